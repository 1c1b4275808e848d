"""Benchmark: guarded tool calls (``run.call``) vs. the raw five-transition SQL floor.

Cases, each measured per call on one SQLite file, at durability ``full`` and ``normal``,
interleaved batch by batch in the same run so all see the same machine:

- ``raw floor``: the five transitions of a call's life (create, claim, complete, claim
  delivery, complete delivery) as five plain SQL transactions, record JSON precomputed:
  no toolledger code. At ``full`` each commit is fsync-ed.
- ``statement floor new``: the very statements a new call sends (16, in its two
  transactions, on the store's schema), with the least Python that can build them: no
  validation, no objects (``_common.StatementFloor``). What a Python implementation of
  the same writes cannot go below; ``run.call new`` is also given as a ratio to it.
- ``log-design floor new``: a new call as the storage redesign would write it (the
  checkpoint row and one append-only log row per commit, 9 statements, in a file of its
  own), with the same least Python (``_common.LogDesignFloor``): the best that redesign
  could reach in Python.
- ``run.call new``: a new guarded call through a real ``toolledger.run`` (checkpoint +
  journal ``tool_call`` event), trivial tool.
- ``run.call new + deliver``: the same, then ``run.deliver`` (the floor's five transitions).
- ``run.call replayed``: the same call again (stored payload, tool not run).
- ``guard only new`` / ``guard only replayed``: the guard with the journal switched off (a
  run object whose events cost nothing), to show what the journal adds.
- ``journal tool_call event``: just the journal's start + end records of one event.
- ``part: …``: the pieces of a new call measured alone (input fingerprint + binding, the
  store read, the claim commit, the completion commit); the guard's own Python is what
  ``guard only new`` costs beyond them.

Columns: median and p99 in microseconds, commits and fsync-ed commits per call, and the
ratio to the raw floor's median. A second table counts, outside the timed cases, the SQL
statements one call sends (``set_trace_callback``; top-level statements, BEGIN/COMMIT
included, FTS5's internal ones and trigger programs not) and the WAL pages it writes (the
``-wal`` file's growth with auto-checkpoints off for the count, divided by the frame size),
and which b-tree each written page belongs to (the frames' page numbers, named by SQLite's
``dbstat``; ``?`` for a page no b-tree holds at the end, e.g. freed), the two floors'
new calls counted the same way.
``--profile N`` runs N new calls (durability ``normal``) under cProfile instead and prints
the functions that take the most time; ``--profile-replayed N`` does so for N replays.
Targets: new call at ``normal`` <= 100 us (p99 <= 1 ms), <= 6 statements and <= 10 WAL
pages per new call; replayed call <= 25 us; at ``full``, see ``bench_peers.py`` (the raw
two-commit floor and the peers, in one run).

Run: ``.venv/bin/python bench/bench_guard.py [--calls N]``. Prints a table; nothing here is
asserted by the test suite.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sqlite3
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _common import (
    RESULT,
    CountingStore,
    LogDesignFloor,
    StatementFloor,
    lifecycle_docs,
    percentile,
    raw_connect,
    raw_lifecycle,
)

import toolledger as tl
from toolledger import guard
from toolledger.checkpoint import (
    Binding,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore
from toolledger.store.base import CreateCheckpoint, RemoveOperation, SwapCheckpoint
from toolledger.telemetry._hooks import NoopSpan

__all__ = ["main"]

INPUT = {"to": "a@example.com", "subject": "hello"}


def input_of(call_id: str) -> dict[str, Any]:
    """A call's input: ``INPUT`` plus its own reference, so each new id is a new action
    (the same action under a new id is served the stored result, not executed)."""
    return {**INPUT, "ref": call_id}


BATCH = 20


class _NoEvent:
    span = NoopSpan()
    event_id = "0" * 32

    def update(self, **kw: Any) -> None:
        pass

    def end(self, status: str, **kw: Any) -> None:
        pass


class NoJournalRun:
    """A run whose journal events cost nothing: isolates the guard's own cost."""

    strict = False
    span = NoopSpan()

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.namespace = "bench-guard"
        self.run_id = "0" * 32
        self.errors: list[Any] = []
        self.conversation_id = None

    def require_running(self) -> None:
        pass

    def requested_by(self, call_id: str) -> None:
        return None

    def ride(self, store: Any, end: Any = None, requires: int | None = None) -> None:
        return None

    def prepare_end(self, *args: Any, **kw: Any) -> None:
        return None

    def record_point(self, *args: Any, **kw: Any) -> str:
        return "0" * 32

    def record_event(self, *args: Any, **kw: Any) -> str:
        return "0" * 32

    def record_failure(self, exc: BaseException) -> None:
        pass

    def flush(self) -> bool:
        return True

    def begin_event(self, *args: Any, **kw: Any) -> _NoEvent:
        return _NoEvent()


