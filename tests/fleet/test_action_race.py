"""Two real processes asking for one action at once, many rounds: one execution per round.

Each round both processes call the same payment under their own call id (a model that
asked again, or two copies of an agent), meeting at a barrier just before their claims
commit, so the store's claim transaction decides. With the same-action rules (issue 29)
exactly one executes; the other is told the outcome is unknown (the winner was still
inside the tool) or is served the winner's result (it had completed, unseen). Two
different actions in a round never block each other.
"""

from __future__ import annotations

import json
import multiprocessing
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger

from .._pg_dsn import pg_dsn_or_skip
from ._action_race_worker import race

pytestmark = pytest.mark.slow

ROUNDS = 40
RACERS = 2


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """``(db, PostgreSQL schema or None)`` on each backend, its schema made once."""
    if request.param == "sqlite":
        db = tmp_path / "ledger.db"
        toolledger.SQLiteStore(db).close()
        yield str(db), None
        return
    from toolledger.store.postgres import PostgresStore

    dsn = pg_dsn_or_skip()
    schema = f"tl_race_{uuid.uuid4().hex[:12]}"
    PostgresStore(dsn, schema=schema).close()
    yield dsn, schema
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _race(ledger: tuple[str, str | None], folder: Path, *, mode: str) -> list[list[Any]]:
    """Run the racers; return each racer's outcomes (``[round, kind, other id]`` per round)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    db, schema = ledger
    procs = [
        ctx.Process(target=race, args=(db, schema, str(folder), me, ROUNDS, mode, barrier))
        for me in range(RACERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * RACERS
    return [json.loads((folder / f"w{me}.json").read_text()) for me in range(RACERS)]


def _effects(folder: Path) -> Counter[int]:
    lines = (folder / "effects.log").read_text().splitlines()
    return Counter(int(line.split()[0]) for line in lines)


def _one_winner_a_round(outcomes: list[list[Any]], folder: Path) -> None:
    assert _effects(folder) == Counter(dict.fromkeys(range(ROUNDS), 1))
    for r in range(ROUNDS):
        kinds = sorted(outcomes[me][r][1] for me in range(RACERS))
        assert kinds.count("new") == 1, (r, kinds)
        winner = next(me for me in range(RACERS) if outcomes[me][r][1] == "new")
        for me in range(RACERS):
            _, kind, other = outcomes[me][r]
            if me == winner:
                continue
            # Blocked while the winner ran, or served its result once it had completed.
            assert kind in ("OUTCOME_UNKNOWN", "replayed"), (r, kind)
            assert other == f"w{winner}-r{r}"


def test_racing_new_ids_for_one_action_execute_once_per_round(ledger, tmp_path: Path) -> None:
    """Every round, of two processes asking for the same payment, exactly one pays."""
    _one_winner_a_round(_race(ledger, tmp_path, mode="same"), tmp_path)


def test_racing_to_repeat_a_seen_action_execute_once_per_round(ledger, tmp_path: Path) -> None:
    """The same payment again after the model saw the last one: one racer takes it over."""
    _one_winner_a_round(_race(ledger, tmp_path, mode="repeat"), tmp_path)


def test_racing_different_actions_both_execute_every_round(ledger, tmp_path: Path) -> None:
    """Two processes paying different payees at once never block each other."""
    outcomes = _race(ledger, tmp_path, mode="different")
    assert _effects(tmp_path) == Counter(dict.fromkeys(range(ROUNDS), RACERS))
    assert all(kind == "new" for mine in outcomes for _, kind, _ in mine)
