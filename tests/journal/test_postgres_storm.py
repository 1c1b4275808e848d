"""A run's batched calls while another connection keeps killing its PostgreSQL backends.

``run.call_many`` claims each batch in one transaction that carries the journal's buffer,
and each completion carries the call's end record; a second connection runs
``pg_terminate_backend`` on the store's backends throughout (commits lost mid-flight,
answers lost after the commit, read-backs that fail). Once the storm stops: no effect ran
twice, every call that executed keeps its result, the calls that never ran either run now
or stay ``OUTCOME_UNKNOWN`` (a claim that landed without its effect), new calls of the
same run complete, and the run's chain verifies with every record stored once.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import toolledger

from .._pg_dsn import pg_dsn_or_skip
from ._ledger import Effects, check_chain

pytestmark = pytest.mark.postgres

#: How long the storm lasts (seconds) and how many calls each batch makes.
STORM_SECONDS = 6.0
BATCH = 5


@pytest.fixture
def storm_store() -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    from psycopg import sql

    from toolledger.store.postgres import PostgresStore

    dsn = pg_dsn_or_skip()
    schema = f"tl_storm_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(dsn, schema=schema, application_name=schema, max_size=2)
    yield store
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _killer(dsn: str, app: str, stop: threading.Event, kills: list[int]) -> None:
    """Terminate one of ``app``'s backends every few milliseconds until ``stop``."""
    import psycopg

    rng = random.Random(27)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.wait(rng.uniform(0.0005, 0.005)):
            row = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid() "
                "ORDER BY random() LIMIT 1",
                (app,),
            ).fetchone()
            if row is not None and row[0]:
                kills.append(1)


def test_backend_kills_during_call_many_never_double_an_effect_or_break_the_run(storm_store):
    store = storm_store
    effects = Effects()
    tool = effects.tool()
    stop = threading.Event()
    kills: list[int] = []
    killer = threading.Thread(
        target=_killer, args=(pg_dsn_or_skip(), store.schema, stop, kills), daemon=True
    )
    call_ids: list[str] = []
    failures: list[str] = []
    with toolledger.run("storm", db=store) as run:
        killer.start()
        deadline = time.monotonic() + STORM_SECONDS
        batch = 0
        try:
            while time.monotonic() < deadline:
                calls = [
                    {"tool": tool, "call_id": f"b{batch}-{i}", "input": {"n": batch * BATCH + i}}
                    for i in range(BATCH)
                ]
                call_ids += [c["call_id"] for c in calls]
                for out in run.call_many(calls, return_exceptions=True):
                    if isinstance(out, toolledger.CheckpointError):
                        failures.append(out.code)
                run.note(f"batch {batch}")
                batch += 1
        finally:
            stop.set()
            killer.join(30)
        # The storm is over: the run writes again and every call that ran keeps its result.
        assert "INVALID_ARGUMENT" not in failures
        unknown = 0
        for call_id in call_ids:
            n = int(call_id[1:].split("-")[0]) * BATCH + int(call_id.split("-")[1])
            try:
                out = run.call(tool, call_id=call_id, input={"n": n})
            except toolledger.OutcomeUnknownError:
                assert effects.count[call_id] == 0, f"{call_id} ran and lost its result"
                unknown += 1
                continue
            assert out.payload == {"n": n, "call": call_id}
        after = run.call_many(
            [{"tool": tool, "call_id": f"after-{i}", "input": {"n": -1 - i}} for i in range(BATCH)]
        )
        assert [o.payload["call"] for o in after] == [f"after-{i}" for i in range(BATCH)]
        assert run.flush() is True
    assert kills, "the storm killed no backend"
    assert effects.double_effects() == []
    assert unknown < len(call_ids)
    check_chain(store, run.run_id)
    assert toolledger.verify(store, run.run_id).ok
