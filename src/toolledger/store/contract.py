"""The store contract: checks every ``Store`` backend must pass.

Each check takes a fresh, empty store and raises ``AssertionError`` (or a toolledger
error) on failure. The checks are grouped by capability (``CHECK_GROUPS``): ``"core"``
is the ``Store`` protocol every backend keeps, each other group a ``Capabilities`` field
whose checks run on a store that declares it (``checks_for``). ``tests/contract/``
parametrizes these over every backend; ``toolledger.testing.check_store`` runs them for
third-party backends.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial

from ..checkpoint import (
    Binding,
    Status,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
    release_execution,
)
from ..checkpoint.model import CheckpointRecord
from ..errors import CheckpointError
from ._approval_record import ApprovalRecord, ApprovalStatus, latest_denial
from ._contract_resolve import RESOLVE_CHECKS
from ._contract_search import SEARCH_CHECKS
from ._rows import dump_record
from ._tombstone import build_tombstone
from .base import (
    AppendEvents,
    Capabilities,
    ClaimEffectKey,
    CreateCheckpoint,
    EventRow,
    Op,
    ReleaseEffectKey,
    RemoveOperation,
    RunRow,
    Store,
    SwapCheckpoint,
    Tombstone,
    WriteOperation,
    approval_reader,
    capabilities_of,
    denial_finder,
    migrations_of,
    record_fields_of,
)

__all__ = ["CHECKS", "CHECK_GROUPS", "checks_for"]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _binding(call_id: str = "call-1", namespace: str = "ns") -> Binding:
    return Binding(namespace, call_id, "send_email", "1", fingerprint({"to": "a@example.com"}))


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def check_get_missing_returns_none(store: Store) -> None:
    assert store.get("ns", "nope") is None


def check_create_then_get_round_trips(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    created, stored = store.create_if_absent(rec)
    assert created and stored == rec
    assert store.get("ns", "call-1") == rec


def check_create_twice_returns_stored(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    other = create_checkpoint(_binding(), at=_t(5))
    created, stored = store.create_if_absent(other)
    assert not created
    assert stored == rec


def check_cas_wins_once(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    a = claim_execution(rec, attempt_id="a", at=_t(1))
    b = claim_execution(rec, attempt_id="b", at=_t(1))
    assert store.compare_and_swap(a.expected_revision, a.next) is True
    assert store.compare_and_swap(b.expected_revision, b.next) is False
    got = store.get("ns", "call-1")
    assert got is not None and got.execution_fence == "a" and got.revision == 1


def check_cas_on_absent_key_fails(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    assert store.compare_and_swap(0, t.next) is False
    assert store.get("ns", "call-1") is None


def check_cas_rejects_revision_gap(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    try:
        store.compare_and_swap(5, t.next)
    except CheckpointError as exc:
        assert exc.code == "INVALID_ARGUMENT"
    else:
        raise AssertionError("a CAS whose next revision is not expected + 1 must be refused")
    assert store.get("ns", "call-1") == rec


def check_cas_without_transition_is_refused(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    done = complete_execution(t.next, attempt_id="a", at=_t(2), result=1).next
    skip = dataclasses.replace(done, revision=1)  # ready -> completed: no such transition
    try:
        store.compare_and_swap(0, skip)
    except CheckpointError as exc:
        assert exc.code == "INVALID_TRANSITION"
    else:
        raise AssertionError("a CAS that no transition explains must raise INVALID_TRANSITION")
    assert store.get("ns", "call-1") == rec
    assert len(store.history("ns", "call-1")) == 1


def check_full_lifecycle_history(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    steps = []
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    steps.append(t)
    t = complete_execution(t.next, attempt_id="a", at=_t(2), result={"ok": True})
    steps.append(t)
    t = claim_delivery(t.next, delivery_id="d", at=_t(3))
    steps.append(t)
    t = complete_delivery(t.next, delivery_id="d", at=_t(4))
    steps.append(t)
    for s in steps:
        assert store.compare_and_swap(s.expected_revision, s.next)
    hist = store.history("ns", "call-1")
    assert [h.revision for h in hist] == [0, 1, 2, 3, 4]
    assert [h.status for h in hist] == [
        Status.READY,
        Status.EXECUTING,
        Status.COMPLETED,
        Status.DELIVERING,
        Status.DELIVERED,
    ]
    assert [h.transition for h in hist] == [
        "create_checkpoint",
        "claim_execution",
        "complete_execution",
        "claim_delivery",
        "complete_delivery",
    ]
    assert [h.action.value for h in hist] == ["execute", "execute", "deliver", "deliver", "none"]
    assert hist[-1].record == steps[-1].next
    assert store.history("ns", "absent") == []


def check_payload_round_trips_exactly(store: Store) -> None:
    payload = {"z": 1, "a": [None, 1.5, "é\n", {"k": False}], "n": None}
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    store.compare_and_swap(0, t.next)
    t = complete_execution(t.next, attempt_id="a", at=_t(2), result=payload)
    store.compare_and_swap(1, t.next)
    got = store.get("ns", "call-1")
    assert got is not None and got.result is not None
    assert got.result.payload == payload
    assert list(got.result.payload) == ["z", "a", "n"]  # key order kept


def check_null_payload_is_a_result(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    store.compare_and_swap(0, t.next)
    t = complete_execution(t.next, attempt_id="a", at=_t(2), result=None)
    store.compare_and_swap(1, t.next)
    got = store.get("ns", "call-1")
    assert got is not None and got.result is not None and got.result.payload is None


def check_list_filters(store: Store) -> None:
    for i in range(4):
        rec = create_checkpoint(_binding(f"c{i}", namespace="ns" if i < 3 else "other"), at=_t(i))
        store.create_if_absent(rec)
    c1 = store.get("ns", "c1")
    assert c1 is not None
    t = claim_execution(c1, attempt_id="a", at=_t(10))
    store.compare_and_swap(0, t.next)
    assert [r.binding.call_id for r in store.list()] == ["c0", "c2", "c3", "c1"]
    assert [r.binding.call_id for r in store.list(status="executing")] == ["c1"]
    assert [r.binding.call_id for r in store.list(status=[Status.READY], namespace="ns")] == [
        "c0",
        "c2",
    ]
    assert [r.binding.call_id for r in store.list(updated_before=_t(2))] == ["c0"]
    assert len(store.list(limit=2)) == 2


def check_operation_journal(store: Store) -> None:
    assert store.operation_read("ns", "c") is None
    store.operation_write("ns", "c", {"order_id": "o-1"})
    assert store.operation_read("ns", "c") == {"order_id": "o-1"}
    store.operation_write("ns", "c", {"order_id": "o-2"})
    assert store.operation_read("ns", "c") == {"order_id": "o-2"}
    assert store.operation_remove("ns", "c") is True
    assert store.operation_remove("ns", "c") is False
    assert store.operation_read("ns", "c") is None


def check_operation_journal_refuses_bad_values(store: Store) -> None:
    for bad in ({"x": float("nan")}, {"x": b"bytes"}, {"x": "y" * 20_000}):
        try:
            store.operation_write("ns", "c", bad)
        except CheckpointError as exc:
            assert exc.code in ("INVALID_ARGUMENT", "PAYLOAD_LIMIT")
        else:
            raise AssertionError(f"operation_write accepted {bad!r:.40}")
    assert store.operation_read("ns", "c") is None


def check_apply_runs_ops_in_one_batch(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    claim = claim_execution(rec, attempt_id="a", at=_t(0))
    out = store.apply(
        [
            CreateCheckpoint(rec),
            SwapCheckpoint(0, claim.next),
            WriteOperation("ns", "call-1", {"order_id": "o"}),
        ]
    )
    assert out[0] == (True, rec)
    assert out[1] is True
    assert out[2] is None
    got = store.get("ns", "call-1")
    assert got is not None and got.status is Status.EXECUTING
    done = complete_execution(claim.next, attempt_id="a", at=_t(1), result=1)
    out = store.apply([SwapCheckpoint(1, done.next), RemoveOperation("ns", "call-1")])
    assert out == [True, True]
    assert store.operation_read("ns", "call-1") is None


def check_apply_is_all_or_nothing(store: Store) -> None:
    store.create_run(_run("r1"))
    rec = create_checkpoint(_binding(), at=_t(0))
    try:
        store.apply([CreateCheckpoint(rec), AppendEvents("missing-run", (), 0)])
    except CheckpointError as exc:
        assert exc.code == "NOT_FOUND"
    else:
        raise AssertionError("appending to a missing run must fail")
    assert store.get("ns", "call-1") is None


def _run(run_id: str, started: str = "2026-01-01T00:00:00.000000+00:00") -> RunRow:
    return RunRow(
        run_id=run_id,
        namespace="ns",
        agent="bot",
        goal="g",
        status="running",
        started_at=started,
        data='{"goal":"g"}',
    )


def _event(run_id: str, seq: int, prev: str | None) -> EventRow:
    return EventRow(
        run_id=run_id,
        seq=seq,
        event_id=f"e{seq}",
        parent_id=None,
        kind="step",
        name="s",
        status="completed",
        at="2026-01-01T00:00:00.000000+00:00",
        prev_hash=prev,
        hash=f"h{seq}",
        data="{}",
    )


def check_runs_and_events(store: Store) -> None:
    assert store.get_run("r1") is None
    store.create_run(_run("r1"))
    try:
        store.create_run(_run("r1"))
    except CheckpointError as exc:
        assert exc.code == "INVALID_ARGUMENT"
    else:
        raise AssertionError("duplicate run ids must be refused")
    assert store.append_events(
        "r1", [_event("r1", 0, None), _event("r1", 1, "h0")], expected_count=0
    )
    assert not store.append_events("r1", [_event("r1", 1, "h0")], expected_count=1)
    assert store.append_events("r1", [_event("r1", 2, "h1")], expected_count=2)
    run = store.get_run("r1")
    assert run is not None and run.event_count == 3 and run.head_hash == "h2"
    assert [e.seq for e in store.read_events("r1")] == [0, 1, 2]
    assert [e.seq for e in store.read_events("r1", after_seq=0, limit=1)] == [1]
    store.update_run("r1", status="completed", ended_at="2026-01-01T00:00:01.000000+00:00")
    run = store.get_run("r1")
    assert run is not None and run.status == "completed" and run.head_hash == "h2"
    store.create_run(_run("r2", started="2026-01-02T00:00:00.000000+00:00"))
    assert [r.run_id for r in store.list_runs()] == ["r2", "r1"]
    try:
        store.update_run("nope", status="x")
    except CheckpointError as exc:
        assert exc.code == "NOT_FOUND"
    else:
        raise AssertionError("updating a missing run must fail")


def check_threads_race_one_winner(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        t = claim_execution(rec, attempt_id=f"w{i}", at=_t(1))
        barrier.wait()
        if store.compare_and_swap(t.expected_revision, t.next):
            wins.append(f"w{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    got = store.get("ns", "call-1")
    assert got is not None and got.execution_fence == wins[0]
    assert len(store.history("ns", "call-1")) == 2


def _delivered(store: Store, call_id: str = "call-1") -> CheckpointRecord:
    rec = create_checkpoint(_binding(call_id), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    store.compare_and_swap(0, t.next)
    t = complete_execution(t.next, attempt_id="a", at=_t(2), result={"secret": "s3cr3t"})
    store.compare_and_swap(1, t.next)
    t = claim_delivery(t.next, delivery_id="d", at=_t(3))
    store.compare_and_swap(2, t.next)
    t = complete_delivery(t.next, delivery_id="d", at=_t(4))
    assert store.compare_and_swap(3, t.next)
    return t.next


def _tombstone_of(rec: CheckpointRecord, reason: str = "retention: older than 30d") -> Tombstone:
    return build_tombstone(
        rec,
        stored_json=dump_record(rec),
        transitions=["create_checkpoint", "claim_execution"],
        operation_json=None,
        erased_at=_t(100),
        reason=reason,
    )


def check_erase_checkpoint_leaves_tombstone(store: Store) -> None:
    rec = _delivered(store)
    store.operation_write("ns", "call-1", {"order_id": "o-1"})
    tomb = _tombstone_of(rec)
    assert store.erase_checkpoint(tomb, expected_revision=3) is False  # stale revision
    assert store.get("ns", "call-1") == rec
    assert store.tombstone("ns", "call-1") is None
    assert store.erase_checkpoint(tomb, expected_revision=4) is True
    assert store.get("ns", "call-1") is None
    assert store.history("ns", "call-1") == []
    assert store.operation_read("ns", "call-1") is None
    assert store.tombstone("ns", "call-1") == tomb
    assert store.list_tombstones() == [tomb]
    assert store.list_tombstones(namespace="other") == []
    assert store.list() == []
    try:
        store.erase_checkpoint(tomb, expected_revision=4)
    except CheckpointError as exc:
        assert exc.code == "INVALID_ARGUMENT"
    else:
        raise AssertionError("erasing a tombstoned key twice must be refused")


def check_tombstoned_key_cannot_be_created(store: Store) -> None:
    rec = _delivered(store)
    assert store.erase_checkpoint(_tombstone_of(rec), expected_revision=4)
    again = create_checkpoint(_binding(), at=_t(200))
    for attempt in (
        lambda: store.create_if_absent(again),
        lambda: store.apply([CreateCheckpoint(again)]),
    ):
        try:
            attempt()
        except CheckpointError as exc:
            assert exc.code == "TOMBSTONED"
            assert exc.details["call_id"] == "call-1"
            assert exc.details["reason"] == "retention: older than 30d"
            assert "2026-01-01T00:01:40" in exc.message  # says when
        else:
            raise AssertionError("creating a checkpoint under a tombstone must raise TOMBSTONED")
    assert store.get("ns", "call-1") is None
    claim = claim_execution(again, attempt_id="b", at=_t(201))
    assert store.compare_and_swap(0, claim.next) is False
    other = create_checkpoint(_binding("call-2"), at=_t(200))
    assert store.create_if_absent(other) == (True, other)  # other keys are unaffected


def check_add_tombstone(store: Store) -> None:
    rec = create_checkpoint(_binding("call-9"), at=_t(0))
    tomb = _tombstone_of(rec)
    assert store.add_tombstone(tomb) is True
    assert store.add_tombstone(tomb) is False
    assert store.tombstone("ns", "call-9") == tomb
    store.create_if_absent(create_checkpoint(_binding("call-8"), at=_t(0)))
    try:
        store.add_tombstone(_tombstone_of(create_checkpoint(_binding("call-8"), at=_t(0))))
    except CheckpointError as exc:
        assert exc.code == "INVALID_ARGUMENT"
    else:
        raise AssertionError("a tombstone over a live checkpoint must be refused")
    assert store.tombstone("ns", "call-8") is None


def check_list_operations(store: Store) -> None:
    store.operation_write("ns", "b", {"order_id": "o-b"})
    store.operation_write("ns", "a", {"order_id": "o-a"})
    store.operation_write("zz", "a", {"order_id": "o-z"})
    rows = store.list_operations()
    assert [(r.namespace, r.call_id) for r in rows] == [("ns", "a"), ("ns", "b"), ("zz", "a")]
    assert json.loads(rows[0].data) == {"order_id": "o-a"}
    assert rows[0].written_at
    assert [r.call_id for r in store.list_operations(namespace="ns", limit=1)] == ["a"]


def check_rewrite_event_data(store: Store) -> None:
    store.create_run(_run("r1"))
    store.append_events("r1", [_event("r1", 0, None), _event("r1", 1, "h0")], expected_count=0)
    assert store.rewrite_event_data("r1", {1: '{"erased":true}'}) == 1
    events = store.read_events("r1")
    assert [e.data for e in events] == ["{}", '{"erased":true}']
    assert [e.hash for e in events] == ["h0", "h1"]  # the chain is untouched
    for run_id, changes in (("r1", {0: '{"x":1}', 7: "{}"}), ("nope", {0: "{}"})):
        try:
            store.rewrite_event_data(run_id, changes)
        except CheckpointError as exc:
            assert exc.code == "NOT_FOUND"
        else:
            raise AssertionError(f"rewriting {run_id}/{sorted(changes)} must raise NOT_FOUND")
    assert store.read_events("r1")[0].data == "{}"  # all or nothing


def _approval(call_id: str = "call-1", namespace: str = "ns", at: float = 0) -> ApprovalRecord:
    return ApprovalRecord(
        binding=_binding(call_id, namespace),
        status=ApprovalStatus.PENDING,
        revision=0,
        requested_at=_t(at),
        justification="Tell Ana her order shipped.",
        input={"to": "ana@example.com", "n": 1.5},
        ticket="T-1",
    )


def check_approval_request_and_decision_round_trip(store: Store) -> None:
    assert store.approval_get("ns", "call-1") is None
    pending = _approval()
    assert store.approval_put(pending, expected_revision=-1) is True
    assert store.approval_put(pending, expected_revision=-1) is False  # the key exists
    assert store.approval_get("ns", "call-1") == pending
    decided = pending.next(
        status=ApprovalStatus.APPROVED,
        by="alice",
        reason="ok",
        decided_at=_t(5),
        expires_at=_t(3600),
    )
    assert store.approval_put(decided, expected_revision=0) is True
    late = pending.next(status=ApprovalStatus.DENIED, by="bob", decided_at=_t(6))
    assert store.approval_put(late, expected_revision=0) is False  # lost the race
    assert store.approval_get("ns", "call-1") == decided
    try:
        store.approval_put(decided.next(), expected_revision=5)
    except CheckpointError as exc:
        assert exc.code == "INVALID_ARGUMENT"
    else:
        raise AssertionError("a revision that does not follow expected_revision must raise")
    assert store.approval_get("ns", "call-1") == decided


def check_get_with_approval_reads_what_the_two_reads_do(store: Store) -> None:
    read_both = approval_reader(store)
    assert read_both is not None, "a store declaring read_with_approval has get_with_approval"
    rec, approval = read_both("ns", "call-1")
    assert rec is None and approval() is None
    created = create_checkpoint(_binding(), at=T0)
    store.create_if_absent(created)
    rec, approval = read_both("ns", "call-1")
    assert rec == created and approval() is None
    pending = _approval()
    assert store.approval_put(pending, expected_revision=-1)
    rec, approval = read_both("ns", "call-1")
    assert rec == store.get("ns", "call-1") == created
    assert approval() == store.approval_get("ns", "call-1") == pending
    rec, approval = read_both("ns", "call-2")  # another key's rows are not read
    assert rec is None and approval() is None


def check_approval_list_filters(store: Store) -> None:
    for i, (ns, cid) in enumerate([("a", "c2"), ("b", "c1"), ("a", "c1")]):
        assert store.approval_put(_approval(cid, ns, at=i), expected_revision=-1)
    first = store.approval_get("a", "c2")
    assert first is not None
    denied = first.next(status=ApprovalStatus.DENIED, by="bob", reason="no", decided_at=_t(9))
    assert store.approval_put(denied, expected_revision=0)
    keys = [r.key for r in store.list_approvals()]
    assert keys == [("a", "c2"), ("b", "c1"), ("a", "c1")]  # oldest request first
    assert [r.key for r in store.list_approvals(status="pending")] == [("b", "c1"), ("a", "c1")]
    assert [r.key for r in store.list_approvals(status=["denied"])] == [("a", "c2")]
    assert [r.key for r in store.list_approvals(namespace="a")] == [("a", "c2"), ("a", "c1")]
    assert [r.key for r in store.list_approvals(limit=1)] == [("a", "c2")]


def check_approval_threads_race_one_winner(store: Store) -> None:
    pending = _approval()
    assert store.approval_put(pending, expected_revision=-1)
    wins: list[bool] = []
    barrier = threading.Barrier(6)

    def worker(i: int) -> None:
        barrier.wait()
        granted = i % 2 == 0
        decision = pending.next(
            status=ApprovalStatus.APPROVED if granted else ApprovalStatus.DENIED,
            by=f"user-{i}",
            decided_at=_t(i + 1),
        )
        wins.append(store.approval_put(decision, expected_revision=0))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    stored = store.approval_get("ns", "call-1")
    assert stored is not None and stored.revision == 1 and stored.by is not None


def _refused(code: str, fn: Callable[[], object], why: str) -> None:
    try:
        fn()
    except CheckpointError as exc:
        assert exc.code == code, f"{why}: expected {code}, got {exc.code}"
    else:
        raise AssertionError(why)


def check_records_not_dicts_are_required(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    _refused(
        "INVALID_ARGUMENT",
        lambda: store.create_if_absent(rec.to_dict()),  # type: ignore[arg-type]
        "create_if_absent must refuse a dict",
    )
    store.create_if_absent(rec)
    nxt = claim_execution(rec, attempt_id="a", at=_t(1)).next
    _refused(
        "INVALID_ARGUMENT",
        lambda: store.compare_and_swap(0, nxt.to_dict()),  # type: ignore[arg-type]
        "compare_and_swap must refuse a dict",
    )
    assert store.get("ns", "call-1") == rec


def check_create_refuses_non_ready_record(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    claimed = claim_execution(rec, attempt_id="a", at=_t(1)).next
    _refused(
        "INVALID_ARGUMENT",
        lambda: store.create_if_absent(claimed),
        "create_if_absent must take a ready record at revision 0",
    )
    assert store.get("ns", "call-1") is None


def check_cas_refuses_invalid_next(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    nxt = claim_execution(rec, attempt_id="a", at=_t(1)).next
    broken = dataclasses.replace(nxt, execution_fence=None)  # executing without a fence
    _refused(
        "INVALID_CHECKPOINT",
        lambda: store.compare_and_swap(0, broken),
        "compare_and_swap must validate the record it writes",
    )
    assert store.get("ns", "call-1") == rec
    assert len(store.history("ns", "call-1")) == 1


def check_release_then_reclaim_fences_stale_claims(store: Store) -> None:
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    first = claim_execution(rec, attempt_id="a", at=_t(1))
    stale = claim_execution(rec, attempt_id="late", at=_t(1))
    assert store.compare_and_swap(first.expected_revision, first.next)
    back = release_execution(first.next, attempt_id="a", at=_t(2), evidence="journal-empty")
    assert store.compare_and_swap(back.expected_revision, back.next)
    assert store.compare_and_swap(stale.expected_revision, stale.next) is False
    again = claim_execution(back.next, attempt_id="b", at=_t(3))
    assert store.compare_and_swap(again.expected_revision, again.next)
    got = store.get("ns", "call-1")
    assert got is not None
    assert (got.status, got.execution_fence, got.revision) == (Status.EXECUTING, "b", 3)
    hist = store.history("ns", "call-1")
    assert [h.transition for h in hist] == [
        "create_checkpoint",
        "claim_execution",
        "release_execution",
        "claim_execution",
    ]


def check_result_under_raised_limit_round_trips(store: Store) -> None:
    big = {"text": "é" * 60_000}  # 120,000+ bytes: over the default, under the raised limit
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_t(1))
    store.compare_and_swap(0, t.next)
    t = complete_execution(t.next, attempt_id="a", at=_t(2), result=big, max_payload_bytes=200_000)
    assert store.compare_and_swap(1, t.next)
    got = store.get("ns", "call-1")
    assert got is not None
    assert got.result is not None
    assert got.result.payload == big
    assert store.list(status="completed") == [got]


def check_list_unknown_status_is_invalid_argument(store: Store) -> None:
    _refused(
        "INVALID_ARGUMENT",
        lambda: store.list(status="done"),
        "list(status=...) must refuse an unknown status",
    )


_KEY = fingerprint({"tool": "send_email", "key": "order-17"})


def _claim_ops(call_id: str, at: float = 0) -> list[Op]:
    """A new call's claim transaction with an effect key: key, create, claim (gated)."""
    rec = create_checkpoint(_binding(call_id), at=_t(at))
    claim = claim_execution(rec, attempt_id=f"a-{call_id}", at=_t(at))
    return [
        ClaimEffectKey("ns", _KEY, call_id),
        CreateCheckpoint(rec, requires=0),
        SwapCheckpoint(0, claim.next, requires=0),
    ]


