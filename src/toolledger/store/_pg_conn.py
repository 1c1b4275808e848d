"""PostgreSQL connections for ``PostgresStore``: pools, transactions, lost commits.

Rules:

- Connections come from a pool per process (autocommit connections); a process that forks
  gets its own pools, never its parent's sockets. Relaxed writes use a second pool whose
  sessions run with ``synchronous_commit = off`` (no ``SET`` per write).
- A connection done with is parked (kept checked out, idle) and the next statement takes
  it back without the pool's checkout; a thread that has to wait for the pool is handed
  the next one returned instead of its being parked, so parking never starves a waiter.
  Only idle, healthy connections are parked; a lost one sends every parked one back to
  the pool, which checks them.
- ``read`` runs one statement; ``statement`` runs one write statement in autocommit (its
  own implicit transaction: one ``apply`` op, or a whole batch as one ``apply_ops``
  call); ``write`` runs a function inside ``BEGIN`` … ``COMMIT``. A stale pooled
  connection (the server restarted) is detected on first use: reads and not-yet-begun
  writes retry once.
- A commit that got no answer (``COMMIT``, or a one-statement write) has an unknown outcome.
  ``_read_back`` waits until the server backend that ran it is gone (it may still be
  finishing it), then asks a probe that reads what only that write could have stored.
  Landed: return normally. Provably not landed: run once more. Unreadable:
  ``STORE_UNAVAILABLE`` with ``outcome="unknown"`` and the key and revision. Never a guess.
- Driver errors never leak: timeouts, lock failures, deadlocks, serialisation failures
  and too many connections are ``STORE_BUSY``; anything else ``STORE_UNAVAILABLE``, raised
  ``from`` the psycopg error. A dead connection makes its pool check the idle ones.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg import Cursor, errors, pq
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StoreBusyError, StoreError, StoreUnavailableError
from ._pg_batch import SLOW_SQLSTATE
from ._pg_ops import Queries, execute_op, landed_outcome, op_key, probe_one
from .base import Op

__all__ = ["PgConnections", "PooledConnection", "map_error"]

T = TypeVar("T")

_BUSY = (
    errors.QueryCanceled,
    errors.LockNotAvailable,
    errors.DeadlockDetected,
    errors.SerializationFailure,
    errors.TooManyConnections,
)


_IDLE = pq.TransactionStatus.IDLE


class _Parking:
    """One process's parked connections (durable and relaxed) and who waits for the pool."""

    __slots__ = ("idle", "lock", "waiting")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[bool, list[PooledConnection]] = {False: [], True: []}
        self.waiting = 0


