"""Prototype: the storage redesign (one append-only log row per commit) under the real guard.

Issue 33 asks whether one log row per commit pays before anything is built in ``src``.
``LogStore`` is a ``SQLiteStore`` whose ``apply`` writes a new call's two commits the
redesign's way, from the very ops the real guard sends (``run.call``: the claim batch with
its two effect keys and the start record, the completion batch with the operation
journal's removal and the end record), after the store's own op preparation
(``prepare_ops``: the same validation and record JSON as today):

- claim: the effect keys (still a unique table: the claim must refuse a held key), the
  claimed checkpoint row, one ``log`` row (the transitions, the record text, the journal
  records), ``COMMIT``;
- completion: the checkpoint CAS, the operation journal's removal, one ``log`` row.

No ``checkpoint_history``, ``events`` or ``runs`` count writes: history and the journal
would read the log; the run's count CAS becomes the log's unique ``(run_id, seq)``. Any
other batch goes to ``SQLiteStore.apply`` unchanged. Only a measurement: nothing reads the
log back (``load_run``, verify, search, gc, copy would have to), contention and crashes
are not handled beyond the uncontended path, and a replay's buffered record is not written.

Cases, interleaved batch by batch for ``--reps`` repetitions on files of their own, at
``normal`` and ``full``: ``run.call`` new on today's schema, on ``LogStore``, and the two
raw floors (``raw_two_commits`` on the store's schema, and ``_common``'s least-Python
floors of both designs). Medians over all repetitions, p99, the per-repetition ratio of
medians (median and range) to the 2-commit floor, and the load average.

Run: ``python bench/proto_log_design.py [--calls 300] [--reps 3]``. Not a ``bench_*.py``
(``make bench`` leaves it out); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import LogDesignFloor, StatementFloor, percentile, raw_connect, raw_two_commits

import toolledger as tl
from toolledger.checkpoint.model import format_time
from toolledger.store import SQLiteStore
from toolledger.store._rows import prepare_ops
from toolledger.store._sqlcommon import now_text
from toolledger.store.base import (
    AppendEvents,
    ClaimEffectKey,
    CreateCheckpoint,
    RemoveOperation,
    SwapCheckpoint,
)

__all__ = ["LogStore", "main"]

BATCH = 20
RESULT = {"ok": True, "message_id": "msg-0001", "recipients": ["a@example.com"]}
_HANDLED = (ClaimEffectKey, CreateCheckpoint, SwapCheckpoint, RemoveOperation, AppendEvents)
_LOG = (
    "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, run_id TEXT, seq INTEGER, "
    "namespace TEXT NOT NULL, call_id TEXT NOT NULL, revision INTEGER NOT NULL, "
    "transitions TEXT NOT NULL, record TEXT NOT NULL, events TEXT)"
)
_LOG_SEQ = "CREATE UNIQUE INDEX IF NOT EXISTS log_run_seq ON log (run_id, seq)"


class LogStore(SQLiteStore):
    """``SQLiteStore`` writing a new call's commits as the redesign would (see above)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._write(lambda conn: (conn.execute(_LOG), conn.execute(_LOG_SEQ)), durable=True)

    def apply(self, ops: Sequence[Any], *, durable: bool = True) -> list[Any]:
        if not ops or not all(type(op) in _HANDLED for op in ops):
            return super().apply(ops, durable=durable)
        if any(type(op) is AppendEvents and not op.rows for op in ops):
            return super().apply(ops, durable=durable)
        prepared = prepare_ops(ops)

        def run(conn: Any) -> list[Any]:
            out: list[Any] = []
            transitions: list[list[Any]] = []
            record = ""
            key: tuple[str, str] | None = None
            revision = 0
            events: list[tuple[Any, ...]] = []
            run_id = seq = None
            i = 0
            while i < len(prepared):
                op, extra = prepared[i]
                req = getattr(op, "requires", None)
                if req is not None and not out[req]:
                    out.append(False)
                elif type(op) is ClaimEffectKey:
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO effect_keys (namespace, effect_key, call_id, "
                        "claimed_at) VALUES (?, ?, ?, ?)",
                        (op.namespace, op.key, op.call_id, now_text()),
                    )
                    assert cur.rowcount == 1, "prototype: uncontended keys only"
                    out.append(True)
                elif type(op) is CreateCheckpoint:
                    swap, (text, _, _) = prepared[i + 1]
                    assert type(swap) is SwapCheckpoint
                    assert swap.expected_revision == 0
                    nxt = swap.next
                    key, revision, record = nxt.key, nxt.revision, text
                    at = format_time(nxt.updated_at)
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO checkpoints (namespace, call_id, status, "
                        "revision, tool_name, updated_at, record) VALUES (?,?,?,?,?,?,?)",
                        (*key, nxt.status.value, revision, nxt.binding.tool_name, at, text),
                    )
                    assert cur.rowcount == 1, "prototype: new keys only"
                    transitions.append(["create_checkpoint", "execute", 0, "ready"])
                    transitions.append(["claim_execution", "execute", revision, "executing"])
                    out.extend(((True, op.record), True))
                    i += 2
                    continue
                elif type(op) is SwapCheckpoint:
                    text, _, _ = extra
                    nxt = op.next
                    key, revision, record = nxt.key, nxt.revision, text
                    cur = conn.execute(
                        "UPDATE checkpoints SET status = ?, revision = ?, updated_at = ?, "
                        "record = ? WHERE namespace = ? AND call_id = ? AND revision = ?",
                        (
                            nxt.status.value,
                            revision,
                            format_time(nxt.updated_at),
                            text,
                            *key,
                            op.expected_revision,
                        ),
                    )
                    out.append(cur.rowcount == 1)
                    transitions.append([nxt.status.value, revision])
                elif type(op) is RemoveOperation:
                    conn.execute(
                        "DELETE FROM operation_journal WHERE namespace = ? AND call_id = ?",
                        (op.namespace, op.call_id),
                    )
                    out.append(True)
                else:
                    assert type(op) is AppendEvents
                    run_id, seq = op.run_id, op.expected_count
                    events.extend(
                        (
                            r.seq,
                            r.event_id,
                            r.parent_id,
                            r.kind,
                            r.name,
                            r.status,
                            r.at,
                            r.hash,
                            r.data,
                        )
                        for r in op.rows
                    )
                    out.append(True)
                i += 1
            if key is not None:
                conn.execute(
                    "INSERT INTO log (run_id, seq, namespace, call_id, revision, transitions, "
                    "record, events) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        run_id,
                        seq,
                        *key,
                        revision,
                        json.dumps(transitions, separators=(",", ":")),
                        record,
                        json.dumps(events, separators=(",", ":"), ensure_ascii=False),
                    ),
                )
            return out

        return self._write(run, durable=durable)


