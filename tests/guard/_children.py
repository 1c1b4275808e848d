"""The guard process tests' side of their child processes: the ledger both backends give
the children, spawning one, its JSON report, waiting for its signal files, its effects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger

from .._pg_dsn import pg_dsn_or_skip


def ledger_fixture(prefix: str) -> Callable[..., Iterator[tuple[str, dict[str, str]]]]:
    """A ``ledger`` fixture on SQLite and PostgreSQL (a fresh schema named ``prefix...``)."""

    @pytest.fixture(params=["sqlite", "postgres"])
    def ledger(
        request: pytest.FixtureRequest, tmp_path: Path
    ) -> Iterator[tuple[str, dict[str, str]]]:
        """``(db argument for the children, extra environment)`` on each backend."""
        if request.param == "sqlite":
            db = tmp_path / "ledger.db"
            toolledger.SQLiteStore(db).close()  # the schema, once
            yield str(db), {}
            return
        from toolledger.store.postgres import PostgresStore

        dsn = pg_dsn_or_skip()
        schema = f"{prefix}{uuid.uuid4().hex[:12]}"
        PostgresStore(dsn, schema=schema).close()
        yield dsn, {"TOOLLEDGER_TEST_PG_SCHEMA": schema}
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    return ledger


def open_store(db: str, env: dict[str, str]) -> Any:
    """The store the children write, opened by the test."""
    schema = env.get("TOOLLEDGER_TEST_PG_SCHEMA")
    if schema:
        from toolledger.store.postgres import PostgresStore

        return PostgresStore(db, schema=schema)
    return toolledger.SQLiteStore(db)


def spawn(child: Path, db: str, folder: Path, call_id: str, mode: str, env: dict[str, str]) -> Any:
    """Start ``child DB DIR CALL_ID MODE`` with this process's import path."""
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    return subprocess.Popen(
        [sys.executable, str(child), db, str(folder), call_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


def report(proc: Any) -> dict[str, Any]:
    """The child's last stdout line (its JSON report); it exited 0."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def wait_for(path: Path, procs: Iterable[Any], seconds: float = 120.0) -> None:
    """Wait until ``path`` exists; fail at once if one of ``procs`` has ended."""
    procs = list(procs)
    deadline = time.monotonic() + seconds
    while not path.exists():
        for proc in procs:
            assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


def effects_of(folder: Path) -> list[str]:
    """The effects the children made (lines of ``folder/effects.log``)."""
    path = folder / "effects.log"
    return path.read_text().split() if path.exists() else []
