"""One guarded call's flow over its frozen ``Call``: decide, claim, execute, complete.

Rules this module keeps:

- The flow does no I/O. ``CallFlow.run()`` is a generator: every store read and commit,
  opening the journal event, asking the approver and calling user code is a request it
  *yields* (``_call``); the drivers (``_drivers``: sync, async, batches) perform them and
  send the answer back, or throw the store error in where it was yielded. So one state
  machine serves ``call``, ``acall`` and ``call_many``, and a test can drive every branch
  by answering its requests (``tests/guard/test_flow_scripted.py``).
- It starts by reading the checkpoint with the stored approval for its key, for every
  call, gated or not, and runs the approval gate (``GateFlow``) for a gated call or a
  decision stored for one that would execute: the stored decision binds the call whatever
  the caller's tool says. A call the gate stops never opens its ``tool_call`` event.
- Decide from the stored record, act only after a CAS wins. A lost CAS, or a store error
  whose commit outcome is unknown, is answered by re-reading and deciding again; this
  attempt's fence tells whether its own write landed.
- ``execute`` is requested at most once per flow, and only after the durable claim.
  Nothing here ever moves a record back to ``ready`` except ``release_execution`` by the
  owner with an empty operation journal (the effect key goes with it, same transaction).
- Cancellation (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``) never
  reaches ``recover``.
- Effect keys are decisions here: the key is claimed in the claim transaction (op 0, the
  checkpoint ops gated on it). A key another call holds: holder done, this call's record
  is written as a completed copy of the holder's result (one relaxed commit,
  ``deduplicated_from``); holder in flight, it is reconciled as its own id would be
  (``reconcile``: marked uncertain, ``recover``, else ``OUTCOME_UNKNOWN`` naming it);
  holder erased, ``TOMBSTONED``. The call never executes.
- The same action (tool name + revision + input fingerprint) under a new call id is
  decided in the claim transaction too, by default: the call's two keys (``ActionKeys``)
  are claimed first and the checkpoint ops gated on them. Lost: while the namespace's
  latest call of the action is ``executing``/``uncertain`` the call is blocked
  (``OUTCOME_UNKNOWN``, ``same_action_as``); while the conversation's latest call of it
  is ``completed`` and unseen (not delivered) its result is served (a completed copy,
  ``deduplicated_from``); otherwise the keys are taken over (a CAS on their holder) and
  the call executes. A tool with an effect key, or ``independent=True``, has no such keys.
- A claim held by a live attempt (``_seams.is_live``) is reported as such and left
  alone: never marked uncertain.
- Every error that leaves the flow names the call's namespace, call id and stored status;
  a call that may have taken effect ends ``OUTCOME_UNKNOWN``, never with a guess.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Generator
from datetime import datetime, timezone
from functools import partial
from typing import Any

from ..checkpoint import stored_result, unencodable_result
from ..checkpoint.model import Action, CheckpointRecord, Status, Transition
from ..checkpoint.transitions import (
    DECISIONS,
    check_binding,
    claim_execution,
    complete_execution,
    create_and_claim,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_execution,
)
from ..errors import (
    SETTLE_HINT,
    InvalidArgumentError,
    InvalidTransitionError,
    OutcomeUnknownError,
    PayloadLimitError,
    StoreError,
    StoreUnavailableError,
    TombstonedError,
)
from ..store import tombstoned_error
from ..store.base import (
    NO_CAPABILITIES,
    Capabilities,
    ClaimEffectKey,
    CreateCheckpoint,
    RemoveOperation,
    SwapCheckpoint,
    no_approval,
)
from ..tools import NotRecovered, Recovered, ToolOutcome
from ._approval_flow import GateFlow
from ._call import (
    CANCELLATION,
    OPEN,
    Abandoned,
    ActionKeys,
    Call,
    Commit,
    EndFields,
    Execute,
    Read,
    ReadGate,
    ReadHolder,
    ReadOperation,
    ReadTombstone,
    Recover,
    Request,
    action_keys,
    clip_reason,
    describe,
    error_payload,
    group_errors,
    outcome,
)
from ._seams import (
    CRASH_ACTIONS,
    DECIDE_ROUNDS,
    DONE,
    EFFECT_KEY_ROUNDS,
    STATUS_VALUE,
    STORE_RETRIES,
    after,
    is_live,
    parse_link,
    reached,
    report_transition,
)

__all__ = ["CallFlow", "Flow"]

#: What ``decide_checkpoint`` answers for each status, as stored strings.
STATUS_ACTION: dict[Status, str] = {s: a.value for s, a in DECISIONS.items()}

Flow = Generator[Request, Any, ToolOutcome]
_Step = Generator[Request, Any, Any]


def _same(value: Any) -> Any:
    """``value`` (an approval already read, handed to the gate as its first read)."""
    return value


class CallFlow:
    """One guarded call's flow: ``run()`` yields requests and returns the ``ToolOutcome``.

    Args:
        call: The call (never changed).
        attempt_id: This attempt's execution fence (the driver's ``Open`` answer sets it;
            given for a holder's reconciliation).
        span: The span transitions are reported to (``Open`` sets it).
        journaled: Whether completions carry the call's journal end record.
        store_capabilities: What the store declares (``start`` reads it once per call).

    What the flow found, read by the driver when the call ends: ``last`` (the record it
    ended on), ``link`` (the claiming span of another attempt's claim it found),
    ``first_action``, ``deduplicated_from``, ``replay_only`` (the gate found the call
    done), ``executed``, ``recovered``. The driver keeps ``handle`` (the journal event)
    and ``end_carried`` (the end record a completion carried) here too.
    """

    def __init__(
        self,
        call: Call,
        *,
        attempt_id: str = "",
        span: Any = None,
        journaled: bool = True,
        store_capabilities: Capabilities = NO_CAPABILITIES,
    ) -> None:
        self.call = call
        #: What the store declares (``Capabilities``), for the drivers performing requests.
        self.store_capabilities = store_capabilities
        self.binding = call.binding
        self.key = call.binding.key  # (namespace, call id): a property, read once
        self.attempt_id = attempt_id
        self.span = span
        self.journaled = journaled
        self.handle: Any = None
        self.end_carried: Any = None
        self.last: CheckpointRecord | None = None
        self.link: dict[str, str] | None = None
        self.first_action: str | None = None
        self.deduplicated_from: str | None = None
        self.replay_only = False
        self.executed = False
        self.recovered = False
        self._store_errors = 0
        #: The holders the next claim of the same-action keys takes over, once decided.
        self._replaces: tuple[str | None, str | None] = (None, None)
        #: Whether the last claim lost a same-action key (decide before claiming again).
        self._keys_lost = False
        self._action: ActionKeys | None = None

    @property
    def action(self) -> ActionKeys | None:
        """The call's same-action keys (derived once, when first needed), or ``None``."""
        conversation = self.call.conversation
        if conversation is None:
            return None
        if self._action is None:
            self._action = action_keys(self.binding, conversation)
        return self._action

    # -- decide ----------------------------------------------------------------------------

    def run(self) -> Flow:
        """Drive the call to an outcome; see the module docstring for the protocol."""
        call = self.call
        # The checkpoint and the stored approval for the key, as of one moment where the
        # store reads both in one round trip (``first``: the approval, decoded when asked).
        rec, first = yield ReadGate(self.key)
        if rec is not None:
            check_binding(rec, self.binding)  # BINDING_CONFLICT
        # The gate (``GateFlow``) runs for a gated call, and for any call that would execute
        # once it finds a decision stored for the key (a stored decision binds every later
        # attempt, whatever the Tool object passed).
        if call.approval is not None or (
            (rec is None or rec.status is Status.READY)
            # (``no_approval``: the store found none stored; nothing to decode)
            and (first is None or (first is not no_approval and (stored := first()) is not None))
        ):
            if call.approval is None and first is not None:
                first = partial(_same, stored)
            stopped = yield from GateFlow(call).flow(rec, first)
            if stopped is not None:
                return stopped  # waiting or denied: no tool_call event, nothing claimed
        if rec is not None and rec.status in DONE:
            # A replay (the gate checked the binding): nothing to claim or write here. Its
            # journal event is one record, written when the call finishes.
            self.first_action = STATUS_ACTION[rec.status]
            self.replay_only = True
            return self._outcome(rec, replayed=True)
        self.attempt_id, self.span = yield OPEN
        # What decide_checkpoint answers for the record as first found (telemetry's
        # ``checkpoint.action``): fixed here, before any transition moves the record on.
        self.first_action = "execute" if rec is None else STATUS_ACTION[rec.status]
        effect = self.call.effect
        for _ in range(DECIDE_ROUNDS):
            if rec is None and effect is not None:
                found = yield from self._held_key(None)  # another call holds the key?
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
                if self._keys_lost:  # the same action is another call's: decide on it
                    found = yield from self._same_action(None)
                    if isinstance(found, ToolOutcome):
                        return found
                    rec = found
                continue
            decide_checkpoint(rec, self.binding)  # BINDING_CONFLICT
            self.last = rec
            status = rec.status
            if status in DONE:
                return self._outcome(rec, replayed=True)
            if status is Status.READY:
                rec = yield from self._claim_ready(rec)
                if isinstance(rec, ToolOutcome):
                    return rec
                continue
            if status is Status.EXECUTING:
                if rec.execution_fence == self.attempt_id and not self.executed:
                    # Our claim landed although its commit reported an error.
                    return (yield from self._execute(rec))
                rec = yield from self._found_executing(rec)
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

    def reconcile(self) -> Generator[Request, Any, CheckpointRecord | None]:
        """Reconcile this checkpoint without ever executing; return the record it ends on.

        For the call holding another call's effect key: ``executing`` is marked uncertain,
        ``uncertain`` goes to ``recover`` (``OUTCOME_UNKNOWN`` unless it proves the
        outcome). Returns the completed (or later) record, or the absent/``ready`` record
        for the caller to decide on.
        """
        rec: CheckpointRecord | None = yield Read(self.key)
        for _ in range(DECIDE_ROUNDS):
            if rec is None or rec.status is Status.READY or rec.status in DONE:
                return rec
            if rec.status is Status.EXECUTING:
                rec = yield from self._found_executing(rec)
                continue
            if rec.execution_fence != self.attempt_id:
                self.link = parse_link(rec.execution_fence)
            yield from self._recover(rec, None)
            return self.last
        raise self._unknown((yield from self._reread()), "the store kept refusing writes")

    def _found_executing(self, rec: CheckpointRecord) -> _Step:
        """Another attempt's claim: mark it uncertain (never execute); return the re-read.

        Raises:
            OutcomeUnknownError: ``OUTCOME_UNKNOWN`` with ``details["live_attempt"]``: a
                live attempt holds the claim (left as it is; it will store the result).
        """
        self.link = parse_link(rec.execution_fence)
        claimed = rec.execution_claimed_at
        if is_live(rec.execution_fence):
            since = claimed.isoformat() if claimed else "?"
            self.last = rec
            raise OutcomeUnknownError(
                message=f"call {self.binding.namespace}/{self.binding.call_id} "
                f"({self.binding.tool_name}) is held by a live attempt since {since} "
                f"(attempt {rec.execution_fence}); not executed here. Its outcome is not "
                "known yet: do not retry it under a new call id; call again later for its "
                "result",
                details={**self._details(rec), "live_attempt": True, "held_since": since},
            )
        t = mark_execution_uncertain(
            rec,
            attempt_id=rec.execution_fence or self.attempt_id,
            at=after(rec),
            reason=clip_reason(
                f"found executing by another caller (attempt {rec.execution_fence}, "
                f"claimed {claimed.isoformat() if claimed else '?'}); outcome unknown"
            ),
        )
        if (yield from self._swap(t, rec, durable=False)):
            return t.next
        return (yield Read(self.key))

    # -- claim -----------------------------------------------------------------------------

    def _claim_new(self) -> Generator[Request, Any, tuple[CheckpointRecord | None, bool]]:
        when = datetime.now(timezone.utc)  # ``now()``, without its frame
        new, t = create_and_claim(self.binding, attempt_id=self.attempt_id, at=when)
        if CRASH_ACTIONS:
            reached("before-claim")
        effect = self.call.effect
        # ``self.action`` without its frame: the same-action keys, derived once per flow.
        action, conversation = self._action, self.call.conversation
        if action is None and conversation is not None:
            action = self._action = action_keys(self.binding, conversation)
        keys = 0
        if action is not None:  # both same-action keys first; the rest only if both won
            keys = 2
            ops: tuple[Any, ...] = (
                *action.claims(self.binding.call_id, self._replaces),
                CreateCheckpoint(new, requires=1),
                SwapCheckpoint(0, t.next, requires=1),
            )
        elif effect is None:
            ops = (CreateCheckpoint(new), SwapCheckpoint(0, t.next))
        else:  # the effect key first; the create and the claim only if this call holds it
            keys = 1
            ops = (
                effect.claim(self.binding.call_id),
                CreateCheckpoint(new, requires=0),
                SwapCheckpoint(0, t.next, requires=0),
            )
        try:
            reply = yield Commit(ops, True, True)
        except StoreError:
            self._store_errors += 1
            if self._store_errors > STORE_RETRIES:
                raise
            return (yield Read(self.key)), False  # outcome unknown: the re-read tells
        self._keys_lost = False
        if keys:
            if not reply[keys - 1]:  # another call holds a key: nothing was written
                self._keys_lost = action is not None
                return None, False
            reply = reply[keys:]
        (created, stored), won = reply[0], bool(reply[1])
        if self.span is not None:
            create_t = Transition(
                action=t.action, expected_revision=-1, next=new, name="create_checkpoint"
            )
            report_transition(self.span, create_t, None, bool(created))
            report_transition(self.span, t, "ready", won)
        if won and (created or stored.binding == self.binding):
            return t.next, True
        if won:
            # A record for another binding appeared between our read and our commit, at
            # revision 0, and our claim replaced it. Put it back, then report the conflict.
            back = dataclasses.replace(
                stored, revision=t.next.revision + 1, updated_at=after(t.next)
            )
            yield from self._commit((SwapCheckpoint(t.next.revision, back),))
            decide_checkpoint(stored, self.binding)
        return (stored if not created else (yield Read(self.key))), False

    def _claim_ready(self, rec: CheckpointRecord) -> _Step:
        """Claim a ``ready`` record; execute on a win, else return what to decide on next."""
        if self.executed:
            raise InvalidTransitionError(
                message=f"call {self.binding.call_id} went back to ready while this "
                "attempt held it; refusing to execute twice",
                details={"call_id": self.binding.call_id},
            )
        t = claim_execution(rec, attempt_id=self.attempt_id, at=after(rec))
        swap = SwapCheckpoint(t.expected_revision, t.next)
        effect = self.call.effect
        action = self.action
        ops: tuple[Any, ...] = (swap,)
        if action is not None:  # the same-action keys are claimed with the claim
            claims = action.claims(self.binding.call_id, self._replaces)
            ops = (*claims, dataclasses.replace(swap, requires=1))
        elif effect is not None:  # the key is claimed with the claim
            ops = (effect.claim(self.binding.call_id), dataclasses.replace(swap, requires=0))
        reply = yield from self._commit(ops, claim=True)
        if reply is not None:
            self._report(t, "ready", bool(reply[-1]))
            if reply[-1]:
                return (yield from self._execute(t.next))
            found: Any = None
            if action is not None and not reply[1]:
                found = yield from self._same_action(rec)
            elif effect is not None and not reply[0]:
                found = yield from self._held_key(rec)
            if isinstance(found, ToolOutcome):
                return found
        return (yield Read(self.key))

    # -- effect keys -----------------------------------------------------------------------

    def _held_key(self, own: CheckpointRecord | None) -> _Step:
        """Decide a call whose own checkpoint is absent (``own=None``) or ``ready``.

        Returns ``None`` (the key is free or this call's: claim it with the checkpoint),
        this call's own record (it moved meanwhile: decide on it), or a ``ToolOutcome``
        (the holder's stored result, ``deduplicated_from`` set).

        Raises:
            OutcomeUnknownError: ``OUTCOME_UNKNOWN``: the holder may have taken effect and
                could not be recovered (never executes).
            TombstonedError: ``TOMBSTONED``: the holder was erased by retention.
        """
        ek = self.call.effect
        assert ek is not None
        me = self.binding.call_id
        for _ in range(EFFECT_KEY_ROUNDS):
            holder = yield ReadHolder(ek.namespace, ek.key)
            if holder is None or holder == me:
                return None
            rec = yield Read((ek.namespace, holder))
            if rec is None:
                tomb = yield ReadTombstone((ek.namespace, holder))
                if tomb is not None:
                    base = tombstoned_error(tomb)
                    raise TombstonedError(
                        message=f"call {me}: its effect key belongs to call {holder}. "
                        f"{base.message}",
                        details={**base.details, **self._key_details(holder)},
                    )
                if (yield ReadHolder(ek.namespace, ek.key)) != holder:
                    continue  # released meanwhile: decide again
                raise OutcomeUnknownError(
                    message=f"call {me}: its effect key belongs to call {holder}, which has "
                    "no checkpoint; not executed. Reconcile it by hand",
                    details=self._key_details(holder),
                )
            if rec.status is Status.READY:
                # A holder's key is released in the transaction that releases its claim,
                # so a ready holder let go of it meanwhile (or was just created): read again.
                if (yield ReadHolder(ek.namespace, ek.key)) != holder:
                    continue
                raise InvalidTransitionError(
                    message=f"call {me}: its effect key belongs to call {holder}, which is "
                    "ready (claimed, then not executed); not executed. Run or reconcile "
                    f"{holder} first",
                    details=self._key_details(holder),
                )
            if rec.status not in DONE:
                rec = yield from self._reconcile_holder(rec)
                if rec is None or rec.status is Status.READY:
                    continue
            return (yield from self._copy(own, rec))
        raise InvalidTransitionError(
            message=f"call {me}: its effect key kept changing holders; not executed",
            details=self._key_details(None),
        )

    def _same_action(self, own: CheckpointRecord | None) -> _Step:
        """Decide a call whose same-action keys another call holds (nothing was written).

        Returns ``None`` (claim again, taking the keys over: ``_replaces``), this call's
        own record (``own``, to decide on), or a ``ToolOutcome`` (the conversation's
        unseen result of the action, ``deduplicated_from`` set).

        Raises:
            OutcomeUnknownError: ``OUTCOME_UNKNOWN`` with ``details["same_action_as"]``: an
                earlier call of the action is ``executing`` or ``uncertain``.
        """
        ak = self.action
        assert ak is not None
        me = self.binding.call_id
        seen_by = yield ReadHolder(ak.namespace, ak.seen)
        if seen_by is not None and seen_by != me:
            held = yield Read((ak.namespace, seen_by))
            if held is not None and held.status in (Status.COMPLETED, Status.DELIVERING):
                return (yield from self._copy(own, held, key=(ak, seen_by)))
            if held is not None and held.status in (Status.EXECUTING, Status.UNCERTAIN):
                raise self._same_action_blocked(held)
        done_by = yield ReadHolder(ak.namespace, ak.action)
        if done_by is not None and done_by not in (me, seen_by):
            held = yield Read((ak.namespace, done_by))
            if held is not None and held.status in (Status.EXECUTING, Status.UNCERTAIN):
                raise self._same_action_blocked(held)
        # Delivered, completed in another conversation, released or erased: taken over.
        self._replaces = (
            None if done_by == me else done_by,
            None if seen_by == me else seen_by,
        )
        return own if own is None else (yield Read(self.key))

    def _same_action_blocked(self, held: CheckpointRecord) -> OutcomeUnknownError:
        """The error of a call blocked by ``held``, an earlier call of the same action."""
        other = held.binding.call_id
        me = f"call {self.binding.namespace}/{self.binding.call_id} ({self.binding.tool_name})"
        claimed = held.execution_claimed_at
        since = claimed.isoformat() if claimed else "?"
        live = held.status is Status.EXECUTING and is_live(held.execution_fence)
        if live:
            message = (
                f"{me} asks for the same action (same tool, revision and input) as call "
                f"{other}, which is held by a live attempt since {since}: it is being "
                f"performed now. Not executed; do not retry it: call {other}'s result is "
                "stored when it finishes"
            )
        else:
            message = (
                f"{me} asks for the same action (same tool, revision and input) as call "
                f"{other} ({held.status.value}), which may already have happened and is "
                "being settled. Not executed; do not retry it: settle the earlier call "
                f"first (`toolledger checkpoints`, `toolledger resolve {other} ...`)"
            )
        self.link = parse_link(held.execution_fence)
        return OutcomeUnknownError(
            message=message,
            details={
                "namespace": self.binding.namespace,
                "call_id": self.binding.call_id,
                "tool_name": self.binding.tool_name,
                "same_action_as": other,
                "status": held.status.value,
                "live_attempt": live,
                "held_since": since,
            },
        )

    def _reconcile_holder(self, rec: CheckpointRecord) -> _Step:
        """Reconcile the holder's ``executing``/``uncertain`` checkpoint; never execute."""
        holder_call = dataclasses.replace(
            self.call, binding=rec.binding, input=None, effect=None, conversation=None
        )
        sub = CallFlow(
            holder_call,
            attempt_id=self.attempt_id,
            span=self.span,
            journaled=False,
            store_capabilities=self.store_capabilities,
        )
        try:
            done = yield from sub.reconcile()
        except OutcomeUnknownError as exc:
            holder = rec.binding.call_id
            raise OutcomeUnknownError(
                message=f"call {self.binding.call_id}: its effect key belongs to call "
                f"{holder}; not executed. {exc.message}",
                details={**exc.details, **self._key_details(holder)},
            ) from exc.__cause__
        finally:
            if sub.link is not None:
                self.link = sub.link
        return done

    def _copy(
        self,
        own: CheckpointRecord | None,
        held: CheckpointRecord,
        *,
        key: tuple[ActionKeys, str] | None = None,
    ) -> _Step:
        """Store the holder's result as this call's (one relaxed commit); return the outcome.

        ``key``: the same-action keys and the holder of their conversation key, which this
        call takes over in the same commit (the copy gated on it), so the copy is the
        conversation's latest call of the action: once it is seen, the action is too.
        """
        result = held.result
        assert result is not None
        transitions: builtins.list[tuple[Transition, str | None]] = []
        ops: builtins.list[Any] = []
        if key is not None:
            keys, holder = key
            ops.append(
                ClaimEffectKey(keys.namespace, keys.seen, self.binding.call_id, replaces=holder)
            )
        if own is None:
            base = create_checkpoint(self.binding, at=after(None))
            created = Transition(
                action=Action.EXECUTE, expected_revision=-1, next=base, name="create_checkpoint"
            )
            transitions.append((created, None))
            ops.append(CreateCheckpoint(base, requires=0 if ops else None))
        else:
            base = own
        claim = claim_execution(base, attempt_id=self.attempt_id, at=after(base))
        gate = len(ops) - 1 if ops else None
        ops.append(SwapCheckpoint(claim.expected_revision, claim.next, requires=gate))
        transitions.append((claim, base.status.value))
        done = complete_execution(
            claim.next,
            attempt_id=self.attempt_id,
            at=after(claim.next),
            result=result.payload,
            is_error=result.is_error,
            max_payload_bytes=self.call.tool.max_result_bytes,
        )
        ops.append(SwapCheckpoint(claim.next.revision, done.next, requires=len(ops) - 1))
        transitions.append((done, "executing"))
        out = yield from self._commit(tuple(ops), durable=False)
        if out is None:
            return (yield Read(self.key))
        if key is not None:
            if not out[0]:  # the conversation's key moved meanwhile: decide again
                return own if own is None else (yield Read(self.key))
            out = out[1:]
        wins = [out[0][0] if isinstance(out[0], tuple) else bool(out[0]), *map(bool, out[1:])]
        for (t, source), won in zip(transitions, wins, strict=True):
            self._report(t, source, won)
        if not wins[-1]:
            return (yield Read(self.key))  # this call's own record moved: decide again
        holder = held.binding.call_id
        self.deduplicated_from = holder
        self.last = done.next
        return outcome(done.next, replayed=True, deduplicated_from=holder)

    def _key_details(self, holder: str | None) -> dict[str, Any]:
        return {
            "namespace": self.binding.namespace,
            "for_call_id": self.binding.call_id,
            "effect_key_holder": holder,
            "tool_name": self.binding.tool_name,
        }

    # -- execute ---------------------------------------------------------------------------

    def _execute(self, rec: CheckpointRecord) -> Flow:
        self.executed = True
        self.last = rec
        if CRASH_ACTIONS:
            reached("after-claim")
        try:
            ok, value = yield Execute(self.binding, self.attempt_id)
        except Abandoned:
            yield from self._give_back(rec)
            raise
        if ok:
            if CRASH_ACTIONS:
                reached("after-execute")
            return (yield from self._complete(rec, value, is_error=False, own=True))
        exc: BaseException = value
        try:
            journal = yield ReadOperation(self.key)
        except StoreError:
            # Cannot prove the journal is empty: treat it as written (never release blindly).
            journal = {"unreadable": True}
        if isinstance(exc, CANCELLATION):
            try:
                if journal is None:
                    yield from self._give_back(rec)
                else:
                    yield from self._mark_uncertain(
                        rec,
                        f"execute was interrupted ({type(exc).__qualname__}) after the "
                        "operation-journal write; outcome unknown",
                    )
            except Exception as write_error:  # the interruption wins; the record says executing
                exc.__context__ = write_error
            raise exc
        if journal is None:
            if self.call.on_error == "result":
                payload = error_payload(exc)
                return (yield from self._complete(rec, payload, is_error=True, own=True))
            try:
                yield from self._give_back(rec)
            except StoreError as store_error:  # the claim stays; the original error wins
                exc.__context__ = store_error
            raise exc
        rec = yield from self._mark_uncertain(
            rec, f"execute raised {describe(exc)} after the operation-journal write"
        )
        if rec.status in DONE:  # another caller recovered it meanwhile
            return self._outcome(rec, replayed=True)
        if rec.status is not Status.UNCERTAIN:
            raise self._unknown(rec, f"execute raised {describe(exc)}") from exc
        return (yield from self._recover(rec, exc))

    def _recover(self, rec: CheckpointRecord, error: BaseException | None) -> Flow:
        """``rec`` is uncertain: ask ``recover``; never execute."""
        self.last = rec
        if self.call.tool.recover is None:
            raise self._unknown(rec, "the tool has no recover function") from error
        attempt = rec.execution_fence or self.attempt_id
        ok, answer = yield Recover(self.binding, attempt, rec.uncertain_reason, error)
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

    # -- complete (and give back) ----------------------------------------------------------

    def _complete(self, rec: CheckpointRecord, output: Any, *, is_error: bool, own: bool) -> Flow:
        """Store ``output`` acting for the attempt on ``rec`` (ours when ``own``)."""
        attempt = self.attempt_id if own else (rec.execution_fence or self.attempt_id)
        # Not exact JSON: stored by the journal's rules, or as an error result naming what
        # cannot be (checkpoint._encode). Its shape never leaves the call uncertain.
        output, is_error = stored_result(output, is_error)
        for _ in range(DECIDE_ROUNDS):
            if rec.status in DONE:
                # Our own commit may have landed although it reported an error.
                return self._outcome(rec, replayed=not (own and rec.execution_fence == attempt))
            if rec.execution_fence != attempt or rec.status is Status.READY:
                raise OutcomeUnknownError(
                    message=f"call {self.binding.call_id}: the result is known here but the "
                    f"checkpoint moved to {rec.status.value} under another attempt; "
                    f"{SETTLE_HINT}",
                    details=self._details(rec),
                )
            at = max(datetime.now(timezone.utc), rec.updated_at)  # ``after(rec)``, inline
            try:
                t = complete_execution(
                    rec,
                    attempt_id=attempt,
                    at=at,
                    result=output,
                    is_error=is_error,
                    max_payload_bytes=self.call.tool.max_result_bytes,
                )
            except (InvalidArgumentError, PayloadLimitError) as err:
                # Over its bound: the call completes with an error result naming it (small,
                # toolledger's own, within the default bound).
                output, is_error = unencodable_result(f"{err.code}: {err.message}"), True
                t = complete_execution(rec, attempt_id=attempt, at=at, result=output, is_error=True)
            end = None
            if self.journaled:
                assert t.next.result is not None
                end = self.end_fields(
                    t.next.result.payload,
                    is_error,
                    t.next.revision,
                    replayed=False,
                    recovered=not own,
                )
            try:
                won = yield from self._swap(t, rec, durable=True, remove_op=True, end=end)
                if won:
                    if CRASH_ACTIONS:
                        reached("after-completion")
                    self.last = t.next
                    self.recovered = not own
                    return outcome(t.next, replayed=False, recovered=not own)
                rec = yield from self._reread()
            except StoreError as store_error:
                raise self._unstored(rec) from store_error
        raise self._unstored(rec)

    def _give_back(self, rec: CheckpointRecord) -> _Step:
        """Release our claim (journal empty: the failure is proven pre-effect)."""
        effect = self.call.effect
        for _ in range(DECIDE_ROUNDS):
            if rec.status is not Status.EXECUTING or rec.execution_fence != self.attempt_id:
                self.last = rec
                return  # another caller marked it uncertain; it stays for reconciliation
            t = release_execution(
                rec, attempt_id=self.attempt_id, at=after(rec), evidence="journal-empty"
            )
            # Proven pre-effect: the keys go with the claim (same transaction).
            action = self.action
            also: tuple[Any, ...] = ()
            if action is not None:
                also = action.releases(self.binding.call_id, requires=0)
            elif effect is not None:
                also = (effect.release(self.binding.call_id, requires=0),)
            if (yield from self._swap(t, rec, durable=False, also=also)):
                self.last = t.next
                return
            rec = yield from self._reread()

    def _mark_uncertain(self, rec: CheckpointRecord, reason: str) -> _Step:
        """Mark our executing claim uncertain; return the record it ends on."""
        for _ in range(DECIDE_ROUNDS):
            if rec.status is not Status.EXECUTING or rec.execution_fence != self.attempt_id:
                return rec
            t = mark_execution_uncertain(
                rec, attempt_id=self.attempt_id, at=after(rec), reason=clip_reason(reason)
            )
            if (yield from self._swap(t, rec, durable=False)):
                return t.next
            rec = yield from self._reread()
        return rec

    # -- commits ---------------------------------------------------------------------------

    def _commit(
        self,
        ops: tuple[Any, ...],
        *,
        durable: bool = True,
        claim: bool = False,
        end: EndFields | None = None,
    ) -> _Step:
        """Yield one commit; return its outcomes, or ``None`` when it raised a store error.

        A store error counts against this flow's budget (``STORE_RETRIES``; the last one
        is raised); its outcome is unknown, so the caller re-reads and decides again.
        """
        try:
            return (yield Commit(ops, durable, claim, end))
        except StoreError:
            self._store_errors += 1
            if self._store_errors > STORE_RETRIES:
                raise
            return None

    def _swap(
        self,
        t: Transition,
        source: CheckpointRecord,
        *,
        durable: bool,
        remove_op: bool = False,
        end: EndFields | None = None,
        also: tuple[Any, ...] = (),
    ) -> _Step:
        """CAS ``t`` from ``source``; ``False`` when lost or when the outcome is unknown.

        ``end`` rides in the same transaction, appended only if the CAS wins; ``also``:
        more ops for the same transaction (gated on op 0).
        """
        ops: tuple[Any, ...] = (SwapCheckpoint(t.expected_revision, t.next),)
        if remove_op:
            ops += (RemoveOperation(*self.key),)
        try:
            reply = yield Commit(ops + also, durable, False, end)
        except StoreError:
            self._store_errors += 1
            if self._store_errors > STORE_RETRIES:
                raise
            return False
        won = bool(reply[0])
        if self.span is not None:
            report_transition(self.span, t, STATUS_VALUE[source.status], won)
        return won

    def _reread(self) -> _Step:
        rec = yield Read(self.key)
        if rec is None:
            raise InvalidTransitionError(
                message=f"checkpoint {self.binding.namespace}/{self.binding.call_id} vanished "
                "while this attempt used it",
                details={"namespace": self.binding.namespace, "call_id": self.binding.call_id},
            )
        return rec

    def _report(self, t: Transition, status_from: str | None, won: bool) -> None:
        if self.span is not None:
            report_transition(self.span, t, status_from, won)

    # -- outcomes, errors and the journal's end record ---------------------------------------

    def _outcome(
        self, rec: CheckpointRecord, *, replayed: bool, recovered: bool = False
    ) -> ToolOutcome:
        self.last = rec
        self.recovered = recovered
        return outcome(rec, replayed=replayed, recovered=recovered)

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
            f"recovered ({why}); the checkpoint stays {rec.status.value}: {SETTLE_HINT}",
            details={**self._details(rec), "why": why},
        )

    def _unstored(self, rec: CheckpointRecord) -> OutcomeUnknownError:
        """The result is known here but could not be stored: the checkpoint still says so."""
        self.last = rec
        return OutcomeUnknownError(
            message=f"call {self.binding.call_id}: the tool ran but its result could not be "
            f"stored; the checkpoint still says {rec.status.value}: {SETTLE_HINT}",
            details=self._details(rec),
        )

    def end_fields(
        self,
        payload: Any,
        is_error: bool,
        revision: int | None,
        *,
        replayed: bool,
        recovered: bool,
    ) -> EndFields:
        """The journal end record of an outcome."""
        meta: dict[str, Any] = {
            "tool_revision": self.call.tool.revision,
            "attempt_id": self.attempt_id,
            "replayed": replayed,
            "recovered": recovered,
        }
        if self.deduplicated_from is not None:
            meta["deduplicated_from"] = self.deduplicated_from
        return EndFields(
            "replayed" if replayed else "completed",
            {"result": payload, "is_error": is_error},
            meta,
            {"namespace": self.key[0], "call_id": self.key[1], "revision": revision},
        )

    def end_meta(self, *, replayed: bool, recovered: bool) -> dict[str, Any]:
        """The meta the end record carries (``deduplicated_from`` only when set; the same
        keys as ``end_fields``' meta)."""
        meta: dict[str, Any] = {
            "tool_revision": self.call.tool.revision,
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