# -- the raw floor (bench/_common.py) ----------------------------------------------------


def _docs(call_id: str) -> list[tuple[str, str]]:
    b = Binding("raw", call_id, "send_email", "1", fingerprint(INPUT))
    return lifecycle_docs(b, attempt_id="a1", delivery_id="d1")


def _raw(conn: sqlite3.Connection, call_id: str, docs: list[tuple[str, str]]) -> None:
    raw_lifecycle(conn, "raw", call_id, docs)


# -- the parts of a new call, one at a time --------------------------------------------


def _binding(call_id: str) -> Binding:
    return Binding("parts", call_id, "send_email", "1", fingerprint(INPUT))


_CLAIMED: dict[str, Any] = {}


def _claim(store: SQLiteStore, call_id: str) -> None:
    now = datetime.now(timezone.utc)
    rec = create_checkpoint(_binding(call_id), at=now)
    t = claim_execution(rec, attempt_id="a1", at=now)
    store.apply([CreateCheckpoint(rec), SwapCheckpoint(0, t.next)], durable=True)
    _CLAIMED[call_id] = t.next


def _complete(store: SQLiteStore, call_id: str) -> None:
    rec = _CLAIMED.pop(call_id)
    t = complete_execution(rec, attempt_id="a1", at=rec.updated_at, result=RESULT)
    store.apply([SwapCheckpoint(1, t.next), RemoveOperation("parts", call_id)], durable=True)


# -- one configuration -----------------------------------------------------------------


def run_config(tmp: Path, durability: str, n: int) -> list[tuple[str, list[float], float, float]]:
    path = tmp / f"guard-{durability}.db"
    store = CountingStore(path, durability=durability)  # type: ignore[arg-type]
    conn = raw_connect(path, durability)
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
    bare = NoJournalRun(store)
    floor_calls = StatementFloor(conn)
    design_path = tmp / f"design-{durability}.db"
    design_conn = raw_connect(design_path, durability)
    design_calls = LogDesignFloor(design_conn)
    docs = {f"raw-{i}": _docs(f"raw-{i}") for i in range(n)}
    samples: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}

    with tl.run("bench guard", agent="bench", db=store) as run:

        def measure(case: str, fn: Callable[[], Any]) -> None:
            c0, f0 = store.commits, store.fsyncs
            t0 = time.perf_counter()
            fn()
            samples.setdefault(case, []).append(time.perf_counter() - t0)
            counts.setdefault(case, [0, 0])
            counts[case][0] += store.commits - c0
            counts[case][1] += store.fsyncs - f0

        def settle() -> None:
            """Write what the journal buffered (replays' records) outside every case."""
            c0, f0 = store.commits, store.fsyncs
            run.flush()
            store.commits, store.fsyncs = c0, f0

        # warm-up
        run.call(tool, call_id="warm", input=input_of("warm"))
        run.call(tool, call_id="warm", input=input_of("warm"))
        _raw(conn, "warm", _docs("warm"))
        floor_calls.call("sf-warm", INPUT, lambda input: RESULT)
        design_calls.call("lf-warm", INPUT, lambda input: RESULT)
        for start in range(0, n, BATCH):
            ids = range(start, min(n, start + BATCH))
            for i in ids:
                measure(
                    "raw floor (5 transitions)",
                    lambda i=i: _raw(conn, f"raw-{i}", docs[f"raw-{i}"]),
                )
            for i in ids:
                measure(
                    "statement floor new",
                    lambda i=i: floor_calls.call(f"sf-{i}", INPUT, lambda input: RESULT),
                )
            for i in ids:
                measure(
                    "log-design floor new",
                    lambda i=i: design_calls.call(f"lf-{i}", INPUT, lambda input: RESULT),
                )
            for i in ids:
                measure(
                    "run.call new",
                    lambda i=i: run.call(tool, call_id=f"new-{i}", input=input_of(f"new-{i}")),
                )
            for i in ids:
                measure(
                    "run.call replayed",
                    lambda i=i: run.call(tool, call_id=f"new-{i}", input=input_of(f"new-{i}")),
                )
            settle()
            for i in ids:

                def new_and_deliver(cid: str = f"nd-{i}") -> None:
                    run.call(tool, call_id=cid, input=input_of(cid))
                    run.deliver(cid, lambda payload: None)

                measure("run.call new + deliver", new_and_deliver)
            for i in ids:
                measure(
                    "guard only new",
                    lambda i=i: guard.call(bare, tool, call_id=f"b-{i}", input=input_of(f"b-{i}")),
                )
            for i in ids:
                measure(
                    "guard only replayed",
                    lambda i=i: guard.call(bare, tool, call_id=f"b-{i}", input=input_of(f"b-{i}")),
                )
            for i in ids:
                measure("  part: fingerprint+binding", lambda i=i: _binding(f"fp-{i}"))
                measure("  part: store.get (absent)", lambda i=i: store.get("parts", f"p-{i}"))
                measure("  part: claim commit", lambda i=i: _claim(store, f"p-{i}"))
                measure("  part: store.get (stored)", lambda i=i: store.get("parts", f"p-{i}"))
                measure("  part: completion commit", lambda i=i: _complete(store, f"p-{i}"))
            for _ in ids:

                def event() -> None:
                    h = run.begin_event("tool_call", "send_email", inputs=INPUT)
                    h.end("completed", outputs={"result": RESULT})

                measure("journal tool_call event", event)
        costs = count_costs(store, run, tool)
        costs.append(count_floor("statement floor new", conn, path, floor_calls))
        costs.append(count_floor("log-design floor new", design_conn, design_path, design_calls))
    conn.close()
    design_conn.close()
    store.close()
    floor = statistics.median(samples["raw floor (5 transitions)"])
    rows = []
    for case, values in samples.items():
        commits, fsyncs = counts[case]
        if case.startswith("raw floor"):  # plain sqlite3, not counted by the store
            commits, fsyncs = 5 * len(values), (5 * len(values) if durability == "full" else 0)
        elif case.startswith(("statement floor", "log-design floor")):
            commits, fsyncs = 2 * len(values), (2 * len(values) if durability == "full" else 0)
        rows.append((case, values, commits / len(values), fsyncs / len(values)))
    return [*rows, ("__floor__", [floor], 0.0, 0.0), ("__costs__", costs, 0.0, 0.0)]  # type: ignore[list-item]


