"""The same action across real processes: one executes, the other blocks or is served;
a live attempt's claim is reported as live, never marked uncertain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Status

from .._pg_dsn import pg_dsn_or_skip

CHILD = Path(__file__).with_name("_same_action_child.py")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """``(db argument for the children, extra environment)`` on each backend."""
    if request.param == "sqlite":
        db = tmp_path / "ledger.db"
        toolledger.SQLiteStore(db).close()  # the schema, once
        yield str(db), {}
        return
    from toolledger.store.postgres import PostgresStore

    dsn = pg_dsn_or_skip()
    schema = f"tl_same_{uuid.uuid4().hex[:12]}"
    PostgresStore(dsn, schema=schema).close()
    yield dsn, {"TOOLLEDGER_TEST_PG_SCHEMA": schema}
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _open(db: str, env: dict[str, str]) -> Any:
    schema = env.get("TOOLLEDGER_TEST_PG_SCHEMA")
    if schema:
        from toolledger.store.postgres import PostgresStore

        return PostgresStore(db, schema=schema)
    return toolledger.SQLiteStore(db)


def _spawn(db: str, folder: Path, call_id: str, mode: str, env: dict[str, str]) -> Any:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    return subprocess.Popen(
        [sys.executable, str(CHILD), db, str(folder), call_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


def _report(proc: Any) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def _wait_for(path: Path, procs: list[Any], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        for proc in procs:
            assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


def _effects(folder: Path) -> list[str]:
    log = folder / "effects.log"
    return log.read_text().split() if log.exists() else []


def test_two_processes_racing_one_action_execute_it_once(ledger, tmp_path: Path) -> None:
    """Two call ids for one payment, claimed at once: one pays, the other never does."""
    db, env = ledger
    procs = {cid: _spawn(db, tmp_path, cid, "race", env) for cid in ("call-a", "call-b")}
    for cid in procs:
        _wait_for(tmp_path / f"ready-{cid}", list(procs.values()))
    (tmp_path / "go").touch()
    reports = {cid: _report(p) for cid, p in procs.items()}
    effects = _effects(tmp_path)
    assert len(effects) == 1
    winner = effects[0]
    loser = "call-b" if winner == "call-a" else "call-a"
    assert reports[winner]["call"] == "new"
    lost = reports[loser]
    # The loser found the winner paying (blocked) or done (served its result).
    assert lost in (
        {"call": "replayed", "deduplicated_from": winner},
        {**lost, "call": "OUTCOME_UNKNOWN", "same_action_as": winner},
    )


def test_live_attempt_holding_a_call_is_reported_live_never_marked_uncertain(
    ledger, tmp_path: Path
) -> None:
    """A second process on the same call id, while the first is inside the tool."""
    db, env = ledger
    holder = _spawn(db, tmp_path, "call-1", "hold", env)
    _wait_for(tmp_path / "holding", [holder])
    second = _report(_spawn(db, tmp_path, "call-1", "plain", env))
    assert second["call"] == "OUTCOME_UNKNOWN"
    assert second["live"] is True
    assert "held by a live attempt since" in second["message"]
    assert "stays" not in second["message"]
    store = _open(db, env)
    try:
        assert store.get("default", "call-1").status is Status.EXECUTING
        (tmp_path / "release").touch()
        assert _report(holder)["call"] == "new"
        assert store.get("default", "call-1").status is Status.COMPLETED
    finally:
        store.close()
    assert _effects(tmp_path) == ["call-1"]


def test_live_attempt_blocks_the_same_action_under_a_new_id_as_live(ledger, tmp_path: Path) -> None:
    """A re-plan while the first attempt is alive: blocked, named, the holder untouched."""
    db, env = ledger
    holder = _spawn(db, tmp_path, "call-1", "hold", env)
    _wait_for(tmp_path / "holding", [holder])
    second = _report(_spawn(db, tmp_path, "call-2", "plain", env))
    assert (second["call"], second["same_action_as"], second["live"]) == (
        "OUTCOME_UNKNOWN",
        "call-1",
        True,
    )
    (tmp_path / "release").touch()
    assert _report(holder)["call"] == "new"
    # Settled and unseen in the same conversation: served, not paid again.
    third = _report(_spawn(db, tmp_path, "call-3", "plain", env))
    assert third == {"call": "replayed", "deduplicated_from": "call-1"}
    assert _effects(tmp_path) == ["call-1"]


def test_dead_attempt_after_its_effect_blocks_the_re_plan(ledger, tmp_path: Path) -> None:
    """SIGKILL inside the tool after the effect: the re-plan is blocked, not re-run."""
    db, env = ledger
    killed = _spawn(db, tmp_path, "call-1", "kill", env)
    killed.communicate(timeout=120)
    assert killed.returncode == -9
    again = _report(_spawn(db, tmp_path, "call-2", "plain", env))
    assert (again["call"], again["same_action_as"], again["live"]) == (
        "OUTCOME_UNKNOWN",
        "call-1",
        False,
    )
    assert "may already have happened" in again["message"]
    assert _effects(tmp_path) == ["call-1"]
