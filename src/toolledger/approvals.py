"""Approval gates: durable human-in-the-loop authority bound to the exact call.

A tool defined with ``approval="always"`` or ``approval="effect-only"`` (or a call made
with those keywords) asks its ``approver`` before it proceeds. The answer is stored in the
same database as the checkpoint, keyed by ``(namespace, call_id)`` and bound to the call's
binding (tool name, tool revision, input fingerprint), so it survives a crash and a restart
and never authorizes a call whose input differs.

Rules this module keeps:

- ``approver(request)`` answers ``Approved(by, reason=None)``, ``Denied(by, reason)`` or
  ``Pending(ticket)``; it may be sync or async (async needs ``run.acall``).
- A stored decision counts as the decision: calling the same call again proceeds (or is
  denied) without asking again. A denial is final. An approval may carry an expiry; an
  expired approval asks again.
- A pending call's checkpoint exists in ``ready`` and is not claimed; the decision may come
  later from any process or host (``decide_approval``, ``toolledger approve``/``deny``).
- Nothing here executes a tool: the guard (``toolledger.guard``) calls the gate first and
  runs the call only when it is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .checkpoint.model import Binding, check_time
from .errors import InvalidArgumentError, InvalidTransitionError, NotFoundError
from .store import (
    CAS_ROUNDS,
    TEXT_MAX,
    ApprovalRecord,
    ApprovalStatus,
    StoreLike,
    binding_fingerprint,
    latest_denial,
    using_store,
)
from .store.base import Store, denial_finder

__all__ = [
    "APPROVAL_MODES",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalStatus",
    "Approved",
    "Denied",
    "Pending",
    "binding_fingerprint",
    "copy_approvals",
    "decide_approval",
    "find_denial",
    "get_approval",
    "list_approvals",
    "scrub_approval",
]

#: The values of ``approval=`` (``None``: no gate).
APPROVAL_MODES = ("always", "effect-only")


def _text(value: object, name: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > TEXT_MAX:
        raise InvalidArgumentError(
            message=f"{name} must be a non-empty str of at most {TEXT_MAX} characters; "
            f"got {value!r:.80}",
            details={"argument": name},
        )
    return value


@dataclass(frozen=True, slots=True)
class Approved:
    """The approver allows the call.

    Args:
        by: Who decided (a user, a policy).
        reason: Why (optional).
        expires_at: The approval stops counting after this time (timezone-aware).
    """

    by: str
    reason: str | None = None
    expires_at: datetime | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        _text(self.by, "by", required=True)
        _text(self.reason, "reason")
        if self.expires_at is not None:
            check_time(self.expires_at, "expires_at")


@dataclass(frozen=True, slots=True)
class Denied:
    """The approver refuses the call; it is never executed.

    Args:
        by: Who decided.
        reason: Why (told to the model with ``on_error="result"``).
    """

    by: str
    reason: str | None = None

    def __post_init__(self) -> None:
        _text(self.by, "by", required=True)
        _text(self.reason, "reason")


@dataclass(frozen=True, slots=True)
class Pending:
    """The decision will come later (``decide_approval`` or the CLI), e.g. from a human.

    Args:
        ticket: The approver's reference for the request (shown by ``toolledger approvals``).
    """

    ticket: str | None = None

    def __post_init__(self) -> None:
        _text(self.ticket, "ticket")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """What the approver is asked about.

    ``input`` is the call's input itself (content capture governs spans, not what local
    code sees); ``input_fingerprint`` is what the decision is bound to. ``replay`` says the
    call would not execute (its result is stored, or it is being recovered): only
    ``approval="always"`` asks then.
    """

    binding: Binding
    tool_name: str
    description: str | None
    input: Any
    input_fingerprint: str
    justification: str | None
    mode: str
    replay: bool = False
    run_id: str | None = None

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.binding.call_id

    @property
    def namespace(self) -> str:
        """The call's namespace."""
        return self.binding.namespace


def get_approval(db: StoreLike | None, namespace: str, call_id: str) -> ApprovalRecord | None:
    """Return the call's stored approval request/decision, or ``None``.

    Args:
        db: A ``Store``, a path or a URL (as ``toolledger.run``'s ``db``).
        namespace: The call's namespace (the run's).
        call_id: The call's id.

    Raises:
        StoreError: storage failure.
    """
    with using_store(db, readonly=True) as store:
        return store.approval_get(namespace, call_id)


def list_approvals(
    db: StoreLike | None,
    *,
    status: str | Iterable[str] | None = None,
    namespace: str | None = None,
    limit: int | None = None,
) -> list[ApprovalRecord]:
    """Return stored approvals, oldest request first.

    Args:
        db: A ``Store``, a path or a URL.
        status: ``"pending"``, ``"approved"``, ``"denied"`` or several.
        namespace: Only this namespace.
        limit: At most this many.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown status.
        StoreError: storage failure.
    """
    with using_store(db, readonly=True) as store:
        return store.list_approvals(status=status, namespace=namespace, limit=limit)


