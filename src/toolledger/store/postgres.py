"""The fleet store: the ``Store`` contract on PostgreSQL (psycopg 3 + psycopg_pool).

Rules this module keeps:

- Everything lives in one schema (``schema="toolledger"``); every statement names it, so
  runs and tenants isolate by schema. Tables, columns and orderings mirror ``SQLiteStore``.
- Connections, transactions and lost commits are ``_pg_conn``'s: per-process pools of
  autocommit connections; one ``apply`` op is one autocommit statement, and so are
  several, as one call of the ``apply_ops`` server function (``_pg_batch``: its own
  implicit transaction); op by op in ``BEGIN`` … ``COMMIT`` when it gives up; a commit (or
  a write statement) that got no answer is read back once its backend is gone (landed:
  returned; provably not landed: run again once; unreadable: ``STORE_UNAVAILABLE`` with
  the key and revision). It never guesses.
- CAS is ``UPDATE … WHERE … AND revision = %s`` plus the row count; creation is
  ``INSERT … ON CONFLICT DO NOTHING`` then a read (``_pg_ops``). No lock is taken for
  correctness; a transaction-scoped advisory lock serialises schema migrations only.
- Durability: ``durability="full"`` (default) commits durable writes with the server's
  ``synchronous_commit`` (``on`` by default: the WAL is flushed before the commit returns)
  and relaxed writes on sessions with ``synchronous_commit = off`` (a server crash may lose
  the last relaxed commits, never tear them). ``durability="normal"`` relaxes every write.
- Driver errors never leak: statement and lock timeouts, deadlocks and serialisation
  failures become ``STORE_BUSY``; everything else (connection loss, a restart, a missing
  schema) ``STORE_UNAVAILABLE``, raised ``from`` the driver error. The next call works
  once the server is back.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeVar

from psycopg import Cursor, errors

from ..checkpoint.model import CheckpointRecord, Status, check_time, format_time
from ..errors import (
    InvalidArgumentError,
    NotFoundError,
    StoreSchemaTooNewError,
    UnsupportedSchemaError,
)
from . import _pg_approvals, _pg_search
from ._approval_record import ApprovalRecord, load_approval
from ._pg_approvals import PgApprovals
from ._pg_batch import CALL as _APPLY_OPS
from ._pg_batch import encode_ops, fits, landed_outcomes, outcomes
from ._pg_conn import PgConnections
from ._pg_ops import HANDLERS, Queries, op_key, probe, probe_batch
from ._pg_schema import LATEST_VERSION, MIGRATIONS, lock_key, qualify
from ._rows import load_record, prepare_ops, run_ops, status_values
from ._search import EventQuery
from ._sqlcommon import (
    EVENT_COLUMNS,
    RUN_COLUMNS,
    ApplyShortcuts,
    event_row,
    history_entries,
    now_text,
    quarantined_rows,
    run_changes,
    run_row,
    valid_records,
)
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

__all__ = ["PostgresStore"]

T = TypeVar("T")

_TEMPLATES = {
    "get": "SELECT record FROM {s}.checkpoints "
    "WHERE namespace = %s AND call_id = %s AND revision >= 0",
    # A guarded call's first read: its checkpoint and its approval, as of one moment.
    "get_with_approval": "SELECT (SELECT record FROM {s}.checkpoints "
    "WHERE namespace = %s AND call_id = %s AND revision >= 0), "
    "(SELECT record FROM {s}.approvals WHERE namespace = %s AND call_id = %s)",
    "history": "SELECT transition, action, record FROM {s}.checkpoint_history "
    "WHERE namespace = %s AND call_id = %s ORDER BY revision",
    "op_read": "SELECT data FROM {s}.operation_journal WHERE namespace = %s AND call_id = %s",
    "run_insert": f"INSERT INTO {{s}}.runs ({RUN_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
    "run_get": f"SELECT {RUN_COLUMNS} FROM {{s}}.runs WHERE run_id = %s",
    "run_exists": "SELECT 1 FROM {s}.runs WHERE run_id = %s",
    "events": f"SELECT {EVENT_COLUMNS} FROM {{s}}.events WHERE run_id = %s AND seq > %s "
    "ORDER BY seq LIMIT %s",
    "tomb_get": "SELECT data FROM {s}.tombstones WHERE namespace = %s AND call_id = %s",
    "tomb_insert": "INSERT INTO {s}.tombstones (namespace, call_id, erased_at, data) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
    # An erased key keeps a marker row (revision -1, no record): a create racing the erase
    # then conflicts with it instead of slipping in after a DELETE. Readers skip it.
    "erase_checkpoint": "UPDATE {s}.checkpoints SET status = 'erased', revision = -1, "
    "updated_at = %s, record = '' WHERE namespace = %s AND call_id = %s AND revision = %s",
    "marker_insert": "INSERT INTO {s}.checkpoints "
    "(namespace, call_id, status, revision, tool_name, updated_at, record) "
    "VALUES (%s, %s, 'erased', -1, %s, %s, '') ON CONFLICT DO NOTHING",
    "lock_key": "SELECT revision FROM {s}.checkpoints "
    "WHERE namespace = %s AND call_id = %s FOR UPDATE",
    "erase_history": "DELETE FROM {s}.checkpoint_history WHERE namespace = %s AND call_id = %s",
    "erase_operation": "DELETE FROM {s}.operation_journal WHERE namespace = %s AND call_id = %s",
    "event_rewrite": "UPDATE {s}.events SET data = %s WHERE run_id = %s AND seq = %s",
    "event_data": "SELECT data FROM {s}.events WHERE run_id = %s AND seq = %s",
    "version_table": "CREATE TABLE IF NOT EXISTS {s}.toolledger_schema ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    "version_max": "SELECT max(version) FROM {s}.toolledger_schema",
    "version_insert": "INSERT INTO {s}.toolledger_schema (version, name, applied_at) "
    "VALUES (%s, %s, %s)",
    "versions": "SELECT version, name FROM {s}.toolledger_schema ORDER BY version",
    "create_schema": "CREATE SCHEMA IF NOT EXISTS {s}",
    "apply_ops": _APPLY_OPS,
}


class PostgresStore(PgApprovals, ApplyShortcuts):
    """The ``Store`` contract on PostgreSQL, shared by many hosts.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL; a URL may name the schema
            as ``?schema=NAME`` (used unless ``schema`` is given).
        schema: The schema holding every table (created and migrated on open): not a
            PostgreSQL system schema (``information_schema``, ``pg_*``). ``public`` is
            allowed when named (``toolledger migrate`` notes it on stderr).
        durability: ``"full"`` (durable writes wait for the WAL flush) or ``"normal"``
            (every write uses ``synchronous_commit = off``).
        min_size, max_size: Connection-pool bounds for this process.
        timeout: Seconds to wait for a pooled connection before ``STORE_UNAVAILABLE``.
        statement_timeout: Seconds one statement may run before ``STORE_BUSY``.
        connect_timeout: Seconds to wait for the server when connecting.
        application_name: Shown in ``pg_stat_activity``.
        readonly: Open an existing schema for reading only: nothing is created or
            migrated and every session refuses writes (``default_transaction_read_only``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad option, a system schema, or
            two ``?schema=`` parameters in the URL.
        NotFoundError: ``NOT_FOUND``: with ``readonly``, the schema holds no toolledger tables.
        UnsupportedSchemaError: ``UNSUPPORTED_SCHEMA``: with ``readonly``, an older schema.
        StoreSchemaTooNewError: ``STORE_SCHEMA_TOO_NEW``: a newer toolledger wrote the schema.
        StoreUnavailableError: ``STORE_UNAVAILABLE``: the server cannot be reached.
    """

    capabilities = Capabilities(
        gated_append=True,
        effect_keys=True,
        read_with_approval=True,
        migrations=True,
        denials_by_action=True,
    )

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "toolledger",
        durability: Literal["full", "normal"] = "full",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
        statement_timeout: float = 30.0,
        connect_timeout: float = 5.0,
        application_name: str = "toolledger",
        readonly: bool = False,
    ) -> None:
        if durability not in ("full", "normal"):
            raise InvalidArgumentError(message='durability must be "full" or "normal"')
        if not isinstance(dsn, str) or not dsn:
            raise InvalidArgumentError(message="dsn must be a non-empty str")
        if not (isinstance(min_size, int) and isinstance(max_size, int) and min_size >= 0):
            raise InvalidArgumentError(message="min_size and max_size must be ints")
        if max_size < max(min_size, 1):
            raise InvalidArgumentError(message="max_size must be >= max(min_size, 1)")
        for name, value in (
            ("timeout", timeout),
            ("statement_timeout", statement_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if not (isinstance(value, (int, float)) and value > 0):
                raise InvalidArgumentError(message=f"{name} must be a positive number")
        if not isinstance(readonly, bool):
            raise InvalidArgumentError(message="readonly must be a bool")
        self.readonly = readonly
        dsn, url_schema = _split_schema(dsn)
        if url_schema is not None and schema == "toolledger":
            schema = url_schema
        _check_schema(schema)
        self.dsn = dsn
        self.schema = schema
        self.durability = durability
        self.timeout = float(timeout)
        self.statement_timeout = float(statement_timeout)
        pool_args: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "timeout": float(timeout),
            "kwargs": {
                "autocommit": True,
                "connect_timeout": max(1, round(connect_timeout)),
                "application_name": application_name,
                "options": f"-c statement_timeout={int(statement_timeout * 1000)}"
                # A reader's sessions refuse every write, server-side.
                + (" -c default_transaction_read_only=on" if readonly else ""),
            },
        }
        self._q = Queries(schema, {**_TEMPLATES, **_pg_search.TEMPLATES, **_pg_approvals.TEMPLATES})
        self._db = PgConnections(
            dsn,
            schema=schema,
            durability=durability,
            pool_args=pool_args,
            timeout=float(timeout),
            statement_timeout=float(statement_timeout),
        )
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, durability={self.durability!r})"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connection pools. Idempotent."""
        self._db.close()

    # -- migrations --------------------------------------------------------------------

    def _migrate(self) -> None:
        reg = f"{_quote_ident(self.schema)}.toolledger_schema"
        rows = self._db.read("SELECT to_regclass(%s) IS NOT NULL", (reg,))
        if rows[0][0]:
            current = self._db.read(self._q["version_max"])[0][0] or 0
            if current > LATEST_VERSION:
                raise self._too_new(current)
            if current == LATEST_VERSION:
                return
        if self.readonly:  # readers never create or migrate
            if not rows[0][0]:
                raise NotFoundError(
                    message=f"schema {self.schema!r} holds no toolledger database "
                    "(readers never create one)",
                    details={"schema": self.schema, "reason": "missing"},
                )
            raise UnsupportedSchemaError(
                message=f"schema {self.schema!r} has version {current}; this toolledger reads "
                f"version {LATEST_VERSION}. Run `toolledger migrate` on it (readers never "
                "migrate).",
                details={"schema": self.schema, "version": current, "supported": LATEST_VERSION},
            )

        def run(cur: Cursor[Any]) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_key(self.schema),))
            cur.execute(self._q["create_schema"])
            cur.execute(self._q["version_table"])
            cur.execute(self._q["version_max"])
            row = cur.fetchone()
            have = (row[0] if row else None) or 0
            if have > LATEST_VERSION:
                raise self._too_new(have)
            now = now_text()
            for version, name, statements in MIGRATIONS:
                if version <= have:
                    continue
                for statement in statements:
                    if callable(statement):
                        statement(cur, self._q)
                    else:
                        cur.execute(qualify(statement, self.schema))
                cur.execute(self._q["version_insert"], (version, name, now))

        self._db.write(run, durable=True)

    def _too_new(self, version: int) -> StoreSchemaTooNewError:
        return StoreSchemaTooNewError(
            message=f"schema {self.schema!r} has version {version}; this toolledger knows up "
            f"to {LATEST_VERSION}. Upgrade toolledger to open it.",
            details={"schema": self.schema, "version": version, "supported": LATEST_VERSION},
        )

    def applied_migrations(self) -> builtins.list[tuple[int, str]]:
        """Return ``(version, name)`` of every applied migration. Read-only."""
        return [(int(v), str(n)) for v, n in self._db.read(self._q["versions"])]

    # -- checkpoints -------------------------------------------------------------------

    def get(self, namespace: str, call_id: str) -> CheckpointRecord | None:
        """Return the stored record or ``None``; see ``Store.get``."""
        rows = self._db.read(self._q["get"], (namespace, call_id))
        return load_record(rows[0][0], namespace, call_id) if rows else None

    def get_with_approval(
        self, namespace: str, call_id: str
    ) -> tuple[CheckpointRecord | None, Callable[[], ApprovalRecord | None]]:
        """Return ``get``'s record and ``approval_get`` as of the same moment, in one read.

        The approval is decoded when the returned function is called (a damaged row then
        raises as ``approval_get`` does), so a caller that never needs it is never failed
        by it.
        """
        rec_text, approval_text = self._db.read(
            self._q["get_with_approval"], (namespace, call_id, namespace, call_id)
        )[0]
        rec = None if rec_text is None else load_record(rec_text, namespace, call_id)
        if approval_text is None:
            return rec, no_approval
        return rec, partial(load_approval, approval_text, namespace, call_id)

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
        where: builtins.list[str] = ["revision >= 0"]  # not the markers of erased keys
        params: builtins.list[Any] = []
        statuses = status_values(status)
        if statuses is not None:
            where.append("status = ANY(%s)")
            params.append(statuses)
        if namespace is not None:
            where.append("namespace = %s")
            params.append(namespace)
        if updated_before is not None:
            where.append("updated_at < %s")
            params.append(format_time(check_time(updated_before, "updated_before")))
        template = (
            "SELECT namespace, call_id, record FROM {s}.checkpoints WHERE "
            + " AND ".join(where)
            + " ORDER BY updated_at, namespace, call_id"
        )
        if limit is not None:
            template += " LIMIT %s"
            params.append(int(limit))
        rows = self._db.read(qualify(template, self.schema), params)
        return [(str(a), str(b), str(c)) for a, b, c in rows]

    def history(self, namespace: str, call_id: str) -> builtins.list[HistoryEntry]:
        """Return every transition of the key in order; see ``Store.history``."""
        rows = self._db.read(self._q["history"], (namespace, call_id))
        return history_entries(namespace, call_id, rows)

    # -- batches -----------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], *, durable: bool = True) -> builtins.list[Any]:
        """Run ``ops`` in one transaction; see ``Store.apply``."""
        prepared = prepare_ops(ops)  # validate everything before writing
        if len(prepared) == 1:
            return [self._db.single(self._q, *prepared[0], durable=durable)]
        q = self._q

        def run(cur: Cursor[Any]) -> builtins.list[Any]:
            return run_ops(prepared, HANDLERS, cur, q)

        def fast(cur: Cursor[Any]) -> builtins.list[Any]:
            cur.execute(q["apply_ops"], (encode_ops(prepared),))
            row = cur.fetchone()
            assert row is not None
            return outcomes(prepared, row[0])

        def check(cur: Cursor[Any], results: builtins.list[Any]) -> bool | None:
            return probe(cur, q, prepared, results)

        details = op_key(prepared[0][0]) if prepared else {}
        fitting = fits(prepared)
        landed = landed_outcomes(prepared) if fitting and prepared else None
        if landed is None:
            return self._db.write(
                run,
                durable=durable,
                probe_fn=check,
                details=details,
                fast=fast if fitting else None,
            )
        # One autocommit statement (one round trip): all or nothing, read back if lost;
        # op by op in BEGIN … COMMIT when the function gives up.
        return self._db.statement(
            fast,
            durable=durable,
            probe_fn=lambda cur: probe_batch(cur, q, prepared),
            landed=lambda: landed,
            details=details,
            slow=lambda: self._db.write(run, durable=durable, probe_fn=check, details=details),
        )

    # -- operation journal -------------------------------------------------------------

    def operation_read(self, namespace: str, call_id: str) -> dict[str, Any] | None:
        """Return the call's operation-journal entry or ``None``."""
        rows = self._db.read(self._q["op_read"], (namespace, call_id))
        return None if not rows else dict(json.loads(rows[0][0]))

    # -- runs and events ---------------------------------------------------------------

    def create_run(self, run: RunRow, *, durable: bool = False) -> None:
        """Store a new run; ``INVALID_ARGUMENT`` if the id exists."""
        values = (
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
        )

        def write(cur: Cursor[Any]) -> None:
            try:
                cur.execute(self._q["run_insert"], values)
            except errors.UniqueViolation as exc:
                raise InvalidArgumentError(
                    message=f"run {run.run_id} exists already", details={"run_id": run.run_id}
                ) from exc
            cur.execute(self._q["index_run"], _pg_search.run_index_params(run.run_id, run.data))

        def check(cur: Cursor[Any], _: None) -> bool:
            cur.execute(self._q["run_get"], (run.run_id,))
            row = cur.fetchone()
            return row is not None and run_row(row) == run

        self._db.write(write, durable=durable, probe_fn=check, details={"run_id": run.run_id})

    def get_run(self, run_id: str) -> RunRow | None:
        """Return the run or ``None``."""
        rows = self._db.read(self._q["run_get"], (run_id,))
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
        sets = ", ".join(f"{k} = %s" for k in changes)
        template = f"UPDATE {{s}}.runs SET {sets} WHERE run_id = %s" if changes else None

        def write(cur: Cursor[Any]) -> None:
            if template is not None:
                cur.execute(qualify(template, self.schema), (*changes.values(), run_id))
                found = cur.rowcount == 1
                if found and data is not None:
                    cur.execute(self._q["index_run"], _pg_search.run_index_params(run_id, data))
            else:
                cur.execute(self._q["run_exists"], (run_id,))
                found = cur.fetchone() is not None
            if not found:
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})

        def check(cur: Cursor[Any], _: None) -> bool:
            cur.execute(self._q["run_get"], (run_id,))
            row = cur.fetchone()
            if row is None:
                return False
            got = run_row(row)
            return all(getattr(got, k) == v for k, v in changes.items())

        self._db.write(write, durable=durable, probe_fn=check, details={"run_id": run_id})

    def list_runs(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[RunRow]:
        """Return runs, newest first."""
        template = f"SELECT {RUN_COLUMNS} FROM {{s}}.runs"
        params: builtins.list[Any] = []
        if namespace is not None:
            template += " WHERE namespace = %s"
            params.append(namespace)
        template += " ORDER BY started_at DESC, run_id"
        if limit is not None:
            template += " LIMIT %s"
            params.append(int(limit))
        return [run_row(r) for r in self._db.read(qualify(template, self.schema), params)]

    def read_events(
        self, run_id: str, *, after_seq: int = -1, limit: int | None = None
    ) -> builtins.list[EventRow]:
        """Return the run's events after ``after_seq`` in order."""
        rows = self._db.read(self._q["events"], (run_id, after_seq, limit))
        return [event_row(r) for r in rows]

    def search_events(self, query: EventQuery) -> builtins.list[tuple[EventRow, ...]]:
        """Return the records of matching events, newest first; see ``Store.search_events``."""
        select = _pg_search.search_select(
            lambda t: qualify(t, self.schema).as_string(None), self._db.read
        )
        keys = select(query)
        if not keys:
            return []
        rows = self._db.read(
            self._q["search_records"], ([r for r, _ in keys], [e for _, e in keys])
        )
        return _pg_search.search_records(keys, rows)

    # -- retention and copying (tombstones) --------------------------------------------

    def erase_checkpoint(self, tombstone: Tombstone, *, expected_revision: int) -> bool:
        """Replace the checkpoint by ``tombstone`` iff at ``expected_revision``; see ``Store``."""
        ns, cid = tombstone.key
        text = dump_tombstone(tombstone)
        q = self._q

        def write(cur: Cursor[Any]) -> bool:
            cur.execute(q["tomb_get"], (ns, cid))
            if cur.fetchone() is not None:
                raise InvalidArgumentError(
                    message=f"{ns}/{cid} has a tombstone already",
                    details={"namespace": ns, "call_id": cid},
                )
            erased_at = format_time(tombstone.erased_at)
            cur.execute(q["erase_checkpoint"], (erased_at, ns, cid, expected_revision))
            if cur.rowcount != 1:
                return False
            cur.execute(q["erase_history"], (ns, cid))
            cur.execute(q["erase_operation"], (ns, cid))
            cur.execute(q["tomb_insert"], (ns, cid, format_time(tombstone.erased_at), text))
            return True

        return self._db.write(
            write,
            durable=True,
            probe_fn=self._tombstone_probe(ns, cid, text),
            details={"namespace": ns, "call_id": cid, "revision": expected_revision},
        )

    def add_tombstone(self, tombstone: Tombstone) -> bool:
        """Store a tombstone unless one exists; see ``Store.add_tombstone``."""
        ns, cid = tombstone.key
        text = dump_tombstone(tombstone)
        q = self._q

        def write(cur: Cursor[Any]) -> bool:
            cur.execute(q["lock_key"], (ns, cid))
            row = cur.fetchone()
            if row is not None and row[0] >= 0:
                raise InvalidArgumentError(
                    message=f"a checkpoint holds {ns}/{cid}; it cannot be tombstoned this way",
                    details={"namespace": ns, "call_id": cid},
                )
            at = format_time(tombstone.erased_at)
            cur.execute(q["marker_insert"], (ns, cid, tombstone.binding.tool_name, at))
            cur.execute(q["tomb_insert"], (ns, cid, at, text))
            return cur.rowcount == 1

        return self._db.write(
            write,
            durable=True,
            probe_fn=self._tombstone_probe(ns, cid, text),
            details={"namespace": ns, "call_id": cid},
        )

    def _tombstone_probe(
        self, ns: str, cid: str, text: str
    ) -> Callable[[Cursor[Any], bool], bool | None]:
        def check(cur: Cursor[Any], wrote: bool) -> bool | None:
            if not wrote:
                return None
            cur.execute(self._q["tomb_get"], (ns, cid))
            row = cur.fetchone()
            return row is not None and row[0] == text

        return check

    def tombstone(self, namespace: str, call_id: str) -> Tombstone | None:
        """Return the key's tombstone or ``None``."""
        rows = self._db.read(self._q["tomb_get"], (namespace, call_id))
        return load_tombstone(rows[0][0], namespace, call_id) if rows else None

    def list_tombstones(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[Tombstone]:
        """Return tombstones ordered by key."""
        rows = self._keyed("namespace, call_id, data", "tombstones", namespace, limit)
        return [load_tombstone(d, ns, cid) for ns, cid, d in rows]

    def list_operations(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[OperationRow]:
        """Return operation-journal entries ordered by key."""
        rows = self._keyed(
            "namespace, call_id, data, written_at", "operation_journal", namespace, limit
        )
        return [OperationRow(namespace=a, call_id=b, data=c, written_at=d) for a, b, c, d in rows]

    def _keyed(
        self, columns: str, table: str, namespace: str | None, limit: int | None
    ) -> builtins.list[Any]:
        template = f"SELECT {columns} FROM {{s}}.{table}"
        params: builtins.list[Any] = []
        if namespace is not None:
            template += " WHERE namespace = %s"
            params.append(namespace)
        template += " ORDER BY namespace, call_id"
        if limit is not None:
            template += " LIMIT %s"
            params.append(int(limit))
        return self._db.read(qualify(template, self.schema), params)

    # -- effect keys -------------------------------------------------------------------

    def effect_key_holder(self, namespace: str, key: str) -> str | None:
        """Return the call id holding the effect key, or ``None``."""
        rows = self._db.read(self._q["effect_holder"], (namespace, key))
        return str(rows[0][0]) if rows else None

    def list_effect_keys(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[EffectKeyRow]:
        """Return stored effect keys ordered by ``(namespace, key)``."""
        template = "SELECT namespace, effect_key, call_id, claimed_at FROM {s}.effect_keys"
        params: builtins.list[Any] = []
        if namespace is not None:
            template += " WHERE namespace = %s"
            params.append(namespace)
        template += " ORDER BY namespace, effect_key"
        if limit is not None:
            template += " LIMIT %s"
            params.append(int(limit))
        rows = self._db.read(qualify(template, self.schema), params)
        return [EffectKeyRow(namespace=a, key=b, call_id=c, claimed_at=d) for a, b, c, d in rows]

    def rewrite_event_data(self, run_id: str, data: Mapping[int, str]) -> int:
        """Replace the data of the run's events ``{seq: data}``; see ``Store``."""
        items = sorted(data.items())
        q = self._q

        def write(cur: Cursor[Any]) -> int:
            cur.execute(q["run_exists"], (run_id,))
            if cur.fetchone() is None:
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})
            for seq, text in items:
                cur.execute(q["event_rewrite"], (text, run_id, seq))
                if cur.rowcount != 1:
                    raise NotFoundError(
                        message=f"run {run_id} has no event {seq}",
                        details={"run_id": run_id, "seq": seq},
                    )
            if items:
                cur.execute(q["event_names"], (run_id, [seq for seq, _ in items]))
                names = {seq: (eid, name) for seq, eid, name in cur.fetchall()}
                cur.execute(
                    q["index_events"],
                    _pg_search.event_index_params(
                        (run_id, seq, *names[seq], text) for seq, text in items
                    ),
                )
            return len(items)

        def check(cur: Cursor[Any], _: int) -> bool | None:
            if not items:
                return None
            seq, text = items[-1]
            cur.execute(q["event_data"], (run_id, seq))
            row = cur.fetchone()
            return row is not None and row[0] == text

        return self._db.write(write, durable=True, probe_fn=check, details={"run_id": run_id})


def _split_schema(dsn: str) -> tuple[str, str | None]:
    """Take ``?schema=NAME`` out of a URL DSN (libpq would refuse it).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for two ``schema`` parameters (which
            one was meant cannot be told).
    """
    if not dsn.startswith(("postgresql://", "postgres://")) or "?" not in dsn:
        return dsn, None
    from urllib.parse import parse_qsl, urlencode

    base, _, query = dsn.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    schema = [v for k, v in params if k == "schema"]
    if len(schema) > 1:
        raise InvalidArgumentError(
            message=f"the URL names {len(schema)} schemas ({', '.join(map(repr, schema))[:200]}): "
            "give ?schema= once",
            details={"argument": "dsn", "reason": "duplicate schema parameter"},
        )
    rest = [(k, v) for k, v in params if k != "schema"]
    return (base + ("?" + urlencode(rest) if rest else "")), (schema[0] if schema else None)


def _check_schema(schema: object) -> None:
    """Refuse a schema toolledger must not create its tables in: PostgreSQL's own.

    ``information_schema`` and every ``pg_`` name (``pg_catalog``, ``pg_toast``,
    ``pg_temp_3``: the prefix is reserved for system schemas) are PostgreSQL's; names are
    quoted, so ``"Information_Schema"`` is another, ordinary schema. ``public`` is allowed
    when asked for: ``toolledger migrate`` says on stderr that it is in use.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a system schema, or a name that is
            empty, over 63 bytes (PostgreSQL would truncate it) or holds a NUL.
    """
    try:
        size = len(schema.encode("utf-8")) if isinstance(schema, str) else 0
    except UnicodeEncodeError:
        size = 0
    if not isinstance(schema, str) or not (0 < size <= 63) or "\0" in schema:
        raise InvalidArgumentError(
            message=f"schema must be a name of 1-63 bytes (UTF-8) without NUL, not {schema!r:.80}",
            details={"argument": "schema"},
        )
    if schema == "information_schema" or schema.startswith("pg_"):
        raise InvalidArgumentError(
            message=f"schema {schema!r} is a PostgreSQL system schema: toolledger never "
            "creates its tables there (use ?schema=toolledger, the default, or a name of "
            "your own)",
            details={"argument": "schema", "schema": schema, "reason": "system schema"},
        )


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
