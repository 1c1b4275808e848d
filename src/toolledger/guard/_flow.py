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
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..approvals import ApprovalRequest
from ..checkpoint.model import Action, Binding, CheckpointRecord, Status, Transition
from ..checkpoint.transitions import (
    DECISIONS,
    claim_execution,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_execution,
)
from ..errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    OutcomeUnknownError,
    PayloadLimitError,
    StoreError,
    StoreUnavailableError,
)
from ..journal import EventHandle
from ..store.base import CreateCheckpoint, RemoveOperation, SwapCheckpoint
from ..tools import (
    ExecuteContext,
    NotRecovered,
    OperationJournal,
    RecoverContext,
    Recovered,
    Tool,
    ToolOutcome,
)
from ._effect_key import EffectKey, resolve
from ._outcomes import outcome
from ._seams import (
    DECIDE_ROUNDS,
    STORE_RETRIES,
    GuardedRun,
    after,
    new_attempt_id,
    now,
    parse_link,
    reached,
    report_transition,
)

if TYPE_CHECKING:
    from ._approval_flow import GateFlow

__all__ = [
    "CANCELLATION",
    "Abandoned",
    "CallFlow",
    "Claim",
    "Execute",
    "Recover",
    "RecoveryFailed",
    "error_payload",
    "join_claims",
]

#: Exceptions that mean "stop", never "the tool failed": no recovery, no error result.
CANCELLATION: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit, GeneratorExit)
try:  # asyncio.CancelledError is a BaseException since 3.8
    import asyncio as _asyncio

    CANCELLATION = (*CANCELLATION, _asyncio.CancelledError)
except ImportError:  # pragma: no cover
    pass

_REASON_MAX = 1024


@dataclass(frozen=True, slots=True)
class Claim:
    """Request: commit these ops durably in one transaction; reply with outcomes or the error.

    An op's ``requires`` (an effect-key claim gating the checkpoint ops) indexes into
    ``ops``: batching several claims into one transaction goes through ``join_claims``.
    """

    ops: tuple[Any, ...]


def join_claims(batches: Iterable[tuple[Any, ...]]) -> builtins.list[Any]:
    """Concatenate several claims' ops for one transaction, re-basing each ``requires``."""
    out: builtins.list[Any] = []
    for ops in batches:
        base = len(out)
        for op in ops:
            requires = getattr(op, "requires", None)
            if requires is not None and base:
                op = dataclasses.replace(op, requires=requires + base)
            out.append(op)
    return out


@dataclass(frozen=True, slots=True)
class Execute:
    """Request: call ``tool.execute(input, ctx)``; reply ``(True, output)`` or ``(False, exc)``."""

    ctx: ExecuteContext


@dataclass(frozen=True, slots=True)
class Recover:
    """Request: call ``tool.recover(ctx)``; reply ``(True, answer)`` or ``(False, exc)``."""

    ctx: RecoverContext


class Abandoned(Exception):
    """Thrown into a flow at its ``Execute`` request: give the claim back, do not execute."""


Request = ApprovalRequest | Claim | Execute | Recover
Flow = Generator[Request, Any, ToolOutcome]


def _reason(text: str) -> str:
    return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1] + "…"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__qualname__}: {str(exc)[:300]}"


def error_payload(exc: BaseException) -> dict[str, str]:
    """The stored result of a pre-effect failure with ``on_error="result"``."""
    return {"error": type(exc).__qualname__, "message": str(exc)[:2000]}


def _group(message: str, errors: builtins.list[BaseException]) -> BaseException:
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None and all(isinstance(e, Exception) for e in errors):
        result: BaseException = group(message, errors)
        return result
    fallback = RecoveryFailed(message)
    fallback.exceptions = tuple(errors)
    return fallback


_DONE = (Status.COMPLETED, Status.DELIVERING, Status.DELIVERED)


class RecoveryFailed(Exception):
    """Python 3.10 stand-in for ``ExceptionGroup``: ``.exceptions`` holds both errors."""

    exceptions: tuple[BaseException, ...] = ()


