"""Run arguments are checked at run(), failures are bounded, pending approvals read pending."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger import Pending
from toolledger.cli import main
from toolledger.store import SQLiteStore

from .._internals import MAX_ERRORS


@pytest.mark.parametrize("namespace", ["a b", "", "ns/1", "é", "x" * 129, 5])
def test_run_refuses_a_namespace_the_checkpoint_would_refuse(tmp_path: Path, namespace):
    db = tmp_path / "ns.db"
    with pytest.raises(toolledger.InvalidArgumentError) as err:
        toolledger.run("bad namespace", db=db, namespace=namespace)
    assert err.value.code == "INVALID_ARGUMENT"
    assert "namespace" in err.value.message


def test_run_errors_are_bounded_with_a_total_count(tmp_path: Path):
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, busy_timeout=0)
    with toolledger.run("many failures", db=store) as run:
        blocker = sqlite3.connect(path, isolation_level=None)  # a second connection
        blocker.execute("BEGIN IMMEDIATE")
        try:
            for i in range(3 * MAX_ERRORS):
                run.note(f"note {i}")
                assert not run.flush()  # the write lock makes every flush fail
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        first = run.errors[0]
        assert len(run.errors) == MAX_ERRORS
        assert run.error_count >= 3 * MAX_ERRORS
        assert run.flush()  # the lock is gone: everything buffered is written
    assert run.errors[0] is first  # the first failure (usually the cause) is kept
    assert toolledger.verify(store, run.run_id).ok
    kinds = [r.kind for r in store.read_events(run.run_id)]
    assert kinds.count("note") == 3 * MAX_ERRORS
    store.close()


def test_show_prints_a_pending_approval_as_pending(tmp_path: Path):
    db = tmp_path / "pending.db"

    @toolledger.tool(revision="1", approval="effect-only", approver=lambda r: Pending("HELP-1"))
    def send_email(input, ctx):
        return {"sent": True}

    with toolledger.run("Refund Ana", db=db) as run:
        out = run.call(send_email, call_id="toolu_01", input={"to": "ana@example.com"})
    assert out.status == "awaiting_approval"
    result = CliRunner().invoke(main, ["--db", str(db), "show", run.run_id])
    assert result.exit_code == 0
    assert "pending (ticket HELP-1)" in result.output
    assert "refused" not in result.output
    assert "None" not in result.output