def _cases(tmp: Path, durability: str) -> dict[str, Callable[[int], Any]]:
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
    cases: dict[str, Callable[[int], Any]] = {}
    for name, cls in (("today's schema", SQLiteStore), ("log prototype", LogStore)):
        store = cls(tmp / f"{name[:3]}-{durability}.db", durability=durability)  # type: ignore[arg-type]
        run = tl.run("proto", agent="bench", db=store)
        run.__enter__()

        def new(i: int, run: Any = run, tag: str = name[:3]) -> Any:
            cid = f"{tag}-{i}"
            return run.call(tool, call_id=cid, input={"to": "a@example.com", "ref": cid})

        for i in range(50):
            new(-1 - i)
        cases[f"run.call new, {name}"] = new
    SQLiteStore(tmp / f"floor-{durability}.db").close()
    conn = raw_connect(tmp / f"floor-{durability}.db", durability)
    cases["floor: 2 raw commits"] = lambda i, c=conn: raw_two_commits(c, "bench", f"f-{i}")
    stmt = StatementFloor(conn)
    cases["least-Python floor, today's"] = lambda i: stmt.call(f"s-{i}", {"i": i}, dict)
    lconn = raw_connect(tmp / f"logfloor-{durability}.db", durability)
    log = LogDesignFloor(lconn)
    cases["least-Python floor, log"] = lambda i: log.call(f"l-{i}", {"i": i}, dict)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per case per rep")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for durability in ("normal", "full"):
            cases = _cases(tmp, durability)
            times = {name: [[] for _ in range(args.reps)] for name in cases}
            loads = []
            n = 0
            for rep in range(args.reps):
                loads.append(round(os.getloadavg()[0], 2))
                for _ in range(0, args.calls, BATCH):
                    for name, op in cases.items():
                        for _ in range(BATCH):
                            n += 1
                            t0 = time.perf_counter_ns()
                            op(n)
                            times[name][rep].append((time.perf_counter_ns() - t0) / 1000)
            loads.append(round(os.getloadavg()[0], 2))
            import sqlite3

            with sqlite3.connect(tmp / f"log-{durability}.db") as check:
                logged = check.execute("SELECT count(*) FROM log").fetchone()[0]
                evs = check.execute("SELECT count(*) FROM events").fetchone()[0]
            base = "floor: 2 raw commits"
            print(f"\n{durability}: {args.calls} calls x {args.reps} reps, interleaved by {BATCH}")
            print(f"load average (1 min) at each rep's start and the end: {loads}")
            print(f"(prototype file: {logged} log rows, {evs} events rows: the log path ran)")
            print(f"{'case':<30} {'median us':>10} {'p99 us':>10} {'x floor':>8} {'range':<12}")
            for name, per in times.items():
                flat = [t for rep in per for t in rep]
                ratios = [
                    statistics.median(per[r]) / statistics.median(times[base][r])
                    for r in range(args.reps)
                ]
                print(
                    f"{name:<30} {statistics.median(flat):>10.1f} "
                    f"{percentile(flat, 0.99):>10.1f} {statistics.median(ratios):>8.2f} "
                    f"{min(ratios):.2f}-{max(ratios):.2f}"
                )


if __name__ == "__main__":
    main()
