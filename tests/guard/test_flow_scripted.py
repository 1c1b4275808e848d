"""The guard's flow driven with no store: each test answers the requests it yields.

``CallFlow.run()`` yields every store read and commit; these tests play the store (and
the other callers racing it) by answering them from a script, so every branch of
"execute raised" and of the claim races is reached exactly, and the requests the flow
makes (which reads, which commits, whether it executes) are asserted in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import toolledger
from toolledger import NotRecovered, Recovered
from toolledger.checkpoint import (
    Binding,
    Status,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
)
from toolledger.errors import OutcomeUnknownError, StoreUnavailableError

from .._internals import CallFlow, EffectKey, guard_requests

R = guard_requests
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
OURS = "a" * 32
OTHER = "b" * 32
INPUT = {"to": "ana@example.com"}


def _binding(call_id: str = "c1") -> Binding:
    return Binding("default", call_id, "send", "1", fingerprint(INPUT))


def _flow(*, on_error: str = "raise", recover: Any = None, effect: bool = False) -> CallFlow:
    tool = toolledger.tool("send", revision="1", execute=lambda i, c: None, recover=recover)
    binding = _binding()
    key = EffectKey("default", "sha256:" + "1" * 64) if effect else None
    call = R.Call(
        tool=tool, binding=binding, input=INPUT, on_error=on_error, run_id="r1", effect=key
    )
    return CallFlow(call)


def _executing(attempt: str, call_id: str = "c1") -> Any:
    rec = create_checkpoint(_binding(call_id), at=T0)
    return claim_execution(rec, attempt_id=attempt, at=T0).next


def _completed(attempt: str, result: Any, call_id: str = "c1") -> Any:
    return complete_execution(
        _executing(attempt, call_id),
        attempt_id=attempt,
        at=T0 + timedelta(seconds=1),
        result=result,
    ).next


def _uncertain(attempt: str) -> Any:
    return mark_execution_uncertain(
        _executing(attempt), attempt_id=attempt, at=T0 + timedelta(seconds=1), reason="crash"
    ).next


@dataclass
class Raise:
    """Answer a request by throwing ``exc`` into the flow (what a store raised)."""

    exc: BaseException


class Script:
    """Drive a flow: each step names the request type expected and its answer."""

    def __init__(self, flow: CallFlow) -> None:
        self.flow = flow
        self.gen = flow.run()
        self.seen: list[Any] = []
        self.req = next(self.gen)

    def answer(self, kind: type, reply: Any = None) -> Any:
        """Answer the pending request (asserted to be a ``kind``); return the next one."""
        req = self.req
        assert type(req) is kind, f"expected {kind.__name__}, flow asked {req!r}"
        self.seen.append(req)
        value = reply(req) if callable(reply) and not isinstance(reply, type) else reply
        if isinstance(value, Raise):
            self.req = self.gen.throw(value.exc)
        else:
            self.req = self.gen.send(value)
        return self.req

    def to_claim(self) -> None:
        """The gate (no approval stored) and the event opening of a new call."""
        self.answer(R.ReadGate, (None, lambda: None))
        self.answer(R.Open, (OURS, None))

    def finish(self, kind: type, reply: Any) -> Any:
        """Answer the last request; return the flow's outcome."""
        with pytest.raises(StopIteration) as stop:
            self.answer(kind, reply)
        return stop.value.value

    def kinds(self) -> list[str]:
        return [type(r).__name__ for r in self.seen]


def _claim_won(req: Any) -> list[Any]:
    create, _swap = req.ops
    return [(True, create.record), True]


def _claimed_then_execute_raises(script: Script, exc: BaseException) -> Any:
    script.to_claim()
    req = script.answer(R.Commit, _claim_won)
    assert isinstance(req, R.Execute)
    assert req.attempt_id == OURS
    return script.answer(R.Execute, (False, exc))