def check_effect_key_claimed_with_checkpoint_in_one_transaction(store: Store) -> None:
    out = store.apply(_claim_ops("call-1"))
    assert out[0] is True and out[1][0] is True and out[2] is True
    assert store.effect_key_holder("ns", _KEY) == "call-1"
    got = store.get("ns", "call-1")
    assert got is not None and got.status is Status.EXECUTING
    # The holder claiming again (a retry after an unknown commit outcome) is a no-op win.
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-1")]) == [True]
    rows = store.list_effect_keys()
    assert [(r.namespace, r.key, r.call_id) for r in rows] == [("ns", _KEY, "call-1")]
    assert rows[0].claimed_at
    assert store.list_effect_keys(namespace="other") == []
    assert store.effect_key_holder("other", _KEY) is None  # scoped by namespace


def check_effect_key_held_by_another_call_gates_its_checkpoint_ops(store: Store) -> None:
    store.apply(_claim_ops("call-1"))
    out = store.apply(_claim_ops("call-2", at=1))
    assert out == [False, False, False]
    assert store.get("ns", "call-2") is None  # nothing was created or claimed
    assert store.history("ns", "call-2") == []
    assert store.effect_key_holder("ns", _KEY) == "call-1"
    # Ungated ops of the same transaction still run.
    out = store.apply(
        [ClaimEffectKey("ns", _KEY, "call-3"), WriteOperation("ns", "call-3", {"o": 1})]
    )
    assert out == [False, None]
    assert store.operation_read("ns", "call-3") == {"o": 1}