class PooledConnection(psycopg.Connection[Any]):
    """A pooled connection that runs every statement through one cursor it keeps.

    A checked-out connection runs one statement at a time, so one cursor serves them all;
    a new cursor per statement (and its adapter map) cost a fifth of a small read's
    client CPU.
    """

    _kept: Cursor[Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened_by = os.getpid()  # used, parked and returned only by this process
        self.opened_at = time.monotonic()

    def kept_cursor(self) -> Cursor[Any]:
        """Return this connection's cursor (a new one if it was closed)."""
        cur = self._kept
        if cur is None or cur.closed:
            cur = self._kept = self.cursor()
        return cur


class PgConnections:
    """The connection pools of one store in one process, and how writes commit.

    Args:
        dsn: The libpq DSN (without toolledger's ``schema`` parameter).
        schema: For messages only.
        durability: ``"full"`` or ``"normal"`` (every write relaxed).
        pool_args: ``ConnectionPool`` keyword arguments (sizes, timeout, connect kwargs).
        timeout: Seconds to wait for a pooled connection (for messages).
        statement_timeout: Bounds how long a lost commit's backend is waited for.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        durability: str,
        pool_args: Mapping[str, Any],
        timeout: float,
        statement_timeout: float,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.durability = durability
        self._pool_args = dict(pool_args)
        self.timeout = timeout
        self.statement_timeout = statement_timeout
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._pools: dict[bool, ConnectionPool[PooledConnection]] = {}
        self._parking = _Parking()
        #: A parked connection older than this goes back to the pool (its own default).
        self._lifetime = float(self._pool_args.get("max_lifetime", 3600.0))

    def relaxed(self, durable: bool) -> bool:
        """Whether a write (or, with ``durable=True``, a read) uses relaxed connections."""
        return self.durability == "normal" or not durable

    def _new_pool(self, relaxed: bool) -> ConnectionPool[PooledConnection]:
        args = {**self._pool_args, "kwargs": dict(self._pool_args["kwargs"])}
        if relaxed:  # a session setting: no SET round trip per write
            args["kwargs"]["options"] += " -c synchronous_commit=off"
        name = f"toolledger-{self.schema}{'-relaxed' if relaxed else ''}"
        return ConnectionPool(
            self.dsn, open=True, name=name, connection_class=PooledConnection, **args
        )

    def _current_pool(self, relaxed: bool) -> ConnectionPool[PooledConnection]:
        if self._closed:
            raise StoreUnavailableError(message=f"the store for schema {self.schema!r} is closed")
        pool = self._pools.get(relaxed)
        if pool is not None and os.getpid() == self._pid:
            return pool
        with self._lock:
            if os.getpid() != self._pid:  # forked: never touch the parent's sockets
                self._pid = os.getpid()
                self._lock = threading.Lock()
                self._pools = {}
                self._parking = _Parking()
            if relaxed not in self._pools:
                self._pools[relaxed] = self._new_pool(relaxed)
            return self._pools[relaxed]

    def take(self, relaxed: bool) -> PooledConnection:
        """Return a parked connection, else one from the pool; hand it back with ``give``."""
        if self._closed:
            raise StoreUnavailableError(message=f"the store for schema {self.schema!r} is closed")
        if os.getpid() != self._pid:
            self._current_pool(relaxed)  # forked: this process's own pools and parking
        parking = self._parking
        with parking.lock:
            parked = parking.idle[relaxed]
            if parked:
                return parked.pop()
            parking.waiting += 1  # from now on, connections given back go to the pool
        try:
            return self._current_pool(relaxed).getconn()
        except PoolTimeout as exc:
            raise StoreUnavailableError(
                message=f"no PostgreSQL connection within {self.timeout:g} s "
                f"(is the server up?): {exc}",
                details={"doing": "connecting"},
            ) from exc
        finally:
            with parking.lock:
                parking.waiting -= 1

    def give(self, conn: PooledConnection, relaxed: bool) -> None:
        """Park ``conn`` for the next statement, or return it to its pool.

        It goes back to the pool when a thread waits for one, when it is lost or not idle
        (the pool discards or resets it), when it is older than the pool's
        ``max_lifetime`` (the pool replaces it, as it would an idle one), and after a fork
        or ``close``.
        """
        pid = os.getpid()
        if conn.opened_by != pid:
            return  # forked while it was in use: the parent's socket, never touched here
        parking = self._parking
        young = time.monotonic() - conn.opened_at < self._lifetime
        if young and conn.pgconn.transaction_status == _IDLE and not self._closed:
            with parking.lock:
                if not parking.waiting and pid == self._pid:
                    parking.idle[relaxed].append(conn)
                    return
        lost = conn.closed or conn.broken
        pool = self._pools.get(relaxed)
        if pool is None:
            return
        with contextlib.suppress(Exception):
            pool.putconn(conn)
        if lost:
            self._unpark()
            self._check_pool(pool)

    @contextlib.contextmanager
    def connection(self, *, durable: bool = True) -> Iterator[PooledConnection]:
        """Lend a connection (``take`` … ``give``) for the ``with`` block."""
        relaxed = self.relaxed(durable)
        conn = self.take(relaxed)
        try:
            yield conn
        finally:
            self.give(conn, relaxed)

    def _unpark(self) -> None:
        """Return every parked connection to its pool (they may have died with a lost one)."""
        parking = self._parking
        with parking.lock:
            parked = {relaxed: idle[:] for relaxed, idle in parking.idle.items()}
            for idle in parking.idle.values():
                idle.clear()
        for relaxed, conns in parked.items():
            pool = self._pools.get(relaxed)
            for conn in conns:
                with contextlib.suppress(Exception):
                    if pool is not None:
                        pool.putconn(conn)

    def _check_pool(self, pool: ConnectionPool[PooledConnection]) -> None:
        # A dead connection usually means every idle one died with it (a restart).
        with contextlib.suppress(Exception):
            pool.check()

    def close(self) -> None:
        """Close this process's connection pools. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() == self._pid:
            self._unpark()
            for pool in self._pools.values():
                with contextlib.suppress(Exception):
                    pool.close(timeout=5.0)

    def read(
        self, query: Any, params: Sequence[Any] = (), *, prepare: bool | None = None
    ) -> builtins.list[Any]:
        """Run one read statement (``prepare=False``: never as a prepared statement, whose
        generic plan cannot see its parameters)."""
        relaxed = self.relaxed(True)
        for attempt in (0, 1):
            conn = self.take(relaxed)
            try:
                cur = conn.kept_cursor()
                cur.execute(query, params, prepare=prepare)
                return cur.fetchall()
            except psycopg.Error as exc:
                if attempt == 0 and (conn.closed or conn.broken):
                    continue  # a stale pooled connection: reads are safe to retry
                raise map_error(exc, "reading") from exc
            finally:
                self.give(conn, relaxed)
        raise AssertionError("unreachable")  # pragma: no cover

    def write(
        self,
        fn: Callable[[Cursor[Any]], T],
        *,
        durable: bool,
        probe_fn: Callable[[Cursor[Any], T], bool | None] | None = None,
        details: Mapping[str, Any] | None = None,
        fast: Callable[[Cursor[Any]], T] | None = None,
    ) -> T:
        """Run ``fn`` in one transaction; resolve a ``COMMIT`` that got no answer.

        With ``fast`` (one statement doing all of ``fn``'s work when nothing is contended),
        ``fast`` runs instead of ``fn``; when it gives up (an error with ``SLOW_SQLSTATE``),
        the transaction is rolled back and ``fn`` runs in a new one.

        A COMMIT proven not to have landed (its backend gone, the probe negative) is run
        again once, from the start: nothing of it can land any more.
        """
        for attempt in (0, 1):
            with self.connection(durable=durable) as conn:
                cur = conn.kept_cursor()
                try:
                    cur.execute("BEGIN")
                except psycopg.Error as exc:
                    if attempt == 0 and (conn.closed or conn.broken):
                        continue  # nothing was sent that could commit: safe to retry
                    raise map_error(exc, "beginning a write", details) from exc
                try:
                    result = _run(cur, fn, fast)
                except BaseException as exc:
                    with contextlib.suppress(psycopg.Error):
                        cur.execute("ROLLBACK")
                    if isinstance(exc, psycopg.Error):
                        raise map_error(exc, "writing (nothing was written)", details) from exc
                    raise
                backend = conn.info.backend_pid
                try:
                    cur.execute("COMMIT")
                except psycopg.Error as exc:
                    if isinstance(exc, _BUSY) or not (conn.closed or conn.broken):
                        with contextlib.suppress(psycopg.Error):
                            cur.execute("ROLLBACK")
                        raise map_error(exc, "committing (nothing was written)", details) from exc
                    lost = exc
                else:
                    return result
            # The COMMIT got no answer: find out, outside the dead connection.
            landed = self._read_back(lost, backend, _bind(probe_fn, result), details)
            if landed is not False:
                return result
            if attempt == 1:
                raise _not_committed(lost, details)
        raise AssertionError("unreachable")  # pragma: no cover

    def single(self, q: Queries, op: Op, extra: Any, *, durable: bool) -> Any:
        """Run one ``apply`` op as one autocommit statement (one round trip, no BEGIN).

        Every op is a single statement, so it is its own transaction; see ``statement``.
        """
        return self.statement(
            partial(execute_op, q=q, op=op, extra=extra),
            durable=durable,
            probe_fn=partial(probe_one, q=q, op=op, extra=extra),
            landed=partial(landed_outcome, op),
            details=op_key(op),
        )

    def statement(
        self,
        fn: Callable[[Cursor[Any]], T],
        *,
        durable: bool,
        probe_fn: Callable[[Cursor[Any]], bool],
        landed: Callable[[], T],
        details: Mapping[str, Any],
        slow: Callable[[], T] | None = None,
    ) -> T:
        """Run ``fn`` (one statement: its own implicit transaction) in autocommit.

        A statement that got no answer is resolved like a lost COMMIT: ``probe_fn`` says
        it landed, ``landed()`` is returned; proven not landed, it is run again once (a
        stale pooled connection after a restart ends up here too). With ``slow``, an error
        with ``SLOW_SQLSTATE`` (the statement gave up; nothing of it landed) returns
        ``slow()``, run once the connection is given back.
        """
        lost: psycopg.Error | None
        relaxed = self.relaxed(durable)
        for attempt in (0, 1):
            conn = self.take(relaxed)
            try:
                cur = conn.kept_cursor()
                backend = conn.info.backend_pid
                try:
                    return fn(cur)
                except psycopg.Error as exc:
                    if conn.closed or conn.broken:
                        lost = exc
                    elif slow is None or exc.sqlstate != SLOW_SQLSTATE:
                        raise map_error(exc, "writing (nothing was written)", details) from exc
                    else:
                        lost = None
            finally:
                self.give(conn, relaxed)
            if lost is None:
                assert slow is not None
                return slow()
            if self._read_back(lost, backend, probe_fn, details):
                return landed()
            if attempt == 1:
                raise _not_committed(lost, details)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_back(
        self,
        exc: psycopg.Error,
        backend: int,
        probe_fn: Callable[[Cursor[Any]], bool | None] | None,
        details: Mapping[str, Any] | None,
    ) -> bool | None:
        """Say whether a write whose commit got no answer landed; never guess.

        Raises:
            StoreUnavailableError: ``STORE_UNAVAILABLE`` (``details["outcome"] ==
                "unknown"``, with the key and revision) when it cannot be read back.
        """
        facts = {**(details or {}), "doing": "committing"}
        try:
            return self._probe_after(backend, probe_fn)
        except (psycopg.Error, StoreError, TimeoutError) as probe_exc:
            raise StoreUnavailableError(
                message="the connection was lost while committing and the outcome could not "
                f"be read back ({probe_exc}); the write may or may not have landed: re-read "
                f"before acting ({_describe(facts)})",
                details={**facts, "outcome": "unknown"},
            ) from exc

    def _probe_after(
        self, backend: int, probe_fn: Callable[[Cursor[Any]], bool | None] | None
    ) -> bool | None:
        deadline = time.monotonic() + max(self.statement_timeout, 5.0)
        with self.connection() as conn:
            cur = conn.kept_cursor()
            # Until the backend that ran the commit is gone, it may still finish it.
            delay = 0.005
            while True:
                cur.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,))
                if cur.fetchone() is None:
                    break
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"backend {backend} still running")
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
            if probe_fn is None:
                raise TimeoutError("this write has no read-back probe")
            return probe_fn(cur)