def _won(req: Any) -> list[Any]:
    return [True] * len(req.ops)


def _lost(req: Any) -> list[Any]:
    return [False] * len(req.ops)


class TestExecuteRaised:
    def test_empty_journal_gives_the_claim_back_and_reraises(self) -> None:
        """Pre-effect failure: the claim is released (one relaxed commit), the error raised."""
        s = Script(_flow())
        boom = ValueError("smtp down")
        _claimed_then_execute_raises(s, boom)
        req = s.answer(R.ReadOperation, None)
        assert isinstance(req, R.Commit)
        assert not req.durable
        assert req.ops[0].next.status is Status.READY
        with pytest.raises(ValueError, match="smtp down"):
            s.answer(R.Commit, _won)
        assert s.kinds() == ["ReadGate", "Open", "Commit", "Execute", "ReadOperation", "Commit"]

    def test_empty_journal_on_error_result_stores_the_error_as_the_result(self) -> None:
        """``on_error="result"``: the error is completed as an ``is_error`` result."""
        s = Script(_flow(on_error="result"))
        _claimed_then_execute_raises(s, ValueError("bad address"))
        req = s.answer(R.ReadOperation, None)
        assert isinstance(req, R.Commit)
        assert req.durable
        assert req.end is not None
        out = s.finish(R.Commit, _won)
        assert out.is_error
        assert out.payload == {"error": "ValueError", "message": "bad address"}
        assert not out.replayed

    def test_empty_journal_give_back_lost_to_another_caller_keeps_it_and_reraises(self) -> None:
        """The give-back CAS loses (someone marked it uncertain): nothing released."""
        s = Script(_flow())
        _claimed_then_execute_raises(s, ValueError("x"))
        s.answer(R.ReadOperation, None)
        s.answer(R.Commit, _lost)
        theirs = mark_execution_uncertain(
            _executing(OURS), attempt_id=OURS, at=T0, reason="found executing"
        ).next
        with pytest.raises(ValueError):
            s.answer(R.Read, theirs)
        assert s.flow.last is theirs

    def test_written_journal_without_recover_is_outcome_unknown(self) -> None:
        """After the journal write: uncertain, and no recover means OUTCOME_UNKNOWN."""
        s = Script(_flow())
        _claimed_then_execute_raises(s, ValueError("timeout"))
        req = s.answer(R.ReadOperation, {"order": 1})
        assert req.ops[0].next.status is Status.UNCERTAIN
        with pytest.raises(OutcomeUnknownError) as info:
            s.answer(R.Commit, _won)
        assert info.value.details["status"] == "uncertain"
        assert "no recover function" in info.value.details["why"]
        assert isinstance(info.value.__cause__, ValueError)

    def test_written_journal_recovered_completes_for_the_attempt(self) -> None:
        """``recover`` proves the outcome: the result is stored, ``recovered=True``."""
        s = Script(_flow(recover=lambda ctx: None))
        _claimed_then_execute_raises(s, ValueError("timeout"))
        s.answer(R.ReadOperation, {"order": 1})
        req = s.answer(R.Commit, _won)
        assert isinstance(req, R.Recover)
        assert (req.attempt_id, req.reason) == (OURS, req.reason)
        assert isinstance(req.error, ValueError)
        req = s.answer(R.Recover, (True, Recovered({"id": 7})))
        assert req.ops[0].next.status is Status.COMPLETED
        out = s.finish(R.Commit, _won)
        assert (out.payload, out.recovered, out.replayed) == ({"id": 7}, True, False)

    def test_written_journal_not_recovered_is_outcome_unknown(self) -> None:
        """``NotRecovered(reason)``: OUTCOME_UNKNOWN naming the reason; nothing stored."""
        s = Script(_flow(recover=lambda ctx: None))
        _claimed_then_execute_raises(s, ValueError("timeout"))
        s.answer(R.ReadOperation, {"order": 1})
        s.answer(R.Commit, _won)
        with pytest.raises(OutcomeUnknownError, match="provider has no record"):
            s.answer(R.Recover, (True, NotRecovered("provider has no record")))

    def test_written_journal_recover_raising_groups_both_errors(self) -> None:
        """``recover`` raises too: OUTCOME_UNKNOWN caused by both errors."""
        s = Script(_flow(recover=lambda ctx: None))
        first = ValueError("timeout")
        _claimed_then_execute_raises(s, first)
        s.answer(R.ReadOperation, {"order": 1})
        s.answer(R.Commit, _won)
        second = RuntimeError("provider down")
        with pytest.raises(OutcomeUnknownError) as info:
            s.answer(R.Recover, (False, second))
        assert list(info.value.__cause__.exceptions) == [first, second]

    def test_unreadable_journal_is_treated_as_written(self) -> None:
        """The journal cannot be read: never released blindly (marked uncertain)."""
        s = Script(_flow())
        _claimed_then_execute_raises(s, ValueError("x"))
        req = s.answer(R.ReadOperation, Raise(StoreUnavailableError(message="gone")))
        assert req.ops[0].next.status is Status.UNCERTAIN

    def test_interrupt_with_empty_journal_gives_back_and_propagates(self) -> None:
        """KeyboardInterrupt, nothing journaled: claim released, interruption re-raised."""
        s = Script(_flow(recover=lambda ctx: None))
        _claimed_then_execute_raises(s, KeyboardInterrupt())
        req = s.answer(R.ReadOperation, None)
        assert req.ops[0].next.status is Status.READY
        with pytest.raises(KeyboardInterrupt):
            s.answer(R.Commit, _won)
        assert "Recover" not in s.kinds()

    def test_interrupt_after_journal_write_marks_uncertain_never_recovers(self) -> None:
        """KeyboardInterrupt after the journal write: uncertain; ``recover`` never runs."""
        s = Script(_flow(recover=lambda ctx: None))
        _claimed_then_execute_raises(s, KeyboardInterrupt())
        req = s.answer(R.ReadOperation, {"order": 1})
        assert req.ops[0].next.status is Status.UNCERTAIN
        with pytest.raises(KeyboardInterrupt):
            s.answer(R.Commit, _won)
        assert "Recover" not in s.kinds()

    def test_mark_uncertain_lost_to_a_recovery_returns_the_stored_result(self) -> None:
        """Another caller recovered the call meanwhile: its stored result, replayed."""
        s = Script(_flow())
        _claimed_then_execute_raises(s, ValueError("x"))
        s.answer(R.ReadOperation, {"order": 1})
        s.answer(R.Commit, _lost)
        out = s.finish(R.Read, _completed(OURS, {"id": 9}))
        assert (out.payload, out.replayed) == ({"id": 9}, True)

    def test_abandoned_at_execute_gives_the_claim_back(self) -> None:
        """A batch abandons the call at its Execute: released, never executed."""
        s = Script(_flow())
        s.to_claim()
        s.answer(R.Commit, _claim_won)
        req = s.gen.throw(R.Abandoned())
        assert isinstance(req, R.Commit)
        assert req.ops[0].next.status is Status.READY
        with pytest.raises(R.Abandoned):
            s.gen.send([True])