def check_effect_key_release_only_by_its_holder(store: Store) -> None:
    store.apply(_claim_ops("call-1"))
    assert store.apply([ReleaseEffectKey("ns", _KEY, "call-2")]) == [False]
    assert store.effect_key_holder("ns", _KEY) == "call-1"
    assert store.apply([ReleaseEffectKey("ns", _KEY, "call-1")]) == [True]
    assert store.effect_key_holder("ns", _KEY) is None
    assert store.apply([ReleaseEffectKey("ns", _KEY, "call-1")]) == [False]
    out = store.apply(_claim_ops("call-2", at=1))
    assert out[0] is True and out[2] is True
    assert store.effect_key_holder("ns", _KEY) == "call-2"


def check_effect_key_claim_takes_over_only_from_the_holder_it_names(store: Store) -> None:
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-1")]) == [True]
    # ``replaces`` is a compare-and-swap on the holder: another name takes nothing.
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-2", replaces="call-9")]) == [False]
    assert store.effect_key_holder("ns", _KEY) == "call-1"
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-2", replaces="call-1")]) == [True]
    assert store.effect_key_holder("ns", _KEY) == "call-2"
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-3", replaces="call-1")]) == [False]
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-2", replaces="call-1")]) == [True]
    assert store.effect_key_holder("ns", _KEY) == "call-2"
    # A free key is claimed whatever ``replaces`` names.
    other = fingerprint({"tool": "send_email", "key": "order-18"})
    assert store.apply([ClaimEffectKey("ns", other, "call-4", replaces="call-1")]) == [True]
    assert store.effect_key_holder("ns", other) == "call-4"


