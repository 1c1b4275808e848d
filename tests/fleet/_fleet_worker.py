"""A fleet "host": one process, its own PostgreSQL connections, guarded calls from a queue.

Each worker leases released calls from a durable queue table (a lease expires after
``LEASE_SECONDS``, so a killed worker's call is picked up again), runs each through the
guard (``toolledger.run(...).call(...)`` then ``run.deliver``), and marks it done when it
is delivered or left in a reconcile state (``OUTCOME_UNKNOWN``, ``DELIVERY_UNCERTAIN``);
an ``OUTCOME_UNKNOWN`` for a call a live attempt holds is not an end: the lease expires
and the call is asked again (the holder may give its claim back, leaving it ``ready``).
The tool's side effect is a row in ``effects`` (one per call id, with a count), written
through a separate connection: the outside world. ``recover`` looks the effect up there,
as a real tool would look an order up by the id it journaled.

Every toolledger error is logged as its code (one line per error in ``log_path``);
anything else is logged as ``UNEXPECTED`` and the worker exits with status 3.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import time
import traceback
import warnings
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["LEASE_SECONDS", "worker"]

LEASE_SECONDS = 2.0


class _World:
    """The outside world: the effects table, over its own reconnecting connection."""

    def __init__(self, dsn: str, schema: str, name: str) -> None:
        self.dsn, self.schema, self.name = dsn, schema, name
        self.conn: psycopg.Connection[Any] | None = None

    def _connect(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect(
                self.dsn, autocommit=True, application_name=self.name, connect_timeout=3
            )
        return self.conn

    def execute(self, query: sql.Composable, params: tuple[Any, ...]) -> Any:
        try:
            return self._connect().execute(query, params)
        except psycopg.OperationalError:
            with contextlib.suppress(Exception):
                if self.conn is not None:
                    self.conn.close()
            self.conn = None
            raise

    def q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=sql.Identifier(self.schema))


def worker(dsn: str, schema: str, index: int, log_path: str) -> None:
    """Work the queue until every call is done. Runs in a spawned process."""
    warnings.simplefilter("ignore")  # journaling failures during a restart are warned about
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # reconnect attempts
    import toolledger as tl
    from toolledger.store.postgres import PostgresStore

    log = open(log_path, "a", buffering=1)  # noqa: SIM115 (kept open until SIGKILL or exit)
    rng = random.Random(index * 7919 + os.getpid())
    world = _World(dsn, schema, f"fleet-world{index}")
    name = f"w{index}-{os.getpid()}"

    def effect(call_id: str) -> None:
        world.execute(
            world.q(
                "INSERT INTO {s}.effects (call_id, count, by) VALUES (%s, 1, %s) "
                "ON CONFLICT (call_id) DO UPDATE SET count = {s}.effects.count + 1"
            ),
            (call_id, name),
        )

    def execute(inp: dict[str, str], ctx: Any) -> dict[str, str]:
        ctx.operation.write({"effect_key": inp["call"]})
        effect(inp["call"])
        return {"call": inp["call"], "by": name}

    def recover(ctx: Any) -> Any:
        row = world.execute(
            world.q("SELECT by FROM {s}.effects WHERE call_id = %s"), (ctx.binding.call_id,)
        ).fetchone()
        if row is None:
            return tl.NotRecovered("no effect recorded for this call")
        return tl.Recovered({"call": ctx.binding.call_id, "by": row[0]})

    tool = tl.tool("fleet_effect", revision="1", execute=execute, recover=recover)

    store = None
    while store is None:
        try:
            store = PostgresStore(
                dsn,
                schema=schema,
                application_name=f"fleet-w{index}",
                max_size=2,
                timeout=3.0,
                statement_timeout=10.0,
            )
        except tl.CheckpointError as exc:
            log.write(f"{exc.code}\n")
            time.sleep(0.2)

    def lease() -> str | bool | None:
        row = world.execute(
            world.q(
                "UPDATE {s}.queue SET leased_at = clock_timestamp(), leased_by = %s "
                "WHERE call_id = (SELECT call_id FROM {s}.queue WHERE NOT done AND released "
                "AND (leased_at IS NULL OR leased_at < clock_timestamp() - %s * interval '1 s') "
                "ORDER BY call_id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING call_id"
            ),
            (name, LEASE_SECONDS),
        ).fetchone()
        if row is not None:
            return str(row[0])
        left = world.execute(
            world.q("SELECT count(*) FROM {s}.queue WHERE NOT done"), ()
        ).fetchone()
        return bool(left and left[0])  # True: wait for leases to expire; False: all done

    def done(call_id: str, how: str) -> None:
        try:
            world.execute(
                world.q("UPDATE {s}.queue SET done = true, outcome = %s WHERE call_id = %s"),
                (how, call_id),
            )
        except psycopg.Error as exc:  # the lease expires and the call is looked at again
            log.write(f"WORLD:{type(exc).__name__}\n")

    try:
        with tl.run("fleet", db=store, namespace="fleet", agent=name) as run:
            while True:
                try:
                    item = lease()
                except psycopg.Error as exc:
                    log.write(f"WORLD:{type(exc).__name__}\n")
                    time.sleep(0.1)
                    continue
                if item is False:
                    break
                if item is True:
                    time.sleep(0.05)
                    continue
                assert isinstance(item, str)
                try:
                    run.call(tool, call_id=item, input={"call": item})
                    run.deliver(item, lambda payload: None)
                    done(item, "delivered")
                except tl.OutcomeUnknownError as exc:
                    log.write(f"{exc.code}\n")
                    if exc.details.get("live_attempt"):
                        # Held by a live attempt: not settled yet ("call again later"). If
                        # that attempt gives the claim back (its execute failed before the
                        # effect), the call is ready again: the lease expires, and a
                        # worker calls again.
                        time.sleep(rng.uniform(0.02, 0.1))
                    else:
                        done(item, "outcome-unknown")
                except tl.DeliveryUncertainError as exc:
                    log.write(f"{exc.code}\n")
                    done(item, "delivery-uncertain")
                except tl.CheckpointError as exc:
                    log.write(f"{exc.code}\n")  # the lease expires; someone retries
                    time.sleep(rng.uniform(0.02, 0.1))
                except psycopg.Error as exc:  # the world (effect or queue) failed
                    log.write(f"WORLD:{type(exc).__name__}\n")
                    time.sleep(rng.uniform(0.02, 0.1))
    except BaseException:
        log.write("UNEXPECTED " + traceback.format_exc().replace("\n", " | ") + "\n")
        log.flush()
        sys.exit(3)
    finally:
        with contextlib.suppress(Exception):
            store.close()
    log.write("EXIT\n")
    log.flush()
