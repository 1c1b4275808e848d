"""One ``store_kind`` fixture for guard tests that must hold on every backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore

from .._pg_dsn import pg_dsn_or_skip

__all__ = ["STORE_KINDS", "open_kind"]

STORE_KINDS = ["sqlite", "postgres", "memory"]


def open_kind(kind: str, tmp_path: Path) -> Iterator[Any]:
    """Yield a fresh store of ``kind`` (a real file, a unique PostgreSQL schema, memory)."""
    if kind == "sqlite":
        store: Any = SQLiteStore(tmp_path / "ledger.db", durability="normal")
        yield store
        store.close()
    elif kind == "memory":
        yield MemoryStore()
    else:
        dsn = pg_dsn_or_skip()
        psycopg = pytest.importorskip("psycopg")
        from toolledger.store.postgres import PostgresStore

        schema = f"tl_guard_{uuid.uuid4().hex[:10]}"
        store = PostgresStore(dsn, schema=schema)
        try:
            yield store
        finally:
            store.close()
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
