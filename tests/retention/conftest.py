"""Retention fixtures: a fresh store of every backend (PostgreSQL: one schema each)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolledger import Store
from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore

from .._pg_dsn import pg_dsn_or_skip


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_url() -> Iterator[Callable[[], str]]:
    """Make ``postgresql://…?schema=…`` URLs, each schema dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        dsn = pg_dsn_or_skip()
        made.append(f"tl_ret_{uuid.uuid4().hex[:10]}")
        return f"{dsn}{'&' if '?' in dsn else '?'}schema={made[-1]}"

    yield make
    for schema in made:
        drop_schema(schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, pg_url: Callable[[], str]
) -> Iterator[Store]:
    s: Any
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "ledger.db")
    else:
        from toolledger.store.postgres import PostgresStore

        s = PostgresStore(pg_url())
    yield s
    s.close()
