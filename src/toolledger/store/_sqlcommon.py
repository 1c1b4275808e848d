"""Rows to records and one-op shortcuts, shared by ``SQLiteStore``, ``PostgresStore`` and
``MemoryStore``.

Rules this module keeps: no SQL and no I/O. Each backend selects its rows in its own
dialect (placeholders, ``LIMIT``, schema qualification stay where they are); what it
then does with the selected rows is the same everywhere and lives here:

- checkpoint rows ``(namespace, call_id, stored text)`` become records, invalid ones
  skipped (``valid_records``) or reported untouched (``quarantined_rows``);
- history rows ``(transition, action, stored text)`` become ``HistoryEntry`` values, each
  validated like a live record (an invalid one raises ``INVALID_CHECKPOINT``);
- run and event rows are read by column position (``RUN_COLUMNS``, ``EVENT_COLUMNS``
  order) and written back in the same order (``event_params``);
- the ``Store`` methods that are one op through ``apply`` (``create_if_absent``,
  ``compare_and_swap``, ``operation_write``, ``operation_remove``, ``append_events``) are
  written once, in ``ApplyShortcuts``, so their semantics are ``apply``'s by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any, Protocol

from ..checkpoint.model import Action, CheckpointRecord
from ..errors import CheckpointError, StoreUnavailableError
from ._rows import load_record, now_text
from .base import (
    EVENT_FIELDS,
    AppendEvents,
    CreateCheckpoint,
    EventRow,
    HistoryEntry,
    Op,
    QuarantinedRow,
    RemoveOperation,
    RunRow,
    SwapCheckpoint,
    WriteOperation,
    event_row_of,
)

__all__ = [
    "now_text",
    "EVENT_COLUMNS",
    "RECORD_FIELDS",
    "RUN_COLUMNS",
    "ApplyShortcuts",
    "event_params",
    "event_row",
    "history_entries",
    "quarantined_rows",
    "record_fields",
    "run_changes",
    "run_row",
    "valid_records",
]

#: Column order of the ``runs`` table as every backend selects it (``run_row``).
RUN_COLUMNS = (
    "run_id, namespace, agent, goal, status, started_at, ended_at, head_hash, event_count, data"
)
#: Column order of the ``events`` table as every backend selects and inserts it.
EVENT_COLUMNS = ", ".join(EVENT_FIELDS)
#: What readers of a whole run take of each record (``read_event_fields``), in this order:
#: its row less ``run_id`` (the run asked for) and ``prev_hash`` (``verify`` reads rows).
RECORD_FIELDS = ("seq", "event_id", "parent_id", "kind", "name", "status", "at", "hash", "data")


def record_fields(rows: list[Any], run_id: str) -> list[Any]:
    """Return rows selected in ``RECORD_FIELDS`` order with each ``seq`` an int.

    Raises:
        StoreUnavailableError: a ``seq`` that is not an integer (a damaged file), as
            ``event_row`` does.
    """
    for r in rows:
        if type(r[0]) is not int:
            break
    else:
        return rows
    return [r if type(r[0]) is int else (_event_seq((run_id, r[0])), *r[1:]) for r in rows]


def valid_records(rows: Iterable[Sequence[Any]]) -> list[CheckpointRecord]:
    """Return the records of ``(namespace, call_id, text)`` rows, in order, invalid ones skipped."""
    out = []
    for ns, cid, text in rows:
        try:
            out.append(load_record(text, ns, cid))
        except CheckpointError:
            continue
    return out


def quarantined_rows(rows: Iterable[Sequence[Any]], limit: int | None) -> list[QuarantinedRow]:
    """Return the ``(namespace, call_id, text)`` rows that fail validation, at most ``limit``."""
    out: list[QuarantinedRow] = []
    for ns, cid, text in rows:
        try:
            load_record(text, ns, cid)
        except CheckpointError as exc:
            out.append(QuarantinedRow(namespace=ns, call_id=cid, reason=exc.message))
            if limit is not None and len(out) >= limit:
                break
    return out


def history_entries(
    namespace: str, call_id: str, rows: Iterable[Sequence[Any]]
) -> list[HistoryEntry]:
    """Return the key's ``(transition, action, text)`` history rows as entries, in order.

    Raises:
        InvalidCheckpointError: ``INVALID_CHECKPOINT`` for a stored record that fails
            validation.
    """
    out = []
    for transition, action, text in rows:
        rec = load_record(text, namespace, call_id)
        out.append(
            HistoryEntry(
                revision=rec.revision,
                status=rec.status,
                transition=str(transition),
                action=Action(action),
                at=rec.updated_at,
                record=rec,
            )
        )
    return out


def run_row(r: Sequence[Any]) -> RunRow:
    """Return the ``RunRow`` of a row selected in ``RUN_COLUMNS`` order."""
    return RunRow(
        run_id=r[0],
        namespace=r[1],
        agent=r[2],
        goal=r[3],
        status=r[4],
        started_at=r[5],
        ended_at=r[6],
        head_hash=r[7],
        event_count=_count(r[8]),
        data=r[9],
    )


def _count(value: Any) -> int:
    """A stored event count; ``-1`` when the column holds no integer (a damaged row, which
    ``verify`` names) so one bad row never breaks a listing."""
    if type(value) is int:
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1


def event_row(r: Sequence[Any]) -> EventRow:
    """Return the ``EventRow`` of a row selected in ``EVENT_COLUMNS`` order."""
    run_id, seq, event_id, parent_id, kind, name, status, at, prev_hash, hash_, data = r
    if type(seq) is not int:
        seq = _event_seq(r)
    return event_row_of(
        run_id, seq, event_id, parent_id, kind, name, status, at, prev_hash, hash_, data
    )


def _event_seq(r: Sequence[Any]) -> int:
    """An event row's ``seq``; a damaged file's non-integer one is a typed error (readers
    page by ``seq``, so no stand-in value is safe)."""
    if type(r[1]) is int:
        return r[1]
    try:
        return int(r[1])
    except (TypeError, ValueError, OverflowError) as exc:
        raise StoreUnavailableError(
            message=f"a stored event row of run {str(r[0])[:80]!r} is damaged: its seq "
            f"{r[1]!r:.40} is not an integer",
            details={"run_id": str(r[0])[:200], "reason": "damaged event row"},
        ) from exc


#: The insert parameters of an event row, in ``EVENT_COLUMNS`` order (a C getter: no
#: Python frame per row).
event_params: Callable[[EventRow], tuple[Any, ...]] = attrgetter(*EVENT_FIELDS)


def run_changes(*, status: str | None, ended_at: str | None, data: str | None) -> dict[str, str]:
    """Return the run columns an ``update_run`` sets (``None`` leaves a column unchanged)."""
    return {
        k: v
        for k, v in (("status", status), ("ended_at", ended_at), ("data", data))
        if v is not None
    }


class _Applies(Protocol):
    def apply(self, ops: Sequence[Op], *, durable: bool = True) -> list[Any]: ...


class ApplyShortcuts:
    """The ``Store`` methods that are one op through the store's own ``apply``."""

    __slots__ = ()

    def create_if_absent(
        self: _Applies, record: CheckpointRecord, *, durable: bool = True
    ) -> tuple[bool, CheckpointRecord]:
        """Store ``record`` unless its key exists; see ``Store.create_if_absent``."""
        result: tuple[bool, CheckpointRecord] = self.apply(
            [CreateCheckpoint(record)], durable=durable
        )[0]
        return result

    def compare_and_swap(
        self: _Applies, expected_revision: int, next: CheckpointRecord, *, durable: bool = True
    ) -> bool:
        """Swap iff the stored revision is ``expected_revision``; see ``Store``."""
        return bool(self.apply([SwapCheckpoint(expected_revision, next)], durable=durable)[0])

    def operation_write(
        self: _Applies,
        namespace: str,
        call_id: str,
        data: Mapping[str, Any],
        *,
        durable: bool = True,
    ) -> None:
        """Set the call's operation-journal entry."""
        self.apply([WriteOperation(namespace, call_id, data)], durable=durable)

    def operation_remove(
        self: _Applies, namespace: str, call_id: str, *, durable: bool = True
    ) -> bool:
        """Remove the call's entry; return whether one existed."""
        return bool(self.apply([RemoveOperation(namespace, call_id)], durable=durable)[0])

    def append_events(
        self: _Applies,
        run_id: str,
        rows: Sequence[EventRow],
        *,
        expected_count: int,
        durable: bool = False,
    ) -> bool:
        """Append iff the run holds ``expected_count`` events; see ``Store``."""
        op = AppendEvents(run_id, tuple(rows), expected_count)
        return bool(self.apply([op], durable=durable)[0])
