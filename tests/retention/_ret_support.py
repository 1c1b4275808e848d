"""Retention test helpers: a clock and records in every status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from toolledger import Store
from toolledger.checkpoint import (
    Binding,
    CheckpointRecord,
    Status,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make_record(
    store: Store, call_id: str, status: Status, *, start: float = 0, namespace: str = "ns"
) -> CheckpointRecord:
    """Drive a record to ``status`` with transitions at ``start`` … ``start + 4`` seconds."""
    binding = Binding(namespace, call_id, "send_email", "1", fingerprint({"id": call_id}))
    rec = create_checkpoint(binding, at=at(start))
    store.create_if_absent(rec)
    if status is Status.READY:
        return rec
    t = claim_execution(rec, attempt_id=f"a-{call_id}", at=at(start + 1))
    assert store.compare_and_swap(t.expected_revision, t.next)
    rec = t.next
    if status is Status.EXECUTING:
        return rec
    if status is Status.UNCERTAIN:
        t = mark_execution_uncertain(
            rec, attempt_id=f"a-{call_id}", reason="worker vanished", at=at(start + 2)
        )
        assert store.compare_and_swap(t.expected_revision, t.next)
        return t.next
    t = complete_execution(
        rec, attempt_id=f"a-{call_id}", at=at(start + 2), result={"secret": f"s-{call_id}"}
    )
    assert store.compare_and_swap(t.expected_revision, t.next)
    rec = t.next
    if status is Status.COMPLETED:
        return rec
    t = claim_delivery(rec, delivery_id=f"d-{call_id}", at=at(start + 3))
    assert store.compare_and_swap(t.expected_revision, t.next)
    rec = t.next
    if status is Status.DELIVERING:
        return rec
    t = complete_delivery(rec, delivery_id=f"d-{call_id}", at=at(start + 4))
    assert store.compare_and_swap(t.expected_revision, t.next)
    return t.next
