"""The journal on PostgreSQL: record, verify, export and re-import (own schema per test)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import toolledger
from toolledger.testing import stored_run

from .._pg_dsn import pg_dsn_or_skip

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store():
    import psycopg
    from psycopg import sql

    from toolledger.store.postgres import PostgresStore

    dsn = pg_dsn_or_skip()
    schema = f"tl_journal_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema)
    yield store
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_journal_round_trips_on_postgres(pg_store, tmp_path: Path) -> None:
    with toolledger.run("pg goal", agent="bot", db=pg_store) as run:
        with run.step("outer", justification="why", q="x") as st:
            st.record_output(score=0.5)
            with run.step("inner"):
                pass
        run.approval("send", granted=False, by="user")
    report = toolledger.verify(pg_store, run.run_id)
    assert report.ok
    assert report.event_count == 5  # the inner step is one record: it ended while buffered
    events = stored_run(pg_store, run.run_id).events
    assert events[1]["parent_id"] == events[0]["event_id"]
    info = toolledger.export_json(pg_store, run.run_id, tmp_path / "pg.json")
    assert toolledger.import_json(info.path, tmp_path / "copy.db") == run.run_id
    assert toolledger.verify(tmp_path / "copy.db", run.run_id, expected_head=info.head_hash).ok