def decide_approval(
    db: StoreLike | None,
    namespace: str,
    call_id: str,
    granted: bool,
    by: str,
    reason: str | None = None,
    *,
    expires_at: datetime | None = None,
) -> ApprovalRecord:
    """Decide a pending approval request, from any process or host.

    The call then proceeds (or raises ``ApprovalDenied``) the next time it is made, without
    asking again. Deciding the same way twice returns the stored decision unchanged; a
    decision is final otherwise. An expired approval may be decided again.

    Args:
        db: A ``Store``, a path or a URL (the run's database).
        namespace: The call's namespace.
        call_id: The call's id.
        granted: ``True`` to approve, ``False`` to deny.
        by: Who decides.
        reason: Why.
        expires_at: For an approval: it stops counting after this time.

    Returns:
        The stored ``ApprovalRecord``.

    Raises:
        NotFoundError: ``NOT_FOUND``: no approval was requested for this call.
        InvalidTransitionError: ``INVALID_TRANSITION``: it was decided otherwise already.
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (an expiry in the
            past, or on a denial).
        StoreError: storage failure.
    """
    if not isinstance(granted, bool):
        raise InvalidArgumentError(message="granted must be True or False")
    _text(by, "by", required=True)
    _text(reason, "reason")
    at = datetime.now(timezone.utc)
    if expires_at is not None:
        expires_at = check_time(expires_at, "expires_at")
        if not granted:
            raise InvalidArgumentError(message="only an approval can carry expires_at")
        if expires_at <= at:
            raise InvalidArgumentError(message="expires_at is in the past")
    with using_store(db) as store:
        for _ in range(CAS_ROUNDS):
            rec = store.approval_get(namespace, call_id)
            if rec is None:
                raise NotFoundError(
                    message=f"no approval was requested for {namespace}/{call_id}",
                    details={"namespace": namespace, "call_id": call_id},
                )
            status = ApprovalStatus.APPROVED if granted else ApprovalStatus.DENIED
            if rec.decided(at):
                if rec.status is status:
                    return rec
                raise InvalidTransitionError(
                    message=f"{namespace}/{call_id} was {rec.status.value} by {rec.by} at "
                    f"{rec.decided_at.isoformat() if rec.decided_at else '?'}; a decision "
                    "is final",
                    details={
                        "namespace": namespace,
                        "call_id": call_id,
                        "status": rec.status.value,
                        "by": rec.by,
                    },
                )
            new = rec.next(
                status=status,
                by=by,
                reason=reason,
                decided_at=max(at, rec.requested_at),
                expires_at=expires_at,
            )
            if store.approval_put(new, expected_revision=rec.revision):
                return new
        raise InvalidTransitionError(message="the approval kept changing; try again")


def find_denial(store: Store, binding: Binding, conversation: str) -> ApprovalRecord | None:
    """Return a stored denial of the same action in ``conversation``, or ``None``.

    The same action: the binding's namespace, tool name, tool revision and input
    fingerprint under another call id; the latest such denial wins. Only the gate of a
    call with no stored decision of its own calls this, so a call without a gate never
    pays for it. A store declaring ``Capabilities.denials_by_action`` finds it through its
    index (the built-in ones do); any other store's denials of the namespace are read and
    compared. An approval never carries over.

    Raises:
        StoreError: storage failure.
    """
    find = denial_finder(store)
    if find is not None:
        return find(binding, conversation)
    denials = store.list_approvals(status="denied", namespace=binding.namespace)
    return latest_denial(denials, binding, conversation)


def scrub_approval(store: Store, namespace: str, call_id: str) -> bool:
    """Drop the content kept with a call's approval request; keep the decision.

    Retention (``toolledger.gc``) calls this for every checkpoint it erases: the input,
    justification and description go; the binding (with the input's fingerprint), status,
    ``by``, ``reason`` and times stay, so who authorized what remains provable.

    Returns:
        Whether anything was scrubbed.

    Raises:
        StoreError: storage failure.
    """
    for _ in range(CAS_ROUNDS):
        rec = store.approval_get(namespace, call_id)
        if rec is None or (rec.input, rec.justification, rec.description) == (None, None, None):
            return False
        new = rec.next(input=None, justification=None, description=None)
        if store.approval_put(new, expected_revision=rec.revision):
            return True
    return False


def copy_approvals(src: Store, dst: Store) -> int:
    """Copy every approval record from ``src`` to ``dst`` (used by ``copy_ledger``).

    Each record lands with its revision (its chain is replayed as CAS steps), so a copied
    ledger decides exactly as the source would. Returns how many records were copied.

    Raises:
        StoreError: storage failure.
    """
    copied = 0
    for rec in src.list_approvals():
        ok = dst.approval_put(dataclasses.replace(rec, revision=0), expected_revision=-1)
        for revision in range(1, rec.revision + 1):
            step = dataclasses.replace(rec, revision=revision)
            ok = ok and dst.approval_put(step, expected_revision=revision - 1)
        copied += ok
    return copied
