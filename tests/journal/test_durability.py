"""The durability the docs promise: old buffers reach the store without a flush call,
a normal exit flushes open runs, tool calls and approvals are written at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import toolledger
from toolledger.store import SQLiteStore

from .._internals import FLUSH_INTERVAL


def _stored(db: Path, run_id: str) -> int:
    store = SQLiteStore(db)
    try:
        row = store.get_run(run_id)
        return 0 if row is None else row.event_count
    finally:
        store.close()


def test_background_flusher_writes_an_old_buffer(tmp_path: Path) -> None:
    db = tmp_path / "bg.db"
    with toolledger.run("g", db=db, run_id="bg") as run:
        with run.step("s"):
            pass
        deadline = time.monotonic() + 20 * FLUSH_INTERVAL + 5
        while _stored(db, "bg") < 1:  # the step's one record (it ended while buffered)
            assert time.monotonic() < deadline, "the background flusher never wrote the step"
            time.sleep(0.01)
        assert run.event_count == 1


def test_approval_and_tool_call_records_are_written_at_once(tmp_path: Path) -> None:
    db = tmp_path / "now.db"
    with toolledger.run("g", db=db, run_id="now") as run:
        run.approval("send", granted=True, by="policy")
        assert _stored(db, "now") == 1
        handle = run.begin_event("tool_call", "send", flush=True)
        assert _stored(db, "now") == 2
        handle.end("completed", flush=True)
        assert _stored(db, "now") == 3


def test_normal_exit_flushes_runs_left_open(tmp_path: Path) -> None:
    db = tmp_path / "exit.db"
    script = textwrap.dedent(
        f"""
        import toolledger
        run = toolledger.run("left open", db={str(db)!r}, run_id="open")
        run.start()
        for i in range(3):
            with run.step("s", i=i):
                pass
        # the interpreter exits without leaving the run's block
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _stored(db, "open") == 3  # each step one record: it ended while buffered
    assert toolledger.verify(db, "open").ok
