"""PostgresStore specifics: options, forks, relaxed durability, the optional dependency."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg import sql

from toolledger import CheckpointError
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.store.postgres import PostgresStore

from .._pg_dsn import pg_dsn_or_skip

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def schema() -> Iterator[str]:
    dsn = pg_dsn_or_skip()
    name = f"tl_pgstore_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _binding(call_id: str) -> Binding:
    return Binding("ns", call_id, "t", "1", fingerprint(call_id))


@pytest.mark.parametrize(
    "options",
    [
        {"durability": "sometimes"},
        {"schema": ""},
        {"schema": "x" * 64},
        {"max_size": 0},
        {"min_size": 3, "max_size": 2},
        {"timeout": 0},
        {"statement_timeout": -1},
    ],
)
def test_postgres_store_bad_option_raises_invalid_argument(options: dict[str, Any]) -> None:
    with pytest.raises(CheckpointError) as info:
        PostgresStore(pg_dsn_or_skip(), **options)
    assert info.value.code == "INVALID_ARGUMENT"


def test_postgres_store_normal_durability_round_trips(schema: str) -> None:
    with PostgresStore(pg_dsn_or_skip(), schema=schema, durability="normal") as store:
        rec = create_checkpoint(_binding("c1"), at=T0)
        assert store.create_if_absent(rec) == (True, rec)
        t = claim_execution(rec, attempt_id="a", at=T0 + timedelta(seconds=1))
        assert store.compare_and_swap(0, t.next, durable=False) is True
        assert store.get("ns", "c1") == t.next


def _child_uses_store(store: PostgresStore, out: Any) -> None:
    rec = create_checkpoint(_binding("from-child"), at=T0)
    out.put(store.create_if_absent(rec)[0])
    store.close()


def test_postgres_store_forked_child_gets_its_own_connections(schema: str) -> None:
    """A store made before fork works in the child and, afterwards, in the parent."""
    store = PostgresStore(pg_dsn_or_skip(), schema=schema)
    try:
        assert store.get("ns", "x") is None  # the parent's pool is open and used
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_child_uses_store, args=(store, out))
        child.start()
        assert out.get(timeout=60) is True
        child.join(30)
        assert child.exitcode == 0
        got = store.get("ns", "from-child")
        assert got is not None
        assert got.binding.call_id == "from-child"
    finally:
        store.close()


def test_import_toolledger_does_not_import_psycopg() -> None:
    code = "import sys, toolledger; print('psycopg' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_closed_store_raises_store_unavailable(schema: str) -> None:
    store = PostgresStore(pg_dsn_or_skip(), schema=schema)
    store.close()
    store.close()  # idempotent
    with pytest.raises(CheckpointError) as info:
        store.get("ns", "c1")
    assert info.value.code == "STORE_UNAVAILABLE"


def test_run_and_cli_accept_a_postgresql_dsn(schema: str) -> None:
    """``toolledger.run(db=DSN)`` journals into PostgreSQL; ``--db DSN`` reads it back."""
    from click.testing import CliRunner

    import toolledger as tl
    from toolledger.cli import main

    dsn = pg_dsn_or_skip()
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    tool = tl.tool("echo", revision="1", execute=lambda inp, ctx: inp)
    with tl.run("dsn run", db=url, namespace="ns") as run:
        assert run.call(tool, call_id="c1", input={"x": 1}).payload == {"x": 1}
    with PostgresStore(url) as store:
        assert store.schema == schema
        got = store.get("ns", "c1")
        assert got is not None
        assert got.result is not None
        assert tl.verify(store, run.run_id).ok
    migrate = CliRunner().invoke(main, ["--db", url, "migrate"])
    assert migrate.exit_code == 0, migrate.output
    assert migrate.output.splitlines()[:2] == [
        "1\tcheckpoints_history_operations_runs_events",
        "2\ttombstones",
    ]
    listed = CliRunner().invoke(main, ["--db", url, "checkpoints", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [json.loads(line)["call_id"] for line in listed.output.splitlines()] == ["c1"]


def _backends(name: str) -> list[int]:
    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def _create(store: PostgresStore, call_id: str) -> None:
    rec = create_checkpoint(_binding(call_id), at=T0)
    assert store.create_if_absent(rec) == (True, rec)


class TestParkedConnections:
    """A connection done with is parked for the next statement, never to a waiter's cost."""

    def test_one_thread_reuses_one_parked_connection(self, schema: str) -> None:
        """Statement after statement in one thread runs on the same server backend."""
        name = f"tl-park-{uuid.uuid4().hex[:8]}"
        with PostgresStore(
            pg_dsn_or_skip(), schema=schema, application_name=name, min_size=0
        ) as store:
            for i in range(20):
                _create(store, f"c{i}")
                assert store.get("ns", f"c{i}") is not None
            assert len(_backends(name)) == 1

    def test_parked_connection_dropped_by_the_server_is_replaced(self, schema: str) -> None:
        """A parked connection the server ended is replaced: the next calls just work."""
        name = f"tl-park-{uuid.uuid4().hex[:8]}"
        with PostgresStore(pg_dsn_or_skip(), schema=schema, application_name=name) as store:
            _create(store, "before")
            before = _backends(name)
            with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as admin:
                for pid in before:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert store.get("ns", "before") is not None  # a read retries once
            _create(store, "after")
            assert store.get("ns", "after") is not None
            assert not set(_backends(name)) & set(before)

    def test_parked_write_connection_dropped_by_the_server_is_replaced(self, schema: str) -> None:
        """A write whose parked connection died is not lost: it lands or is retried."""
        name = f"tl-park-{uuid.uuid4().hex[:8]}"
        with PostgresStore(
            pg_dsn_or_skip(), schema=schema, application_name=name, max_size=1
        ) as store:
            _create(store, "before")
            with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as admin:
                for pid in _backends(name):
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            _create(store, "after")  # the statement on the dead one is proven not landed
            assert sorted(r.binding.call_id for r in store.list()) == ["after", "before"]

    def test_threads_beyond_max_size_never_wait_for_a_parked_connection(self, schema: str) -> None:
        """More threads than connections: each gets one in time, none is left waiting."""
        import threading

        errors: list[BaseException] = []
        with PostgresStore(pg_dsn_or_skip(), schema=schema, max_size=1, timeout=5.0) as store:

            def work(t: int) -> None:
                try:
                    for i in range(15):
                        _create(store, f"t{t}-{i}")
                        assert store.get("ns", f"t{t}-{i}") is not None
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            assert errors == []
            assert len(store.list()) == 90

    def test_a_connection_past_the_pools_lifetime_goes_back_to_it(self, schema: str) -> None:
        """Parking never keeps a connection past max_lifetime: the pool gets it to renew."""
        with PostgresStore(pg_dsn_or_skip(), schema=schema) as store:
            conns = store._db
            _create(store, "young")
            parked = [c for idle in conns._parking.idle.values() for c in idle]
            assert len(parked) == 1
            parked[0].opened_at -= conns._lifetime  # as old as the pool lets one live
            _create(store, "old")
            assert [c for idle in conns._parking.idle.values() for c in idle] == []
            pool = next(iter(conns._pools.values()))
            assert pool.get_stats()["pool_available"] >= 1
            assert sorted(r.binding.call_id for r in store.list()) == ["old", "young"]

    def test_closed_store_leaves_no_parked_connection(self, schema: str) -> None:
        """close() ends the parked connections too."""
        name = f"tl-park-{uuid.uuid4().hex[:8]}"
        store = PostgresStore(pg_dsn_or_skip(), schema=schema, application_name=name)
        _create(store, "c1")
        assert _backends(name)
        store.close()
        for _ in range(50):
            if not _backends(name):
                break
            time.sleep(0.1)
        assert _backends(name) == []
