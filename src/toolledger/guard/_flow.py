"""The guarded-call state machine, shared by the sync, async and batch drivers.

Rules this module keeps:

- The flow is a generator: it does the store reads and writes itself, and *yields* what
  the driver must do (``ApprovalRequest``: ask the approver; ``Claim``: commit the
  create+claim ops, possibly batched with other calls; ``Execute``/``Recover``: call user
  code, sync or async). The driver sends back the outcome. So one state machine serves
  ``call``, ``acall`` and ``call_many``.
- It starts with the approval gate (``GateFlow``) for every call, gated or not: the stored
  decision for the call binds it whatever the caller's tool says. A call the gate stops
  (pending, denied) never opens its ``tool_call`` event; the gate's checkpoint read is
  the flow's first read.
- Decide from the stored record, act only after a CAS wins. A lost CAS, or a store error
  whose commit outcome is unknown, is answered by re-reading and deciding again; the
  fences (this attempt's ``attempt_id``) tell whether our own write landed.
- ``execute`` is invoked at most once per flow, and only after the durable claim. Nothing
  here ever moves a record back to ``ready`` except ``release_execution`` by the owner with
  an empty operation journal.
- Cancellation (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``) never
  reaches ``recover``.

The flow is split by concern: what it yields and keeps (``_flow_state``), its outcomes
and errors (``_flow_outcomes``), its journal event and span (``_flow_telemetry``), its
commits (``_flow_commit``); this module decides and acts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

from ..checkpoint.model import Action, Binding, CheckpointRecord, Status
from ..checkpoint.transitions import (
    DECISIONS,
    claim_execution,
    decide_checkpoint,
    mark_execution_uncertain,
)
from ..errors import InvalidTransitionError, StoreError, StoreUnavailableError
from ..store.base import SwapCheckpoint
from ..tools import ExecuteContext, NotRecovered, RecoverContext, Recovered, ToolOutcome
from ._effect_key import resolve
from ._flow_commit import FlowCommits
from ._flow_outcomes import clip_reason, describe, error_payload, group_errors
from ._flow_state import CANCELLATION, Abandoned, Execute, Flow, Recover, Request
from ._seams import DECIDE_ROUNDS, DONE, after, parse_link, reached

__all__ = ["CallFlow"]


class CallFlow(FlowCommits):
    """One guarded call's state machine: ``run_flow()`` decides and acts (see ``FlowState``)."""

    def run_flow(self) -> Flow:
        """Drive the call to an outcome; see the module docstring for the protocol."""
        stopped = yield from self.gate.flow()
        if stopped is not None:
            return stopped  # waiting or denied: no tool_call event, nothing claimed
        rec = self.gate.checkpoint
        if rec is not None and rec.status in DONE:
            # A replay (the gate checked the binding): nothing to claim or write here. Its
            # journal event is one record, written when the call finishes (``finish``).
            self.first_action = DECISIONS[rec.status].value
            self.replay_only = True
            return self._outcome(rec, replayed=True)
        self.open_event()
        # What decide_checkpoint answers for the record as first found (telemetry's
        # ``checkpoint.action``): fixed here, before any transition moves the record on.
        self.first_action = Action.EXECUTE.value if rec is None else DECISIONS[rec.status].value
        for _ in range(DECIDE_ROUNDS):
            if rec is None and self.effect is not None:
                found = yield from resolve(self, None)  # another call holds the key?
                if isinstance(found, ToolOutcome):
                    return found
                rec = found
                if rec is not None:
                    continue
            if rec is None:
                rec, go = yield from self._claim_new()
                if go:
                    assert rec is not None
                    return (yield from self._execute(rec))
                continue
            decide_checkpoint(rec, self.binding)  # BINDING_CONFLICT
            self.last = rec
            status = rec.status
            if status in DONE:
                return self._outcome(rec, replayed=True)
            if status is Status.READY:
                if self.executed:
                    raise InvalidTransitionError(
                        message=f"call {self.binding.call_id} went back to ready while this "
                        "attempt held it; refusing to execute twice",
                        details={"call_id": self.binding.call_id},
                    )
                t = claim_execution(rec, attempt_id=self.attempt_id, at=after(rec))
                swap = SwapCheckpoint(t.expected_revision, t.next)
                ops: tuple[Any, ...] = (swap,)
                if self.effect is not None:  # the key is claimed with the claim
                    ops = (
                        self.effect.claim(self.binding.call_id),
                        dataclasses.replace(swap, requires=0),
                    )
                reply = yield from self._claim_ops(ops)
                if reply is not None:
                    self._transition(t, status.value, bool(reply[-1]))
                    if reply[-1]:
                        return (yield from self._execute(t.next))
                    if self.effect is not None and not reply[0]:
                        found = yield from resolve(self, rec)
                        if isinstance(found, ToolOutcome):
                            return found
                rec = self._get()
                continue
            if status is Status.EXECUTING:
                if rec.execution_fence == self.attempt_id and not self.executed:
                    # Our claim landed although its commit reported an error.
                    return (yield from self._execute(rec))
                rec = self._found_executing(rec)
                continue
            # uncertain
            if rec.execution_fence != self.attempt_id:
                self.link = parse_link(rec.execution_fence)
            return (yield from self._recover(rec, None))
        raise StoreUnavailableError(
            message=f"call {self.binding.call_id}: the store kept refusing writes "
            f"({DECIDE_ROUNDS} rounds); nothing was executed twice",
            details={"namespace": self.binding.namespace, "call_id": self.binding.call_id},
        )

    def _found_executing(self, rec: CheckpointRecord) -> CheckpointRecord | None:
        """Another attempt's claim: mark it uncertain (never execute); return the re-read."""
        self.link = parse_link(rec.execution_fence)
        claimed = rec.execution_claimed_at
        t = mark_execution_uncertain(
            rec,
            attempt_id=rec.execution_fence or self.attempt_id,
            at=after(rec),
            reason=clip_reason(
                f"found executing by another caller (attempt {rec.execution_fence}, "
                f"claimed {claimed.isoformat() if claimed else '?'}); outcome unknown"
            ),
        )
        return t.next if self._swap(t, rec, durable=False) else self._get()

    def reconcile_flow(self) -> Generator[Request, Any, CheckpointRecord | None]:
        """Reconcile this checkpoint without ever executing; return the record it ends on.

        For a call found holding another call's effect key: ``executing`` is marked
        uncertain, ``uncertain`` goes to ``recover`` (``OUTCOME_UNKNOWN`` unless it proves
        the outcome). Returns the completed (or later) record, or the absent/``ready``
        record for the caller to decide on.
        """
        rec = self._get()
        for _ in range(DECIDE_ROUNDS):
            if rec is None or rec.status is Status.READY or rec.status in DONE:
                return rec
            if rec.status is Status.EXECUTING:
                rec = self._found_executing(rec)
                continue
            if rec.execution_fence != self.attempt_id:
                self.link = parse_link(rec.execution_fence)
            yield from self._recover(rec, None)
            return self.last
        raise self._unknown(self._reread(), "the store kept refusing writes")

    def for_holder(self, binding: Binding, handle: Any) -> CallFlow:
        """A flow for the call holding this call's effect key (reconciled, never executed)."""
        sub = CallFlow(
            run=self.run,
            tool=self.tool,
            binding=binding,
            input=None,
            on_error="raise",
            gate=self.gate,  # not run: reconcile_flow never passes a gate
            justification=None,
        )
        sub.handle = handle
        sub.attempt_id = self.attempt_id
        return sub

    def _execute(self, rec: CheckpointRecord) -> Flow:
        self.executed = True
        self.last = rec
        reached("after-claim")
        ctx = ExecuteContext(
            binding=self.binding,
            attempt_id=self.attempt_id,
            operation=self.operation,
            run_id=self.run.run_id,
            justification=self.justification,
        )
        try:
            ok, value = yield Execute(ctx)
        except Abandoned:
            self._give_back(rec)
            raise
        if ok:
            reached("after-execute")
            return (yield from self._complete(rec, value, is_error=False, own=True))
        exc: BaseException = value
        journal = self._read_journal()
        if isinstance(exc, CANCELLATION):
            try:
                if journal is None:
                    self._give_back(rec)
                else:
                    self._mark_uncertain(
                        rec,
                        f"execute was interrupted ({type(exc).__qualname__}) after the "
                        "operation-journal write; outcome unknown",
                    )
            except Exception as write_error:  # the interruption wins; the record says executing
                exc.__context__ = write_error
            raise exc
        if journal is None:
            if self.on_error == "result":
                return (yield from self._complete(rec, error_payload(exc), is_error=True, own=True))
            try:
                self._give_back(rec)
            except StoreError as store_error:  # the claim stays; the original error wins
                exc.__context__ = store_error
            raise exc
        rec = self._mark_uncertain(
            rec, f"execute raised {describe(exc)} after the operation-journal write"
        )
        if rec.status in DONE:  # another caller recovered it meanwhile
            return self._outcome(rec, replayed=True)
        if rec.status is not Status.UNCERTAIN:
            raise self._unknown(rec, f"execute raised {describe(exc)}") from exc
        return (yield from self._recover(rec, exc))

    def _read_journal(self) -> dict[str, Any] | None:
        try:
            return self.operation.read()
        except StoreError:
            # Cannot prove the journal is empty: treat it as written (never release blindly).
            return {"unreadable": True}

    def _recover(self, rec: CheckpointRecord, error: BaseException | None) -> Flow:
        """``rec`` is uncertain: ask ``recover``; never execute."""
        self.last = rec
        if self.tool.recover is None:
            raise self._unknown(rec, "the tool has no recover function") from error
        rctx = RecoverContext(
            binding=self.binding,
            attempt_id=rec.execution_fence or self.attempt_id,
            operation=self.operation,
            run_id=self.run.run_id,
            reason=rec.uncertain_reason,
            error=error,
        )
        ok, answer = yield Recover(rctx)
        if not ok:
            if isinstance(answer, CANCELLATION):
                raise answer
            cause = (
                answer
                if error is None
                else group_errors("execute and recover failed", [error, answer])
            )
            raise self._unknown(rec, f"recover raised {describe(answer)}") from cause
        if isinstance(answer, Recovered):
            return (
                yield from self._complete(rec, answer.output, is_error=answer.is_error, own=False)
            )
        if answer is None or isinstance(answer, NotRecovered):
            why = getattr(answer, "reason", None) or "recover could not prove the outcome"
            raise self._unknown(rec, why) from error
        raise self._unknown(
            rec, f"recover returned {type(answer).__name__}, not Recovered/NotRecovered/None"
        ) from error
