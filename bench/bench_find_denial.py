"""Benchmark: ``approvals.find_denial`` by the store's index against the namespace scan.

The gate of every call with no stored decision of its own asks for a denial of the same
action. Before ``Capabilities.denials_by_action`` it read every denial of the namespace
(``list_approvals(status="denied", namespace=...)``) and compared them; now the store looks
the action up by ``(namespace, action, conversation_id, status)``. Both are timed in the
same run, on the same ledger, taking turns: ``scan`` is the fallback third-party stores
still get (the code every store ran before), ``index`` what the built-in stores run.

Each ledger holds N denials of N different actions in one namespace (one of them the
asked action, in the asked conversation); rows are written in bulk with the columns the
store would write. Backends: MemoryStore, SQLite, and PostgreSQL with
``$TOOLLEDGER_PG_DSN`` (a fresh schema, analyzed, dropped after). Columns: median of the
per-lookup time in microseconds. Nothing here is asserted by the test suite.

Run: ``.venv/bin/python bench/bench_find_denial.py [--sizes 10,1000,10000] [--reps 15]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from toolledger.approvals import find_denial
from toolledger.checkpoint import Binding, fingerprint
from toolledger.checkpoint.model import format_time
from toolledger.store import SQLiteStore, latest_denial
from toolledger.store._approval_record import (
    ApprovalRecord,
    ApprovalStatus,
    action_digest,
    dump_approval,
)
from toolledger.store.base import Store
from toolledger.testing import MemoryStore

__all__ = ["main"]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CONVERSATION = "conv-1"


def _denials(n: int) -> list[ApprovalRecord]:
    out = []
    for i in range(n):
        pending = ApprovalRecord(
            binding=Binding("ns", f"c{i}", "send_email", "1", fingerprint({"to": f"u{i}"})),
            status=ApprovalStatus.PENDING,
            revision=0,
            requested_at=T0 + timedelta(microseconds=i),
            conversation_id=CONVERSATION,
        )
        out.append(
            pending.next(status=ApprovalStatus.DENIED, by="ana", decided_at=pending.requested_at)
        )
    return out


def _row(rec: ApprovalRecord) -> tuple[Any, ...]:
    return (
        rec.binding.namespace,
        rec.call_id,
        rec.status.value,
        rec.revision,
        format_time(rec.requested_at),
        dump_approval(rec),
        action_digest(rec.binding),
        rec.conversation_id,
    )


_INSERT = (
    "INSERT INTO {t} (namespace, call_id, status, revision, requested_at, record, action, "
    "conversation_id) VALUES ({p})"
)


@contextmanager
def _memory(recs: list[ApprovalRecord]) -> Iterator[Store]:
    store = MemoryStore()
    for rec in recs:
        assert store.approval_put(dataclasses.replace(rec, revision=0), expected_revision=-1)
    yield store


@contextmanager
def _sqlite(recs: list[ApprovalRecord]) -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        SQLiteStore(db).close()
        conn = sqlite3.connect(str(db), isolation_level=None)
        conn.execute("BEGIN")
        conn.executemany(_INSERT.format(t="approvals", p=", ".join("?" * 8)), map(_row, recs))
        conn.execute("COMMIT")
        conn.close()
        with SQLiteStore(db) as store:
            yield store


@contextmanager
def _postgres(recs: list[ApprovalRecord]) -> Iterator[Store]:
    import psycopg
    from psycopg import sql

    from toolledger.store.postgres import PostgresStore

    dsn = os.environ["TOOLLEDGER_PG_DSN"]
    schema = f"tl_bench_denial_{uuid.uuid4().hex[:8]}"
    try:
        PostgresStore(dsn, schema=schema).close()
        with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
            table = sql.Identifier(schema, "approvals").as_string(conn)
            cur.executemany(_INSERT.format(t=table, p=", ".join(["%s"] * 8)), map(_row, recs))
            cur.execute(f"ANALYZE {table}")
        with PostgresStore(dsn, schema=schema) as store:
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _scan(store: Store, binding: Binding, conversation: str) -> ApprovalRecord | None:
    """What every store ran before (and a store without ``denials_by_action`` still runs)."""
    denied = store.list_approvals(status="denied", namespace=binding.namespace)
    return latest_denial(denied, binding, conversation)


def _time(fn: Callable[[], object], rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def measure(open_store: Any, n: int, reps: int) -> tuple[float, float]:
    recs = _denials(n)
    asking = Binding("ns", "c-new", "send_email", "1", recs[n // 2].binding.input_fingerprint)
    with open_store(recs) as store:
        found = find_denial(store, asking, CONVERSATION)
        assert found is not None
        assert found == _scan(store, asking, CONVERSATION)
        assert found.call_id == recs[n // 2].call_id
        rounds = max(1, 2000 // n)
        scan, index = [], []
        for _ in range(reps):  # taking turns, so load drifts hit both alike
            scan.append(_time(lambda: _scan(store, asking, CONVERSATION), rounds))
            index.append(_time(lambda: find_denial(store, asking, CONVERSATION), 200))
    return statistics.median(scan), statistics.median(index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    backends: list[tuple[str, Any]] = [("memory", _memory), ("sqlite", _sqlite)]
    if os.environ.get("TOOLLEDGER_PG_DSN"):
        backends.append(("postgres", _postgres))
    print("| backend | denials in the namespace | scan (before) us | index (after) us | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, open_store in backends:
        for n in (int(s) for s in args.sizes.split(",")):
            scan, index = measure(open_store, n, args.reps)
            print(f"| {name} | {n:,} | {scan:,.1f} | {index:,.1f} | {scan / index:,.1f}x |")


if __name__ == "__main__":
    main()
