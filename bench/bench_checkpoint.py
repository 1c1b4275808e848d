"""Benchmark: a whole checkpoint lifecycle on SQLite, toolledger vs. the raw SQL floor.

A lifecycle is create, claim execution, complete execution, claim delivery, complete
delivery: five committed writes. The *raw floor* runs the very same SQL statements on the
same schema with no toolledger code at all (record JSON precomputed as strings), in the
same run, interleaved batch by batch so both see the same machine. Reported per
configuration (durability full/normal x 1/4 processes): median and p99 lifecycle latency,
transitions (committed writes) per second of wall time (all processes run each side's batch
together, between barriers), and the ratio of medians toolledger / raw (target <= 1.3).

With 4 processes every worker drives its own calls against one shared file; afterwards
the bench checks that no write was lost: every call is ``delivered`` at revision 4 with a
complete five-row history.

Run: ``.venv/bin/python bench/bench_checkpoint.py [--lifecycles N]``. Prints a table;
nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _common import RESULT, T0, lifecycle_docs, percentile, raw_connect, raw_lifecycle

from toolledger.checkpoint import (
    Binding,
    Status,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore

__all__ = ["main"]

FINGERPRINT = fingerprint({"to": "a@example.com", "subject": "hello"})
BATCH = 25  # lifecycles per interleaved batch
TOMBSTONES = False  # set per worker from the schema (see _has_tombstones)


def _at(step: int) -> datetime:
    return T0 + timedelta(milliseconds=step)


def _binding(call_id: str) -> Binding:
    return Binding("bench", call_id, "send_email", "1", FINGERPRINT)


# -- toolledger ------------------------------------------------------------------------


def _toolledger_lifecycle(store: SQLiteStore, call_id: str) -> None:
    rec = create_checkpoint(_binding(call_id), at=_at(0))
    created, rec = store.create_if_absent(rec)
    assert created
    t = claim_execution(rec, attempt_id="attempt-1", at=_at(1))
    assert store.compare_and_swap(t.expected_revision, t.next)
    t = complete_execution(t.next, attempt_id="attempt-1", at=_at(2), result=RESULT)
    assert store.compare_and_swap(t.expected_revision, t.next)
    t = claim_delivery(t.next, delivery_id="delivery-1", at=_at(3))
    assert store.compare_and_swap(t.expected_revision, t.next)
    t = complete_delivery(t.next, delivery_id="delivery-1", at=_at(4))
    assert store.compare_and_swap(t.expected_revision, t.next)


# -- the raw floor: the same statements, no toolledger code (bench/_common.py) ----------


def _precompute(call_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Return, per call, the five stored JSON documents and their times (built up front)."""
    return {
        call_id: lifecycle_docs(_binding(call_id), attempt_id="attempt-1", delivery_id="delivery-1")
        for call_id in call_ids
    }


