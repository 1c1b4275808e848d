"""A simulated fleet: 8 host processes, SIGKILLs, killed backends and a server restart.

The workers use the guard (``toolledger.run(...).call(...)`` + ``run.deliver``) on one
PostgreSQL schema. A controller SIGKILLs random workers and starts replacements,
terminates random worker backends with ``pg_terminate_backend``, and restarts PostgreSQL
once in the middle. At the end every effect ran at most once (exactly once for every call
that has a result), every call is delivered or in the reconcile queue, and every
checkpoint's history is a dense chain of legal transitions.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from toolledger import ERROR_CODES
from toolledger.checkpoint import Status
from toolledger.checkpoint.transitions import transition_between
from toolledger.cli import main
from toolledger.store.postgres import PostgresStore

from .._pg_dsn import pg_dsn_or_skip
from ._fleet_worker import worker

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CALLS = 1000
WORKERS = 8
KILLS = 12
TERMINATES = 6
DEADLINE_S = 80.0
WINDOW = 150
# What ``toolledger checkpoints`` lists by default: the reconcile queue, plus results that
# wait for delivery (a worker may die between completing a call and delivering it after
# another worker already gave up on the call with OUTCOME_UNKNOWN).
RECONCILE = {Status.EXECUTING, Status.UNCERTAIN, Status.COMPLETED, Status.DELIVERING}
KILL_MARKS = [int(CALLS * (0.03 + 0.67 * k / KILLS)) for k in range(KILLS)]
TERMINATE_MARKS = [int(CALLS * (0.08 + 0.6 * k / TERMINATES)) for k in range(TERMINATES)]


def _pg_ctl() -> list[str] | None:
    if (
        shutil.which("pg_ctlcluster") is None
        or os.geteuid() != 0
        or not os.path.isdir("/etc/postgresql")
    ):
        return None
    versions = sorted(os.listdir("/etc/postgresql"))
    return (
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main"] if versions else None
    )


def _pg_ready() -> bool:
    return subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0


def _ensure_up(ctl: list[str] | None) -> None:
    if ctl is None or _pg_ready():
        return
    subprocess.run([*ctl, "start"], check=False, capture_output=True)
    deadline = time.monotonic() + 60
    while not _pg_ready() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture
def fleet_schema() -> Iterator[str]:
    dsn = pg_dsn_or_skip()
    schema = f"tl_fleet_{uuid.uuid4().hex[:10]}"
    PostgresStore(dsn, schema=schema).close()  # migrate once, up front
    with psycopg.connect(dsn, autocommit=True) as conn:
        s = sql.Identifier(schema)
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.effects (call_id TEXT PRIMARY KEY, count INT NOT NULL, by TEXT)"
            ).format(s)
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.queue (call_id TEXT PRIMARY KEY, done BOOLEAN NOT NULL "
                "DEFAULT false, released BOOLEAN NOT NULL DEFAULT false, outcome TEXT, "
                "leased_at TIMESTAMPTZ, leased_by TEXT)"
            ).format(s)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.queue (call_id) SELECT 'call-' || lpad(g::text, 4, '0') "
                "FROM generate_series(1, %s) g"
            ).format(s),
            (CALLS,),
        )
        conn.execute("CHECKPOINT")  # flush setup work: the restart's shutdown stays short
    yield schema
    _ensure_up(_pg_ctl())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class _Controller:
    def __init__(self, dsn: str, schema: str, logs: Path) -> None:
        self.dsn, self.schema, self.logs = dsn, schema, logs
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: dict[int, Any] = {}
        self.finished: list[Any] = []
        self.next_index = 0
        self.rng = random.Random(20261202)

    def start(self) -> None:
        i = self.next_index
        self.next_index += 1
        p = self.ctx.Process(
            target=worker, args=(self.dsn, self.schema, i, str(self.logs / f"w{i}.log"))
        )
        p.start()
        self.procs[i] = p

    def kill_one(self) -> bool:
        alive = [i for i, p in self.procs.items() if p.is_alive()]
        if not alive:
            return False
        i = self.rng.choice(alive)
        os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].join(10)
        self.finished.append(self.procs.pop(i))
        self.start()
        return True

    def terminate_backend(self, conn: psycopg.Connection[Any]) -> bool:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'fleet-w%%'"
        ).fetchall()
        if not rows:
            return False
        pid = self.rng.choice(rows)[0]
        return bool(conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0])

    def join_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            p.join(max(0.1, deadline - time.monotonic()))
        for p in list(self.procs.values()):
            if p.is_alive():
                p.kill()
                p.join(5)
        self.finished.extend(self.procs.values())
        self.procs.clear()


def _release(dsn: str, schema: str, upto: int) -> bool:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.queue SET released = true WHERE call_id <= %s").format(
                    sql.Identifier(schema)
                ),
                (f"call-{upto:04d}",),
            )
            return True
    except psycopg.Error:
        return False


def _count_done(dsn: str, schema: str) -> int | None:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.queue WHERE done").format(sql.Identifier(schema))
            ).fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return None


def test_fleet_kills_and_restart_never_run_an_effect_twice(
    fleet_schema: str, tmp_path: Path
) -> None:
    dsn, schema = pg_dsn_or_skip(), fleet_schema
    ctl = _pg_ctl()
    if ctl is None and os.environ.get("TOOLLEDGER_REQUIRE_PG"):
        pytest.fail("the fleet test restarts PostgreSQL: it needs root and pg_ctlcluster")
    control = _Controller(dsn, schema, tmp_path)
    kills = terminated = tries = released = 0
    restarted_at: float | None = None
    restart_s = 0.0
    done_at_restart = 0
    started = time.monotonic()
    try:
        for _ in range(WORKERS):
            control.start()
        while time.monotonic() - started < DEADLINE_S:
            done = _count_done(dsn, schema)
            if done is not None and done >= CALLS:
                break
            # Faults are tied to progress, not to the clock, and calls are released at most
            # WINDOW ahead of what is done: however fast the workers, every fault lands while
            # calls are in flight (a fault that blocks the controller blocks the release).
            progress = done or 0
            if released - progress < WINDOW and released < CALLS:
                upto = min(CALLS, released + WINDOW // 2)
                if _release(dsn, schema, upto):
                    released = upto
            while kills < KILLS and progress >= KILL_MARKS[kills] and control.kill_one():
                kills += 1
            while tries < TERMINATES and progress >= TERMINATE_MARKS[tries]:
                tries += 1
                with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                    terminated += control.terminate_backend(conn)
            if (
                ctl is not None
                and restarted_at is None
                and done is not None
                and done >= CALLS * 0.35
            ):
                done_at_restart = done
                began = time.monotonic()
                try:
                    subprocess.run([*ctl, "restart", "-m", "fast"], check=True, capture_output=True)
                finally:
                    _ensure_up(ctl)
                restarted_at = time.monotonic()
                restart_s = restarted_at - began
            time.sleep(0.05)
        control.join_all(timeout=max(5.0, DEADLINE_S + 10 - (time.monotonic() - started)))
    finally:
        _ensure_up(ctl)
        for p in control.procs.values():
            p.kill()

    logs = "".join(f.read_text() for f in sorted(tmp_path.glob("w*.log")))
    assert "UNEXPECTED" not in logs, logs[:4000]
    codes = {line.split()[0] for line in logs.splitlines() if line}
    # Every failure a worker saw was a typed toolledger error (or the outside world's).
    assert codes - {"EXIT"} <= ERROR_CODES | {c for c in codes if c.startswith("WORLD:")}, codes
    assert [p.exitcode for p in control.finished if p.exitcode != -signal.SIGKILL] == [0] * (
        WORKERS
    ), "every surviving worker drained the queue and exited cleanly"
    assert kills == KILLS
    assert terminated >= 1

    with PostgresStore(dsn, schema=schema) as store, psycopg.connect(dsn) as conn:
        s = sql.Identifier(schema)
        effects = dict(
            conn.execute(sql.SQL("SELECT call_id, count FROM {}.effects").format(s)).fetchall()
        )
        queue = dict(
            conn.execute(sql.SQL("SELECT call_id, done FROM {}.queue").format(s)).fetchall()
        )
        assert all(queue.values()), "every call was worked to an end state"
        assert max(effects.values()) == 1, "an effect ran twice"
        records = {r.binding.call_id: r for r in store.list(namespace="fleet")}
        assert set(records) == set(queue), "every call has a checkpoint"
        assert store.quarantined() == []
        for call_id, rec in records.items():
            assert rec.status is Status.DELIVERED or rec.status in RECONCILE, (call_id, rec.status)
            if rec.result is not None:  # completed, delivering, delivered: the effect happened once
                assert effects.get(call_id) == 1, call_id
            history = store.history("fleet", call_id)
            assert [h.revision for h in history] == list(range(rec.revision + 1)), call_id
            assert history[0].transition == "create_checkpoint"
            assert history[-1].record == rec
            for before, after in itertools.pairwise(history):
                assert transition_between(before.status, after.status)[0] == after.transition
        reconcile = sorted(c for c, r in records.items() if r.status in RECONCILE)
        listed = sorted(
            r.binding.call_id for r in store.list(status=sorted(RECONCILE), namespace="fleet")
        )
        assert listed == reconcile
        delivered = [r for r in records.values() if r.status is Status.DELIVERED]
        counts: dict[str, int] = {}
        for line in logs.splitlines():
            counts[line.split()[0]] = counts.get(line.split()[0], 0) + 1
        print(  # shown with -s: what this run went through
            f"\nfleet: {len(delivered)} delivered, {len(records) - len(delivered)} to reconcile, "
            f"{sum(effects.values())} effects, {kills} kills, {terminated} backends terminated, "
            f"restart at {done_at_restart} done ({restart_s:.1f}s), "
            f"{time.monotonic() - started:.1f}s in all, "
            f"errors seen: {counts}"
        )
        assert len(delivered) >= CALLS * 0.9, f"only {len(delivered)} delivered"

    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    cli = CliRunner().invoke(
        main, ["--db", url, "checkpoints", "--namespace", "fleet", "--limit", "2000", "--json"]
    )
    assert cli.exit_code == 0, cli.output
    assert sorted(json.loads(line)["call_id"] for line in cli.output.splitlines()) == reconcile

    if ctl is not None:
        assert restarted_at is not None, "the run finished before the restart point"
        assert done_at_restart < CALLS
        resumed = [
            r
            for r in delivered
            if r.delivered_at is not None
            and r.delivered_at.timestamp() > time.time() - (time.monotonic() - restarted_at)
        ]
        assert resumed, "no call was delivered after the restart: work did not resume"
