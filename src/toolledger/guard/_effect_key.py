"""Effect keys: re-plan safety for an action that comes back under a new call id.

A crash between a tool's effect and the saving of the model's turn makes a framework ask
the model again, and the model issues the same action under a new call id; the
checkpoint, keyed by call id, cannot see it. A tool with an effect key
(``toolledger.tool(effect_key=...)``) is also keyed by what it does.

Rules this module keeps:

- The key is computed from the input before anything is written: a raising function,
  or a value that is not a str of 1-1024 characters of valid Unicode, is
  ``INVALID_ARGUMENT``. ``"input"`` means tool name + revision + input fingerprint.
- What is stored is a fingerprint of (tool name, key, conversation id): never the key's
  text. It is scoped by the run's namespace, and by the run's conversation when it has
  one (``run.conversation_id``).
- The key is claimed in the call's claim transaction (``ClaimEffectKey`` first, the
  checkpoint's create and claim gated on it), so the store decides races and the key
  costs no commit of its own. It is released only in the transaction that releases the
  holder's own claim (proven pre-effect), and kept by retention.
- A call whose key another call holds never executes. Holder completed (or later): this
  call's checkpoint is written as a completed copy of the holder's stored result
  (create, claim, complete in one relaxed commit: if it is lost, the next attempt
  copies again), and the outcome says ``deduplicated_from``. Holder ``executing`` or
  ``uncertain``: it is reconciled as the guard reconciles it for the holder's own id
  (marked uncertain, ``recover``, else ``OUTCOME_UNKNOWN`` naming the holder). Holder
  erased by retention: ``TOMBSTONED`` naming the holder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checkpoint.model import (
    Action,
    Binding,
    CheckpointRecord,
    Status,
    Transition,
    fingerprint,
)
from ..checkpoint.transitions import claim_execution, complete_execution, create_checkpoint
from ..errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    OutcomeUnknownError,
    StoreError,
    TombstonedError,
)
from ..store._tombstone import tombstoned_error
from ..store.base import (
    ClaimEffectKey,
    CreateCheckpoint,
    ReleaseEffectKey,
    SwapCheckpoint,
)
from ..tools import Tool, ToolOutcome
from ._seams import DONE, EFFECT_KEY_ROUNDS

if TYPE_CHECKING:
    from ._flow import CallFlow
    from ._flow_state import Request

__all__ = ["EFFECT_KEY_MAX", "EffectKey", "HolderHandle", "effect_key_for", "resolve"]

#: Longest effect key a tool's function may return (characters); it is stored hashed.
EFFECT_KEY_MAX = 1024


@dataclass(frozen=True, slots=True)
class EffectKey:
    """A call's effect key as stored: its namespace and fingerprint."""

    namespace: str
    key: str

    def claim(self, call_id: str) -> ClaimEffectKey:
        """The op that binds the key to ``call_id`` (first op of the claim transaction)."""
        return ClaimEffectKey(self.namespace, self.key, call_id)

    def release(self, call_id: str, *, requires: int) -> ReleaseEffectKey:
        """The op that unbinds the key from ``call_id`` iff op ``requires`` won."""
        return ReleaseEffectKey(self.namespace, self.key, call_id, requires=requires)


def effect_key_for(
    tool: Tool, binding: Binding, input: Any, conversation_id: str | None
) -> EffectKey | None:
    """Return the call's effect key, or ``None`` when the tool has none.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the tool's function raises or
            returns something other than a str of 1-1024 characters of valid Unicode
            (nothing is written).
    """
    spec = tool.effect_key
    if spec is None:
        return None
    if spec == "input":
        raw: object = f"{tool.name}:{tool.revision}:{binding.input_fingerprint}"
    else:
        try:
            raw = spec(input)
        except Exception as exc:
            raise InvalidArgumentError(
                message=f"tool {tool.name}: its effect_key function raised "
                f"{type(exc).__qualname__}: {str(exc)[:200]}; nothing was claimed",
                details={"argument": "effect_key", "tool": tool.name},
            ) from exc
    if not (isinstance(raw, str) and 1 <= len(raw) <= EFFECT_KEY_MAX and _encodable(raw)):
        got = f"a str of {len(raw)} characters" if isinstance(raw, str) else type(raw).__name__
        raise InvalidArgumentError(
            message=f"tool {tool.name}: effect_key must return a str of 1-{EFFECT_KEY_MAX} "
            f"characters of valid Unicode; got {got}; nothing was claimed",
            details={"argument": "effect_key", "tool": tool.name},
        )
    scope = {"tool": tool.name, "key": raw, "conversation": conversation_id}
    return EffectKey(binding.namespace, fingerprint(scope))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class HolderHandle:
    """The event handle of a holder's reconciliation: the caller's span, no journal record.

    The holder's transitions are reported on the calling event's span; the calling event
    ends once, with the calling call's own outcome (so ``run`` is ``None``: nothing
    prepares an end record for the holder's completion).
    """

    __slots__ = ("span",)
    run = None
    ended = True

    def __init__(self, span: Any) -> None:
        self.span = span


Resolution = ToolOutcome | CheckpointRecord | None