class CallFlow:
    """One guarded call: binding, attempt, event handle, and the state machine (``run()``).

    Args:
        run: The run (``store``, ``namespace``, ``run_id``).
        tool: The tool.
        binding: The call's binding.
        input: The tool input (exact JSON).
        on_error: ``"raise"`` or ``"result"``.
        gate: The call's approval gate (its first phase).
        justification: Passed to ``ExecuteContext`` and the journal event.
        justification_source: ``"developer"`` or ``"model"``.
        effect: The call's effect key (``_effect_key``), or ``None``.

    ``handle`` (the journal event: ``span``, ``update``, ``end``) and ``attempt_id`` (this
    attempt's execution fence) exist once the gate let the call proceed.
    """

    def __init__(
        self,
        *,
        run: GuardedRun,
        tool: Tool,
        binding: Binding,
        input: Any,
        on_error: str,
        gate: GateFlow,
        justification: str | None,
        justification_source: str = "developer",
        effect: EffectKey | None = None,
    ) -> None:
        self.run = run
        self.store = run.store
        self.tool = tool
        self.binding = binding
        self.input = input
        self.on_error = on_error
        self.gate = gate
        self.handle: Any = None
        self.attempt_id = ""
        self.justification = justification
        self.justification_source = justification_source
        self.effect = effect
        #: The call whose stored result this call returned (same effect key), if any.
        self.deduplicated_from: str | None = None
        self.executed = False
        self.recovered = False
        self.link: dict[str, str] | None = None
        self.last: CheckpointRecord | None = None
        self.first_action: str | None = None
        #: The end record the completion transaction carried (``finish`` reuses it).
        self.end_carried: Any = None
        self._store_errors = 0
        self.operation = OperationJournal(self.store, binding.namespace, binding.call_id)

    # -- store access with outcome-unknown handling --------------------------------------

    def _get(self) -> CheckpointRecord | None:
        rec: CheckpointRecord | None = self.store.get(*self.binding.key)
        return rec

    def _store_failed(self, exc: StoreError) -> None:
        """Count a store error; re-raise it once the budget is spent."""
        self._store_errors += 1
        if self._store_errors > STORE_RETRIES:
            raise exc

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

    def end_fields(
        self,
        payload: Any,
        is_error: bool,
        revision: int | None,
        *,
        replayed: bool,
        recovered: bool,
    ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """``(status, outputs, meta, checkpoint)`` of the journal end record of an outcome."""
        return (
            "replayed" if replayed else "completed",
            {"result": payload, "is_error": is_error},
            self.end_meta(replayed=replayed, recovered=recovered),
            self.checkpoint_link(revision),
        )

    def end_meta(self, *, replayed: bool, recovered: bool) -> dict[str, Any]:
        """The meta the end record carries (``deduplicated_from`` only when set)."""
        meta: dict[str, Any] = {
            "tool_revision": self.tool.revision,
            "attempt_id": self.attempt_id,
            "replayed": replayed,
            "recovered": recovered,
        }
        if self.deduplicated_from is not None:
            meta["deduplicated_from"] = self.deduplicated_from
        return meta

    def checkpoint_link(self, revision: int | None) -> dict[str, Any]:
        """The event's checkpoint link at ``revision``."""
        return {
            "namespace": self.binding.namespace,
            "call_id": self.binding.call_id,
            "revision": revision,
        }

    def _transition(self, t: Transition, status_from: str | None, won: bool) -> None:
        report_transition(getattr(self.handle, "span", None), t, status_from, won)

    def _reread(self) -> CheckpointRecord:
        rec = self._get()
        if rec is None:
            raise InvalidTransitionError(
                message=f"checkpoint {self.binding.namespace}/{self.binding.call_id} vanished "
                "while this attempt used it",
                details={"namespace": self.binding.namespace, "call_id": self.binding.call_id},
            )
        return rec

    # -- the state machine ----------------------------------------------------------------

    def open_event(self) -> None:
        """Start the call's ``tool_call`` journal event and pick the attempt id."""
        binding = self.binding
        self.handle = handle = self.run.begin_event(
            "tool_call",
            self.tool.name,
            justification=self.justification,
            justification_source=self.justification_source,
            inputs=self.input if isinstance(self.input, dict) else {"input": self.input},
            meta={
                "tool_revision": self.tool.revision,
                "input_fingerprint": binding.input_fingerprint,
            },
            checkpoint={
                "namespace": binding.namespace,
                "call_id": binding.call_id,
                "revision": None,
            },
            # Requested by a journaled model call: that call's child.
            parent=self.run.requested_by(binding.call_id) or ...,
            flush=False,  # the start record rides in the claim transaction (commit_claims)
        )
        span = getattr(handle, "span", None)
        self.attempt_id = new_attempt_id(
            getattr(span, "trace_id", None), getattr(span, "span_id", None)
        )

    def run_flow(self) -> Flow:
        """Drive the call to an outcome; see the module docstring for the protocol."""
        stopped = yield from self.gate.flow()
        if stopped is not None:
            return stopped  # waiting or denied: no tool_call event, nothing claimed
        rec = self.gate.checkpoint
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
            if status in _DONE:
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
            reason=_reason(
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
            if rec is None or rec.status is Status.READY or rec.status in _DONE:
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

    # -- what the effect-key resolution (``_effect_key``) uses -----------------------------

    def after(self, rec: CheckpointRecord | None) -> datetime:
        """Now, never earlier than ``rec.updated_at``."""
        return after(rec)

    def report_transition(self, t: Transition, status_from: str | None, won: bool) -> None:
        """Tell the event's span about a CAS (won or lost)."""
        self._transition(t, status_from, won)

    def count_store_error(self, exc: StoreError) -> None:
        """Count a store error against this flow's budget; re-raise once it is spent."""
        self._store_failed(exc)

    def reread_or_none(self) -> CheckpointRecord | None:
        """This call's stored record, or ``None``."""
        return self._get()

    def outcome_of(self, rec: CheckpointRecord, *, replayed: bool) -> ToolOutcome:
        """The outcome of this call ending on ``rec``."""
        return self._outcome(rec, replayed=replayed)

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
            rec, f"execute raised {_describe(exc)} after the operation-journal write"
        )
        if rec.status in _DONE:  # another caller recovered it meanwhile
            return self._outcome(rec, replayed=True)
        if rec.status is not Status.UNCERTAIN:
            raise self._unknown(rec, f"execute raised {_describe(exc)}") from exc
        return (yield from self._recover(rec, exc))

    def _read_journal(self) -> dict[str, Any] | None:
        try:
            return self.operation.read()
        except StoreError:
            # Cannot prove the journal is empty: treat it as written (never release blindly).
            return {"unreadable": True}

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
                rec, attempt_id=self.attempt_id, at=after(rec), reason=_reason(reason)
            )
            if self._swap(t, rec, durable=False):
                return t.next
            rec = self._reread()
        return rec

    def _complete(self, rec: CheckpointRecord, output: Any, *, is_error: bool, own: bool) -> Flow:
        """Store ``output`` acting for the attempt on ``rec`` (ours when ``own``)."""
        attempt = self.attempt_id if own else (rec.execution_fence or self.attempt_id)
        for _ in range(DECIDE_ROUNDS):
            if rec.status in _DONE:
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

    def _unstored(self, rec: CheckpointRecord) -> OutcomeUnknownError:
        """The result is known here but could not be stored: the checkpoint still says so."""
        self.last = rec
        return OutcomeUnknownError(
            message=f"call {self.binding.call_id}: the tool ran but its result could not be "
            f"stored; the checkpoint still says {rec.status.value}. Reconcile it; do not "
            "retry under a new call id",
            details=self._details(rec),
        )

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
                answer if error is None else _group("execute and recover failed", [error, answer])
            )
            raise self._unknown(rec, f"recover raised {_describe(answer)}") from cause
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

    # -- results ----------------------------------------------------------------------------

    def _details(self, rec: CheckpointRecord) -> dict[str, Any]:
        return {
            "namespace": self.binding.namespace,
            "call_id": self.binding.call_id,
            "tool_name": self.binding.tool_name,
            "status": rec.status.value,
            "revision": rec.revision,
            "attempt_id": rec.execution_fence,
            "reason": rec.uncertain_reason,
        }

    def _unknown(self, rec: CheckpointRecord, why: str) -> OutcomeUnknownError:
        self.last = rec
        return OutcomeUnknownError(
            message=f"call {self.binding.namespace}/{self.binding.call_id} "
            f"({self.binding.tool_name}) may have taken effect and its outcome could not be "
            f"recovered ({why}); the checkpoint stays {rec.status.value}. Reconcile it; do "
            "not retry under a new call id",
            details={**self._details(rec), "why": why},
        )

    def _outcome(
        self, rec: CheckpointRecord, *, replayed: bool, recovered: bool = False
    ) -> ToolOutcome:
        self.last = rec
        self.recovered = recovered
        return outcome(rec, replayed=replayed, recovered=recovered)
