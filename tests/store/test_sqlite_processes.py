"""Real processes against one SQLite file: concurrent creation, claim races, SIGKILL crashes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest

from toolledger.checkpoint import Status
from toolledger.store import SQLiteStore
from toolledger.store.sqlite import MIGRATIONS

from . import _proc_workers as w

pytestmark = pytest.mark.slow

CTX = mp.get_context("spawn")
WAIT = 60  # seconds: a bound for a hung child, never a synchronisation


def _run(target: object, args: tuple[object, ...]) -> mp.process.BaseProcess:
    proc = CTX.Process(target=target, args=args)
    proc.start()
    return proc


def test_sqlite_8_processes_create_the_file_at_once(tmp_path: Path) -> None:
    """8 processes opening a brand-new file together all succeed (no "database is locked")."""
    paths = [str(tmp_path / f"fresh-{i}.db") for i in range(4)]
    barrier = CTX.Barrier(8)
    pipes = [CTX.Pipe(duplex=False) for _ in range(8)]
    procs = [_run(w.create_store_at_once, (paths, i, barrier, pipes[i][1])) for i in range(8)]
    results = []
    for recv, _ in pipes:
        assert recv.poll(WAIT), "a child did not report"
        results.append(recv.recv())
    for p in procs:
        p.join(WAIT)
        assert p.exitcode == 0
    assert results == [["created"] * len(paths)] * 8
    for path in paths:
        with SQLiteStore(path) as store:
            assert store.applied_migrations() == [(v, n) for v, n, _ in MIGRATIONS]
            assert len(store.list(namespace="open")) == 8


def test_sqlite_8_processes_race_200_rounds_exactly_one_winner(tmp_path: Path) -> None:
    """Of 8 processes claiming the same call, exactly one wins, in every one of 200 rounds."""
    path = str(tmp_path / "race.db")
    SQLiteStore(path).close()
    rounds, n = 200, 8
    barrier = CTX.Barrier(n)
    pipes = [CTX.Pipe(duplex=False) for _ in range(n)]
    procs = [_run(w.race_claims, (path, i, rounds, barrier, pipes[i][1])) for i in range(n)]
    winners: dict[int, list[int]] = {r: [] for r in range(rounds)}
    for i, (recv, _) in enumerate(pipes):
        assert recv.poll(WAIT * 2), "a child did not report"
        won, errors = recv.recv()
        assert errors == []
        for r in won:
            winners[r].append(i)
    for p in procs:
        p.join(WAIT)
        assert p.exitcode == 0
    assert {r: len(ws) for r, ws in winners.items()} == {r: 1 for r in range(rounds)}
    with SQLiteStore(path) as store:
        for r, (winner,) in winners.items():
            rec = store.get("race", f"r{r}")
            assert rec is not None
            assert rec.status is Status.EXECUTING
            assert rec.execution_fence == f"w{winner}"
            assert [h.revision for h in store.history("race", f"r{r}")] == [0, 1]


def _crash(target: object, tmp_path: Path, expect: str) -> tuple[str, Path, Path]:
    db, effects = tmp_path / "crash.db", tmp_path / "effects.log"
    parent_end, child_end = CTX.Pipe()
    child = _run(target, (str(db), str(effects), child_end))
    assert parent_end.poll(WAIT), "the child never reported"
    assert parent_end.recv() == expect
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(WAIT)
    assert child.exitcode == -signal.SIGKILL
    return str(db), db, effects


def _recover(db: Path, effects: Path) -> tuple[str, str, object, str]:
    parent_end, child_end = CTX.Pipe()
    fresh = _run(w.recover, (str(db), str(effects), child_end))
    assert parent_end.poll(WAIT), "the fresh process never reported"
    answer = parent_end.recv()
    fresh.join(WAIT)
    assert fresh.exitcode == 0
    return answer  # type: ignore[no-any-return]


def _effects(effects: Path) -> int:
    return len(effects.read_text().splitlines()) if effects.exists() else 0


def test_sqlite_kill_after_claim_fresh_process_decides_reconcile(tmp_path: Path) -> None:
    """SIGKILL between claim and completion: a fresh process must reconcile, not execute."""
    _, db, effects = _crash(w.claim_then_hang, tmp_path, "claimed")
    action, status, delivered, final = _recover(db, effects)
    assert (action, status, delivered, final) == (
        "reconcile-execution",
        "executing",
        None,
        "executing",
    )
    assert _effects(effects) == 0


def test_sqlite_kill_after_complete_fresh_process_delivers_tool_ran_once(
    tmp_path: Path,
) -> None:
    """SIGKILL right after completion: a fresh process delivers the stored result."""
    _, db, effects = _crash(w.complete_then_hang, tmp_path, "completed")
    action, status, delivered, final = _recover(db, effects)
    assert (action, status, final) == ("deliver", "completed", "delivered")
    assert delivered == {"message_id": "msg-1"}
    assert _effects(effects) == 1
    with SQLiteStore(db) as store:
        hist = store.history("race", "crash")
        assert [h.transition for h in hist] == [
            "create_checkpoint",
            "claim_execution",
            "complete_execution",
            "claim_delivery",
            "complete_delivery",
        ]
