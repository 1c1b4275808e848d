"""Hostile rows and arguments at the store boundary: deeply nested stored JSON is
quarantined like any other bad row, and a bad path is a typed error, on every backend."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore

from .._pg_dsn import pg_dsn_or_skip

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DEEP_ARRAY = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
#: What validation says of each when the parser reads it (Python 3.13 does).
_SHAPE = {
    DEEP_ARRAY: "expected a CheckpointRecord or dict, got list (left untouched)",
    DEEP_OBJECT: "schema_version must be an int, got None (left untouched)",
}


def _binding(call_id: str) -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"id": call_id}))


def _plant_sqlite(store: Any, table: str, values: tuple[Any, ...]) -> None:
    conn = sqlite3.connect(store.path)
    # The table's first columns, as PostgreSQL's positional INSERT (later ones stay NULL).
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")][: len(values)]
    marks = ",".join("?" * len(values))
    conn.execute(f"INSERT OR REPLACE INTO {table} ({','.join(columns)}) VALUES ({marks})", values)
    conn.commit()
    conn.close()


def _plant_postgres(store: Any, table: str, values: tuple[Any, ...]) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.{} VALUES ({})").format(
                sql.Identifier(store.schema),
                sql.Identifier(table),
                sql.SQL(",").join(sql.Placeholder() * len(values)),
            ),
            values,
        )


def _plant_memory(store: Any, table: str, values: tuple[Any, ...]) -> None:
    rows = {"checkpoints": store.rows, "approvals": store._approvals}[table]
    rows[(values[0], values[1])] = values[-1]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[tl.Store, Callable[..., None]]]:
    if request.param == "memory":
        store: Any = MemoryStore()
        yield store, _plant_memory
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "hostile.db")
        yield store, _plant_sqlite
    else:
        from toolledger.store.postgres import PostgresStore

        store = PostgresStore(pg_dsn_or_skip(), schema=f"tl_hostile_{uuid.uuid4().hex[:10]}")
        try:
            yield store, _plant_postgres
        finally:
            import psycopg
            from psycopg import sql

            with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(store.schema))
                )
    store.close()


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT], ids=["arrays", "objects"])
def test_store_checkpoint_nested_5000_deep_is_quarantined(backend, text) -> None:
    """list() skips it, quarantined() reports it, get() raises INVALID_CHECKPOINT: no
    RecursionError anywhere, and the good rows stay readable."""
    store, plant = backend
    store.create_if_absent(create_checkpoint(_binding("good"), at=T0))
    plant(
        store, "checkpoints", ("ns", "deep", "ready", 0, "send_email", "2026-01-01T00:00:00Z", text)
    )

    assert [r.binding.call_id for r in store.list()] == ["good"]
    assert [r.binding.call_id for r in store.list(status="ready", limit=10)] == ["good"]
    (q,) = store.quarantined()
    assert (q.namespace, q.call_id) == ("ns", "deep")
    # Python <= 3.11's json refuses 5,000 levels; 3.13's reads them, and the shape fails.
    assert "nested too deeply" in q.reason or q.reason.endswith("is invalid: " + _SHAPE[text])
    with pytest.raises(tl.InvalidCheckpointError) as info:
        store.get("ns", "deep")
    assert info.value.details["call_id"] == "deep"


def test_sqlite_checkpoints_command_survives_a_deep_row(tmp_path: Path) -> None:
    """``toolledger checkpoints`` still lists the reconcile queue around a deep row."""
    from click.testing import CliRunner

    from toolledger.cli import main

    db = tmp_path / "queue.db"
    store = SQLiteStore(db)
    rec = create_checkpoint(_binding("good"), at=T0)
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=T0)
    assert store.compare_and_swap(t.expected_revision, t.next)
    _plant_sqlite(
        store,
        "checkpoints",
        ("ns", "deep", "executing", 1, "x", "2026-01-01T00:00:00Z", DEEP_ARRAY),
    )
    store.close()
    result = CliRunner().invoke(main, ["--db", str(db), "checkpoints"])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split()[:3] == ["call", "tool", "status"]
    assert len(rows) == 1  # the deep row is quarantined, the good one listed
    assert rows[0].split()[:3] == ["ns/good", "send_email", "executing"]


def test_store_approval_nested_5000_deep_is_invalid_checkpoint(backend) -> None:
    """A damaged approval row is a typed INVALID_CHECKPOINT, never RecursionError."""
    store, plant = backend
    plant(store, "approvals", ("ns", "deep", "pending", 0, "2026-01-01T00:00:00Z", DEEP_ARRAY))
    with pytest.raises(tl.InvalidCheckpointError):
        store.approval_get("ns", "deep")


@pytest.mark.parametrize("path", [None, 5, 1.5, b"x.db", "", True], ids=repr)
def test_sqlite_store_path_not_a_path_is_invalid_argument(path: Any) -> None:
    with pytest.raises(tl.InvalidArgumentError) as info:
        SQLiteStore(path)
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.details == {"argument": "path"}


def test_sqlite_store_under_a_regular_file_is_store_unavailable(tmp_path: Path) -> None:
    """A regular file where the directory should be: typed, not FileExistsError."""
    (tmp_path / "file").write_text("x")
    for path in (tmp_path / "file" / "a.db", tmp_path / "file" / "sub" / "a.db"):
        with pytest.raises(tl.StoreUnavailableError) as info:
            SQLiteStore(path)
        assert str(tmp_path / "file") in info.value.message
        assert isinstance(info.value.__cause__, OSError)


def test_sqlite_store_uncreatable_parent_is_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No permission to create the parent: typed, not PermissionError.

    A chmod cannot deny root (the suite may run as root), so the denial comes from
    ``Path.mkdir`` as the kernel would raise it.
    """

    def denied(self: Path, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", denied)
    with pytest.raises(tl.StoreUnavailableError) as info:
        SQLiteStore(tmp_path / "locked" / "a.db")
    assert "Permission denied" in info.value.message
    assert info.value.details["errno"] == 13
