"""The embedded default store: one SQLite file, safe across threads and processes.

Rules this module keeps:

- Pragmas are set once per connection at open: WAL, ``busy_timeout``, ``synchronous``
  (``_sqlite_conn.connect``, the twin of ``_pg_conn``).
- Each thread (and each process: connections are never shared across ``fork``) gets its
  own connection. Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction
  (``_write``).
- CAS is ``UPDATE … WHERE namespace=? AND call_id=? AND revision=?`` plus a row-count
  check; the history row is inserted in the same transaction. A creation's row holds the
  whole record; a transition's row holds its facts (status, revision and time in columns;
  fences, times, counts, reason in the text) and the binding, creation time and result
  only where they changed (``_rows.expand_history`` rebuilds each revision's record).
- Durability: ``durability="full"`` (default) commits durable writes with
  ``synchronous=FULL`` (the WAL is fsync-ed before the commit returns: a claim survives
  power loss before the tool runs) and relaxed writes with ``synchronous=NORMAL``.
  ``durability="normal"`` uses NORMAL for everything: a power failure (not a process
  crash) may lose the last commits, so a completed call could be forgotten and, after the
  reboot, found ``executing``, i.e. reconciled, never silently re-run if its claim
  survived, but possibly re-run if the claim was lost too.
- WAL checkpoints run off the callers' commits: passive checkpoint rounds on a thread of
  the store's own every ``CHECKPOINT_EVERY`` commits (``CHECKPOINT_EVERY_FULL`` at
  ``durability="full"``: see ``_round_every``) (``_sqlite_checkpointer``), SQLite's
  auto-checkpoint kept only as a far backstop. It changes when pages reach the database
  file, never what a commit syncs. This process's writers of a store hold its ``_gate``
  from ``BEGIN`` to ``COMMIT`` (a lock, waited on up to ``busy_timeout`` like SQLite's own):
  the thread takes it for the last short round of each, so the WAL restarts.
- Schema changes are numbered migrations recorded in ``toolledger_schema`` in the same
  transaction; a file written by a newer toolledger fails with ``STORE_SCHEMA_TOO_NEW``.
- ``sqlite3`` errors never leak: locked/busy becomes ``STORE_BUSY``, anything else
  ``STORE_UNAVAILABLE``, raised ``from`` the driver error (``_sqlite_conn.map_error``).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..checkpoint.model import CheckpointRecord, Status, check_time, format_time
from ..errors import (
    CheckpointError,
    InvalidArgumentError,
    NotFoundError,
    StoreBusyError,
    StoreUnavailableError,
    UnsupportedSchemaError,
)
from . import _sqlite_search
from ._approval_record import ApprovalRecord, load_approval
from ._rows import expand_history, load_record, prepare_ops, run_ops, status_values
from ._search import EventQuery
from ._sqlcommon import (
    RECORD_FIELDS,
    RUN_COLUMNS,
    ApplyShortcuts,
    event_row,
    history_entries,
    now_text,
    quarantined_rows,
    record_fields,
    run_changes,
    run_row,
    valid_records,
)
from ._sqlite_approvals import SqliteApprovals
from ._sqlite_checkpointer import (
    CHECKPOINT_EVERY,
    CHECKPOINT_EVERY_FULL,
    Checkpointer,
)
from ._sqlite_conn import (
    connect,
    connect_readonly,
    map_error,
    not_utf8,
    refuse_special_files,
    too_new,
    unencodable,
)
from ._sqlite_ops import HANDLERS, SELECT_EVENT_COLUMNS, create_and_swap
from ._sqlite_schema import LATEST_VERSION, MIGRATIONS
from ._tombstone import dump_tombstone, load_tombstone
from .base import (
    Capabilities,
    EffectKeyRow,
    EventRow,
    HistoryEntry,
    Op,
    OperationRow,
    QuarantinedRow,
    RunRow,
    Tombstone,
    no_approval,
)

__all__ = ["LATEST_VERSION", "MIGRATIONS", "SQLiteStore"]

T = TypeVar("T")

#: What a read may raise that ``_read_error`` maps.
_READ_ERRORS = (sqlite3.Error, UnicodeEncodeError, UnicodeDecodeError)
#: A guarded call's first read: its checkpoint and its approval, one snapshot, one row.
_GET_WITH_APPROVAL = (
    "SELECT (SELECT record FROM checkpoints WHERE namespace = ?1 AND call_id = ?2), "
    "(SELECT record FROM approvals WHERE namespace = ?1 AND call_id = ?2)"
)


class SQLiteStore(SqliteApprovals, ApplyShortcuts):
    """The embedded store: one SQLite file holding everything.

    Args:
        path: The database file (created if missing, with its parent directory).
        durability: ``"full"`` (default: durable writes are fsync-ed before returning) or
            ``"normal"`` (faster; a power failure may lose the last commits).
        busy_timeout: Seconds to wait for another writer before ``STORE_BUSY``.
        readonly: Open an existing toolledger database for reading only: nothing is
            created or migrated, no write is attempted (``file:…?mode=ro``). A WAL file on
            a read-only mount is opened ``immutable`` when SQLite cannot create its shared
            memory file there and no un-checkpointed WAL content would be skipped.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad argument; a ``path`` (or its
            ``-wal``/``-shm``/``-journal``) that exists and is not a regular file (a
            directory, FIFO, socket or device: refused before SQLite opens it, which would
            block on a FIFO); with ``readonly``, a file that is not a toolledger database.
        NotFoundError: ``NOT_FOUND``: with ``readonly``, no file at ``path``.
        UnsupportedSchemaError: ``UNSUPPORTED_SCHEMA``: with ``readonly``, a database
            written by an older toolledger (``toolledger migrate`` upgrades it).
        StoreSchemaTooNewError: the file was written by a newer toolledger.
        StoreBusyError, StoreUnavailableError: the file cannot be opened or migrated.
    """

    capabilities = Capabilities(
        gated_append=True,
        effect_keys=True,
        read_with_approval=True,
        record_fields=True,
        migrations=True,
        denials_by_action=True,
    )
    #: Commits between two checkpoint rounds off the callers' path (each restarts the WAL);
    #: ``None``: SQLite's own auto-checkpoint inside the commit that crosses 1,000 pages
    #: (benches compare).
    _checkpoint_every: int | None = CHECKPOINT_EVERY

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Literal["full", "normal"] = "full",
        busy_timeout: float = 10.0,
        readonly: bool = False,
    ) -> None:
        if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)) or not str(path):
            raise InvalidArgumentError(
                message=f"path must be a file path (str or os.PathLike), got {path!r:.80}",
                details={"argument": "path"},
            )
        if durability not in ("full", "normal"):
            raise InvalidArgumentError(message='durability must be "full" or "normal"')
        if not (isinstance(busy_timeout, (int, float)) and busy_timeout >= 0):
            raise InvalidArgumentError(message="busy_timeout must be a non-negative number")
        if not isinstance(readonly, bool):
            raise InvalidArgumentError(message="readonly must be a bool")
        self.readonly = readonly
        self._immutable = False
        self.path = Path(path)
        self.durability = durability
        self.busy_timeout = float(busy_timeout)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: builtins.list[sqlite3.Connection] = []
        self._pid = os.getpid()
        self._closed = False
        self._checkpointer: Checkpointer | None = None
        self._gate = threading.Lock()  # held by this process's writers, BEGIN to COMMIT
        if str(self.path) != ":memory:":
            refuse_special_files(self.path)
        try:
            self._open(readonly)
        except BaseException:
            # Refused (another application's file, too new, damaged, busy): the caller
            # never gets this store to close, so the connections it opened go now.
            self._closed = True  # nothing to index on the way out
            self.close()
            raise

    def _open(self, readonly: bool) -> None:
        """Check (read-only) or create and migrate the file; probe its search index."""
        if readonly:
            self._check_readable()
            self._indexed = self._probe_index()
            return
        if str(self.path) != ":memory:":
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a regular file in the way, no permission, read-only fs
                raise StoreUnavailableError(
                    message=f"cannot create the directory of {self.path}: "
                    f"{exc.strerror or exc} ({exc.filename or self.path.parent})",
                    details={"path": str(self.path), "errno": exc.errno},
                ) from exc
        self._migrate()
        self._indexed = self._probe_index()

    def _probe_index(self) -> bool:
        conn = self._conn()
        try:
            return _sqlite_search.has_search_index(conn)
        except sqlite3.Error as exc:
            raise map_error(exc, f"reading {self.path}") from exc

    def __repr__(self) -> str:
        mode = ", readonly=True" if self.readonly else ""
        return f"SQLiteStore({str(self.path)!r}, durability={self.durability!r}{mode})"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            conn, self._immutable = connect_readonly(
                self.path, self.busy_timeout, immutable=self._immutable
            )
        else:
            conn = connect(
                self.path, self.busy_timeout, backstop=self._checkpoint_every is not None
            )
        self._local.sync = "NORMAL"
        return conn

    def _check_readable(self) -> None:
        """Refuse (typed) what a reader must not open: no file, not toolledger's, too old."""
        if str(self.path) == ":memory:":
            raise InvalidArgumentError(message="a :memory: database cannot be opened read-only")
        if not self.path.exists():
            raise NotFoundError(
                message=f"no database at {self.path} (readers never create one)",
                details={"path": str(self.path), "reason": "missing"},
            )
        (user_version,) = self._read("PRAGMA user_version")[0]
        has_table = self._read(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'toolledger_schema'"
        )
        if not has_table:
            raise InvalidArgumentError(
                message=f"{self.path} is not a toolledger database (no toolledger_schema "
                "table); readers never add toolledger's tables to it",
                details={"path": str(self.path), "reason": "not a toolledger database"},
            )
        have = self._read("SELECT MAX(version) FROM toolledger_schema")[0][0] or 0
        if not isinstance(have, int):
            have = 0
        if have > LATEST_VERSION:
            raise too_new(self.path, have)
        if have < LATEST_VERSION or user_version < LATEST_VERSION:
            raise UnsupportedSchemaError(
                message=f"{self.path} has schema version {min(have, user_version)}; this "
                f"toolledger reads version {LATEST_VERSION}. Run `toolledger migrate` on it "
                "(readers never migrate).",
                details={"path": str(self.path), "version": have, "supported": LATEST_VERSION},
            )

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use; after a fork, new ones.

        ``_read`` and ``_write`` take a connection this thread holds in this process
        directly (a closed store has dropped them all, so they come here and fail).
        """
        if self._closed:
            raise StoreUnavailableError(message=f"{self!r} is closed")
        pid = os.getpid()
        if pid != self._pid:
            # After fork: never use the parent's connections (they share file locks).
            self._pid = pid
            self._local = threading.local()
            self._connections = []
            self._lock = threading.Lock()
            self._gate = threading.Lock()  # a parent's writer may have held it at the fork
            self._checkpointer = None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this store opened in this process. Idempotent.

        Records still waiting for the search index are indexed first (best effort, never
        waiting for the write lock: a busy or failing database leaves them to the next
        search).
        """
        if not self._closed and os.getpid() == self._pid and not self.readonly:
            with contextlib.suppress(CheckpointError):
                self._index_pending(wait=False)
        self._closed = True
        if os.getpid() != self._pid:
            return
        with self._lock:
            conns, self._connections = self._connections, []
            ckpt, self._checkpointer = self._checkpointer, None
        if ckpt is not None:
            ckpt.close()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    def _write(
        self, fn: Callable[[sqlite3.Connection], T], *, durable: bool, wait: bool = True
    ) -> T:
        """Run ``fn(conn)`` in one ``BEGIN IMMEDIATE`` … ``COMMIT`` at the durability asked
        for (``synchronous`` set first where this connection is at the other one), holding
        the gate; roll back on any exception. ``wait=False``: only if the write lock (the
        gate, then SQLite's) is free now, else ``StoreBusyError`` at once.

        Raises:
            StoreBusyError, StoreUnavailableError: the driver failed (``map_error``), or
                the gate stayed taken.
            InvalidArgumentError: ``INVALID_ARGUMENT``: a read-only store, or a text
                argument that is not valid Unicode.
            Whatever ``fn`` raises (not a driver error), unchanged.
        """
        if self.readonly:
            raise InvalidArgumentError(
                message=f"{self!r} was opened read-only; open it without readonly to write",
                details={"path": str(self.path), "reason": "readonly"},
            )
        conn = getattr(self._local, "conn", None)  # ``_conn``'s fast path: this thread's
        if conn is None or self._pid != os.getpid():
            conn = self._conn()
        gate = self._gate  # after ``_conn``: a forked child has its own by then
        # Uncontended, a non-blocking acquire costs a third of a timed one.
        if not (gate.acquire(False) or (wait and gate.acquire(timeout=self.busy_timeout))):
            raise StoreBusyError(
                message="another writer of this store held it for the whole busy timeout "
                f"({self.busy_timeout} s) while beginning a write; retry later",
                details={"doing": "beginning a write"},
            )
        want = "FULL" if durable and self.durability == "full" else "NORMAL"
        local = self._local
        try:
            try:
                if not wait:
                    conn.execute("PRAGMA busy_timeout = 0")
                if local.sync != want:
                    conn.execute(f"PRAGMA synchronous = {want}")
                    local.sync = want
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise map_error(exc, "beginning a write") from exc
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise map_error(exc, "writing") from exc
                if isinstance(exc, UnicodeEncodeError):
                    raise unencodable(exc) from exc
                if isinstance(exc, UnicodeDecodeError):
                    raise not_utf8(self.path, "writing") from exc
                raise
        finally:
            try:
                if not wait:
                    conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            except sqlite3.Error as exc:
                raise map_error(exc, "writing") from exc
            finally:
                gate.release()
        ckpt = self._checkpointer or self._start_checkpointer()
        if ckpt is not None and next(ckpt.commits) % ckpt.every == 0:
            ckpt.wake()  # a round off the callers' path every ``every`` commits
        return result

    def _round_every(self) -> int | None:
        """Commits between checkpoint rounds: at most ``CHECKPOINT_EVERY_FULL`` at ``full``.

        A commit that grows the WAL file costs its fsync a metadata sync too (about twice
        an fsync of the same pages written over the file's old frames, measured on ext4),
        and the WAL grows until its first restart: at ``full``, restarting every 64
        commits keeps it about 3 MB and ends the growth within a process's first ~30 calls.
        """
        every = self._checkpoint_every
        if every is not None and self.durability == "full":
            every = min(every, CHECKPOINT_EVERY_FULL)
        return every

    def _start_checkpointer(self) -> Checkpointer | None:
        every = self._round_every()
        if every is None or str(self.path) == ":memory:":
            return None
        with self._lock:
            if self._checkpointer is None and not self._closed:
                self._checkpointer = Checkpointer(self.path, every=every, gate=self._gate)
            return self._checkpointer

    def _read(self, sql: str, params: Sequence[Any] = ()) -> builtins.list[Any]:
        conn = getattr(self._local, "conn", None)  # ``_conn``'s fast path: this thread's
        if conn is None or self._pid != os.getpid():
            conn = self._conn()
        try:
            return conn.execute(sql, params).fetchall()
        except _READ_ERRORS as exc:
            raise self._read_error(exc) from exc

    def _read_error(self, exc: Exception) -> CheckpointError:
        """The typed error of a failed read (``_READ_ERRORS``)."""
        if isinstance(exc, sqlite3.Error):
            return map_error(exc, "reading")
        if isinstance(exc, UnicodeEncodeError):  # e.g. a key with a lone surrogate
            return unencodable(exc)
        return not_utf8(self.path, "reading")  # a damaged file: a text column is not UTF-8

    # -- migrations --------------------------------------------------------------------

    def _migrate(self) -> None:
        conn = self._conn()
        try:
            (current,) = conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.Error as exc:
            raise map_error(exc, f"reading {self.path}") from exc
        if current > LATEST_VERSION:
            raise too_new(self.path, current)
        if current == LATEST_VERSION:
            # user_version alone is not trusted: a newer toolledger records its migrations
            # in toolledger_schema too, and a file it wrote is never touched.
            try:
                row = conn.execute("SELECT MAX(version) FROM toolledger_schema").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return
                raise map_error(exc, f"reading {self.path}") from exc
            except sqlite3.Error as exc:
                raise map_error(exc, f"reading {self.path}") from exc
            except UnicodeDecodeError as exc:
                raise not_utf8(self.path, "reading") from exc
            if isinstance(row[0], int) and row[0] > LATEST_VERSION:
                raise too_new(self.path, row[0])
            return

        def run(c: sqlite3.Connection) -> None:
            c.execute(
                "CREATE TABLE IF NOT EXISTS toolledger_schema ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            row = c.execute("SELECT MAX(version) FROM toolledger_schema").fetchone()
            have = row[0] or 0
            if have > LATEST_VERSION:
                raise too_new(self.path, have)
            now = now_text()
            for version, name, statements in MIGRATIONS:
                if version <= have:
                    continue
                for statement in statements:
                    if callable(statement):
                        statement(c)
                    else:
                        c.execute(statement)
                c.execute(
                    "INSERT INTO toolledger_schema (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, now),
                )
            c.execute(f"PRAGMA user_version = {LATEST_VERSION}")

        self._write(run, durable=True)

    def applied_migrations(self) -> builtins.list[tuple[int, str]]:
        """Return ``(version, name)`` of every applied migration. Read-only."""
        rows = self._read("SELECT version, name FROM toolledger_schema ORDER BY version")
        return [(int(v), str(n)) for v, n in rows]

    # -- checkpoints -------------------------------------------------------------------

    def get(self, namespace: str, call_id: str) -> CheckpointRecord | None:
        """Return the stored record or ``None``; see ``Store.get``."""
        rows = self._read(
            "SELECT record FROM checkpoints WHERE namespace = ? AND call_id = ?",
            (namespace, call_id),
        )
        if not rows:
            return None
        return load_record(rows[0][0], namespace, call_id)

    def get_with_approval(
        self, namespace: str, call_id: str
    ) -> tuple[CheckpointRecord | None, Callable[[], ApprovalRecord | None]]:
        """Return ``get``'s record and ``approval_get`` as of the same moment, in one statement.

        The approval is decoded when the returned function is called (a damaged row then
        raises as ``approval_get`` does), so a caller that never needs it is never failed
        by it.
        """
        conn = getattr(self._local, "conn", None)  # ``_read``, inline: every call reads this
        if conn is None or self._pid != os.getpid():
            conn = self._conn()
        try:
            ((record, approval),) = conn.execute(_GET_WITH_APPROVAL, (namespace, call_id))
        except _READ_ERRORS as exc:
            raise self._read_error(exc) from exc
        rec = None if record is None else load_record(record, namespace, call_id)
        if approval is None:
            return rec, no_approval
        return rec, partial(load_approval, approval, namespace, call_id)

    def list(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        namespace: str | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
    ) -> builtins.list[CheckpointRecord]:
        """Return matching records, oldest first; invalid rows are skipped (``quarantined``)."""
        return valid_records(self._select_checkpoints(status, namespace, updated_before, limit))

    def quarantined(self, *, limit: int | None = None) -> builtins.list[QuarantinedRow]:
        """Return stored rows that fail validation, untouched."""
        return quarantined_rows(self._select_checkpoints(None, None, None, None), limit)

    def _select_checkpoints(
        self,
        status: Status | str | Iterable[Status | str] | None,
        namespace: str | None,
        updated_before: datetime | None,
        limit: int | None,
    ) -> builtins.list[tuple[str, str, str]]:
        where, params = [], []
        statuses = status_values(status)
        if statuses is not None:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params.extend(statuses)
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        if updated_before is not None:
            where.append("updated_at < ?")
            params.append(format_time(check_time(updated_before, "updated_before")))
        sql = "SELECT namespace, call_id, record FROM checkpoints"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at, namespace, call_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [(str(a), str(b), str(c)) for a, b, c in self._read(sql, params)]

    def history(self, namespace: str, call_id: str) -> builtins.list[HistoryEntry]:
        """Return every transition of the key in order; see ``Store.history``."""
        rows = self._read(
            "SELECT transition, action, record, revision, status, at FROM checkpoint_history "
            "WHERE namespace = ? AND call_id = ? ORDER BY revision",
            (namespace, call_id),
        )
        return history_entries(namespace, call_id, expand_history(namespace, call_id, rows))

    # -- batches -----------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], *, durable: bool = True) -> builtins.list[Any]:
        """Run ``ops`` in one transaction; see ``Store.apply``."""
        # Validate everything before writing (a swap comes with the text last proven for
        # its key: ``_sqlite_ops``' known-row path); a new call's create and claim are one
        # row write (``create_and_swap``).
        prepared = prepare_ops(ops)
        return self._write(
            partial(run_ops, prepared, HANDLERS, pair=create_and_swap), durable=durable
        )

    # -- operation journal -------------------------------------------------------------

    def operation_read(self, namespace: str, call_id: str) -> dict[str, Any] | None:
        """Return the call's operation-journal entry or ``None``."""
        rows = self._read(
            "SELECT data FROM operation_journal WHERE namespace = ? AND call_id = ?",
            (namespace, call_id),
        )
        return None if not rows else dict(json.loads(rows[0][0]))

    # -- runs and events ---------------------------------------------------------------

    def create_run(self, run: RunRow, *, durable: bool = False) -> None:
        """Store a new run; ``INVALID_ARGUMENT`` if the id exists."""

        def write(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO runs (run_id, namespace, agent, goal, status, started_at, "
                    "ended_at, head_hash, event_count, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        run.run_id,
                        run.namespace,
                        run.agent,
                        run.goal,
                        run.status,
                        run.started_at,
                        run.ended_at,
                        run.head_hash,
                        run.event_count,
                        run.data,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise InvalidArgumentError(
                    message=f"run {run.run_id} exists already", details={"run_id": run.run_id}
                ) from exc
            if self._indexed:
                _sqlite_search.index_run(conn, run.run_id, run.data)

        self._write(write, durable=durable)

    def get_run(self, run_id: str) -> RunRow | None:
        """Return the run or ``None``."""
        rows = self._read(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
        return run_row(rows[0]) if rows else None

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        ended_at: str | None = None,
        data: str | None = None,
        durable: bool = False,
    ) -> None:
        """Update a run's status, end time or document; ``NOT_FOUND`` if absent."""
        changes = run_changes(status=status, ended_at=ended_at, data=data)
        sets, params = [f"{column} = ?" for column in changes], builtins.list(changes.values())

        def write(conn: sqlite3.Connection) -> None:
            if sets:
                cur = conn.execute(
                    f"UPDATE runs SET {', '.join(sets)} WHERE run_id = ?", (*params, run_id)
                )
                found = cur.rowcount == 1
                if found and data is not None and self._indexed:
                    _sqlite_search.reindex_run(conn, run_id, data)
            else:
                found = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if not found:
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})

        self._write(write, durable=durable)

    def list_runs(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[RunRow]:
        """Return runs, newest first."""
        sql = f"SELECT {RUN_COLUMNS} FROM runs"
        params: builtins.list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        sql += " ORDER BY started_at DESC, run_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [run_row(r) for r in self._read(sql, params)]

    def read_events(
        self, run_id: str, *, after_seq: int = -1, limit: int | None = None
    ) -> builtins.list[EventRow]:
        """Return the run's events after ``after_seq`` in order."""
        sql = f"SELECT {SELECT_EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [event_row(r) for r in self._read(sql, (run_id, after_seq))]

    def read_event_fields(self, run_id: str) -> builtins.list[tuple[Any, ...]]:
        """Return all the run's records in ``seq`` order as ``RECORD_FIELDS`` tuples.

        One statement, and no ``EventRow`` built: what ``load_run`` reads.
        """
        sql = f"SELECT {', '.join(RECORD_FIELDS)} FROM events WHERE run_id = ? ORDER BY seq"
        return record_fields(self._read(sql, (run_id,)), run_id)

    # -- retention and copying (tombstones) --------------------------------------------

    def erase_checkpoint(self, tombstone: Tombstone, *, expected_revision: int) -> bool:
        """Replace the checkpoint by ``tombstone`` iff at ``expected_revision``; see ``Store``."""
        ns, cid = tombstone.key
        text = dump_tombstone(tombstone)

        def write(conn: sqlite3.Connection) -> bool:
            if conn.execute(
                "SELECT 1 FROM tombstones WHERE namespace = ? AND call_id = ?", (ns, cid)
            ).fetchone():
                raise InvalidArgumentError(
                    message=f"{ns}/{cid} has a tombstone already",
                    details={"namespace": ns, "call_id": cid},
                )
            cur = conn.execute(
                "DELETE FROM checkpoints WHERE namespace = ? AND call_id = ? AND revision = ?",
                (ns, cid, expected_revision),
            )
            if cur.rowcount != 1:
                return False
            for table in ("checkpoint_history", "operation_journal"):
                conn.execute(f"DELETE FROM {table} WHERE namespace = ? AND call_id = ?", (ns, cid))
            conn.execute(
                "INSERT INTO tombstones (namespace, call_id, erased_at, data) VALUES (?,?,?,?)",
                (ns, cid, format_time(tombstone.erased_at), text),
            )
            return True

        return self._write(write, durable=True)

    def add_tombstone(self, tombstone: Tombstone) -> bool:
        """Store a tombstone unless one exists; see ``Store.add_tombstone``."""
        ns, cid = tombstone.key
        text = dump_tombstone(tombstone)

        def write(conn: sqlite3.Connection) -> bool:
            if conn.execute(
                "SELECT 1 FROM checkpoints WHERE namespace = ? AND call_id = ?", (ns, cid)
            ).fetchone():
                raise InvalidArgumentError(
                    message=f"a checkpoint holds {ns}/{cid}; it cannot be tombstoned this way",
                    details={"namespace": ns, "call_id": cid},
                )
            cur = conn.execute(
                "INSERT OR IGNORE INTO tombstones (namespace, call_id, erased_at, data) "
                "VALUES (?,?,?,?)",
                (ns, cid, format_time(tombstone.erased_at), text),
            )
            return cur.rowcount == 1

        return self._write(write, durable=True)

    def tombstone(self, namespace: str, call_id: str) -> Tombstone | None:
        """Return the key's tombstone or ``None``."""
        rows = self._read(
            "SELECT data FROM tombstones WHERE namespace = ? AND call_id = ?",
            (namespace, call_id),
        )
        return load_tombstone(rows[0][0], namespace, call_id) if rows else None

    def list_tombstones(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[Tombstone]:
        """Return tombstones ordered by key."""
        sql, params = "SELECT namespace, call_id, data FROM tombstones", []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        sql += " ORDER BY namespace, call_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [load_tombstone(d, ns, cid) for ns, cid, d in self._read(sql, params)]

    def list_operations(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[OperationRow]:
        """Return operation-journal entries ordered by key."""
        sql = "SELECT namespace, call_id, data, written_at FROM operation_journal"
        params: builtins.list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        sql += " ORDER BY namespace, call_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [
            OperationRow(namespace=a, call_id=b, data=c, written_at=d)
            for a, b, c, d in self._read(sql, params)
        ]

    def rewrite_event_data(self, run_id: str, data: Mapping[int, str]) -> int:
        """Replace the data of the run's events ``{seq: data}``; see ``Store``."""
        items = sorted(data.items())

        def write(conn: sqlite3.Connection) -> int:
            if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})
            for seq, text in items:
                cur = conn.execute(
                    "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (text, run_id, seq)
                )
                if cur.rowcount != 1:
                    raise NotFoundError(
                        message=f"run {run_id} has no event {seq}",
                        details={"run_id": run_id, "seq": seq},
                    )
            if self._indexed:
                names = dict(
                    conn.execute(
                        "SELECT seq, name FROM events WHERE run_id = ? AND seq IN "
                        f"({', '.join('?' * len(items))})",
                        (run_id, *(seq for seq, _ in items)),
                    ).fetchall()
                )
                _sqlite_search.reindex_events(
                    conn, run_id, [(seq, names.get(seq), text) for seq, text in items]
                )
            return len(items)

        return self._write(write, durable=True)

    # -- search ------------------------------------------------------------------------

    def search_events(self, query: EventQuery) -> builtins.list[tuple[EventRow, ...]]:
        """Return the records of matching events, newest first; see ``Store.search_events``."""
        staged = False
        # A read never waits for the write lock: records another writer's lock keeps
        # from the index are staged for this search alone, as a reader's are.
        if self._indexed and query.terms and (self.readonly or not self._index_pending(wait=False)):
            try:
                staged = _sqlite_search.stage_pending(self._conn())
            except sqlite3.Error as exc:
                raise map_error(exc, "reading") from exc
        return _sqlite_search.search_events(
            query,
            read=self._read,
            records=self._event_records,
            many=self._events_records,
            indexed=self._indexed,
            staged=staged,
        )

    def _index_pending(self, *, wait: bool = True) -> bool:
        """Index the records appended since the last time (its own relaxed write).

        Return whether none is left pending. Without ``wait`` the write lock is taken only
        if it is free now: while another writer holds it, the records stay pending.
        """
        if not self._indexed:
            return True
        try:
            pending = _sqlite_search.has_pending(self._conn())
        except sqlite3.Error as exc:
            raise map_error(exc, "reading") from exc
        if not pending:
            return True
        if wait:
            self._write(_sqlite_search.index_pending, durable=False)
            return True
        return self._write_if_free(_sqlite_search.index_pending)

    def _write_if_free(self, fn: Callable[[sqlite3.Connection], object]) -> bool:
        """Run ``fn`` in a relaxed write if the write lock is free now; never wait for it."""
        try:
            self._write(fn, durable=False, wait=False)
        except StoreBusyError:
            return False
        return True

    def _event_records(self, run_id: str, event_id: str) -> tuple[EventRow, ...]:
        return self._events_records([(run_id, event_id)])[0]

    def _events_records(
        self, keys: Sequence[tuple[str, str]]
    ) -> builtins.list[tuple[EventRow, ...]]:
        """The records of each ``(run_id, event_id)`` in ``seq`` order: one query per run."""
        grouped: dict[tuple[str, str], builtins.list[EventRow]] = {k: [] for k in keys}
        by_run: dict[str, builtins.list[str]] = {}
        for run_id, event_id in keys:
            by_run.setdefault(run_id, []).append(event_id)
        for run_id, ids in by_run.items():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                sql = (
                    f"SELECT {SELECT_EVENT_COLUMNS} FROM events WHERE run_id = ? AND event_id IN "
                    f"({', '.join('?' * len(chunk))}) ORDER BY seq"
                )
                for r in self._read(sql, [run_id, *chunk]):
                    row = event_row(r)
                    grouped[(row.run_id, row.event_id)].append(row)
        return [tuple(grouped[k]) for k in keys]

    # -- effect keys -------------------------------------------------------------------

    def effect_key_holder(self, namespace: str, key: str) -> str | None:
        """Return the call id holding the effect key, or ``None``."""
        rows = self._read(
            "SELECT call_id FROM effect_keys WHERE namespace = ? AND effect_key = ?",
            (namespace, key),
        )
        return str(rows[0][0]) if rows else None

    def list_effect_keys(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[EffectKeyRow]:
        """Return stored effect keys ordered by ``(namespace, key)``."""
        sql = "SELECT namespace, effect_key, call_id, claimed_at FROM effect_keys"
        params: builtins.list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        sql += " ORDER BY namespace, effect_key"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [
            EffectKeyRow(namespace=a, key=b, call_id=c, claimed_at=d)
            for a, b, c, d in self._read(sql, params)
        ]
