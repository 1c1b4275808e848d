"""An in-process Store: the full contract, no durability (``toolledger.testing`` re-exports it)."""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from ..checkpoint.model import Action, Binding, CheckpointRecord, Status, check_time
from ..checkpoint.transitions import transition_between
from ..errors import (
    CheckpointError,
    InvalidArgumentError,
    NotFoundError,
    StoreUnavailableError,
)
from ._approval_record import (
    ApprovalRecord,
    action_digest,
    approval_statuses,
    latest_denial,
    load_approval,
    prepare_put,
)
from ._rows import load_record, op_table, prepare_ops, run_ops, status_values
from ._search import EventQuery, run_goal, scan_search, select_in_memory
from ._sqlcommon import ApplyShortcuts, history_entries, now_text, quarantined_rows, run_changes
from ._tombstone import dump_tombstone, load_tombstone, tombstoned_error
from .base import (
    AppendEvents,
    Capabilities,
    ClaimEffectKey,
    CreateCheckpoint,
    EffectKeyRow,
    EventRow,
    HistoryEntry,
    Op,
    OperationRow,
    QuarantinedRow,
    ReleaseEffectKey,
    RemoveOperation,
    RunRow,
    SwapCheckpoint,
    Tombstone,
    WriteOperation,
    no_approval,
)

__all__ = ["MemoryStore"]


