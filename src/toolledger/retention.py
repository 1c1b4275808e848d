"""Retention: erase old content, keep tombstones, never reopen re-execution.

Rules:

- Only terminal checkpoints are erased: ``delivered`` ones, and ``completed`` ones (result
  stored, never delivered) only with ``include_undelivered=True``. ``ready``,
  ``executing``, ``uncertain`` and ``delivering`` records are never touched: they are work
  in progress or the reconcile queue.
- A record is old when its last transition (``updated_at``) is before the cutoff.
- Erasing a checkpoint deletes its record, its transition history and its
  operation-journal entry and stores a ``Tombstone`` (binding, status, revision,
  timestamps, transition names, SHA-256 of the erased result, record and entry) in one
  transaction, guarded by the record's revision: a record that moved meanwhile is skipped.
  The key can never be created again (``TOMBSTONED``), so a replayed call is refused, not
  re-run.
- Journal content: every run that *ended* before the cutoff (in the namespace, if given)
  has each record's content removed by ``toolledger.journal.erase_content``, which keeps
  every hash input, so ``toolledger.verify`` still passes. A run's records are erased in
  one transaction, whole: ``verify`` reports a partial, selective or future-dated erasure
  (or an erased goal) as tampering. Runs still going (no ``ended_at``) are never touched.
  The run's own row (goal, status, head hash) is kept.
- Running gc twice erases nothing twice (records already erased are left as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .approvals import scrub_approval
from .checkpoint import compact_json
from .checkpoint.model import AGE_UNITS, Status, check_time, format_time, parse_age, parse_time
from .errors import CheckpointError, InvalidArgumentError
from .store import Store, StoreLike, build_tombstone, dump_record, using_store

__all__ = ["GcReport", "gc", "parse_age"]

_BATCH = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class GcReport:
    """What one ``gc`` pass did (counts), and the cutoff it used."""

    cutoff: datetime
    namespace: str | None
    checkpoints_erased: int = 0
    history_rows_erased: int = 0
    operation_entries_erased: int = 0
    checkpoints_skipped: int = 0
    runs_erased: int = 0
    events_erased: int = 0
    events_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form."""
        return {
            "cutoff": format_time(self.cutoff),
            "namespace": self.namespace,
            "checkpoints_erased": self.checkpoints_erased,
            "history_rows_erased": self.history_rows_erased,
            "operation_entries_erased": self.operation_entries_erased,
            "checkpoints_skipped": self.checkpoints_skipped,
            "runs_erased": self.runs_erased,
            "events_erased": self.events_erased,
            "events_skipped": self.events_skipped,
        }


def gc(
    db: StoreLike | None,
    *,
    older_than: timedelta | datetime | str,
    namespace: str | None = None,
    include_undelivered: bool = False,
    now: datetime | None = None,
    reason: str | None = None,
) -> GcReport:
    """Erase the content of terminal checkpoints and ended runs older than a cutoff.

    Args:
        db: A ``Store``, a path, a ``sqlite:///`` URL or a ``postgresql://`` DSN.
        older_than: An age (``timedelta`` or ``"30d"``: the cutoff is ``now - age``) or an
            aware ``datetime`` (the cutoff itself).
        namespace: Only this namespace (checkpoints and runs).
        include_undelivered: Also erase ``completed`` records whose result was never
            delivered (they could otherwise still be delivered).
        now: The clock (default: the current UTC time); also the tombstones' ``erased_at``.
        reason: Stored in each tombstone and erased record (default names the age).

    Returns:
        A ``GcReport`` with counts.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad age, time or namespace.
        StoreError: ``STORE_BUSY`` / ``STORE_UNAVAILABLE``; what was erased stays erased.
    """
    at = check_time(now, "now") if now is not None else datetime.now(timezone.utc)
    if isinstance(older_than, str):
        older_than = parse_age(older_than)
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise InvalidArgumentError(message="older_than must not be negative")
        try:
            cutoff = at - older_than
        except OverflowError:  # before year 1: nothing can be that old
            cutoff = datetime.min.replace(tzinfo=timezone.utc)
        why = reason or f"retention: terminal for longer than {_human(older_than)}"
    elif isinstance(older_than, datetime):
        cutoff = check_time(older_than, "older_than")
        why = reason or f"retention: terminal before {format_time(cutoff)}"
    else:
        raise InvalidArgumentError(message="older_than must be a timedelta, datetime or age")
    if namespace is not None and not isinstance(namespace, str):
        raise InvalidArgumentError(message="namespace must be a str")
    statuses = [Status.DELIVERED] + ([Status.COMPLETED] if include_undelivered else [])
    with using_store(db) as store:
        counts = _erase_checkpoints(store, statuses, namespace, cutoff, at, why)
        runs, events, skipped = _erase_journal(store, namespace, cutoff, at, why)
    return GcReport(
        cutoff=cutoff,
        namespace=namespace,
        checkpoints_erased=counts[0],
        history_rows_erased=counts[1],
        operation_entries_erased=counts[2],
        checkpoints_skipped=counts[3],
        runs_erased=runs,
        events_erased=events,
        events_skipped=skipped,
    )


