"""A run whose row cannot be written at start (another process holds the write lock) lives.

The lock is held by a real second process in ``BEGIN IMMEDIATE``; the run starts while it
is held, then the lock is released and the run's tool calls and records must land.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import toolledger
from toolledger.errors import StoreBusyError
from toolledger.store import SQLiteStore


def _hold_write_lock(path: str, locked, release) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    locked.set()
    release.wait(60)
    conn.execute("ROLLBACK")
    conn.close()


@toolledger.tool(revision="1")
def _echo(input, ctx):
    return {"echo": input["n"]}


def test_run_started_under_a_write_lock_stores_its_row_later_and_calls_work(tmp_path: Path):
    path = str(tmp_path / "locked.db")
    SQLiteStore(path).close()  # the schema exists; only the write lock is in the way
    ctx = multiprocessing.get_context("spawn")
    locked, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_write_lock, args=(path, locked, release))
    holder.start()
    try:
        assert locked.wait(30)
        store = SQLiteStore(path, busy_timeout=0.05)
        with toolledger.run("under a lock", db=store) as run:
            assert store.get_run(run.run_id) is None  # the row could not be written
            assert any(isinstance(e, StoreBusyError) for e in run.errors)
            release.set()
            holder.join(30)
            assert holder.exitcode == 0
            first = run.call(_echo, call_id="c1", input={"n": 1})
            second = run.call(_echo, call_id="c2", input={"n": 2})
            with run.step("after") as step:
                step.record_output(done=True)
        assert first.payload == {"echo": 1}
        assert not first.replayed
        assert second.payload == {"echo": 2}
        row = store.get_run(run.run_id)
        assert row is not None
        assert row.status == "completed"
        assert row.goal == "under a lock"
        report = toolledger.verify(store, run.run_id)
        assert report.ok, report.reason
        kinds = [r.kind for r in store.read_events(run.run_id)]
        assert kinds.count("tool_call") == 4
        assert "step" in kinds
        store.close()
    finally:
        release.set()
        holder.join(30)