def _run(
    cur: Cursor[Any], fn: Callable[[Cursor[Any]], T], fast: Callable[[Cursor[Any]], T] | None
) -> T:
    """Run ``fast`` in the open transaction, or ``fn`` (in a new one if ``fast`` gave up)."""
    if fast is None:
        return fn(cur)
    try:
        return fast(cur)
    except psycopg.Error as exc:
        if exc.sqlstate != SLOW_SQLSTATE:
            raise
    cur.execute("ROLLBACK")  # nothing the fast statement wrote survives
    cur.execute("BEGIN")
    return fn(cur)


def _bind(
    probe_fn: Callable[[Cursor[Any], T], bool | None] | None, result: T
) -> Callable[[Cursor[Any]], bool | None] | None:
    if probe_fn is None:
        return None
    return lambda cur: probe_fn(cur, result)


def _not_committed(exc: psycopg.Error, details: Mapping[str, Any] | None) -> StoreUnavailableError:
    facts = {**(details or {}), "doing": "committing"}
    return StoreUnavailableError(
        message="the connection was lost while committing, twice; reading back shows the "
        f"write did not land: nothing was written ({_describe(facts)})",
        details={**facts, "outcome": "not-committed"},
    )


def _describe(facts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in facts.items())


def map_error(
    exc: psycopg.Error, doing: str, details: Mapping[str, Any] | None = None
) -> StoreError:
    facts = {**(details or {}), "doing": doing}
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        facts["sqlstate"] = sqlstate
    if isinstance(exc, _BUSY):
        return StoreBusyError(
            message=f"PostgreSQL was busy while {doing} (a timeout, lock or conflict); "
            f"retry later: {exc}",
            details=facts,
        )
    return StoreUnavailableError(
        message=f"PostgreSQL failed while {doing}: {exc}".rstrip(), details=facts
    )
