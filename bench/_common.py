"""Shared pieces of the SQLite benchmarks: the raw five-transition SQL floor, percentiles.

Rules this module keeps: the floor runs the very statements the SQLite store runs, on its
schema, with no toolledger code on the timed path (the stored JSON documents are built up
front by ``lifecycle_docs``); nothing here measures or prints, each bench does its own.
Not a benchmark itself (``run_all.py`` runs only ``bench_*.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from toolledger.checkpoint import (
    Binding,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
)
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
    "LogDesignFloor",
    "StatementFloor",
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


def lifecycle_docs(binding: Binding, *, attempt_id: str, delivery_id: str) -> list[tuple[str, str]]:
    """Return the five stored ``(record JSON, updated_at)`` of a call's whole lifecycle.

    The transitions happen at ``T0`` + 0..4 ms: create, claim and complete execution,
    claim and complete delivery.
    """
    at = [T0 + timedelta(milliseconds=i) for i in range(5)]
    rec = create_checkpoint(binding, at=at[0])
    docs = [rec]
    t = claim_execution(rec, attempt_id=attempt_id, at=at[1])
    docs.append(t.next)
    t = complete_execution(t.next, attempt_id=attempt_id, at=at[2], result=RESULT)
    docs.append(t.next)
    t = claim_delivery(t.next, delivery_id=delivery_id, at=at[3])
    docs.append(t.next)
    t = complete_delivery(t.next, delivery_id=delivery_id, at=at[4])
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


_EVENT = (
    "INSERT INTO events (run_id, seq, event_id, parent_id, kind, name, status, at, prev_hash, "
    "hash, data) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
_COUNT = "UPDATE runs SET event_count = ?, head_hash = ? WHERE run_id = ? AND event_count = ?"
_READ = (
    "SELECT (SELECT record FROM checkpoints WHERE namespace = ?1 AND call_id = ?2), "
    "(SELECT record FROM approvals WHERE namespace = ?1 AND call_id = ?2)"
)
_SORTED = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False}


def _claimed_doc(namespace: str, call_id: str, input: Any) -> tuple[str, str, dict[str, Any]]:
    """A new call's input fingerprint, claim time and claimed record, the plainest way."""
    fp = "sha256:" + hashlib.sha256(json.dumps(input, **_SORTED).encode()).hexdigest()
    at = datetime.now(timezone.utc).isoformat()
    binding = {
        "namespace": namespace,
        "call_id": call_id,
        "tool_name": "send_email",
        "tool_revision": "1",
        "input_fingerprint": fp,
    }
    doc = {
        "binding": binding,
        "status": "executing",
        "revision": 1,
        "created_at": at,
        "updated_at": at,
        "execution_fence": os.urandom(16).hex(),
        "execution_claimed_at": at,
        "result": None,
    }
    return fp, at, doc


def _completed(doc: dict[str, Any], result: Any) -> str:
    """Move ``doc`` to completed with ``result``; return the completion time."""
    done = datetime.now(timezone.utc).isoformat()
    doc.update(status="completed", revision=2, updated_at=done, completed_at=done)
    doc["result"] = {"payload": result, "is_error": False}
    return done


def _journal_text(prev: str, data: dict[str, Any]) -> tuple[str, str]:
    """A journal record's stored text (content hash in its header) and chained hash."""
    content = json.dumps(data, **_SORTED)
    header = {"content_sha256": hashlib.sha256(content.encode()).hexdigest(), "v": 1}
    text = json.dumps({"header": header, "content": data}, **_SORTED)
    return text, hashlib.sha256(f"{prev}{text}".encode()).hexdigest()


