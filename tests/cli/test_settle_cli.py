"""`toolledger resolve / reconcile / checkpoints`: output, exit codes 0/1/2, JSON."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import toolledger as tl
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.cli import main
from toolledger.store import SQLiteStore

from .._internals import guard_now


def _crash(input: Any, ctx: Any) -> Any:
    ctx.operation.write({"order": input["order"]})
    raise ConnectionError("no answer")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A ledger with one uncertain call (toolu_u) and one executing call (toolu_e)."""
    path = tmp_path / "l.db"
    with tl.run("pay", db=path) as run, pytest.raises(tl.OutcomeUnknownError):
        run.call(
            tl.tool("pay", revision="1", execute=_crash),
            call_id="toolu_u",
            input={"order": "o-1"},
        )
    store = SQLiteStore(path)
    b = Binding("default", "toolu_e", "pay", "1", fingerprint({"order": "o-2"}))
    rec = create_checkpoint(b, at=guard_now())
    store.create_if_absent(rec)
    assert store.compare_and_swap(0, claim_execution(rec, attempt_id="a", at=guard_now()).next)
    store.close()
    return path


def invoke(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args])


def _status(db: Path, call_id: str) -> str:
    store = SQLiteStore(db)
    try:
        rec = store.get("default", call_id)
        assert rec is not None
        return rec.status.value
    finally:
        store.close()


def test_checkpoints_show_reason_age_and_what_each_blocks(db: Path) -> None:
    """Each stuck call says why, how long, and the action it blocks (text and JSON)."""
    text = invoke(db, "checkpoints")
    assert text.exit_code == 0, text.output
    lines = {line.split()[0]: line for line in text.output.splitlines()}
    store = SQLiteStore(db)
    reason = store.get("default", "toolu_u").uncertain_reason  # type: ignore[union-attr]
    store.close()
    assert reason
    assert reason in lines["default/toolu_u"]
    assert "a live attempt may hold it" in lines["default/toolu_e"]
    assert " pay@1 sha256:" in lines["default/toolu_u"]
    assert text.output.splitlines()[0].split()[:5] == ["call", "tool", "status", "rev", "age"]
    rows = {
        r["call_id"]: r
        for r in map(json.loads, invoke(db, "checkpoints", "--json").output.splitlines())
    }
    assert rows["toolu_u"]["reason"]
    assert rows["toolu_u"]["age_seconds"] >= 0
    assert rows["toolu_u"]["blocks"]["same_action"] == {
        "tool": "pay",
        "revision": "1",
        "input_fingerprint": fingerprint({"order": "o-1"}),
    }


def test_resolve_not_executed_exit_0_and_recorded(db: Path) -> None:
    """Done: exit 0, one line naming the new status, who, and the journal run."""
    result = invoke(
        db, "resolve", "toolu_u", "--not-executed", "--by", "ana", "--reason", "no charge"
    )
    assert result.exit_code == 0, result.output
    assert "not_executed -> ready" in result.output
    assert "by ana" in result.output
    assert "journal: run " in result.output
    assert _status(db, "toolu_u") == "ready"


def test_resolve_result_json_and_error_text(db: Path) -> None:
    """--result stores the JSON; --json prints the settlement."""
    result = invoke(
        db, "resolve", "toolu_u", "--result", '{"paid": 5}', "--by", "a", "--reason", "r", "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["outcome"], out["status"], out["by"]) == ("completed", "completed", "a")
    forced = invoke(
        db, "resolve", "toolu_e", "--error", "declined", "--by", "a", "--reason", "r", "--force"
    )
    assert forced.exit_code == 0, forced.output
    assert _status(db, "toolu_e") == "completed"


def test_resolve_refusals_exit_1(db: Path) -> None:
    """A live claim (no --force) and a settled call are refused with exit 1, one line."""
    live = invoke(db, "resolve", "toolu_e", "--not-executed", "--by", "a", "--reason", "r")
    assert live.exit_code == 1
    assert "a live attempt may hold it" in live.output
    assert _status(db, "toolu_e") == "executing"
    assert (
        invoke(db, "resolve", "toolu_u", "--not-executed", "--by", "a", "--reason", "r").exit_code
        == 0
    )
    again = invoke(db, "resolve", "toolu_u", "--not-executed", "--by", "a", "--reason", "r")
    assert again.exit_code == 1
    assert "INVALID_TRANSITION" in again.output


@pytest.mark.parametrize(
    "args",
    [
        ["resolve", "toolu_u", "--by", "a", "--reason", "r"],  # no outcome
        ["resolve", "toolu_u", "--not-executed", "--error", "x", "--by", "a", "--reason", "r"],
        ["resolve", "toolu_u", "--result", "{nope", "--by", "a", "--reason", "r"],
        ["resolve", "toolu_u", "--not-executed", "--reason", "r"],  # no --by
        ["resolve", "missing", "--not-executed", "--by", "a", "--reason", "r"],
        ["reconcile", "--tools", "nope_module_xyz:TOOLS"],
        ["reconcile", "--tools", "no-colon"],
    ],
)
def test_settle_usage_errors_exit_2(db: Path, args: list[str]) -> None:
    """Bad flags, bad JSON, an unknown call or tools that do not import: exit 2, no change."""
    result = invoke(db, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert _status(db, "toolu_u") == "uncertain"


def test_reconcile_dry_run_then_apply(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--tools imports a list of tools; a dry run changes nothing; --apply completes."""
    (tmp_path / "settle_tools_mod.py").write_text(
        textwrap.dedent(
            """
            import toolledger as tl

            SEEN = []

            def _recover(input, ctx):
                SEEN.append(input)
                return tl.Recovered({"order": input["order"], "paid": True})

            TOOLS = [tl.tool("pay", revision="1", execute=lambda i, c: None, recover=_recover)]
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    dry = invoke(db, "reconcile", "--tools", "settle_tools_mod:TOOLS")
    assert dry.exit_code == 0, dry.output
    lines = {line.split()[0]: line for line in dry.output.splitlines()}
    assert "would complete: recover proved the outcome" in lines["default/toolu_u"]
    assert "skip: executing" in lines["default/toolu_e"]
    assert _status(db, "toolu_u") == "uncertain"
    done = invoke(db, "reconcile", "--tools", "settle_tools_mod:TOOLS", "--apply", "--json")
    assert done.exit_code == 0, done.output
    items = {i["call_id"]: i for i in map(json.loads, done.output.splitlines())}
    assert items["toolu_u"]["applied"] is True
    assert items["toolu_u"]["status_after"] == "completed"
    assert _status(db, "toolu_u") == "completed"
    import settle_tools_mod  # type: ignore[import-not-found]

    assert settle_tools_mod.SEEN == [{"order": "o-1"}, {"order": "o-1"}]