def check_effect_key_claim_gated_on_an_earlier_claim(store: Store) -> None:
    other = fingerprint({"tool": "send_email", "key": "order-18"})
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-1")]) == [True]
    out = store.apply(
        [ClaimEffectKey("ns", _KEY, "call-2"), ClaimEffectKey("ns", other, "call-2", requires=0)]
    )
    assert out == [False, False]
    assert store.effect_key_holder("ns", other) is None  # gated off: nothing written
    out = store.apply(
        [ClaimEffectKey("ns", other, "call-2"), ClaimEffectKey("ns", _KEY, "call-2", requires=0)]
    )
    assert out == [True, False]  # the second lost to its holder, not to its gate
    assert store.effect_key_holder("ns", other) == "call-2"


def check_effect_key_claim_rolls_back_with_its_transaction(store: Store) -> None:
    try:
        store.apply([*_claim_ops("call-1"), AppendEvents("missing-run", (), 0)])
    except CheckpointError as exc:
        assert exc.code == "NOT_FOUND"
    else:
        raise AssertionError("appending to a missing run must fail")
    assert store.effect_key_holder("ns", _KEY) is None
    assert store.get("ns", "call-1") is None


def check_effect_key_survives_erasing_its_holder(store: Store) -> None:
    rec = _delivered(store)
    assert store.apply([ClaimEffectKey("ns", _KEY, "call-1")]) == [True]
    assert store.erase_checkpoint(_tombstone_of(rec), expected_revision=4)
    assert store.effect_key_holder("ns", _KEY) == "call-1"  # retention keeps the key
    assert store.tombstone("ns", "call-1") is not None


