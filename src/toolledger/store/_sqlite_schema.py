"""SQLite schema: numbered migrations. No connections here.

Rules:

- ``MIGRATIONS`` is append-only: never edit a shipped one. ``SQLiteStore`` applies the
  missing ones in one ``BEGIN IMMEDIATE`` transaction and records each version in
  ``toolledger_schema`` (and ``PRAGMA user_version``) in that same transaction.
- Columns mirror the PostgreSQL tables (``_pg_schema``) exactly, so a ledger copies between
  backends byte for byte; the one difference is how a value may be stored, never what is
  read: since version 9 an ``events.prev_hash`` that links to the record before it may be
  an empty BLOB (``_sqlite_ops.PREV_MARKER``), read back as that record's hash.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Union

from ._approval_record import stored_action
from ._sqlite_search import (
    create_search_index,
    create_search_queue,
    mark_per_append,
    reindex_own_tokens,
)

__all__ = ["LATEST_VERSION", "MIGRATIONS", "MigrationStep"]

#: A migration step: an SQL statement, or a function given the connection.
MigrationStep = Union[str, Callable[[sqlite3.Connection], None]]  # noqa: UP007 (runtime alias)


def _nothing_to_change(conn: sqlite3.Connection) -> None:
    """A migration that only moves the schema version (what older versions cannot read)."""


def _add_approval_action_columns(conn: sqlite3.Connection) -> None:
    """Add ``approvals.action`` and ``conversation_id`` unless there (as PostgreSQL's
    ``ADD COLUMN IF NOT EXISTS``: a file whose version table was wound back runs it again)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(approvals)")}
    for column in ("action", "conversation_id"):
        if column not in have:
            conn.execute(f"ALTER TABLE approvals ADD COLUMN {column} TEXT")


def _backfill_approval_actions(conn: sqlite3.Connection) -> None:
    """Fill ``approvals.action``/``conversation_id`` from each stored record's JSON."""
    rows = conn.execute("SELECT namespace, call_id, record FROM approvals").fetchall()
    conn.executemany(
        "UPDATE approvals SET action = ?, conversation_id = ? WHERE namespace = ? AND call_id = ?",
        [(*stored_action(text), ns, cid) for ns, cid, text in rows],
    )


#: Numbered migrations: (version, name, steps). Append only; never edit a shipped one.
MIGRATIONS: list[tuple[int, str, list[MigrationStep]]] = [
    (
        1,
        "checkpoints_history_operations_runs_events",
        [
            """CREATE TABLE checkpoints (
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                status TEXT NOT NULL,
                revision INTEGER NOT NULL,
                tool_name TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            ) WITHOUT ROWID""",
            "CREATE INDEX checkpoints_reconcile ON checkpoints (status, updated_at)",
            "CREATE INDEX checkpoints_ns_updated ON checkpoints (namespace, updated_at)",
            """CREATE TABLE checkpoint_history (
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                revision INTEGER NOT NULL,
                status TEXT NOT NULL,
                transition TEXT NOT NULL,
                action TEXT NOT NULL,
                at TEXT NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id, revision)
            ) WITHOUT ROWID""",
            """CREATE TABLE operation_journal (
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                data TEXT NOT NULL,
                written_at TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            ) WITHOUT ROWID""",
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                namespace TEXT NOT NULL,
                agent TEXT,
                goal TEXT,
                status TEXT NOT NULL,
                started_at TEXT NOT NULL,
                ended_at TEXT,
                head_hash TEXT,
                event_count INTEGER NOT NULL DEFAULT 0,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX runs_started ON runs (started_at)",
            """CREATE TABLE events (
                run_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                event_id TEXT NOT NULL,
                parent_id TEXT,
                kind TEXT NOT NULL,
                name TEXT,
                status TEXT,
                at TEXT NOT NULL,
                prev_hash TEXT,
                hash TEXT NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            ) WITHOUT ROWID""",
            "CREATE INDEX events_event_id ON events (run_id, event_id)",
        ],
    ),
    (
        2,
        "tombstones",
        [
            """CREATE TABLE tombstones (
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                erased_at TEXT NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            ) WITHOUT ROWID""",
            "CREATE INDEX runs_ended ON runs (ended_at)",
        ],
    ),
    (
        3,
        "approvals",
        [
            """CREATE TABLE approvals (
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                status TEXT NOT NULL,
                revision INTEGER NOT NULL,
                requested_at TEXT NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            ) WITHOUT ROWID""",
            "CREATE INDEX approvals_status ON approvals (status, requested_at)",
        ],
    ),
    (
        4,
        "effect_keys",
        [
            """CREATE TABLE effect_keys (
                namespace TEXT NOT NULL,
                effect_key TEXT NOT NULL,
                call_id TEXT NOT NULL,
                claimed_at TEXT NOT NULL,
                PRIMARY KEY (namespace, effect_key)
            ) WITHOUT ROWID""",
        ],
    ),
    (5, "search_index", [create_search_index]),
    (6, "search_queue", [create_search_queue]),
    (
        7,
        "append_only_history",
        [
            # History rows are appended in time order to a rowid table (one leaf page at
            # its end, split cheaply) instead of into a b-tree keyed by random call ids;
            # the key index keeps each checkpoint's rows together for reads and erasure.
            """CREATE TABLE checkpoint_history_v7 (
                id INTEGER PRIMARY KEY,
                namespace TEXT NOT NULL,
                call_id TEXT NOT NULL,
                revision INTEGER NOT NULL,
                status TEXT NOT NULL,
                transition TEXT NOT NULL,
                action TEXT NOT NULL,
                at TEXT NOT NULL,
                record TEXT NOT NULL
            )""",
            "INSERT INTO checkpoint_history_v7 "
            "(namespace, call_id, revision, status, transition, action, at, record) "
            "SELECT namespace, call_id, revision, status, transition, action, at, record "
            "FROM checkpoint_history ORDER BY namespace, call_id, revision",
            "DROP TABLE checkpoint_history",
            "ALTER TABLE checkpoint_history_v7 RENAME TO checkpoint_history",
            "CREATE UNIQUE INDEX checkpoint_history_key "
            "ON checkpoint_history (namespace, call_id, revision)",
            # Every transition moved this index's entry (updated_at changes): one more WAL
            # page per commit. Listing by namespace is served by the primary key's prefix,
            # by status (reconcile, retention) by ``checkpoints_reconcile``.
            "DROP INDEX checkpoints_ns_updated",
        ],
    ),
    (8, "search_mark_per_append", [mark_per_append]),
    # No table changes: from this version a record's ``prev_hash`` may be stored as an
    # empty BLOB meaning "the hash of the record before it" (``_sqlite_ops.PREV_MARKER``),
    # which an older toolledger would read as a broken link; the version keeps it out.
    (9, "prev_hash_of_the_record_before", [_nothing_to_change]),
    # The index holds toolledger's own tokens (NFKC, case-folded), not what FTS5's
    # unicode61 made of the raw text: every run and record is indexed again.
    (10, "search_own_tokens", [reindex_own_tokens]),
    # A denial of the same action is found by (namespace, action, conversation) through
    # an index instead of reading every denial of the namespace (``find_denial``).
    (
        11,
        "approvals_by_action",
        [
            _add_approval_action_columns,
            _backfill_approval_actions,
            "CREATE INDEX IF NOT EXISTS approvals_action "
            "ON approvals (namespace, action, conversation_id, status)",
        ],
    ),
]

LATEST_VERSION = MIGRATIONS[-1][0]
