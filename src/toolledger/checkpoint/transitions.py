"""The checkpoint state machine: every legal move is in ``TRANSITIONS``. Pure; no I/O.

All transition logic lives in this file, which does not know who calls it or where records
are stored. Each transition is ``f(record, *, at, ...) -> Transition``: the clock and ids
are passed in, the input record is never changed, and ``next`` has ``revision + 1`` and
``updated_at == at``. The caller may act only after the store's compare-and-swap from
``expected_revision`` to ``next`` succeeds.

Order of checks, the same in every transition: the record is validated
(``UNSUPPORTED_SCHEMA``, ``INVALID_CHECKPOINT``), then the arguments (``INVALID_ARGUMENT``),
then the status (``INVALID_TRANSITION``, or ``FENCE_CONFLICT`` when the fence is already
held), then the fence (``FENCE_CONFLICT``), then payload bounds (``PAYLOAD_LIMIT``).

There is no automatic way back to ``ready`` and no lease expiry. The guard's one way back,
``release_execution``, needs the owning attempt and the evidence ``"journal-empty"`` (the
operation journal proves the failure was pre-effect). The other way back is a person's:
the ``resolve_*`` transitions (decision rules of the table) settle an ``executing`` or
``uncertain`` call by someone's word, recorded on the new record as its ``resolution``
(who, why, when); an ``executing`` call may be held by a live attempt, so they refuse it
(``FENCE_CONFLICT``) unless forced. A decision rule may share an edge with a machine
rule: stores tell them apart by the new record's ``resolution``
(``transition_between(..., decision=True)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, NamedTuple

from ..errors import (
    BindingConflictError,
    CheckpointError,
    FenceConflictError,
    InvalidArgumentError,
    InvalidTransitionError,
)
from ._json import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    HARD_MAX_PAYLOAD_BYTES,
    check_bounds,
    check_types,
    take_proof,
)
from .model import (
    Action,
    Binding,
    CheckpointRecord,
    Decision,
    Resolution,
    Result,
    Status,
    Transition,
    check_identifier,
    check_reason,
    check_time,
    is_identifier,
    is_known_valid,
    mark_valid,
    replaced_record,
)
from .validate import validate_checkpoint

__all__ = [
    "DECISIONS",
    "TRANSITIONS",
    "TransitionRule",
    "check_binding",
    "claim_delivery",
    "claim_execution",
    "complete_delivery",
    "complete_execution",
    "create_and_claim",
    "create_checkpoint",
    "decide_checkpoint",
    "edges_to",
    "mark_execution_uncertain",
    "release_delivery",
    "release_execution",
    "resolve_completed",
    "resolve_not_executed",
    "transition_between",
]


class TransitionRule(NamedTuple):
    """One row of the table: legal source statuses, the target, and the returned action."""

    sources: frozenset[Status]
    target: Status
    action: Action
    #: A source status on which the move fails with FENCE_CONFLICT (the fence is held).
    fenced: Status | None = None
    #: A person's decision (the new record carries its ``resolution``), not the guard's.
    decision: bool = False


#: The legal moves. A test renders this table to Mermaid and compares it with the docs.
TRANSITIONS: dict[str, TransitionRule] = {
    "claim_execution": TransitionRule(
        frozenset({Status.READY}), Status.EXECUTING, Action.EXECUTE, Status.EXECUTING
    ),
    "complete_execution": TransitionRule(
        frozenset({Status.EXECUTING, Status.UNCERTAIN}), Status.COMPLETED, Action.DELIVER
    ),
    "mark_execution_uncertain": TransitionRule(
        frozenset({Status.EXECUTING}), Status.UNCERTAIN, Action.RECONCILE_EXECUTION
    ),
    "release_execution": TransitionRule(
        frozenset({Status.EXECUTING}), Status.READY, Action.EXECUTE
    ),
    "claim_delivery": TransitionRule(
        frozenset({Status.COMPLETED}), Status.DELIVERING, Action.DELIVER, Status.DELIVERING
    ),
    "release_delivery": TransitionRule(
        frozenset({Status.DELIVERING}), Status.COMPLETED, Action.DELIVER
    ),
    "complete_delivery": TransitionRule(
        frozenset({Status.DELIVERING}), Status.DELIVERED, Action.NONE
    ),
    "resolve_not_executed": TransitionRule(
        frozenset({Status.EXECUTING, Status.UNCERTAIN}), Status.READY, Action.EXECUTE, decision=True
    ),
    "resolve_completed": TransitionRule(
        frozenset({Status.EXECUTING, Status.UNCERTAIN}),
        Status.COMPLETED,
        Action.DELIVER,
        decision=True,
    ),
}

#: What ``decide_checkpoint`` answers for each status.
DECISIONS: dict[Status, Action] = {
    Status.READY: Action.EXECUTE,
    Status.EXECUTING: Action.RECONCILE_EXECUTION,
    Status.UNCERTAIN: Action.RECONCILE_EXECUTION,
    Status.COMPLETED: Action.DELIVER,
    Status.DELIVERING: Action.RECONCILE_DELIVERY,
    Status.DELIVERED: Action.NONE,
}

_BY_EDGE: dict[tuple[Status, Status, bool], str] = {
    (source, rule.target, rule.decision): name
    for name, rule in TRANSITIONS.items()
    for source in rule.sources
}
if len(_BY_EDGE) != sum(len(r.sources) for r in TRANSITIONS.values()):  # pragma: no cover
    raise AssertionError("one machine and one decision rule at most per (source, target)")


def transition_between(
    source: Status | None, target: Status, *, decision: bool = False
) -> tuple[str, Action]:
    """Name the transition from ``source`` to ``target`` (``None``: creation) and its action.

    Stores use this to label history rows without being told which function ran:
    ``decision`` is whether the new record carries a ``resolution`` (a person's decision).

    Raises:
        InvalidTransitionError: ``INVALID_TRANSITION`` when no transition joins the two.
    """
    if source is None:
        if target is Status.READY and not decision:
            return ("create_checkpoint", Action.EXECUTE)
    else:
        name = _BY_EDGE.get((source, target, decision))
        if name is not None:
            return (name, TRANSITIONS[name].action)
    raise InvalidTransitionError(
        message=f"no {'decision ' if decision else ''}transition leads from {source} to {target}",
        details={"from": None if source is None else source.value, "to": target.value},
    )


def edges_to(target: Status, *, decision: bool = False) -> dict[Status, tuple[str, Action]]:
    """Return ``{source: (name, action)}`` of the rules of one kind leading to ``target``.

    The SQL stores render these into their statements (machine rules for the guard's hot
    path, decision rules for a person's ``resolve``).
    """
    return {
        source: (name, rule.action)
        for name, rule in TRANSITIONS.items()
        if rule.target is target and rule.decision is decision
        for source in sorted(rule.sources, key=lambda s: s.value)
    }


def create_checkpoint(binding: Binding, *, at: datetime) -> CheckpointRecord:
    """Return a new ``ready`` record at revision 0.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a non-Binding or a naive ``at``.
    """
    if not isinstance(binding, Binding):
        raise InvalidArgumentError(message="binding must be a Binding")
    when = at if type(at) is datetime and at.tzinfo is timezone.utc else check_time(at)
    new = CheckpointRecord(
        binding=binding, status=Status.READY, revision=0, created_at=when, updated_at=when
    )
    mark_valid(new, True)
    return new


def create_and_claim(
    binding: Binding, *, attempt_id: str, at: datetime
) -> tuple[CheckpointRecord, Transition]:
    """Return a new ``ready`` record and its ``claim_execution`` at ``at``, in one step.

    ``create_checkpoint(binding, at=at)`` then ``claim_execution(new, attempt_id=...,
    at=at)``, as a new call's first commit stores them: the new record is valid and
    ``ready`` by construction, so only ``attempt_id`` is left to check.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a non-Binding, a naive ``at`` or a
            malformed ``attempt_id``.
    """
    new = create_checkpoint(binding, at=at)
    if type(attempt_id) is not str or is_identifier(attempt_id) is None:
        check_identifier(attempt_id, "attempt_id")  # raises
    when = new.updated_at
    claim = _move(
        new, "claim_execution", when, execution_fence=attempt_id, execution_claimed_at=when
    )
    return new, claim


def decide_checkpoint(record: CheckpointRecord, binding: Binding) -> Decision:
    """Return what to do with the call ``binding`` given its stored ``record``.

    ready→execute, executing/uncertain→reconcile-execution, completed→deliver,
    delivering→reconcile-delivery, delivered→none.

    Raises:
        UnsupportedSchemaError, InvalidCheckpointError: the record fails validation.
        InvalidArgumentError: ``binding`` is not a Binding.
        BindingConflictError: ``BINDING_CONFLICT`` when any binding field differs.
    """
    rec = check_binding(record, binding)
    return Decision(action=DECISIONS[rec.status], status=rec.status, revision=rec.revision)


def check_binding(record: CheckpointRecord, binding: Binding) -> CheckpointRecord:
    """Return ``record``, validated, if it is the checkpoint of ``binding``.

    The checks of ``decide_checkpoint``, for a caller that needs no ``Decision`` (the
    approval gate reads the status itself).

    Raises:
        UnsupportedSchemaError, InvalidCheckpointError: the record fails validation.
        InvalidArgumentError: ``binding`` is not a Binding.
        BindingConflictError: ``BINDING_CONFLICT`` when any binding field differs.
    """
    rec = validate_checkpoint(record)
    if not isinstance(binding, Binding):
        raise InvalidArgumentError(message="binding must be a Binding")
    if rec.binding != binding:
        differing = [
            f
            for f in ("namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint")
            if getattr(rec.binding, f) != getattr(binding, f)
        ]
        raise BindingConflictError(
            message=f"call {binding.namespace}/{binding.call_id} was checkpointed for another "
            f"binding (differs in {', '.join(differing)}); use a new call id for a new call",
            details={
                "namespace": binding.namespace,
                "call_id": binding.call_id,
                "differs": differing,
                "stored": rec.binding.to_dict(),
            },
        )
    return rec


def claim_execution(record: CheckpointRecord, *, attempt_id: str, at: datetime) -> Transition:
    """Claim the right to execute: ready → executing, fenced by ``attempt_id``.

    Raises:
        FenceConflictError: ``FENCE_CONFLICT`` when the record is already executing (even
            for the same ``attempt_id``).
        InvalidTransitionError: ``INVALID_TRANSITION`` from any other status.
    """
    rec, when = _begin(record, at, attempt_id, "attempt_id")
    if rec.status not in TRANSITIONS["claim_execution"].sources:
        raise _status_error(rec, "claim_execution")
    return _move(
        rec,
        "claim_execution",
        when,
        execution_fence=attempt_id,
        execution_claimed_at=when,
    )


def complete_execution(
    record: CheckpointRecord,
    *,
    attempt_id: str,
    at: datetime,
    result: object,
    is_error: bool = False,
    max_payload_bytes: int | None = None,
) -> Transition:
    """Store the result: executing/uncertain → completed, owning attempt only.

    ``result`` is the exact JSON payload to deliver (and re-deliver byte for byte); set
    ``is_error`` when it reports a handler error.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for payload types or a bad
            ``max_payload_bytes`` (1 to 10,485,760).
        InvalidTransitionError, FenceConflictError: wrong status or not the owner.
        PayloadLimitError: ``PAYLOAD_LIMIT`` when the payload exceeds its bounds.
    """
    rec, when = _begin(record, at, attempt_id, "attempt_id")
    limit = (
        DEFAULT_MAX_PAYLOAD_BYTES
        if max_payload_bytes is None
        else _payload_limit(max_payload_bytes)
    )
    if type(is_error) is not bool:
        raise InvalidArgumentError(message="is_error must be a bool")
    shape = take_proof(result) or check_types(result, what="result")
    if rec.status not in TRANSITIONS["complete_execution"].sources:
        raise _status_error(rec, "complete_execution")
    if rec.execution_fence != attempt_id:
        raise _fence_error("execution", rec)
    text = check_bounds(result, shape, max_bytes=limit, what="result")
    # Keep a private copy (exact: the JSON round trip of exact JSON is the identity), so a
    # caller mutating its object later cannot change what is stored and re-delivered. (A
    # result stored_result proved: its text as proven; nothing walks or encodes it again.)
    return _move(
        rec,
        "complete_execution",
        when,
        uncertain_reason=None,
        result=Result(payload=_parse_own(text, 0)[0], is_error=is_error),
        completed_at=when,
    )


def mark_execution_uncertain(
    record: CheckpointRecord, *, attempt_id: str, at: datetime, reason: str
) -> Transition:
    """Record that the outcome is unknown: executing → uncertain, owning attempt only.

    Raises:
        InvalidArgumentError: ``reason`` is not a str of 1-1024 characters.
        InvalidTransitionError, FenceConflictError: wrong status or not the owner.
    """
    rec, when = _begin(record, at, attempt_id, "attempt_id")
    check_reason(reason)
    if rec.status not in TRANSITIONS["mark_execution_uncertain"].sources:
        raise _status_error(rec, "mark_execution_uncertain")
    if rec.execution_fence != attempt_id:
        raise _fence_error("execution", rec)
    return _move(rec, "mark_execution_uncertain", when, uncertain_reason=reason)


def release_execution(
    record: CheckpointRecord, *, attempt_id: str, at: datetime, evidence: str
) -> Transition:
    """Give back an execution claim proven pre-effect: executing → ready.

    This exists for one caller, the guard, when the tool failed and the call's operation
    journal is empty (no effect was attempted). ``evidence`` must be ``"journal-empty"``.

    Raises:
        InvalidArgumentError: any other ``evidence``.
        InvalidTransitionError, FenceConflictError: wrong status or not the owner.
    """
    rec, when = _begin(record, at, attempt_id, "attempt_id")
    if evidence != "journal-empty":
        raise InvalidArgumentError(
            message='release_execution needs evidence="journal-empty" (the operation journal '
            "proves the failure happened before any effect)",
            details={"argument": "evidence", "value": repr(evidence)[:100]},
        )
    if rec.status not in TRANSITIONS["release_execution"].sources:
        raise _status_error(rec, "release_execution")
    if rec.execution_fence != attempt_id:
        raise _fence_error("execution", rec)
    return _move(rec, "release_execution", when, execution_fence=None, execution_claimed_at=None)


def claim_delivery(record: CheckpointRecord, *, delivery_id: str, at: datetime) -> Transition:
    """Claim the right to post the result: completed → delivering, attempts + 1.

    Raises:
        FenceConflictError: ``FENCE_CONFLICT`` when a delivery is already claimed.
        InvalidTransitionError: from any status other than completed.
    """
    rec, when = _begin(record, at, delivery_id, "delivery_id")
    if rec.status not in TRANSITIONS["claim_delivery"].sources:
        raise _status_error(rec, "claim_delivery")
    return _move(
        rec,
        "claim_delivery",
        when,
        delivery_fence=delivery_id,
        delivery_attempts=rec.delivery_attempts + 1,
    )


def release_delivery(record: CheckpointRecord, *, delivery_id: str, at: datetime) -> Transition:
    """Give back a delivery claim after a known failed post: delivering → completed.

    The result is kept; the next delivery posts the same payload.

    Raises:
        InvalidTransitionError, FenceConflictError: wrong status or not the owner.
    """
    rec, when = _begin(record, at, delivery_id, "delivery_id")
    if rec.status not in TRANSITIONS["release_delivery"].sources:
        raise _status_error(rec, "release_delivery")
    if rec.delivery_fence != delivery_id:
        raise _fence_error("delivery", rec)
    return _move(rec, "release_delivery", when, delivery_fence=None)


def complete_delivery(record: CheckpointRecord, *, delivery_id: str, at: datetime) -> Transition:
    """Record that the post succeeded: delivering → delivered.

    Raises:
        InvalidTransitionError, FenceConflictError: wrong status or not the owner.
    """
    rec, when = _begin(record, at, delivery_id, "delivery_id")
    if rec.status not in TRANSITIONS["complete_delivery"].sources:
        raise _status_error(rec, "complete_delivery")
    if rec.delivery_fence != delivery_id:
        raise _fence_error("delivery", rec)
    return _move(rec, "complete_delivery", when, delivered_at=when)


def resolve_not_executed(
    record: CheckpointRecord, *, at: datetime, by: str, reason: str, force: bool = False
) -> Transition:
    """A person's word that the call never took effect: executing/uncertain → ready.

    The claim is released (the next call executes) and the decision is recorded on the new
    record as its ``resolution``.

    Raises:
        InvalidArgumentError: ``by``/``reason`` not a str of 1-1024 characters.
        InvalidTransitionError: from any status other than executing/uncertain.
        FenceConflictError: ``FENCE_CONFLICT`` from ``executing`` without ``force`` (a
            live attempt may hold the claim).
    """
    rec, when, resolution = _begin_resolve(
        record, "resolve_not_executed", at, by, reason, force, "not_executed"
    )
    return _move(
        rec,
        "resolve_not_executed",
        when,
        execution_fence=None,
        execution_claimed_at=None,
        uncertain_reason=None,
        resolution=resolution,
    )


def resolve_completed(
    record: CheckpointRecord,
    *,
    at: datetime,
    by: str,
    reason: str,
    result: object,
    is_error: bool = False,
    force: bool = False,
    max_payload_bytes: int | None = None,
) -> Transition:
    """A person's word on the call's outcome: executing/uncertain → completed with ``result``.

    ``result`` is stored and delivered like any result (``is_error``: the call failed).
    The decision (outcome ``completed`` or ``failed``) is the new record's ``resolution``.

    Raises:
        InvalidArgumentError: bad ``by``/``reason``/``is_error``, or a result that is not
            exact JSON.
        InvalidTransitionError: from any status other than executing/uncertain.
        FenceConflictError: ``FENCE_CONFLICT`` from ``executing`` without ``force``.
        PayloadLimitError: ``PAYLOAD_LIMIT`` when the result exceeds its bounds.
    """
    _begin(record, at)  # the record is checked before the arguments, as everywhere
    if type(is_error) is not bool:
        raise InvalidArgumentError(message="is_error must be a bool")
    outcome = "failed" if is_error else "completed"
    limit = _payload_limit(max_payload_bytes)
    shape = take_proof(result) or check_types(result, what="result")
    rec, when, resolution = _begin_resolve(
        record, "resolve_completed", at, by, reason, force, outcome
    )
    text = check_bounds(result, shape, max_bytes=limit, what="result")
    return _move(
        rec,
        "resolve_completed",
        when,
        uncertain_reason=None,
        result=Result(payload=_parse_own(text, 0)[0], is_error=is_error),
        completed_at=when,
        resolution=resolution,
    )


def _begin_resolve(
    record: CheckpointRecord,
    name: str,
    at: datetime,
    by: str,
    reason: str,
    force: bool,
    outcome: str,
) -> tuple[CheckpointRecord, datetime, Resolution]:
    rec, when = _begin(record, at)
    check_reason(by, "by")
    check_reason(reason)
    if type(force) is not bool:
        raise InvalidArgumentError(message="force must be a bool", details={"argument": "force"})
    if rec.status not in TRANSITIONS[name].sources:
        raise _status_error(rec, name)
    if rec.status is Status.EXECUTING and not force:
        claimed = rec.execution_claimed_at
        raise FenceConflictError(
            message=f"call {rec.binding.namespace}/{rec.binding.call_id} is executing: a live "
            f"attempt may hold it (attempt {rec.execution_fence}, claimed "
            f"{claimed.isoformat() if claimed else '?'}); settle it only when no process "
            "runs it any more (force=True, --force)",
            details={
                "namespace": rec.binding.namespace,
                "call_id": rec.binding.call_id,
                "transition": name,
                "status": rec.status.value,
                "revision": rec.revision,
                "attempt_id": rec.execution_fence,
            },
        )
    forced = rec.status is Status.EXECUTING  # reached only with force=True
    return rec, when, Resolution(outcome=outcome, by=by, reason=reason, at=when, forced=forced)


def _begin(
    record: CheckpointRecord, at: datetime, fence: str | None = None, name: str = ""
) -> tuple[CheckpointRecord, datetime]:
    """Check the record, then ``at``, then the attempt or delivery id ``fence`` (``name``)."""
    # A record this package made or checked is not walked again (see model.remember_valid).
    rec = record if is_known_valid(record) else validate_checkpoint(record)
    # An aware UTC time (what the guard passes) is what check_time would return.
    when = at if type(at) is datetime and at.tzinfo is timezone.utc else check_time(at)
    if when < rec.updated_at:
        raise InvalidArgumentError(
            message=f"at ({when.isoformat()}) is earlier than the record's updated_at "
            f"({rec.updated_at.isoformat()})",
            details={"argument": "at"},
        )
    if name and (type(fence) is not str or is_identifier(fence) is None):
        check_identifier(fence, name)  # raises
    return rec, when


#: ``json.loads`` of check_bounds' own compact JSON (it has no whitespace around it to skip,
#: nothing after it to refuse): the C scanner straight, without loads' three Python frames.
_parse_own: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]


def _payload_limit(max_payload_bytes: int | None) -> int:
    if max_payload_bytes is None:
        return DEFAULT_MAX_PAYLOAD_BYTES
    if type(max_payload_bytes) is not int or not 1 <= max_payload_bytes <= HARD_MAX_PAYLOAD_BYTES:
        raise InvalidArgumentError(
            message=f"max_payload_bytes must be an int from 1 to {HARD_MAX_PAYLOAD_BYTES}",
            details={"argument": "max_payload_bytes"},
        )
    return max_payload_bytes


def _status_error(rec: CheckpointRecord, name: str) -> CheckpointError:
    """The error for transition ``name`` from a status not among its rule's sources."""
    rule = TRANSITIONS[name]
    details = {
        "namespace": rec.binding.namespace,
        "call_id": rec.binding.call_id,
        "transition": name,
        "status": rec.status.value,
        "revision": rec.revision,
    }
    if rec.status is rule.fenced:
        return FenceConflictError(
            message=f"{name}: call {rec.binding.namespace}/{rec.binding.call_id} is already "
            f"{rec.status.value} under another claim",
            details=details,
        )
    legal = ", ".join(sorted(s.value for s in rule.sources))
    return InvalidTransitionError(
        message=f"{name} is not allowed from {rec.status.value} (only from {legal})",
        details=details,
    )


def _fence_error(kind: str, rec: CheckpointRecord) -> FenceConflictError:
    """The error for a caller that does not hold the record's ``kind`` fence."""
    return FenceConflictError(
        message=f"the {kind} of {rec.binding.namespace}/{rec.binding.call_id} is held by "
        f"another {'attempt' if kind == 'execution' else 'delivery'}",
        details={
            "namespace": rec.binding.namespace,
            "call_id": rec.binding.call_id,
            "status": rec.status.value,
            "revision": rec.revision,
        },
    )


def _move(rec: CheckpointRecord, name: str, when: datetime, **changes: Any) -> Transition:
    rule = TRANSITIONS[name]
    changes["status"] = rule.target
    changes["revision"] = rec.revision + 1
    if rec.resolution is not None and "resolution" not in changes:
        changes["resolution"] = None  # a decision belongs to the revision that made it
    changes["updated_at"] = when
    nxt = replaced_record(rec, changes)
    # Valid by construction (a valid record, checked arguments, the table's move). Its
    # result payload is private when it is new or comes from a known-valid record.
    if "result" in changes or rec.result is None or is_known_valid(rec):
        mark_valid(nxt, True)
    return Transition(action=rule.action, expected_revision=rec.revision, next=nxt, name=name)