def check_effect_key_ops_refuse_bad_values(store: Store) -> None:
    bad: list[Op] = [
        ClaimEffectKey("ns", "order-17", "call-1"),  # not a fingerprint: no content stored
        ClaimEffectKey("ns", "sha256:" + "G" * 64, "call-1"),
        ClaimEffectKey("bad ns", _KEY, "call-1"),
        ReleaseEffectKey("ns", _KEY, ""),
    ]
    for op in bad:
        _refused("INVALID_ARGUMENT", partial(store.apply, [op]), f"{op!r} must be refused")
    rec = create_checkpoint(_binding(), at=_t(0))
    _refused(
        "INVALID_ARGUMENT",
        lambda: store.apply([CreateCheckpoint(rec, requires=0)]),
        "requires must name an earlier op",
    )
    assert store.list_effect_keys() == []
    assert store.get("ns", "call-1") is None


def check_effect_key_threads_race_one_winner(store: Store) -> None:
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        ops = _claim_ops(f"call-{i}")
        barrier.wait()
        out = store.apply(ops)
        if out[2]:
            wins.append(f"call-{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert store.effect_key_holder("ns", _KEY) == wins[0]
    claimed = [r for r in store.list(status="executing")]
    assert [r.binding.call_id for r in claimed] == wins


def check_gated_append_follows_its_swap(store: Store) -> None:
    store.create_run(_run("r1"))
    rec = create_checkpoint(_binding(), at=_t(0))
    store.create_if_absent(rec)
    claim = claim_execution(rec, attempt_id="a-1", at=_t(0))
    assert store.compare_and_swap(0, claim_execution(rec, attempt_id="a-0", at=_t(0)).next)
    append = AppendEvents("r1", [_event("r1", 0, None)], expected_count=0, requires=0)
    assert store.apply([SwapCheckpoint(0, claim.next), append]) == [False, False]
    assert store.read_events("r1") == []
    other = create_checkpoint(_binding("call-2"), at=_t(0))
    store.create_if_absent(other)
    won = claim_execution(other, attempt_id="a-2", at=_t(0)).next
    assert store.apply([SwapCheckpoint(0, won), append]) == [True, True]
    assert [e.seq for e in store.read_events("r1")] == [0]


def _ask(
    store: Store,
    call_id: str,
    *,
    deny_at: float | None,
    conversation: str = "conv-1",
    revision: str = "1",
    to: str = "a@example.com",
) -> ApprovalRecord:
    """Store a request for ``call_id`` (denied at ``deny_at`` unless ``None``)."""
    binding = Binding("ns", call_id, "send_email", revision, fingerprint({"to": to}))
    pending = ApprovalRecord(
        binding=binding,
        status=ApprovalStatus.PENDING,
        revision=0,
        requested_at=_t(0),
        conversation_id=conversation,
    )
    assert store.approval_put(pending, expected_revision=-1)
    if deny_at is None:
        return pending
    denied = pending.next(status=ApprovalStatus.DENIED, by="ana", decided_at=_t(deny_at))
    assert store.approval_put(denied, expected_revision=0)
    return denied


def check_denials_by_action_finds_the_latest_denial(store: Store) -> None:
    find = denial_finder(store)
    assert find is not None, "a store declaring denials_by_action has find_denial"
    asking = _binding("call-new")
    assert find(asking, "conv-1") is None
    _ask(store, "call-a", deny_at=5)
    later = _ask(store, "call-b", deny_at=9)
    _ask(store, "call-c", deny_at=7)
    assert find(asking, "conv-1") == later
    assert find(asking, "conv-1") == latest_denial(
        store.list_approvals(status="denied", namespace="ns"), asking, "conv-1"
    )


def check_denials_by_action_ignore_other_actions_and_decisions(store: Store) -> None:
    find = denial_finder(store)
    assert find is not None
    asking = _binding("call-new")
    _ask(store, "call-pending", deny_at=None)
    approved = _ask(store, "call-ok", deny_at=None)
    done = approved.next(status=ApprovalStatus.APPROVED, by="ana", decided_at=_t(3))
    assert store.approval_put(done, expected_revision=0)
    _ask(store, "call-elsewhere", deny_at=4, conversation="conv-2")
    _ask(store, "call-rev2", deny_at=4, revision="2")
    _ask(store, "call-input", deny_at=4, to="b@example.com")
    _ask(store, "call-new", deny_at=4)  # the asking call's own denial is not "another"
    assert find(asking, "conv-1") is None
    assert find(asking, "conv-2") is not None
    assert find(_binding("call-new", namespace="other-ns"), "conv-2") is None
    assert find(_binding("call-x"), "conv-1") == store.approval_get("ns", "call-new")


def check_record_fields_read_every_record_in_order(store: Store) -> None:
    store.create_run(_run("r1"))
    assert record_fields_of(store, "r1") == []
    assert store.append_events(
        "r1", [_event("r1", 0, None), _event("r1", 1, "h0")], expected_count=0
    )
    records = record_fields_of(store, "r1")
    assert records is not None
    assert [(r[0], r[1]) for r in records] == [(0, "e0"), (1, "e1")]


def check_migrations_are_listed_in_order(store: Store) -> None:
    applied = migrations_of(store)
    assert applied, "a store declaring migrations lists the ones applied"
    assert [v for v, _ in applied] == sorted({v for v, _ in applied})
    assert all(type(v) is int and type(n) is str and n for v, n in applied)


Check = Callable[[Store], None]

_ALL: list[Check] = (
    [value for name, value in sorted(globals().items()) if name.startswith("check_")]
    + SEARCH_CHECKS
    + RESOLVE_CHECKS
)
_BY_PREFIX = {
    "check_effect_key_": "effect_keys",
    "check_get_with_approval_": "read_with_approval",
    "check_gated_append_": "gated_append",
    "check_record_fields_": "record_fields",
    "check_migrations_": "migrations",
    "check_denials_by_action_": "denials_by_action",
}


def _group(check: Check) -> str:
    for prefix, group in _BY_PREFIX.items():
        if check.__name__.startswith(prefix):
            return group
    return "core"


#: Checks by what they test: ``"core"`` (every store) or a ``Capabilities`` field.
CHECK_GROUPS: dict[str, list[Check]] = {
    group: [c for c in _ALL if _group(c) == group]
    for group in ["core", *(f.name for f in dataclasses.fields(Capabilities))]
}
#: Every check, each once, grouped as ``CHECK_GROUPS``.
CHECKS: list[Check] = [c for group in CHECK_GROUPS.values() for c in group]


def checks_for(store: Store) -> list[Check]:
    """Return the checks ``store`` must pass: the core ones and its capabilities' groups."""
    caps = capabilities_of(store)
    return [
        c
        for group, checks in CHECK_GROUPS.items()
        if group == "core" or getattr(caps, group)
        for c in checks
    ]
