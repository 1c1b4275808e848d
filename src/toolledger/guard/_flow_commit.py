"""The commits of a guarded call, with the journal riding the same transactions.

Rules this module keeps:

- Every write is one ``store.apply``: a CAS from the record as read (``_swap``), or the
  claim ops handed to the driver (``Claim``: the driver may batch them with other calls'
  and the runs' buffered journal records). A lost CAS or a store error whose outcome is
  unknown answers ``False``/``None``: the caller re-reads and decides again, and this
  attempt's fence tells whether its own write landed.
- The completion carries the call's end record (``_prepared_end``), appended only if
  the CAS wins (``requires=0``); recording never breaks the call.
- Claims go back (``_give_back``) only while the operation journal is proven empty, with
  the effect key in the same transaction; otherwise the claim is marked uncertain.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import Generator
from typing import Any

from ..checkpoint.model import CheckpointRecord, Status, Transition
from ..checkpoint.transitions import (
    claim_execution,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_execution,
)
from ..errors import InvalidArgumentError, OutcomeUnknownError, PayloadLimitError, StoreError
from ..journal import EventHandle
from ..store.base import CreateCheckpoint, RemoveOperation, SwapCheckpoint
from ._flow_outcomes import FlowOutcomes, clip_reason
from ._flow_state import Claim, Flow, Request
from ._flow_telemetry import FlowTelemetry
from ._seams import DECIDE_ROUNDS, DONE, after, now, reached

__all__ = ["FlowCommits"]


class FlowCommits(FlowOutcomes, FlowTelemetry):
    """The transactions of one call: claim, give back, mark uncertain, complete."""

    def _swap(
        self,
        t: Transition,
        source: CheckpointRecord,
        *,
        durable: bool,
        remove_op: bool = False,
        end: Any = None,
        also: tuple[Any, ...] = (),
    ) -> bool:
        """CAS ``t`` from ``source``; ``False`` when lost or when the outcome is unknown.

        Either way the caller re-reads and decides again (our fences tell what landed).
        ``end`` (``(prepared journal end record, its fields)``) rides in the same
        transaction with the run's buffered records, appended only if the CAS wins
        (``requires=0``). ``also``: more ops for the same transaction (gated on op 0).
        """
        ops: builtins.list[Any] = [SwapCheckpoint(t.expected_revision, t.next)]
        if remove_op:
            ops.append(RemoveOperation(*self.binding.key))
        ops.extend(also)
        ride = None
        if end is not None:
            with contextlib.suppress(Exception):  # recording never breaks the call
                ride = self.run.ride(self.store, end[0])
        outcome: Any = False
        won = False
        try:
            if ride is not None:
                ops.append(dataclasses.replace(ride.op, requires=0))
            try:
                result = self.store.apply(ops, durable=durable)
            except StoreError as exc:
                outcome = exc
                self._store_failed(exc)
                return False
            won = bool(result[0])
            if ride is not None:
                outcome = bool(result[-1])
        finally:
            if ride is not None:
                ride.settle(outcome, keep_extra=won)
                if ride.carried:
                    self.end_carried = end
        self._transition(t, source.status.value, won)
        return won

    def _prepared_end(self, t: Transition, own: bool) -> Any:
        """``(end record, its fields)`` of this call if ``t`` (a completion) wins, or ``None``.

        Only when the store gates appends (``gated_append``) and the run journals.
        """
        if not getattr(self.store, "gated_append", False):
            return None
        handle = self.handle
        if not isinstance(handle, EventHandle) or handle.ended:
            return None  # no journal event (an effect key's holder), or it ended
        rec = t.next
        assert rec.result is not None
        fields = self.end_fields(
            rec.result.payload, rec.result.is_error, rec.revision, replayed=False, recovered=not own
        )
        status, outputs, meta, checkpoint = fields
        try:
            prepared = self.run.prepare_end(
                handle, status, outputs=outputs, meta=meta, checkpoint=checkpoint
            )
            return prepared, fields
        except Exception:  # e.g. a payload the journal refuses: the normal end path reports it
            return None

    def _claim_ops(self, ops: tuple[Any, ...]) -> Generator[Request, Any, list[Any] | None]:
        reply = yield Claim(ops)
        if isinstance(reply, StoreError):
            self._store_failed(reply)
            return None
        if isinstance(reply, BaseException):
            raise reply
        result: list[Any] = reply
        return result

    def _claim_new(self) -> Generator[Request, Any, tuple[CheckpointRecord | None, bool]]:
        when = now()
        new = create_checkpoint(self.binding, at=when)
        t = claim_execution(new, attempt_id=self.attempt_id, at=when)
        reached("before-claim")
        ops: tuple[Any, ...] = (CreateCheckpoint(new), SwapCheckpoint(0, t.next))
        if self.effect is not None:
            # The effect key first; the create and the claim only if this call holds it.
            ops = (
                self.effect.claim(self.binding.call_id),
                CreateCheckpoint(new, requires=0),
                SwapCheckpoint(0, t.next, requires=0),
            )
        reply = yield from self._claim_ops(ops)
        if reply is None:  # outcome unknown: the re-read tells
            return self._get(), False
        if self.effect is not None:
            if not reply[0]:  # another call holds the key: nothing was written
                return None, False
            reply = reply[1:]
        (created, stored), won = reply[0], bool(reply[1])
        create_t = Transition(
            action=t.action, expected_revision=-1, next=new, name="create_checkpoint"
        )
        self._transition(create_t, None, bool(created))
        self._transition(t, Status.READY.value, won)
        if won and (created or stored.binding == self.binding):
            return t.next, True
        if won:
            # A record for another binding appeared between our read and our commit, at
            # revision 0, and our claim replaced it. Put it back, then report the conflict.
            self._restore(stored, t.next)
            decide_checkpoint(stored, self.binding)
        return (stored if not created else self._get()), False

    def _restore(self, theirs: CheckpointRecord, ours: CheckpointRecord) -> None:
        back = dataclasses.replace(theirs, revision=ours.revision + 1, updated_at=after(ours))
        self.store.compare_and_swap(ours.revision, back, durable=True)

    def _give_back(self, rec: CheckpointRecord) -> None:
        """Release our claim (journal empty: the failure is proven pre-effect)."""
        for _ in range(DECIDE_ROUNDS):
            if rec.status is not Status.EXECUTING or rec.execution_fence != self.attempt_id:
                self.last = rec
                return  # another caller marked it uncertain; it stays for reconciliation
            t = release_execution(
                rec, attempt_id=self.attempt_id, at=after(rec), evidence="journal-empty"
            )
            # Proven pre-effect: the effect key goes with the claim (same transaction).
            also = (
                ()
                if self.effect is None
                else (self.effect.release(self.binding.call_id, requires=0),)
            )
            if self._swap(t, rec, durable=False, also=also):
                self.last = t.next
                return
            rec = self._reread()

    def _mark_uncertain(self, rec: CheckpointRecord, reason: str) -> CheckpointRecord:
        """Mark our executing claim uncertain; return the record it ends on."""
        for _ in range(DECIDE_ROUNDS):
            if rec.status is not Status.EXECUTING or rec.execution_fence != self.attempt_id:
                return rec
            t = mark_execution_uncertain(
                rec, attempt_id=self.attempt_id, at=after(rec), reason=clip_reason(reason)
            )
            if self._swap(t, rec, durable=False):
                return t.next
            rec = self._reread()
        return rec

    def _complete(self, rec: CheckpointRecord, output: Any, *, is_error: bool, own: bool) -> Flow:
        """Store ``output`` acting for the attempt on ``rec`` (ours when ``own``)."""
        attempt = self.attempt_id if own else (rec.execution_fence or self.attempt_id)
        for _ in range(DECIDE_ROUNDS):
            if rec.status in DONE:
                # Our own commit may have landed although it reported an error.
                return self._outcome(rec, replayed=not (own and rec.execution_fence == attempt))
            if rec.execution_fence != attempt or rec.status is Status.READY:
                raise OutcomeUnknownError(
                    message=f"call {self.binding.call_id}: the result is known here but the "
                    f"checkpoint moved to {rec.status.value} under another attempt; "
                    "reconcile it, do not retry under a new call id",
                    details=self._details(rec),
                )
            try:
                t = complete_execution(
                    rec,
                    attempt_id=attempt,
                    at=after(rec),
                    result=output,
                    is_error=is_error,
                    max_payload_bytes=self.tool.max_result_bytes,
                )
            except (InvalidArgumentError, PayloadLimitError) as err:
                if own:
                    self._mark_uncertain(
                        rec, f"execute returned a result that cannot be stored ({err.code})"
                    )
                raise
            try:
                end = self._prepared_end(t, own)
                won = self._swap(t, rec, durable=True, remove_op=True, end=end)
                if won:
                    reached("after-completion")
                    return self._outcome(t.next, replayed=False, recovered=not own)
                rec = self._reread()
            except StoreError as store_error:
                raise self._unstored(rec) from store_error
        raise self._unstored(rec)
        yield  # pragma: no cover (keeps this a generator for ``yield from``)
