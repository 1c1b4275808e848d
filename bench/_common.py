"""Shared pieces of the SQLite benchmarks: the raw five-transition SQL floor, percentiles.

Rules this module keeps: the floor runs the very statements the SQLite store runs, on its
schema, with no toolledger code on the timed path (the stored JSON documents are built up
front by ``lifecycle_docs``); nothing here measures or prints, each bench does its own.
Not a benchmark itself (``run_all.py`` runs only ``bench_*.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import toolledger as tl
from toolledger.checkpoint.model import format_time
from toolledger.store import SQLiteStore
from toolledger.store._rows import dump_record

__all__ = [
    "RESULT",
    "CountingStore",
    "T0",
    "lifecycle_docs",
    "percentile",
    "raw_connect",
    "raw_lifecycle",
    "raw_two_commits",
]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RESULT = {"ok": True, "message_id": "msg-0001", "recipients": ["a@example.com"]}

_INSERT = (
    "INSERT OR IGNORE INTO checkpoints "
    "(namespace, call_id, status, revision, tool_name, updated_at, record) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_HISTORY = (
    "INSERT INTO checkpoint_history "
    "(namespace, call_id, revision, status, transition, action, at, record) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = "SELECT status, revision FROM checkpoints WHERE namespace = ? AND call_id = ?"
_UPDATE = (
    "UPDATE checkpoints SET status = ?, revision = ?, updated_at = ?, record = ? "
    "WHERE namespace = ? AND call_id = ? AND revision = ?"
)
_TOMBSTONE = "SELECT data FROM tombstones WHERE namespace = ? AND call_id = ?"
_STEPS = [
    ("executing", "claim_execution", "execute"),
    ("completed", "complete_execution", "deliver"),
    ("delivering", "claim_delivery", "deliver"),
    ("delivered", "complete_delivery", "none"),
]


class CountingStore(SQLiteStore):
    """Counts commits, and which of them were fsync-ed (durable at full durability)."""

    commits = 0
    fsyncs = 0

    def apply(self, ops: Any, *, durable: bool = True) -> Any:
        result = super().apply(ops, durable=durable)
        self.commits += 1
        self.fsyncs += int(durable and self.durability == "full")
        return result


def lifecycle_docs(
    binding: tl.Binding, *, attempt_id: str, delivery_id: str
) -> list[tuple[str, str]]:
    """Return the five stored ``(record JSON, updated_at)`` of a call's whole lifecycle.

    The transitions happen at ``T0`` + 0..4 ms: create, claim and complete execution,
    claim and complete delivery.
    """
    at = [T0 + timedelta(milliseconds=i) for i in range(5)]
    rec = tl.create_checkpoint(binding, at=at[0])
    docs = [rec]
    t = tl.claim_execution(rec, attempt_id=attempt_id, at=at[1])
    docs.append(t.next)
    t = tl.complete_execution(t.next, attempt_id=attempt_id, at=at[2], result=RESULT)
    docs.append(t.next)
    t = tl.claim_delivery(t.next, delivery_id=delivery_id, at=at[3])
    docs.append(t.next)
    t = tl.complete_delivery(t.next, delivery_id=delivery_id, at=at[4])
    docs.append(t.next)
    return [(dump_record(d), format_time(d.updated_at)) for d in docs]


def raw_connect(path: str | os.PathLike[str], durability: str) -> sqlite3.Connection:
    """Open ``path`` as the store does: autocommit, WAL, 30 s busy timeout, its fsync level."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    return conn


def raw_lifecycle(
    conn: sqlite3.Connection,
    namespace: str,
    call_id: str,
    docs: Sequence[tuple[str, str]],
    *,
    tombstones: bool = False,
) -> None:
    """Run a lifecycle's five transactions in plain SQL (``tombstones``: check the key too)."""
    conn.execute("BEGIN IMMEDIATE")
    text, at = docs[0]
    cur = conn.execute(_INSERT, (namespace, call_id, "ready", 0, "send_email", at, text))
    assert cur.rowcount == 1
    if tombstones:
        assert conn.execute(_TOMBSTONE, (namespace, call_id)).fetchone() is None
    conn.execute(
        _HISTORY, (namespace, call_id, 0, "ready", "create_checkpoint", "execute", at, text)
    )
    conn.execute("COMMIT")
    for revision, (status, name, action) in enumerate(_STEPS, start=1):
        text, at = docs[revision]
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(_SELECT, (namespace, call_id)).fetchone()
        assert row[1] == revision - 1
        cur = conn.execute(_UPDATE, (status, revision, at, text, namespace, call_id, revision - 1))
        assert cur.rowcount == 1
        conn.execute(_HISTORY, (namespace, call_id, revision, status, name, action, at, text))
        conn.execute("COMMIT")


_TWO_DOC = json.dumps({"status": "executing", "result": RESULT}, separators=(",", ":"))


def raw_two_commits(conn: sqlite3.Connection, namespace: str, call_id: str) -> None:
    """A new call's floor: create+claim (insert + history) and complete (CAS + history).

    The two transactions a guarded call must commit durably, in plain SQL on the store's
    schema, with a fixed small document: no toolledger code on the path.
    """
    at = "2026-01-01T00:00:00.000000Z"
    conn.execute("BEGIN IMMEDIATE")
    cur = conn.execute(_INSERT, (namespace, call_id, "executing", 1, "send_email", at, _TWO_DOC))
    assert cur.rowcount == 1
    conn.execute(
        _HISTORY, (namespace, call_id, 1, "executing", "claim_execution", "execute", at, _TWO_DOC)
    )
    conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")
    cur = conn.execute(_UPDATE, ("completed", 2, at, _TWO_DOC, namespace, call_id, 1))
    assert cur.rowcount == 1
    conn.execute(
        _HISTORY,
        (namespace, call_id, 2, "completed", "complete_execution", "deliver", at, _TWO_DOC),
    )
    conn.execute("COMMIT")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank below."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