class TestClaimRaces:
    def test_claim_lost_to_a_live_claim_is_marked_uncertain_never_executed(self) -> None:
        """Another attempt created and claimed it first: reconciled, not executed."""
        s = Script(_flow())
        s.to_claim()
        theirs = _executing(OTHER)
        req = s.answer(R.Commit, [(False, theirs), False])
        assert isinstance(req, R.Commit)
        assert req.ops[0].next.status is Status.UNCERTAIN
        with pytest.raises(OutcomeUnknownError):
            s.answer(R.Commit, _won)
        assert "Execute" not in s.kinds()

    def test_claim_lost_to_a_completed_call_replays_its_result(self) -> None:
        """Another attempt already completed it: the stored result, replayed."""
        s = Script(_flow())
        s.to_claim()
        out = s.finish(R.Commit, [(False, _completed(OTHER, {"n": 1})), False])
        assert (out.payload, out.replayed) == ({"n": 1}, True)

    def test_claim_outcome_unknown_but_landed_executes_once(self) -> None:
        """The claim commit raised, the re-read shows our fence: execute (once)."""
        s = Script(_flow())
        s.to_claim()
        req = s.answer(R.Commit, Raise(StoreUnavailableError(message="lost answer")))
        assert isinstance(req, R.Read)
        req = s.answer(R.Read, _executing(OURS))
        assert isinstance(req, R.Execute)

    def test_claim_outcome_unknown_and_absent_claims_again(self) -> None:
        """The claim commit raised and nothing landed: it claims again."""
        s = Script(_flow())
        s.to_claim()
        s.answer(R.Commit, Raise(StoreUnavailableError(message="refused")))
        req = s.answer(R.Read, None)
        assert isinstance(req, R.Commit)
        assert req.claim

    def test_store_errors_past_the_budget_raise(self) -> None:
        """A store that keeps failing the claim: its error is raised, nothing executed."""
        s = Script(_flow())
        s.to_claim()
        for _ in range(3):
            s.answer(R.Commit, Raise(StoreUnavailableError(message="down")))
            s.answer(R.Read, None)
        with pytest.raises(StoreUnavailableError):
            s.answer(R.Commit, Raise(StoreUnavailableError(message="down")))
        assert "Execute" not in s.kinds()

    def test_uncertain_found_goes_to_recover_linked_to_the_claimer(self) -> None:
        """A crashed attempt's uncertain record: ``recover`` for that attempt."""
        s = Script(_flow(recover=lambda ctx: None))
        s.answer(R.ReadGate, (_uncertain(OTHER), lambda: None))
        req = s.answer(R.Open, (OURS, None))
        assert isinstance(req, R.Recover)
        assert req.attempt_id == OTHER

    def test_effect_key_held_by_a_completed_call_copies_its_result(self) -> None:
        """The key another call holds, completed: this call's record is a copy of it."""
        s = Script(_flow(effect=True))
        s.to_claim()
        s.answer(R.ReadHolder, None)  # free when read ...
        req = s.answer(R.Commit, [False, False, False])  # ... taken at the claim
        assert isinstance(req, R.ReadHolder)
        s.answer(R.ReadHolder, "c0")
        req = s.answer(R.Read, _completed(OTHER, {"sent": 1}, call_id="c0"))
        assert isinstance(req, R.Commit)
        assert not req.durable
        out = s.finish(R.Commit, [(True, None), True, True])
        assert (out.payload, out.replayed, out.deduplicated_from) == ({"sent": 1}, True, "c0")
        assert "Execute" not in s.kinds()

    def test_effect_key_held_by_an_uncertain_call_without_recover_names_it(self) -> None:
        """The key's holder is uncertain: OUTCOME_UNKNOWN naming it, never executed."""
        s = Script(_flow(effect=True))
        s.to_claim()
        s.answer(R.ReadHolder, "c0")
        holder = mark_execution_uncertain(
            _executing(OTHER, "c0"), attempt_id=OTHER, at=T0, reason="crash"
        ).next
        req = s.answer(R.Read, holder)
        assert isinstance(req, R.Read)
        assert req.key == ("default", "c0")
        with pytest.raises(OutcomeUnknownError) as info:
            s.answer(R.Read, holder)
        assert info.value.details["effect_key_holder"] == "c0"


def test_script_answers_are_checked() -> None:
    """The driver here fails on an unexpected request (the scripts above are exact)."""
    s = Script(_flow())
    with pytest.raises(AssertionError, match="expected Open"):
        s.answer(R.Open, None)
