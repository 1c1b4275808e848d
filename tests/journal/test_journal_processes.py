"""Real processes: four writers into one file lose nothing; a killed run reads as interrupted."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from typing import Any

import pytest

import toolledger
from toolledger.testing import stored_run

STEPS = 150


def _own_run(db: str, i: int, barrier) -> None:
    barrier.wait(timeout=30)
    with toolledger.run(f"writer {i}", db=db, run_id=f"own-{i}") as run:
        for n in range(STEPS):
            with run.step("work", n=n) as st:
                st.record_output(n=n)
    assert not run.errors


def _shared_run(db: str, i: int, barrier) -> None:
    barrier.wait(timeout=30)
    with toolledger.run("shared", db=db, run_id="shared") as run:
        for n in range(STEPS):
            with run.step(f"w{i}", n=n):
                pass
            if n % 25 == 0:
                run.flush()  # interleave batches with the other writers
    assert not run.errors


def _crashing(db: str, ready: Any) -> None:
    run = toolledger.run("will crash", db=db, run_id="crashed")
    run.start()
    step = run.step("long", x=1)
    step.__enter__()
    run.flush()
    ready.set()
    threading.Event().wait(60)  # killed long before; the bound only frees a lost child


@pytest.mark.slow
@pytest.mark.parametrize("target", [_own_run, _shared_run])
def test_four_processes_journal_into_one_file_nothing_lost(tmp_path, target):
    db = str(tmp_path / "shared.db")
    toolledger.open_store(db).close()  # create the schema once
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=target, args=(db, i, barrier)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    run_ids = ["shared"] if target is _shared_run else [f"own-{i}" for i in range(4)]
    for run_id in run_ids:
        assert toolledger.verify(db, run_id).ok
    if target is _shared_run:
        events = stored_run(db, "shared").events
        for i in range(4):
            steps = [e for e in events if e["name"] == f"w{i}"]
            assert [e["inputs"]["n"] for e in steps] == list(range(STEPS))
            assert all(e["status"] == "completed" for e in steps)
    else:
        for run_id in run_ids:
            steps = [e for e in stored_run(db, run_id).events if e["kind"] == "step"]
            assert [e["outputs"]["n"] for e in steps] == list(range(STEPS))


@pytest.mark.slow
def test_killed_run_reads_as_interrupted_and_verifies(tmp_path):
    db = str(tmp_path / "crash.db")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_crashing, args=(db, ready))
    proc.start()
    assert ready.wait(60), "child never became ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    view = stored_run(db, "crashed")
    assert view.status == "interrupted"
    (step,) = view.events
    assert step["status"] == "running"
    assert step["interrupted"] is True
    assert toolledger.verify(db, "crashed").ok
