"""`toolledger approve / deny / approvals`: output, exit codes 0/1/2, JSON, expiry."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import toolledger
from toolledger import Pending
from toolledger.cli import main
from toolledger.store import SQLiteStore


def _send(input: Any, ctx: Any) -> Any:
    return {"sent_to": input["to"]}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A ledger with two calls waiting for a decision (c1 in ns default, c2 in ns other)."""
    path = tmp_path / "l.db"
    tool = toolledger.tool(
        "send_email",
        revision="1",
        execute=_send,
        approval="always",
        approver=lambda r: Pending("T-7"),
    )
    for ns, cid in (("default", "c1"), ("other", "c2")):
        with toolledger.run("g", db=path, namespace=ns) as run:
            out = run.call(
                tool, call_id=cid, input={"to": f"{cid}@example.com"}, justification="order shipped"
            )
            assert out.status == "awaiting_approval"
    return path


def _invoke(db: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--db", str(db), *args])


def test_approvals_pending_lists_waiting_calls_with_ages(db: Path) -> None:
    """The listing shows each waiting call with its age, tool, ticket and justification."""
    result = _invoke(db, "approvals", "--pending", "--csv")
    assert result.exit_code == 0, result.output
    header, *cells = list(csv.reader(result.stdout.splitlines()))
    assert header[:3] == ["age", "status", "call"]
    table = _invoke(db, "approvals", "--pending").stdout.splitlines()
    assert table[0].split() == header  # the same columns, aligned
    assert len({line.index("pending") for line in table[1:]}) == 1
    assert [c[2] for c in cells] == ["default/c1", "other/c2"]
    assert all(c[0].endswith("s") and c[1] == "pending" for c in cells)
    assert all(c[3] == "send_email@1" and c[5] == "T-7" for c in cells)
    assert cells[0][7] == "order shipped"
    assert cells[0][8] == '{"to":"c1@example.com"}'  # what the human authorizes
    only = _invoke(db, "approvals", "--pending", "--namespace", "other", "--json")
    data = json.loads(only.stdout)
    assert [d["binding"]["call_id"] for d in data] == ["c2"]
    assert data[0]["input"] == {"to": "c2@example.com"}
    assert data[0]["age"].endswith("s")


def test_approve_then_listing_and_idempotent_repeat(db: Path) -> None:
    """approve exits 0, records who and why; approving again is a no-op; deny then exits 1."""
    result = _invoke(db, "approve", "c1", "--by", "alice", "--reason", "checked")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "default/c1 (send_email) approved by alice: checked"
    stored = SQLiteStore(db).approval_get("default", "c1")
    assert (stored.status.value, stored.by, stored.reason) == ("approved", "alice", "checked")
    assert _invoke(db, "approve", "c1", "--by", "alice").exit_code == 0
    conflict = _invoke(db, "deny", "c1", "--by", "bob")
    assert conflict.exit_code == 1
    assert "decision is final" in conflict.stderr
    pending = _invoke(db, "approvals", "--pending")
    assert [r.split()[2] for r in pending.stdout.splitlines()[1:]] == ["other/c2"]


def test_deny_with_namespace_and_json(db: Path) -> None:
    """deny --namespace decides that namespace's call; --json prints the stored record."""
    result = _invoke(
        db, "deny", "c2", "--by", "bob", "--reason", "no", "--namespace", "other", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["status"], data["by"], data["reason"]) == ("denied", "bob", "no")
    assert data["binding_fingerprint"].startswith("sha256:")
    tool = toolledger.tool("send_email", revision="1", execute=_send, approval="always")
    with (
        toolledger.run("g", db=db, namespace="other") as run,
        pytest.raises(toolledger.ApprovalDeniedError),
    ):
        run.call(tool, call_id="c2", input={"to": "c2@example.com"})


def test_approve_expires_in_sets_expiry(db: Path) -> None:
    """--expires-in 1h stores an expiry about an hour ahead."""
    result = _invoke(db, "approve", "c1", "--by", "alice", "--expires-in", "1h")
    assert result.exit_code == 0, result.output
    stored = SQLiteStore(db).approval_get("default", "c1")
    ahead = stored.expires_at - datetime.now(timezone.utc)
    assert timedelta(minutes=59) < ahead <= timedelta(hours=1)
    assert "expires" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["approve", "nope", "--by", "alice"],  # no such request
        ["approve", "c1", "--by", "alice", "--namespace", "other"],  # wrong namespace
        ["approve", "c1", "--by", "alice", "--expires-in", "soon"],  # bad age
        ["approve", "c1"],  # --by is required
        ["deny", "c1", "--by", "   "],  # empty name
    ],
)
def test_usage_errors_exit_2_and_decide_nothing(db: Path, args: list[str]) -> None:
    """Unknown requests and bad options are usage errors (exit 2); nothing is stored."""
    result = _invoke(db, *args)
    assert result.exit_code == 2, result.output
    assert SQLiteStore(db).approval_get("default", "c1").status.value == "pending"


def test_empty_listing_says_so_on_stderr(tmp_path: Path) -> None:
    """No approvals: nothing on stdout, a note on stderr, exit 0."""
    SQLiteStore(tmp_path / "empty.db").close()  # a reader needs an existing database
    result = _invoke(tmp_path / "empty.db", "approvals", "--pending")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no pending approvals" in result.stderr


@pytest.mark.parametrize("command", ["approve", "deny", "approvals"])
def test_commands_have_help_with_an_example(command: str) -> None:
    """Every approval command documents itself with an example."""
    result = CliRunner().invoke(main, [command, "-h"])
    assert result.exit_code == 0
    assert "Example: toolledger" in result.stdout
