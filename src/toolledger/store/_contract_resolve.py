"""The store contract for a person's decisions (``resolve_*``): labelled and kept apart.

Each check takes a fresh, empty store; ``contract.CHECKS`` includes them. A decision rule
may share an edge with a machine rule (``executing → ready`` is ``release_execution`` and
``resolve_not_executed``): every backend labels the history row by whether the new record
carries a ``resolution``, keeps that resolution on its own revision only, and refuses a
decision edge taken without one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from ..checkpoint import (
    Binding,
    Status,
    claim_delivery,
    claim_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
    release_execution,
    resolve_completed,
    resolve_not_executed,
)
from ..checkpoint.model import CheckpointRecord, replaced_record
from ..errors import CheckpointError
from .base import RemoveOperation, Store, SwapCheckpoint

__all__ = ["RESOLVE_CHECKS"]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _executing(store: Store, call_id: str) -> CheckpointRecord:
    b = Binding("ns", call_id, "pay", "1", fingerprint({"amount": 5}))
    rec = create_checkpoint(b, at=_t(0))
    store.create_if_absent(rec)
    claim = claim_execution(rec, attempt_id="a1", at=_t(1)).next
    assert store.compare_and_swap(0, claim)
    return claim


def check_resolve_not_executed_is_labelled_and_not_inherited(store: Store) -> None:
    rec = _executing(store, "r-1")
    unk = mark_execution_uncertain(rec, attempt_id="a1", at=_t(2), reason="lost").next
    assert store.compare_and_swap(1, unk)
    t = resolve_not_executed(unk, at=_t(3), by="ana", reason="the bank shows no payment")
    assert store.compare_and_swap(t.expected_revision, t.next)
    got = store.get("ns", "r-1")
    assert got == t.next
    assert got.resolution is not None
    assert got.resolution.by == "ana"
    assert got.resolution.outcome == "not_executed"
    again = claim_execution(got, attempt_id="a2", at=_t(4)).next
    assert again.resolution is None
    assert store.compare_and_swap(3, again)
    history = store.history("ns", "r-1")
    assert [h.transition for h in history] == [
        "create_checkpoint",
        "claim_execution",
        "mark_execution_uncertain",
        "resolve_not_executed",
        "claim_execution",
    ]
    assert history[3].record == t.next
    assert history[3].record.resolution == t.next.resolution
    assert [h.record.resolution is None for h in history] == [True, True, True, False, True]
    assert history[4].record == again


def check_resolve_on_a_machine_edge_is_labelled_as_the_decision(store: Store) -> None:
    rec = _executing(store, "r-2")
    # executing -> ready is release_execution too: the resolution tells them apart.
    t = resolve_not_executed(rec, at=_t(2), by="ana", reason="no process runs it", force=True)
    assert t.next.resolution is not None
    assert t.next.resolution.forced
    assert store.compare_and_swap(1, t.next)
    rec2 = _executing(store, "r-3")
    done = resolve_completed(
        rec2, at=_t(2), by="ana", reason="seen at the bank", result={"id": 7}, force=True
    )
    assert store.compare_and_swap(1, done.next)
    d = claim_delivery(done.next, delivery_id="d1", at=_t(3)).next
    assert store.compare_and_swap(2, d)
    labels = [h.transition for h in store.history("ns", "r-2")]
    assert labels[-1] == "resolve_not_executed"
    history = store.history("ns", "r-3")
    assert [h.transition for h in history][-2:] == ["resolve_completed", "claim_delivery"]
    assert history[-2].record.resolution == done.next.resolution
    assert history[-1].record.resolution is None
    assert history[-1].record.result == done.next.result


def check_decision_edge_without_resolution_is_refused(store: Store) -> None:
    rec = _executing(store, "r-4")
    unk = mark_execution_uncertain(rec, attempt_id="a1", at=_t(2), reason="lost").next
    assert store.compare_and_swap(1, unk)
    # uncertain -> ready exists only as a decision: without a resolution it is no move.
    bare = replaced_record(
        release_execution(rec, attempt_id="a1", at=_t(3), evidence="journal-empty").next,
        {"revision": 3},
    )
    try:
        store.compare_and_swap(2, bare)
    except CheckpointError as exc:
        assert exc.code == "INVALID_TRANSITION", exc.code
    else:
        raise AssertionError("uncertain -> ready without a resolution must be refused")
    got = store.get("ns", "r-4")
    assert got is not None
    assert got.status is Status.UNCERTAIN
    assert got.revision == 2


def check_operation_removal_gated_on_a_lost_swap_keeps_the_entry(store: Store) -> None:
    rec = _executing(store, "r-5")
    store.operation_write("ns", "r-5", {"order": "o"})
    stale = resolve_not_executed(rec, at=_t(2), by="ana", reason="r", force=True)
    moved = mark_execution_uncertain(rec, attempt_id="a1", at=_t(2), reason="lost").next
    assert store.compare_and_swap(1, moved)
    out = store.apply([SwapCheckpoint(1, stale.next), RemoveOperation("ns", "r-5", requires=0)])
    assert out == [False, False]
    assert store.operation_read("ns", "r-5") == {"order": "o"}
    won = resolve_not_executed(moved, at=_t(3), by="ana", reason="r")
    out = store.apply([SwapCheckpoint(2, won.next), RemoveOperation("ns", "r-5", requires=0)])
    assert out == [True, True]
    assert store.operation_read("ns", "r-5") is None


RESOLVE_CHECKS: list[Callable[[Store], None]] = [
    value for name, value in sorted(globals().items()) if name.startswith("check_")
]
