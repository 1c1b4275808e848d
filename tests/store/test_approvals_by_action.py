"""The approvals_by_action migration: a ledger written before it gains the columns and the
index, its stored denials are found by action, and an older toolledger refuses it."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import toolledger as tl
from toolledger.approvals import find_denial
from toolledger.checkpoint import Binding, fingerprint
from toolledger.errors import InvalidCheckpointError
from toolledger.store import ApprovalRecord, ApprovalStatus, SQLiteStore, postgres, sqlite
from toolledger.store.postgres import PostgresStore

from .._internals import _sqlite_conn, dump_approval
from .._pg_dsn import pg_dsn_or_skip

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NAME = "approvals_by_action"


def _binding(call_id: str, to: str = "ana@example.com") -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"to": to}))


def _denial(call_id: str, at: float, conversation: str | None = "conv-1", **kw: Any) -> str:
    """The stored JSON text of a denial (what the previous version wrote)."""
    return dump_approval(
        ApprovalRecord(
            binding=_binding(call_id, **kw),
            status=ApprovalStatus.DENIED,
            revision=1,
            requested_at=T0,
            by="ana",
            reason="no",
            decided_at=T0 + timedelta(seconds=at),
            conversation_id=conversation,
        )
    )


#: Rows a ledger of the previous version holds: (call id, stored record text).
OLD_ROWS = [
    ("c-early", _denial("c-early", 1)),
    ("c-late", _denial("c-late", 5)),
    ("c-other-input", _denial("c-other-input", 9, to="bo@example.com")),
    ("c-other-conv", _denial("c-other-conv", 9, conversation="conv-2")),
    ("c-before-conversations", _denial("c-before-conversations", 9, conversation=None)),
    ("c-damaged", '{"v": 1, "binding": '),
]


def _check_migrated(store: tl.Store) -> None:
    asking = _binding("c-new")
    found = find_denial(store, asking, "conv-1")
    assert found is not None
    assert found.call_id == "c-late"
    other = find_denial(store, asking, "conv-2")
    assert other is not None
    assert other.call_id == "c-other-conv"
    assert find_denial(store, _binding("c-new", to="bo@example.com"), "conv-2") is None
    assert find_denial(store, asking, "conv-3") is None
    with pytest.raises(InvalidCheckpointError):  # still reported damaged, never dropped
        store.approval_get("ns", "c-damaged")
    # A denial stored by the new version is found beside the migrated ones.
    pending = ApprovalRecord(
        binding=_binding("c-newest"),
        status=ApprovalStatus.PENDING,
        revision=0,
        requested_at=T0,
        conversation_id="conv-1",
    )
    assert store.approval_put(pending, expected_revision=-1)
    assert find_denial(store, asking, "conv-1") == found  # a pending request is no denial
    denied = pending.next(status=ApprovalStatus.DENIED, by="bo", decided_at=T0 + timedelta(1))
    assert store.approval_put(denied, expected_revision=0)
    assert find_denial(store, asking, "conv-1") == denied


# -- SQLite ------------------------------------------------------------------------------


def _as_previous_sqlite(patch: pytest.MonkeyPatch) -> None:
    before = [m for m in sqlite.MIGRATIONS if m[1] != NAME]
    assert len(before) == len(sqlite.MIGRATIONS) - 1
    assert before[-1][0] + 1 == sqlite.LATEST_VERSION
    patch.setattr(sqlite, "MIGRATIONS", before)
    patch.setattr(sqlite, "LATEST_VERSION", before[-1][0])
    patch.setattr(_sqlite_conn, "LATEST_VERSION", before[-1][0])


def test_sqlite_file_of_the_previous_version_finds_its_denials_by_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written before the migration gains the columns (filled from each record)
    and the index; its denials are found by action, a damaged row stays damaged."""
    db = tmp_path / "ledger.db"
    with monkeypatch.context() as patch:
        _as_previous_sqlite(patch)
        SQLiteStore(db).close()
    conn = _raw(db)
    conn.executemany(
        "INSERT INTO approvals (namespace, call_id, status, revision, requested_at, record) "
        "VALUES ('ns', ?, 'denied', 1, '2026-01-01T00:00:00.000000Z', ?)",
        OLD_ROWS,
    )
    conn.close()
    with SQLiteStore(db) as store:
        assert store.applied_migrations()[-1] == (sqlite.LATEST_VERSION, NAME)
        _check_migrated(store)
    conn = _raw(db)
    columns = [row[2] for row in conn.execute("PRAGMA index_info('approvals_action')")]
    assert columns == ["namespace", "action", "conversation_id", "status"]
    backfilled = dict(
        conn.execute("SELECT call_id, conversation_id FROM approvals WHERE action IS NULL")
    )
    conn.close()
    assert backfilled == {"c-damaged": None}