COUNTED = 20


def count_costs(store: SQLiteStore, run: Any, tool: Any) -> list[tuple[str, float, float, str]]:
    """Statements and WAL pages per call of a new call, a replay, a deliver (untimed)."""
    conn = store._conn()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    (autockpt,) = conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    wal = Path(f"{store.path}-wal")
    statements: list[str] = []
    out = []
    cases: list[tuple[str, Callable[[int], Any]]] = [
        (
            "run.call new",
            lambda i: run.call(tool, call_id=f"count-{i}", input=input_of(f"count-{i}")),
        ),
        (
            "run.call replayed",
            lambda i: run.call(tool, call_id=f"count-{i}", input=input_of(f"count-{i}")),
        ),
        ("run.deliver", lambda i: run.deliver(f"count-{i}", lambda payload: None)),
    ]
    ckpt = store._checkpointer  # no checkpoint may restart the WAL while counting
    every = ckpt.every if ckpt is not None else 0
    if ckpt is not None:
        ckpt.every = 1 << 30
    for case, fn in cases:
        run.flush()
        if ckpt is not None:
            ckpt.run_now(60)  # let a round already under way end first
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        statements.clear()
        conn.set_trace_callback(statements.append)
        for i in range(COUNTED):
            fn(i)
        conn.set_trace_callback(None)
        run.flush()  # a replay's buffered records are written by the flush policy: count them
        pages = wal.stat().st_size / (page_size + 24) if wal.exists() else 0.0
        trees = _pages_by_btree(conn, wal, page_size)
        conn.execute(f"PRAGMA wal_autocheckpoint = {autockpt}")
        # Python's trace reports a trigger's program as its statement again: count it once.
        top = [
            s
            for i, s in enumerate(statements)
            if not s.startswith("--") and (i == 0 or s != statements[i - 1])
        ]
        by_tree = ", ".join(f"{name} {n / COUNTED:.1f}" for name, n in trees.most_common())
        out.append((case, len(top) / COUNTED, pages / COUNTED, by_tree))
    if ckpt is not None:
        ckpt.every = every
    return out