class MemoryStore(ApplyShortcuts):
    """An in-process ``Store`` for tests: the full contract, no durability.

    ``rows`` exposes the stored JSON by key so tests can simulate corruption.
    """

    capabilities = Capabilities(
        gated_append=True, effect_keys=True, read_with_approval=True, denials_by_action=True
    )

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.rows: dict[tuple[str, str], str] = {}
        self._history: dict[tuple[str, str], builtins.list[tuple[str, str, str]]] = {}
        self._ops: dict[tuple[str, str], str] = {}
        self._runs: dict[str, RunRow] = {}
        self._events: dict[str, builtins.list[EventRow]] = {}
        self._tombstones: dict[tuple[str, str], str] = {}
        self._op_times: dict[tuple[str, str], str] = {}
        self._approvals: dict[tuple[str, str], str] = {}
        #: The index ``find_denial`` reads: (namespace, action, conversation) -> call ids of
        #: the approvals (any status) stored under it.
        self._by_action: dict[tuple[str, str, str | None], set[str]] = {}
        self._effect_keys: dict[tuple[str, str], tuple[str, str]] = {}
        self._closed = False

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Mark the store closed. Idempotent."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailableError(message="MemoryStore is closed")

    # -- checkpoints -------------------------------------------------------------------

    def get(self, namespace: str, call_id: str) -> CheckpointRecord | None:
        """Return the stored record or ``None``."""
        with self._lock:
            self._check_open()
            text = self.rows.get((namespace, call_id))
        return None if text is None else load_record(text, namespace, call_id)

    def get_with_approval(
        self, namespace: str, call_id: str
    ) -> tuple[CheckpointRecord | None, Callable[[], ApprovalRecord | None]]:
        """Return ``get``'s record and ``approval_get`` as of the same moment (one lock).

        The approval is decoded when the returned function is called, as the other stores
        do: a caller that never needs it is never failed by a damaged one.
        """
        with self._lock:
            self._check_open()
            text = self.rows.get((namespace, call_id))
            approval = self._approvals.get((namespace, call_id))
        rec = None if text is None else load_record(text, namespace, call_id)
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
        """Return matching records, oldest first; invalid rows are skipped."""
        statuses = status_values(status)
        before = None if updated_before is None else check_time(updated_before, "updated_before")
        with self._lock:
            self._check_open()
            items = builtins.list(self.rows.items())
        out = []
        for (ns, cid), text in items:
            try:
                rec = load_record(text, ns, cid)
            except CheckpointError:
                continue
            if statuses is not None and rec.status.value not in statuses:
                continue
            if namespace is not None and ns != namespace:
                continue
            if before is not None and not rec.updated_at < before:
                continue
            out.append(rec)
        out.sort(key=lambda r: (r.updated_at, r.binding.namespace, r.binding.call_id))
        return out if limit is None else out[:limit]

    def quarantined(self, *, limit: int | None = None) -> builtins.list[QuarantinedRow]:
        """Return stored rows that fail validation, untouched."""
        with self._lock:
            items = builtins.list(self.rows.items())
        out = quarantined_rows(((ns, cid, text) for (ns, cid), text in sorted(items)), None)
        return out if limit is None else out[:limit]

    def history(self, namespace: str, call_id: str) -> builtins.list[HistoryEntry]:
        """Return every transition of the key in order."""
        with self._lock:
            self._check_open()
            rows = builtins.list(self._history.get((namespace, call_id), []))
        return history_entries(namespace, call_id, rows)

    # -- batches -----------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], *, durable: bool = True) -> builtins.list[Any]:
        """Run ``ops`` atomically (all or none)."""
        prepared = prepare_ops(ops)
        with self._lock:
            self._check_open()
            snapshot = (
                dict(self.rows),
                {k: builtins.list(v) for k, v in self._history.items()},
                dict(self._ops),
                dict(self._runs),
                {k: builtins.list(v) for k, v in self._events.items()},
                dict(self._effect_keys),
            )
            try:
                return run_ops(prepared, _HANDLERS, self)
            except BaseException:
                (
                    self.rows,
                    self._history,
                    self._ops,
                    self._runs,
                    self._events,
                    self._effect_keys,
                ) = snapshot
                raise

    def _create(
        self, op: CreateCheckpoint, prepared: tuple[str, str]
    ) -> tuple[bool, CheckpointRecord]:
        extra = prepared[0]
        key = op.record.key
        if key in self.rows:
            return (False, load_record(self.rows[key], *key))
        if key in self._tombstones:
            raise tombstoned_error(load_tombstone(self._tombstones[key], *key))
        self.rows[key] = extra
        self._history[key] = [("create_checkpoint", Action.EXECUTE.value, extra)]
        return (True, op.record)

    def _swap(self, op: SwapCheckpoint, prepared: tuple[str, str, Any]) -> bool:
        extra = prepared[0]
        key = op.next.key
        text = self.rows.get(key)
        if text is None:
            return False
        stored = load_record(text, *key)  # a damaged row raises and stays as it is
        if stored.revision != op.expected_revision:
            return False
        name, action = transition_between(
            stored.status, op.next.status, decision=op.next.resolution is not None
        )
        self.rows[key] = extra
        self._history.setdefault(key, []).append((name, action.value, extra))
        return True

    def _write_operation(self, op: WriteOperation, extra: str) -> None:
        self._ops[(op.namespace, op.call_id)] = extra
        self._op_times[(op.namespace, op.call_id)] = now_text()

    def _remove_operation(self, op: RemoveOperation, _extra: None) -> bool:
        return self._ops.pop((op.namespace, op.call_id), None) is not None

    def _claim_effect_key(self, op: ClaimEffectKey, stamp: str) -> bool:
        current = self._effect_keys.get((op.namespace, op.key))
        if current is not None and op.replaces is not None and current[0] == op.replaces:
            self._effect_keys[(op.namespace, op.key)] = (op.call_id, stamp)
            return True
        held = self._effect_keys.setdefault((op.namespace, op.key), (op.call_id, stamp))
        return held[0] == op.call_id

    def _release_effect_key(self, op: ReleaseEffectKey, _extra: None) -> bool:
        held_by = self._effect_keys.get((op.namespace, op.key))
        if held_by is None or held_by[0] != op.call_id:
            return False
        del self._effect_keys[(op.namespace, op.key)]
        return True

    def _append(self, op: AppendEvents, _extra: None) -> bool:
        run = self._runs.get(op.run_id)
        if run is None:
            raise NotFoundError(message=f"no run {op.run_id}", details={"run_id": op.run_id})
        if run.event_count != op.expected_count:
            return False
        if op.rows:
            self._events.setdefault(op.run_id, []).extend(op.rows)
            self._runs[op.run_id] = _replace_run(
                run, event_count=op.expected_count + len(op.rows), head_hash=op.rows[-1].hash
            )
        return True

    # -- operation journal -------------------------------------------------------------

    def operation_read(self, namespace: str, call_id: str) -> dict[str, Any] | None:
        """Return the call's operation-journal entry or ``None``."""
        with self._lock:
            self._check_open()
            text = self._ops.get((namespace, call_id))
        return None if text is None else dict(json.loads(text))

    # -- runs and events ---------------------------------------------------------------

    def create_run(self, run: RunRow, *, durable: bool = False) -> None:
        """Store a new run."""
        with self._lock:
            self._check_open()
            if run.run_id in self._runs:
                raise InvalidArgumentError(
                    message=f"run {run.run_id} exists already", details={"run_id": run.run_id}
                )
            self._runs[run.run_id] = run

    def get_run(self, run_id: str) -> RunRow | None:
        """Return the run or ``None``."""
        with self._lock:
            self._check_open()
            return self._runs.get(run_id)

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        ended_at: str | None = None,
        data: str | None = None,
        durable: bool = False,
    ) -> None:
        """Update a run's status, end time or document."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None:
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})
            changes = run_changes(status=status, ended_at=ended_at, data=data)
            self._runs[run_id] = _replace_run(run, **changes)

    def list_runs(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[RunRow]:
        """Return runs, newest first."""
        with self._lock:
            runs = [r for r in self._runs.values() if namespace in (None, r.namespace)]
        runs.sort(key=lambda r: r.run_id)
        runs.sort(key=lambda r: r.started_at, reverse=True)
        return runs if limit is None else runs[:limit]

    def read_events(
        self, run_id: str, *, after_seq: int = -1, limit: int | None = None
    ) -> builtins.list[EventRow]:
        """Return the run's events after ``after_seq`` in order."""
        with self._lock:
            self._check_open()
            rows = [r for r in self._events.get(run_id, []) if r.seq > after_seq]
        return rows if limit is None else rows[:limit]

    # -- search ------------------------------------------------------------------------

    def search_events(self, query: EventQuery) -> builtins.list[tuple[EventRow, ...]]:
        """Return the records of matching events, newest first; see ``Store.search_events``."""
        with self._lock:
            self._check_open()
            runs = dict(self._runs)
            events = {k: builtins.list(v) for k, v in self._events.items()}

        def select(q: EventQuery) -> builtins.list[tuple[str, str]]:
            return select_in_memory(q, runs, events)

        grouped: dict[tuple[str, str], builtins.list[EventRow]] = {}
        for run_rows in events.values():
            for r in run_rows:
                grouped.setdefault((r.run_id, r.event_id), []).append(r)

        def records(run_id: str, event_id: str) -> tuple[EventRow, ...]:
            return tuple(grouped.get((run_id, event_id), ()))

        def goal(run_id: str) -> builtins.list[str]:
            run = runs.get(run_id)
            return [] if run is None else run_goal(run.data).split()

        if query.terms:
            return scan_search(query, select=select, records=records, goal=goal)
        return [records(run_id, event_id) for run_id, event_id in select(query)]

    # -- retention and copying (tombstones) --------------------------------------------

    def erase_checkpoint(self, tombstone: Tombstone, *, expected_revision: int) -> bool:
        """Replace the checkpoint by ``tombstone`` iff at ``expected_revision``."""
        key = tombstone.key
        text = dump_tombstone(tombstone)
        with self._lock:
            self._check_open()
            if key in self._tombstones:
                raise InvalidArgumentError(
                    message=f"{key[0]}/{key[1]} has a tombstone already",
                    details={"namespace": key[0], "call_id": key[1]},
                )
            stored = self.rows.get(key)
            if stored is None or json.loads(stored).get("revision") != expected_revision:
                return False
            del self.rows[key]
            self._history.pop(key, None)
            self._ops.pop(key, None)
            self._tombstones[key] = text
            return True

    def add_tombstone(self, tombstone: Tombstone) -> bool:
        """Store a tombstone unless one exists."""
        key = tombstone.key
        text = dump_tombstone(tombstone)
        with self._lock:
            self._check_open()
            if key in self.rows:
                raise InvalidArgumentError(
                    message=f"a checkpoint holds {key[0]}/{key[1]}",
                    details={"namespace": key[0], "call_id": key[1]},
                )
            if key in self._tombstones:
                return False
            self._tombstones[key] = text
            return True

    def tombstone(self, namespace: str, call_id: str) -> Tombstone | None:
        """Return the key's tombstone or ``None``."""
        with self._lock:
            self._check_open()
            text = self._tombstones.get((namespace, call_id))
        return None if text is None else load_tombstone(text, namespace, call_id)

    def list_tombstones(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[Tombstone]:
        """Return tombstones ordered by key."""
        with self._lock:
            items = sorted(self._tombstones.items())
        out = [load_tombstone(t, *k) for k, t in items if namespace in (None, k[0])]
        return out if limit is None else out[:limit]

    def list_operations(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[OperationRow]:
        """Return operation-journal entries ordered by key."""
        with self._lock:
            items = sorted(self._ops.items())
            times = dict(self._op_times)
        out = [
            OperationRow(namespace=k[0], call_id=k[1], data=d, written_at=times.get(k, ""))
            for k, d in items
            if namespace in (None, k[0])
        ]
        return out if limit is None else out[:limit]

    def rewrite_event_data(self, run_id: str, data: Mapping[int, str]) -> int:
        """Replace the data of the run's events ``{seq: data}`` (all or nothing)."""
        import dataclasses

        with self._lock:
            self._check_open()
            if run_id not in self._runs:
                raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})
            rows = builtins.list(self._events.get(run_id, []))
            by_seq = {r.seq: i for i, r in enumerate(rows)}
            for seq, text in data.items():
                if seq not in by_seq:
                    raise NotFoundError(
                        message=f"run {run_id} has no event {seq}",
                        details={"run_id": run_id, "seq": seq},
                    )
                rows[by_seq[seq]] = dataclasses.replace(rows[by_seq[seq]], data=text)
            self._events[run_id] = rows
            return len(data)

    # -- effect keys -------------------------------------------------------------------

    def effect_key_holder(self, namespace: str, key: str) -> str | None:
        """Return the call id holding the effect key, or ``None``."""
        with self._lock:
            self._check_open()
            held = self._effect_keys.get((namespace, key))
        return None if held is None else held[0]

    def list_effect_keys(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[EffectKeyRow]:
        """Return stored effect keys ordered by ``(namespace, key)``."""
        with self._lock:
            self._check_open()
            items = sorted(self._effect_keys.items())
        out = [
            EffectKeyRow(namespace=ns, key=key, call_id=cid, claimed_at=at)
            for (ns, key), (cid, at) in items
            if namespace in (None, ns)
        ]
        return out if limit is None else out[:limit]

    # -- approvals ---------------------------------------------------------------------

    def approval_get(self, namespace: str, call_id: str) -> ApprovalRecord | None:
        """Return the call's approval or ``None``."""
        with self._lock:
            self._check_open()
            text = self._approvals.get((namespace, call_id))
        return None if text is None else load_approval(text, namespace, call_id)

    def approval_put(self, record: ApprovalRecord, *, expected_revision: int) -> bool:
        """Store ``record`` iff the stored approval is at ``expected_revision``."""
        text = prepare_put(record, expected_revision)
        with self._lock:
            self._check_open()
            stored = self._approvals.get(record.key)
            if expected_revision == -1:
                if stored is not None:
                    return False
            else:
                old = None if stored is None else load_approval(stored, *record.key)
                if old is None or old.revision != expected_revision:
                    return False
                self._by_action[_action_key(old)].discard(old.call_id)
            self._approvals[record.key] = text
            self._by_action.setdefault(_action_key(record), set()).add(record.call_id)
            return True

    def find_denial(self, binding: Binding, conversation: str) -> ApprovalRecord | None:
        """Return the latest denial of ``binding``'s action in ``conversation`` under
        another call id (one index look-up); see ``Capabilities.denials_by_action``."""
        ns = binding.namespace
        with self._lock:
            self._check_open()
            ids = self._by_action.get((ns, action_digest(binding), conversation), set())
            texts = [(cid, self._approvals[(ns, cid)]) for cid in ids if cid != binding.call_id]
        found = [load_approval(text, ns, cid) for cid, text in texts]
        found.sort(key=lambda r: (r.requested_at, r.key))
        return latest_denial(found, binding, conversation)

    def list_approvals(
        self,
        *,
        status: str | Iterable[str] | None = None,
        namespace: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[ApprovalRecord]:
        """Return approvals, oldest request first."""
        statuses = approval_statuses(status)
        with self._lock:
            self._check_open()
            items = builtins.list(self._approvals.items())
        out = [load_approval(text, ns, cid) for (ns, cid), text in items]
        out = [
            r
            for r in out
            if (statuses is None or r.status.value in statuses)
            and (namespace is None or r.binding.namespace == namespace)
        ]
        out.sort(key=lambda r: (r.requested_at, r.key))
        return out if limit is None else out[:limit]


def _replace_run(run: RunRow, **changes: Any) -> RunRow:
    import dataclasses

    return dataclasses.replace(run, **changes)


def _action_key(record: ApprovalRecord) -> tuple[str, str, str | None]:
    return (record.binding.namespace, action_digest(record.binding), record.conversation_id)


#: The in-memory op table: ``apply`` runs ``_HANDLERS[type(op)](store, op, prepared)``.
_HANDLERS: dict[type[Any], Callable[[MemoryStore, Any, Any], Any]] = op_table(
    "memory",
    {
        CreateCheckpoint: MemoryStore._create,
        SwapCheckpoint: MemoryStore._swap,
        WriteOperation: MemoryStore._write_operation,
        RemoveOperation: MemoryStore._remove_operation,
        ClaimEffectKey: MemoryStore._claim_effect_key,
        ReleaseEffectKey: MemoryStore._release_effect_key,
        AppendEvents: MemoryStore._append,
    },
)