def _has_tombstones(conn: sqlite3.Connection) -> bool:
    """Whether the schema has tombstones (then a create also checks the key has none)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tombstones'"
    ).fetchone()
    return row is not None


# -- one worker process ----------------------------------------------------------------


def _worker(
    path: str, durability: str, worker: int, n: int, barrier: Any, out: Any
) -> None:  # pragma: no cover - runs in a child process
    try:
        raw_ids = [f"raw-{worker}-{i}" for i in range(n)]
        tl_ids = [f"tl-{worker}-{i}" for i in range(n)]
        docs = _precompute(raw_ids)
        store = SQLiteStore(path, durability=durability, busy_timeout=30)  # type: ignore[arg-type]
        conn = raw_connect(path, durability)
        global TOMBSTONES
        TOMBSTONES = _has_tombstones(conn)
        # Warm both paths (imports, statement cache, connection) outside the timings.
        _toolledger_lifecycle(store, f"warm-tl-{worker}")
        warm = f"warm-raw-{worker}"
        raw_lifecycle(conn, "bench", warm, _precompute([warm])[warm], tombstones=TOMBSTONES)
        raw: list[float] = []
        ours: list[float] = []
        # Per batch and side: seconds from the common start (barrier) to this worker's end.
        # The parent takes the slowest worker per phase: the phase's wall time.
        phases: list[tuple[str, float]] = []
        cpu = {"raw": 0.0, "ours": 0.0}  # this process's CPU seconds per side
        for start in range(0, n, BATCH):
            for side, ids in (("raw", raw_ids), ("ours", tl_ids)):
                barrier.wait()
                began, cpu0 = time.perf_counter(), time.process_time()
                for call_id in ids[start : start + BATCH]:
                    t0 = time.perf_counter()
                    if side == "raw":
                        raw_lifecycle(conn, "bench", call_id, docs[call_id], tombstones=TOMBSTONES)
                        raw.append(time.perf_counter() - t0)
                    else:
                        _toolledger_lifecycle(store, call_id)
                        ours.append(time.perf_counter() - t0)
                phases.append((side, time.perf_counter() - began))
                cpu[side] += time.process_time() - cpu0
        out.send(("ok", raw, ours, (phases, cpu)))
        store.close()
        conn.close()
    except BaseException as exc:  # report, never hang the parent
        out.send(("error", repr(exc), [], ([], {})))
        raise


def _verify(path: Path, workers: int, n: int) -> list[str]:
    """Return problems: any call not delivered at revision 4 with a full history."""
    problems = []
    with SQLiteStore(path) as store:
        for prefix in ("tl", "raw"):
            for w in range(workers):
                for i in range(n):
                    call_id = f"{prefix}-{w}-{i}"
                    if prefix == "tl":
                        rec = store.get("bench", call_id)
                        if rec is None or rec.status is not Status.DELIVERED:
                            problems.append(f"{call_id}: {rec and rec.status}")
                            continue
                        if rec.revision != 4:
                            problems.append(f"{call_id}: revision {rec.revision}")
                    hist = store.history("bench", call_id)
                    if [h.revision for h in hist] != [0, 1, 2, 3, 4]:
                        problems.append(f"{call_id}: history {[h.revision for h in hist]}")
    return problems


def run_config(tmp: Path, durability: str, workers: int, n: int) -> dict[str, Any]:
    """Run one configuration and return its measurements."""
    path = tmp / f"bench-{durability}-{workers}.db"
    SQLiteStore(path, durability=durability).close()  # type: ignore[arg-type]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    pipes = [ctx.Pipe(duplex=False) for _ in range(workers)]
    procs = [
        ctx.Process(target=_worker, args=(str(path), durability, w, n, barrier, pipes[w][1]))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    raw: list[float] = []
    ours: list[float] = []
    slowest: list[tuple[str, float]] = []
    cpu_total = {"raw": 0.0, "ours": 0.0}
    errors = []
    for recv, _send in pipes:
        kind, a, b, (phases, cpu) = recv.recv()
        if kind != "ok":
            errors.append(a)
            continue
        for side, seconds in cpu.items():
            cpu_total[side] += seconds
        raw.extend(a)
        ours.extend(b)
        slowest = [
            (side, max(t, slowest[i][1] if slowest else 0.0)) for i, (side, t) in enumerate(phases)
        ]
    wall = {side: sum(t for s, t in slowest if s == side) for side in ("raw", "ours")}
    for p in procs:
        p.join()
        if p.exitcode != 0:
            errors.append(f"worker exit code {p.exitcode}")
    problems = [] if errors else _verify(path, workers, n)
    return {
        "durability": durability,
        "workers": workers,
        "raw": raw,
        "ours": ours,
        "wall": wall,
        "cpu": cpu_total,
        "errors": errors,
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every configuration and print the table; exit 1 on an error or lost update."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=300, help="per process and side")
    args = parser.parse_args(argv)
    failed = False
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="toolledger-bench-") as tmp:
        for durability in ("full", "normal"):
            for workers in (1, 4):
                n = args.lifecycles if workers == 1 else max(1, args.lifecycles // 2)
                r = run_config(Path(tmp), durability, workers, n)
                if r["errors"] or r["problems"]:
                    failed = True
                    print(f"{durability}/{workers}: errors={r['errors'][:3]}", file=sys.stderr)
                    print(f"  lost updates: {r['problems'][:5]}", file=sys.stderr)
                    continue
                rows.append(r)
    header = (
        f"{'durability':<10} {'procs':>5} {'side':<10} {'median ms':>9} {'p99 ms':>8} "
        f"{'trans/s':>8} {'cpu us':>7} {'ratio':>6}"
    )
    load_after = os.getloadavg()
    print("checkpoint lifecycle (create, claim, complete, claim delivery, complete delivery)")
    print(
        f"{os.cpu_count()} CPUs; 1-min load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after (ratios grow with CPU contention: toolledger's share "
        "is CPU time, the floor's is mostly fsync and SQLite)"
    )
    print("cpu us: CPU time of the client process per lifecycle, SQLite's own work included")
    print(header)
    print("-" * len(header))
    for r in rows:
        med_raw = statistics.median(r["raw"])
        med_ours = statistics.median(r["ours"])
        for side, key in (("raw floor", "raw"), ("toolledger", "ours")):
            values = r[key]
            med = statistics.median(values)
            # Throughput: 5 committed writes per lifecycle, all processes, per wall second.
            per_sec = 5 * len(values) / r["wall"][key]
            # CPU time of the client process per lifecycle (SQLite's work included).
            cpu_us = r["cpu"][key] / len(values) * 1e6
            ratio = f"{med_ours / med_raw:6.2f}" if side == "toolledger" else ""
            print(
                f"{r['durability']:<10} {r['workers']:>5} {side:<10} {med * 1e3:9.3f} "
                f"{percentile(values, 0.99) * 1e3:8.3f} {per_sec:8.0f} {cpu_us:7.0f} {ratio:>6}"
            )
        lost = "no errors, no lost updates" if not r["problems"] else "LOST UPDATES"
        print(f"{'':<10} {'':>5} {lost} ({len(r['ours'])} + {len(r['raw'])} lifecycles)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