def resolve(flow: CallFlow, own: CheckpointRecord | None) -> Generator[Request, Any, Resolution]:
    """Decide a call whose own checkpoint is absent (``own=None``) or ``ready``.

    Returns:
        ``None``: the key is free or this call's: claim it with the checkpoint. A
        ``CheckpointRecord``: this call's own record moved meanwhile: decide on it. A
        ``ToolOutcome``: the holder's stored result (``deduplicated_from`` set).

    Raises:
        OutcomeUnknownError: ``OUTCOME_UNKNOWN``: the holder may have taken effect and
            could not be recovered (never executes).
        TombstonedError: ``TOMBSTONED``: the holder was erased by retention.
    """
    ek = flow.effect
    assert ek is not None
    me = flow.binding.call_id
    for _ in range(EFFECT_KEY_ROUNDS):
        holder = flow.store.effect_key_holder(ek.namespace, ek.key)
        if holder is None or holder == me:
            return None
        rec = flow.store.get(ek.namespace, holder)
        if rec is None:
            tomb = flow.store.tombstone(ek.namespace, holder)
            if tomb is not None:
                raise _tombstoned(flow, holder, tomb)
            if flow.store.effect_key_holder(ek.namespace, ek.key) != holder:
                continue  # released meanwhile: decide again
            raise OutcomeUnknownError(
                message=f"call {me}: its effect key belongs to call {holder}, which has no "
                "checkpoint; not executed. Reconcile it by hand",
                details=_details(flow, holder),
            )
        if rec.status is Status.READY:
            # A holder's key is released in the transaction that releases its claim, so a
            # ready holder let go of it meanwhile (or was just created): read again.
            if flow.store.effect_key_holder(ek.namespace, ek.key) != holder:
                continue
            raise InvalidTransitionError(
                message=f"call {me}: its effect key belongs to call {holder}, which is "
                "ready (claimed, then not executed); not executed. Run or reconcile "
                f"{holder} first",
                details=_details(flow, holder),
            )
        if rec.status not in DONE:
            rec = yield from _reconcile_holder(flow, rec)
            if rec is None or rec.status is Status.READY:
                continue
        return _copy(flow, own, rec)
    raise InvalidTransitionError(
        message=f"call {me}: its effect key kept changing holders; not executed",
        details=_details(flow, None),
    )


def _reconcile_holder(
    flow: CallFlow, rec: CheckpointRecord
) -> Generator[Request, Any, CheckpointRecord | None]:
    """Reconcile the holder's ``executing``/``uncertain`` checkpoint; never execute."""
    sub = flow.for_holder(rec.binding, HolderHandle(getattr(flow.handle, "span", None)))
    try:
        done = yield from sub.reconcile_flow()
    except OutcomeUnknownError as exc:
        holder = rec.binding.call_id
        raise OutcomeUnknownError(
            message=f"call {flow.binding.call_id}: its effect key belongs to call {holder}; "
            f"not executed. {exc.message}",
            details={**exc.details, **_details(flow, holder)},
        ) from exc.__cause__
    finally:
        if sub.link is not None:
            flow.link = sub.link
    return done


def _copy(flow: CallFlow, own: CheckpointRecord | None, held: CheckpointRecord) -> Resolution:
    """Store the holder's result as this call's (one relaxed commit); return the outcome."""
    result = held.result
    assert result is not None
    transitions: list[tuple[Transition, str | None]] = []
    ops: list[Any] = []
    if own is None:
        base = create_checkpoint(flow.binding, at=flow.after(None))
        created = Transition(
            action=Action.EXECUTE, expected_revision=-1, next=base, name="create_checkpoint"
        )
        transitions.append((created, None))
        ops.append(CreateCheckpoint(base))
    else:
        base = own
    claim = claim_execution(base, attempt_id=flow.attempt_id, at=flow.after(base))
    ops.append(SwapCheckpoint(claim.expected_revision, claim.next, requires=0 if ops else None))
    transitions.append((claim, base.status.value))
    done = complete_execution(
        claim.next,
        attempt_id=flow.attempt_id,
        at=flow.after(claim.next),
        result=result.payload,
        is_error=result.is_error,
        max_payload_bytes=flow.tool.max_result_bytes,
    )
    ops.append(SwapCheckpoint(claim.next.revision, done.next, requires=len(ops) - 1))
    transitions.append((done, claim.next.status.value))
    try:
        out = flow.store.apply(ops, durable=False)
    except StoreError as exc:
        flow.count_store_error(exc)
        return flow.reread_or_none()
    wins = [out[0][0] if isinstance(out[0], tuple) else bool(out[0]), *map(bool, out[1:])]
    for (t, source), won in zip(transitions, wins, strict=True):
        flow.report_transition(t, source, won)
    if not wins[-1]:
        return flow.reread_or_none()  # this call's own record appeared or moved: decide again
    holder = held.binding.call_id
    flow.deduplicated_from = holder
    outcome = flow.outcome_of(done.next, replayed=True)
    return dataclasses.replace(outcome, deduplicated_from=holder)


def _details(flow: CallFlow, holder: str | None) -> dict[str, Any]:
    return {
        "namespace": flow.binding.namespace,
        "for_call_id": flow.binding.call_id,
        "effect_key_holder": holder,
        "tool_name": flow.binding.tool_name,
    }


def _tombstoned(flow: CallFlow, holder: str, tomb: Any) -> TombstonedError:
    base = tombstoned_error(tomb)
    return TombstonedError(
        message=f"call {flow.binding.call_id}: its effect key belongs to call {holder}. "
        f"{base.message}",
        details={**base.details, **_details(flow, holder)},
    )
