"""Copy a whole ledger from one store to another, then verify the copy.

Rules:

- Everything moves: checkpoints with their full transition history, operation-journal
  entries, runs, journal events (byte for byte, so hash chains and ``verify`` carry over),
  tombstones, approval records (with their revisions) and effect keys (their holders;
  ``claimed_at`` is the copy's own time, as an entry's ``written_at`` is). Only the public ``Store``
  protocol is used, so any two backends work (SQLite to PostgreSQL and back).
- A checkpoint's history is replayed as its create and compare-and-swap chain in one
  transaction per batch of keys; the destination labels each history row itself, and the
  verification compares them with the source's.
- The destination must be empty: copying never merges into a live ledger. Stop writers on
  the source first; a source that changes during the copy shows up as a failed check.
- Verification reads both stores back: counts of every kind, every record and history
  equal, every run row equal (head hash and event count included), every event row equal,
  every tombstone, entry and approval equal. Rows the source holds but cannot parse
  (``quarantined()``) cannot move and are reported as problems.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .approvals import copy_approvals
from .errors import InvalidArgumentError
from .store import Store, StoreLike, using_store
from .store.base import (
    ClaimEffectKey,
    CreateCheckpoint,
    EventRow,
    Op,
    SwapCheckpoint,
    WriteOperation,
)

__all__ = ["CopyReport", "copy_ledger"]

_BATCH = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyReport:
    """What ``copy_ledger`` moved, and every verification problem (empty when ``ok``)."""

    checkpoints: int = 0
    history_rows: int = 0
    operations: int = 0
    runs: int = 0
    events: int = 0
    tombstones: int = 0
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the copy was verified equal to the source."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form."""
        return {
            "checkpoints": self.checkpoints,
            "history_rows": self.history_rows,
            "operations": self.operations,
            "runs": self.runs,
            "events": self.events,
            "tombstones": self.tombstones,
            "ok": self.ok,
            "problems": list(self.problems),
        }


def copy_ledger(src: StoreLike | None, dst: StoreLike | None) -> CopyReport:
    """Copy everything in ``src`` into the empty ``dst`` and verify the result.

    Args:
        src: The source: a ``Store``, path, ``sqlite:///`` URL or ``postgresql://`` DSN.
        dst: The destination, likewise; it must hold nothing yet.

    Returns:
        A ``CopyReport`` with counts; ``report.ok`` is ``False`` and ``report.problems``
        names each difference when verification fails.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the destination is not empty, or
            the source is not a toolledger database.
        NotFoundError: ``NOT_FOUND`` when the source does not exist (it is opened
            read-only: nothing is created or migrated there).
        StoreError: ``STORE_BUSY`` / ``STORE_UNAVAILABLE`` from either store.
    """
    with (
        using_store(src, readonly=True) as source,  # a missing source is NOT_FOUND
        using_store(dst, readonly=False) as target,
    ):
        _require_empty(target)
        counts = _copy(source, target)
        problems = _verify(source, target)
    return CopyReport(**counts, problems=tuple(problems))


def _require_empty(store: Store) -> None:
    if (
        store.list(limit=1)
        or store.quarantined(limit=1)
        or store.list_runs(limit=1)
        or store.list_tombstones(limit=1)
        or store.list_operations(limit=1)
        or store.list_approvals(limit=1)
        or store.list_effect_keys(limit=1)
    ):
        raise InvalidArgumentError(
            message="the destination already holds a ledger; copy only into an empty store",
            details={"argument": "dst"},
        )


def _copy(src: Store, dst: Store) -> dict[str, int]:
    checkpoints = history_rows = 0
    ops: list[Op] = []
    for rec in src.list():
        history = src.history(*rec.key)
        if not history:
            continue  # reported by _verify
        ops.append(CreateCheckpoint(history[0].record))
        ops.extend(SwapCheckpoint(h.revision - 1, h.record) for h in history[1:])
        checkpoints += 1
        history_rows += len(history)
        if len(ops) >= _BATCH:
            dst.apply(ops)
            ops = []
    entries = src.list_operations()
    ops.extend(WriteOperation(e.namespace, e.call_id, json.loads(e.data)) for e in entries)
    ops.extend(ClaimEffectKey(k.namespace, k.key, k.call_id) for k in src.list_effect_keys())
    if ops:
        dst.apply(ops)
    runs = events = 0
    for run in src.list_runs():
        dst.create_run(dataclasses.replace(run, event_count=0, head_hash=None), durable=True)
        runs += 1
        count = 0
        for batch in _event_batches(src, run.run_id):
            dst.append_events(run.run_id, batch, expected_count=count, durable=True)
            count += len(batch)
        events += count
    tombstones = 0
    for tomb in src.list_tombstones():
        tombstones += dst.add_tombstone(tomb)
    copy_approvals(src, dst)  # approval requests and decisions (toolledger.approvals)
    return {
        "checkpoints": checkpoints,
        "history_rows": history_rows,
        "operations": len(entries),
        "runs": runs,
        "events": events,
        "tombstones": tombstones,
    }


def _event_batches(store: Store, run_id: str) -> Iterator[list[EventRow]]:
    after = -1
    while True:
        rows = store.read_events(run_id, after_seq=after, limit=_BATCH)
        if rows:
            yield rows
        if len(rows) < _BATCH:
            return
        after = rows[-1].seq


def _verify(src: Store, dst: Store) -> list[str]:
    problems = [
        f"checkpoint {q.namespace}/{q.call_id} could not be copied: {q.reason}"
        for q in src.quarantined()
    ]
    a, b = src.list(), dst.list()
    if len(a) != len(b):
        problems.append(f"checkpoints: source has {len(a)}, copy has {len(b)}")
    for rec in a:
        if dst.get(*rec.key) != rec:
            problems.append(f"checkpoint {rec.key[0]}/{rec.key[1]} differs")
        elif dst.history(*rec.key) != src.history(*rec.key):
            problems.append(f"history of {rec.key[0]}/{rec.key[1]} differs")
    if _entries(src) != _entries(dst):  # written_at is the copy's own time
        problems.append("operation-journal entries differ")
    runs_a, runs_b = src.list_runs(), dst.list_runs()
    if runs_a != runs_b:
        problems.append(f"runs differ ({len(runs_a)} in the source, {len(runs_b)} in the copy)")
    for run in runs_a:
        mine = list(_event_batches(src, run.run_id))
        theirs = list(_event_batches(dst, run.run_id))
        if mine != theirs:
            problems.append(f"events of run {run.run_id} differ")
    if src.list_tombstones() != dst.list_tombstones():
        problems.append("tombstones differ")
    if src.list_approvals() != dst.list_approvals():
        problems.append("approvals differ")
    if _holders(src) != _holders(dst):  # claimed_at is the copy's own time
        problems.append("effect keys differ")
    return problems


def _holders(store: Store) -> list[tuple[str, str, str]]:
    return [(k.namespace, k.key, k.call_id) for k in store.list_effect_keys()]


def _entries(store: Store) -> list[tuple[str, str, Any]]:
    return [(e.namespace, e.call_id, json.loads(e.data)) for e in store.list_operations()]