def _erase_checkpoints(
    store: Store,
    statuses: list[Status],
    namespace: str | None,
    cutoff: datetime,
    at: datetime,
    reason: str,
) -> tuple[int, int, int, int]:
    erased = history_rows = operations = 0
    skipped: set[tuple[str, str]] = set()
    while True:
        batch = [
            r
            for r in store.list(
                status=statuses,
                namespace=namespace,
                updated_before=cutoff,
                limit=_BATCH + len(skipped),
            )
            if r.key not in skipped
        ]
        if not batch:
            break
        for rec in batch:
            ns, cid = rec.key
            history = store.history(ns, cid)
            entry = store.operation_read(ns, cid)
            tomb = build_tombstone(
                rec,
                stored_json=dump_record(rec),
                transitions=[h.transition for h in history],
                operation_json=None if entry is None else compact_json(entry),
                erased_at=at,
                reason=reason,
            )
            if store.erase_checkpoint(tomb, expected_revision=rec.revision):
                scrub_approval(store, ns, cid)  # the approval's copy of the input goes too
                erased += 1
                history_rows += len(history)
                operations += entry is not None
            else:  # it moved since we read it: leave it to the next pass
                skipped.add(rec.key)
    return erased, history_rows, operations, len(skipped)


def _erase_journal(
    store: Store, namespace: str | None, cutoff: datetime, at: datetime, reason: str
) -> tuple[int, int, int]:
    from .journal import erase_content

    stamp = format_time(at)
    runs = events = skipped = 0
    for run in store.list_runs(namespace=namespace):
        if run.ended_at is None or _time(run.ended_at) >= cutoff:
            continue
        if _already_erased(store, run.run_id, run.event_count, stamp, reason):
            continue  # erased in order, so an erased last record means a done run
        rewritten = 0
        after = -1
        changes: dict[int, str] = {}
        while True:
            rows = store.read_events(run.run_id, after_seq=after, limit=_BATCH)
            for row in rows:
                try:
                    text = erase_content(row.data, at=stamp, reason=reason)
                except CheckpointError:
                    skipped += 1  # not a journal record: nothing we know how to erase
                    continue
                if text != row.data:
                    changes[row.seq] = text
            if len(rows) < _BATCH:
                break
            after = rows[-1].seq
        if changes:  # the whole run in one transaction: verify accepts only whole erasures
            rewritten = store.rewrite_event_data(run.run_id, changes)
        runs += rewritten > 0
        events += rewritten
    return runs, events, skipped


def _already_erased(store: Store, run_id: str, count: int, stamp: str, reason: str) -> bool:
    from .journal import erase_content

    last = store.read_events(run_id, after_seq=count - 2, limit=1) if count else []
    if not last:
        return count == 0
    try:
        return erase_content(last[0].data, at=stamp, reason=reason) == last[0].data
    except CheckpointError:
        return False


def _time(text: str) -> datetime:
    try:
        return parse_time(text, "ended_at")
    except ValueError:
        return datetime.max.replace(tzinfo=timezone.utc)  # unreadable: never erase


def _human(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in AGE_UNITS.items():
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