def count_floor(
    case: str, conn: sqlite3.Connection, path: Path, floor: Any
) -> tuple[str, float, float, str]:
    """Statements and WAL pages per call of a floor's new call, counted as for ``run.call``."""
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    for i in range(COUNTED):
        floor.call(f"count-{case}-{i}", INPUT, lambda input: RESULT)
    conn.set_trace_callback(None)
    wal = Path(f"{path}-wal")
    pages = wal.stat().st_size / (page_size + 24) if wal.exists() else 0.0
    trees = _pages_by_btree(conn, wal, page_size)
    conn.execute("PRAGMA wal_autocheckpoint = 1000")
    top = [
        s
        for i, s in enumerate(statements)
        if not s.startswith("--") and (i == 0 or s != statements[i - 1])
    ]
    by_tree = ", ".join(f"{name} {n / COUNTED:.1f}" for name, n in trees.most_common())
    return case, len(top) / COUNTED, pages / COUNTED, by_tree


def _pages_by_btree(
    conn: sqlite3.Connection, wal: Path, page_size: int
) -> collections.Counter[str]:
    """How many of the WAL's frames hold a page of each b-tree (``dbstat`` names them)."""
    if not wal.exists():
        return collections.Counter()
    data = wal.read_bytes()
    numbers = [
        struct.unpack(">I", data[off : off + 4])[0]
        for off in range(32, len(data) - page_size - 23, page_size + 24)
    ]
    try:
        owner = {p: n for n, p in conn.execute("SELECT name, pageno FROM dbstat")}
    except sqlite3.Error:  # a build without dbstat: counts only
        return collections.Counter()
    return collections.Counter(owner.get(p, "?") for p in numbers)


def profile(n: int, *, replayed: bool = False) -> None:
    """Run ``n`` new calls (or, with ``replayed``, ``n`` replays of calls made before) at
    durability ``normal`` under cProfile; print the top functions.

    Replays are profiled in batches of ``BATCH``, the journal flushed between batches
    outside the profile (as the timed cases do).
    """
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "profile.db", durability="normal")
        with tl.run("bench guard profile", agent="bench", db=store) as run:
            for i in range(100):
                run.call(tool, call_id=f"warm-{i}", input=input_of(f"warm-{i}"))
            if replayed:
                for i in range(n):
                    run.call(tool, call_id=f"p-{i}", input=input_of(f"p-{i}"))
                run.flush()
            prof = cProfile.Profile()
            for start in range(0, n, BATCH):
                prof.enable()
                for i in range(start, min(n, start + BATCH)):
                    run.call(tool, call_id=f"p-{i}", input=input_of(f"p-{i}"))
                prof.disable()
                run.flush()
        store.close()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description="guarded tool call benchmark")
    parser.add_argument("--calls", type=int, default=0, help="calls per case (default: auto)")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="cProfile N new calls instead"
    )
    parser.add_argument(
        "--profile-replayed",
        type=int,
        default=0,
        metavar="N",
        help="cProfile N replayed calls instead",
    )
    args = parser.parse_args()
    if args.profile or args.profile_replayed:
        profile(args.profile or args.profile_replayed, replayed=not args.profile)
        return
    print(
        f"{'durability':<10} {'case':<28} {'median us':>10} {'p99 us':>10} "
        f"{'commits':>8} {'fsyncs':>7} {'x floor':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for durability in ("full", "normal"):
            n = args.calls or (200 if durability == "full" else 2000)
            rows = run_config(Path(tmp), durability, n)
            costs = rows[-1][1]
            floor = rows[-2][1][0]
            medians = {}
            for case, values, commits, fsyncs in rows[:-2]:
                med, p99 = statistics.median(values), percentile(values, 0.99)
                medians[case] = med
                print(
                    f"{durability:<10} {case:<28} {med * 1e6:>10.1f} {p99 * 1e6:>10.1f} "
                    f"{commits:>8.2f} {fsyncs:>7.2f} {med / floor:>8.2f}"
                )
            for floor_case in ("statement floor new", "log-design floor new"):
                ratio = medians["run.call new"] / medians[floor_case]
                print(f"{durability:<10} {'run.call new / ' + floor_case:<40} {ratio:>10.2f}")
            for case, stmts, pages, _ in costs:
                print(
                    f"{durability:<10} {'count: ' + case:<28} {'stmts/call':>10} {stmts:>10.1f} "
                    f"{'WAL pages':>17} {pages:>7.1f}"
                )
            for case, _, _, by_tree in costs:
                print(f"{durability:<10} {'pages: ' + case:<28} {by_tree}")
    print(
        "\ncommits/fsyncs are per call and include the journal's tool_call event records: "
        "a new call's ride in its claim and completion commits;\na replay's stay buffered "
        "(written by the journal's flush policy, outside the measured cases).\n"
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"{os.cpu_count()} CPUs.\nTargets: new call at normal <= 100 us (p99 <= 1 ms), <= 6 "
        "statements and <= 10 WAL pages per new call; replayed call <= 25 us."
    )


if __name__ == "__main__":
    main()