def test_previous_toolledger_refuses_a_migrated_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A toolledger without the migration refuses the file (STORE_SCHEMA_TOO_NEW) and
    leaves it byte for byte as it was."""
    db = tmp_path / "ledger.db"
    SQLiteStore(db).close()
    before = db.read_bytes()
    with monkeypatch.context() as patch:
        _as_previous_sqlite(patch)
        with pytest.raises(tl.StoreSchemaTooNewError) as info:
            SQLiteStore(db)
    assert info.value.code == "STORE_SCHEMA_TOO_NEW"
    assert info.value.details["version"] == sqlite.LATEST_VERSION
    assert db.read_bytes() == before


def _raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(db), isolation_level=None)


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
def schemas() -> Iterator[Callable[[], str]]:
    dsn = pg_dsn_or_skip()
    made: list[str] = []

    def make() -> str:
        made.append(f"tl_denial_{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _as_previous_pg(patch: pytest.MonkeyPatch) -> None:
    before = [m for m in postgres.MIGRATIONS if m[1] != NAME]
    assert before[-1][0] + 1 == postgres.LATEST_VERSION
    patch.setattr(postgres, "MIGRATIONS", before)
    patch.setattr(postgres, "LATEST_VERSION", before[-1][0])


@pytest.mark.postgres
def test_postgres_schema_of_the_previous_version_finds_its_denials_by_action(
    schemas: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema written before the migration gains the columns (filled from each record)
    and the index; its denials are found by action, a damaged row stays damaged."""
    dsn = pg_dsn_or_skip()
    name = schemas()
    with monkeypatch.context() as patch:
        _as_previous_pg(patch)
        PostgresStore(dsn, schema=name).close()
    table = sql.Identifier(name, "approvals")
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            sql.SQL(
                "INSERT INTO {} (namespace, call_id, status, revision, requested_at, record) "
                "VALUES ('ns', %s, 'denied', 1, '2026-01-01T00:00:00.000000Z', %s)"
            ).format(table),
            OLD_ROWS,
        )
    with PostgresStore(dsn, schema=name) as store:
        assert store.applied_migrations()[-1] == (postgres.LATEST_VERSION, NAME)
        _check_migrated(store)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT call_id FROM {} WHERE action IS NULL").format(table)
        ).fetchall()
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
            (name, "approvals_action"),
        ).fetchone()
    assert rows == [("c-damaged",)]
    assert index is not None
    assert "(namespace, action, conversation_id, status)" in index[0]


@pytest.mark.postgres
def test_previous_toolledger_refuses_a_migrated_postgres_schema(
    schemas: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A toolledger without the migration refuses the schema with STORE_SCHEMA_TOO_NEW."""
    dsn = pg_dsn_or_skip()
    name = schemas()
    PostgresStore(dsn, schema=name).close()
    with monkeypatch.context() as patch:
        _as_previous_pg(patch)
        with pytest.raises(tl.StoreSchemaTooNewError) as info:
            PostgresStore(dsn, schema=name)
    assert info.value.code == "STORE_SCHEMA_TOO_NEW"
    assert info.value.details["version"] == postgres.LATEST_VERSION
    with PostgresStore(dsn, schema=name) as store:  # the current one still opens it
        assert store.applied_migrations()[-1] == (postgres.LATEST_VERSION, NAME)
