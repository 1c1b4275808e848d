"""PostgreSQL schema: numbered migrations and schema-qualified SQL. No connections here.

Rules:

- Every table lives in the store's schema; statements name it through
  ``psycopg.sql.Identifier`` (``qualify``), so tests and tenants isolate by schema.
- Columns mirror the SQLite tables exactly (times as ISO-8601 UTC text with microseconds,
  records as their exact stored JSON text, never ``jsonb``, which would reorder keys), so a
  ledger copies between backends byte for byte.
- ``MIGRATIONS`` is append-only. Each version is recorded in ``toolledger_schema`` in the
  same transaction as its change; two hosts migrating at once serialise on a
  transaction-scoped advisory lock taken for the migration only (never for CAS).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from psycopg import sql

from ._approval_record import stored_action
from ._pg_batch import FUNCTION as _APPLY_OPS_FUNCTION
from ._pg_batch import FUNCTION_6 as _APPLY_OPS_FUNCTION_6
from ._pg_batch import FUNCTION_7 as _APPLY_OPS_FUNCTION_7
from ._pg_search import MIGRATION as _SEARCH_MIGRATION
from ._pg_search import backfill as _search_backfill

__all__ = ["LATEST_VERSION", "MIGRATIONS", "lock_key", "qualify"]

#: A migration step: a statement with ``{s}`` for the schema, or a function given the
#: migration's cursor and the store's rendered queries.
MigrationStep = Union[str, Callable[[Any, Any], None]]  # noqa: UP007 (a runtime alias)


def _backfill_approval_actions(cur: Any, q: Any) -> None:
    """Fill ``approvals.action``/``conversation_id`` from each stored record's JSON."""
    cur.execute(q["approvals_all"])
    rows = cur.fetchall()
    if rows:
        cur.executemany(
            q["approvals_set_action"],
            [(*stored_action(text), ns, cid) for ns, cid, text in rows],
        )


#: Numbered migrations: (version, name, steps).
MIGRATIONS: list[tuple[int, str, list[MigrationStep]]] = [
    (
        1,
        "checkpoints_history_operations_runs_events",
        [
            """CREATE TABLE {s}.checkpoints (
                namespace TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                status TEXT NOT NULL,
                revision BIGINT NOT NULL,
                tool_name TEXT NOT NULL,
                updated_at TEXT COLLATE "C" NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            )""",
            "CREATE INDEX checkpoints_reconcile ON {s}.checkpoints (status, updated_at)",
            "CREATE INDEX checkpoints_ns_updated ON {s}.checkpoints (namespace, updated_at)",
            """CREATE TABLE {s}.checkpoint_history (
                namespace TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                revision BIGINT NOT NULL,
                status TEXT NOT NULL,
                transition TEXT NOT NULL,
                action TEXT NOT NULL,
                at TEXT NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id, revision)
            )""",
            """CREATE TABLE {s}.operation_journal (
                namespace TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                data TEXT NOT NULL,
                written_at TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            )""",
            """CREATE TABLE {s}.runs (
                run_id TEXT COLLATE "C" PRIMARY KEY,
                namespace TEXT COLLATE "C" NOT NULL,
                agent TEXT,
                goal TEXT,
                status TEXT NOT NULL,
                started_at TEXT COLLATE "C" NOT NULL,
                ended_at TEXT COLLATE "C",
                head_hash TEXT,
                event_count BIGINT NOT NULL DEFAULT 0,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX runs_started ON {s}.runs (started_at)",
            """CREATE TABLE {s}.events (
                run_id TEXT COLLATE "C" NOT NULL,
                seq BIGINT NOT NULL,
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
            )""",
            "CREATE INDEX events_event_id ON {s}.events (run_id, event_id)",
        ],
    ),
    (
        2,
        "tombstones",
        [
            """CREATE TABLE {s}.tombstones (
                namespace TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                erased_at TEXT NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            )""",
            "CREATE INDEX runs_ended ON {s}.runs (ended_at)",
        ],
    ),
    (
        3,
        "approvals",
        [
            """CREATE TABLE {s}.approvals (
                namespace TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                status TEXT NOT NULL,
                revision BIGINT NOT NULL,
                requested_at TEXT COLLATE "C" NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (namespace, call_id)
            )""",
            "CREATE INDEX approvals_status ON {s}.approvals (status, requested_at)",
        ],
    ),
    (
        4,
        "effect_keys",
        [
            """CREATE TABLE {s}.effect_keys (
                namespace TEXT COLLATE "C" NOT NULL,
                effect_key TEXT COLLATE "C" NOT NULL,
                call_id TEXT COLLATE "C" NOT NULL,
                claimed_at TEXT NOT NULL,
                PRIMARY KEY (namespace, effect_key)
            )""",
        ],
    ),
    (5, "search_index", [*_SEARCH_MIGRATION, _search_backfill]),
    # One statement per batch (``_pg_batch``): a transaction's ops in one round trip.
    (6, "apply_ops_function", [_APPLY_OPS_FUNCTION_6]),
    # Each op one statement; a create and its claim one insert (``_pg_batch.FUNCTION``).
    (7, "apply_ops_fused_claim", [_APPLY_OPS_FUNCTION_7]),
    # The index holds toolledger's own tokens (NFKC, case-folded) as tsvector literals
    # instead of what to_tsvector('simple') made of them: every row is indexed again.
    (8, "search_own_tokens", [_APPLY_OPS_FUNCTION, _search_backfill]),
    # A denial of the same action is found by (namespace, action, conversation) through
    # an index instead of reading every denial of the namespace (``find_denial``).
    (
        9,
        "approvals_by_action",
        [
            # IF NOT EXISTS: a schema whose version table was wound back (a test of an
            # earlier migration) runs this again over its own columns.
            'ALTER TABLE {s}.approvals ADD COLUMN IF NOT EXISTS action TEXT COLLATE "C", '
            'ADD COLUMN IF NOT EXISTS conversation_id TEXT COLLATE "C"',
            _backfill_approval_actions,
            "CREATE INDEX IF NOT EXISTS approvals_action "
            "ON {s}.approvals (namespace, action, conversation_id, status)",
        ],
    ),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def qualify(template: str, schema: str) -> sql.Composed:
    """Return ``template`` with every ``{s}`` replaced by the quoted schema identifier."""
    return sql.SQL(template).format(s=sql.Identifier(schema))


def lock_key(schema: str) -> str:
    """Return the text hashed into the migration advisory-lock key for ``schema``."""
    return f"toolledger.migrate:{schema}"