class StatementFloor:
    """A new guarded call's statements with the least Python that can send them.

    The very statements a new ``run.call`` sends on the store's schema (the read of the
    checkpoint and approval; create+claim: the two same-action keys, checkpoint, history,
    the run's count CAS, the event's start record; completion: CAS, history, the operation
    journal's delete, the count CAS, the end record: 16 with the ``BEGIN``/``COMMIT``s),
    with what each needs built by the plainest Python: the input's canonical JSON and
    SHA-256, the keys' SHA-256, the record as ``json.dumps`` of a dict, a journal record's
    content hash and chained hash, ISO times, random ids; no validation, no checks, no
    objects. What a Python implementation of the same writes cannot go below.
    """

    def __init__(self, conn: sqlite3.Connection, namespace: str = "floor") -> None:
        self.conn = conn
        self.namespace = namespace
        self.run_id = os.urandom(16).hex()
        self.count = 0
        self.head = ""
        at = datetime.now(timezone.utc).isoformat()
        conn.execute(
            "INSERT INTO runs (run_id, namespace, agent, goal, status, started_at, ended_at, "
            "head_hash, event_count, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (self.run_id, namespace, "bench", None, "running", at, None, None, 0, "{}"),
        )

    def _record(self, status: str, at: str, data: dict[str, Any]) -> tuple[Any, ...]:
        text, digest = _journal_text(self.head, data)
        row = (self.run_id, self.count, self.event_id, None, "tool_call", "send_email", status)
        prev, self.head = self.head, digest
        self.count += 1
        return (*row, at, prev or None, digest, text)

    def _count(self) -> None:
        self.conn.execute(_COUNT, (self.count, self.head, self.run_id, self.count - 1))

    def call(self, call_id: str, input: Any, execute: Any) -> Any:
        """One new call: read, commit the claim, run ``execute(input)``, commit the result."""
        conn, ns = self.conn, self.namespace
        found = conn.execute(_READ, (ns, call_id)).fetchone()
        assert found == (None, None)
        fp, at, doc = _claimed_doc(ns, call_id, input)
        self.event_id = os.urandom(16).hex()
        action = f'["action", "send_email", "1", "{fp}"]'
        seen = f'["seen", "send_email", "1", "{fp}", "{self.run_id}"]'
        conn.execute("BEGIN IMMEDIATE")
        for key in (action, seen):
            conn.execute(
                "INSERT OR IGNORE INTO effect_keys (namespace, effect_key, call_id, claimed_at) "
                "VALUES (?, ?, ?, ?)",
                (ns, "sha256:" + hashlib.sha256(key.encode()).hexdigest(), call_id, at),
            )
        text = json.dumps(doc, separators=(",", ":"))
        cur = conn.execute(_INSERT, (ns, call_id, "executing", 1, "send_email", at, text))
        assert cur.rowcount == 1
        conn.execute(
            _HISTORY, (ns, call_id, 1, "executing", "claim_execution", "execute", at, text)
        )
        start = self._record("running", at, {"inputs": input, "meta": {"input_fingerprint": fp}})
        self._count()
        conn.execute(_EVENT, start)
        conn.execute("COMMIT")
        result = execute(input)
        done = _completed(doc, result)
        conn.execute("BEGIN IMMEDIATE")
        text = json.dumps(doc, separators=(",", ":"))
        cur = conn.execute(_UPDATE, ("completed", 2, done, text, ns, call_id, 1))
        assert cur.rowcount == 1
        conn.execute(
            _HISTORY, (ns, call_id, 2, "completed", "complete_execution", "deliver", done, text)
        )
        conn.execute(
            "DELETE FROM operation_journal WHERE namespace = ? AND call_id = ?", (ns, call_id)
        )
        end = self._record("completed", done, {"outputs": {"result": result, "is_error": False}})
        self._count()
        conn.execute(_EVENT, end)
        conn.execute("COMMIT")
        return result


class LogDesignFloor:
    """A new call as the storage redesign would write it, with the least Python.

    Its own two tables (in a file of its own): the checkpoint row with its reconcile index,
    and one append-only log row per commit carrying the transition and the journal record
    (history and the journal read from it; no other index written per commit). Per new
    call: the read, then ``BEGIN``, the checkpoint, the log row, ``COMMIT``, twice (9
    statements), with ``StatementFloor``'s Python. What the redesign could reach at best.
    """

    def __init__(self, conn: sqlite3.Connection, namespace: str = "floor") -> None:
        self.conn = conn
        self.namespace = namespace
        self.run_id = os.urandom(16).hex()
        self.seq = 0
        self.head = ""
        conn.execute(
            "CREATE TABLE IF NOT EXISTS floor_checkpoints (namespace TEXT NOT NULL, "
            "call_id TEXT NOT NULL, status TEXT NOT NULL, revision INTEGER NOT NULL, "
            "updated_at TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (namespace, call_id)) "
            "WITHOUT ROWID"
        )
        conn.execute(
            "CREATE INDEX IF NOT EXISTS floor_reconcile ON floor_checkpoints (status, updated_at)"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS floor_log (id INTEGER PRIMARY KEY, run_id TEXT, "
            "seq INTEGER, namespace TEXT, call_id TEXT, revision INTEGER, hash TEXT, data TEXT)"
        )

    def _log(self, call_id: str, revision: int, data: dict[str, Any]) -> None:
        text, self.head = _journal_text(self.head, data)
        self.seq += 1
        self.conn.execute(
            "INSERT INTO floor_log (run_id, seq, namespace, call_id, revision, hash, data) "
            "VALUES (?,?,?,?,?,?,?)",
            (self.run_id, self.seq, self.namespace, call_id, revision, self.head, text),
        )

    def call(self, call_id: str, input: Any, execute: Any) -> Any:
        """One new call: read, commit the claim, run ``execute(input)``, commit the result."""
        conn, ns = self.conn, self.namespace
        found = conn.execute(
            "SELECT record FROM floor_checkpoints WHERE namespace = ? AND call_id = ?",
            (ns, call_id),
        ).fetchone()
        assert found is None
        fp, at, doc = _claimed_doc(ns, call_id, input)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO floor_checkpoints VALUES (?,?,?,?,?,?)",
            (ns, call_id, "executing", 1, at, json.dumps(doc, separators=(",", ":"))),
        )
        self._log(call_id, 1, {"inputs": input, "meta": {"input_fingerprint": fp}})
        conn.execute("COMMIT")
        result = execute(input)
        done = _completed(doc, result)
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.execute(
            "UPDATE floor_checkpoints SET status = ?, revision = 2, updated_at = ?, record = ? "
            "WHERE namespace = ? AND call_id = ? AND revision = 1",
            ("completed", done, json.dumps(doc, separators=(",", ":")), ns, call_id),
        )
        assert cur.rowcount == 1
        self._log(call_id, 2, {"outputs": {"result": result, "is_error": False}})
        conn.execute("COMMIT")
        return result


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank below."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
