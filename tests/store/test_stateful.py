"""Random transitions by several actors through a store never break the checkpoint rules.

Actors (execution attempts and deliverers) read records (possibly going stale), compute
transitions from what they last read, and race them through compare-and-swap. Invariants:
every stored record validates; two attempts never hold a won execution claim at once;
nothing leads from completed/delivering/delivered back to execution; history revisions
are 0, 1, 2, ... and end at the stored record.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import toolledger as tl
from toolledger import checkpoint as ck
from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CALLS = ["c0", "c1"]
ATTEMPTS = ["a0", "a1", "a2"]
DELIVERIES = ["d0", "d1"]
AFTER_COMPLETION = {ck.Status.COMPLETED, ck.Status.DELIVERING, ck.Status.DELIVERED}
EXECUTION_SIDE = {ck.Status.READY, ck.Status.EXECUTING, ck.Status.UNCERTAIN}
ALLOWED_REFUSALS = {"INVALID_TRANSITION", "FENCE_CONFLICT"}

calls = st.sampled_from(CALLS)
attempts = st.sampled_from(ATTEMPTS)
deliveries = st.sampled_from(DELIVERIES)
owners = st.sampled_from([True, True, False])  # mostly the fence holder; sometimes anyone
fresh = st.sampled_from([True, True, True, False])  # mostly re-read; sometimes act stale
payloads = st.one_of(
    st.none(),
    st.integers(-(2**53 - 1), 2**53 - 1),
    st.text(max_size=10),
    st.lists(st.booleans(), max_size=3),
    st.dictionaries(
        st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False), max_size=3
    ),
)


def _binding(call_id: str) -> ck.Binding:
    return ck.Binding("ns", call_id, "tool", "1", ck.fingerprint({"call": call_id}))


class CheckpointMachine(RuleBasedStateMachine):
    """Drives one store; subclasses choose the backend."""

    def make_store(self) -> tl.Store:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.store = self.make_store()
        self.clock = T0
        # What each actor last read, per call: its (possibly stale) view.
        self.views: dict[tuple[str, str], ck.CheckpointRecord] = {}
        # Which attempt currently holds a won execution claim, per call.
        self.holder: dict[str, str | None] = dict.fromkeys(CALLS)
        self.claim_wins: dict[str, list[str]] = {c: [] for c in CALLS}

    def teardown(self) -> None:
        self.store.close()

    def _tick(self) -> datetime:
        self.clock += timedelta(milliseconds=1)
        return self.clock

    def _apply(self, call: str, actor: str, make: Any, fresh: bool) -> bool | None:
        """Compute a transition from the actor's view (re-read if ``fresh``), race its CAS."""
        if fresh:
            self.read(call, actor)
        view = self.views.get((actor, call))
        if view is None:
            return None
        try:
            t = make(view, self._tick())
        except tl.CheckpointError as exc:
            if exc.code not in ALLOWED_REFUSALS:
                raise AssertionError(f"unexpected refusal: {exc}") from exc
            return None
        won = self.store.compare_and_swap(t.expected_revision, t.next)
        if won:
            self.views[(actor, call)] = t.next
            if t.name == "claim_execution":
                assert self.holder[call] is None, f"{actor} and {self.holder[call]} both won"
                self.holder[call] = actor
                self.claim_wins[call].append(actor)
            elif t.name in ("release_execution",):
                assert self.holder[call] == actor
                self.holder[call] = None
        return won

    @rule(call=calls)
    def create(self, call: str) -> None:
        created, rec = self.store.create_if_absent(
            ck.create_checkpoint(_binding(call), at=self._tick())
        )
        if not created:
            assert ck.decide_checkpoint(rec, _binding(call)).revision == rec.revision

    @rule(call=calls, actor=st.sampled_from(ATTEMPTS + DELIVERIES))
    def read(self, call: str, actor: str) -> None:
        rec = self.store.get("ns", call)
        if rec is not None:
            self.views[(actor, call)] = rec
            if rec.updated_at > self.clock:
                self.clock = rec.updated_at

    def _who(self, call: str, given: str, owner: bool, field: str) -> str:
        """Usually act as the id holding the fence (so lifecycles progress), else ``given``."""
        rec = self.store.get("ns", call)
        held = None if rec is None else getattr(rec, field)
        return held if owner and held is not None else given

    @rule(call=calls, attempt=attempts, fresh=fresh)
    def claim_execution(self, call: str, attempt: str, fresh: bool) -> None:
        self._apply(
            call, attempt, lambda r, at: ck.claim_execution(r, attempt_id=attempt, at=at), fresh
        )

    @rule(
        call=calls,
        attempt=attempts,
        payload=payloads,
        error=st.booleans(),
        fresh=fresh,
        owner=owners,
    )
    def complete_execution(
        self, call: str, attempt: str, payload: Any, error: bool, fresh: bool, owner: bool
    ) -> None:
        who = self._who(call, attempt, owner, "execution_fence")
        self._apply(
            call,
            who,
            lambda r, at: ck.complete_execution(
                r, attempt_id=who, at=at, result=payload, is_error=error
            ),
            fresh,
        )

    @rule(call=calls, attempt=attempts, fresh=fresh, owner=owners)
    def mark_uncertain(self, call: str, attempt: str, fresh: bool, owner: bool) -> None:
        who = self._who(call, attempt, owner, "execution_fence")
        self._apply(
            call,
            who,
            lambda r, at: ck.mark_execution_uncertain(
                r, attempt_id=who, at=at, reason="timeout after send"
            ),
            fresh,
        )

    @rule(call=calls, attempt=attempts, fresh=fresh, owner=owners)
    def release_execution(self, call: str, attempt: str, fresh: bool, owner: bool) -> None:
        who = self._who(call, attempt, owner, "execution_fence")
        self._apply(
            call,
            who,
            lambda r, at: ck.release_execution(r, attempt_id=who, at=at, evidence="journal-empty"),
            fresh,
        )

    @rule(call=calls, delivery=deliveries, fresh=fresh)
    def claim_delivery(self, call: str, delivery: str, fresh: bool) -> None:
        self._apply(
            call, delivery, lambda r, at: ck.claim_delivery(r, delivery_id=delivery, at=at), fresh
        )

    @rule(call=calls, delivery=deliveries, fresh=fresh, owner=owners)
    def release_delivery(self, call: str, delivery: str, fresh: bool, owner: bool) -> None:
        who = self._who(call, delivery, owner, "delivery_fence")
        self._apply(call, who, lambda r, at: ck.release_delivery(r, delivery_id=who, at=at), fresh)

    @rule(call=calls, delivery=deliveries, fresh=fresh, owner=owners)
    def complete_delivery(self, call: str, delivery: str, fresh: bool, owner: bool) -> None:
        who = self._who(call, delivery, owner, "delivery_fence")
        self._apply(call, who, lambda r, at: ck.complete_delivery(r, delivery_id=who, at=at), fresh)

    @invariant()
    def stored_records_validate_and_history_is_ordered(self) -> None:
        for call in CALLS:
            rec = self.store.get("ns", call)
            if rec is None:
                assert self.store.history("ns", call) == []
                continue
            assert ck.validate_checkpoint(rec.to_dict()) == rec
            event(f"reached {rec.status.value}")  # --hypothesis-show-statistics
            hist = self.store.history("ns", call)
            assert [h.revision for h in hist] == list(range(rec.revision + 1))
            assert hist[-1].record == rec
            assert all(a.at <= b.at for a, b in itertools.pairwise(hist))
            seen_completion = False
            for h in hist:
                assert ck.validate_checkpoint(h.record.to_dict()) == h.record
                if seen_completion:
                    assert h.status not in EXECUTION_SIDE, [x.status for x in hist]
                    assert h.action is not ck.Action.EXECUTE
                seen_completion = seen_completion or h.status in AFTER_COMPLETION
            claims = [h.record.execution_fence for h in hist if h.transition == "claim_execution"]
            assert claims == self.claim_wins[call]
            holder = self.holder[call]
            if rec.status in (ck.Status.EXECUTING, ck.Status.UNCERTAIN):
                assert rec.execution_fence == holder
            if rec.status is ck.Status.READY:
                assert holder is None


class MemoryCheckpointMachine(CheckpointMachine):
    def make_store(self) -> tl.Store:
        return MemoryStore()


class SQLiteCheckpointMachine(CheckpointMachine):
    def make_store(self) -> tl.Store:
        self.tmp = Path(tempfile.mkdtemp(prefix="toolledger-stateful-"))
        return SQLiteStore(self.tmp / "s.db", durability="normal")

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.tmp, ignore_errors=True)


SETTINGS = settings(
    max_examples=80,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],  # a loaded CI box must not fail it
)
TestMemoryStoreStateful = MemoryCheckpointMachine.TestCase
TestMemoryStoreStateful.settings = SETTINGS
TestSQLiteStoreStateful = SQLiteCheckpointMachine.TestCase
TestSQLiteStoreStateful.settings = SETTINGS
