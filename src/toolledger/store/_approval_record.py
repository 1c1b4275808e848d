"""Approval records: what a decision is bound to, and how it is stored. No I/O here.

Rules this module keeps:

- An ``ApprovalRecord`` is keyed by ``(namespace, call_id)`` like the checkpoint, and
  bound to the call's whole ``Binding`` (tool name, tool revision, input fingerprint). A
  record whose binding differs from the call's never authorizes it.
- Statuses: ``pending`` → ``approved`` | ``denied``. A decision is final, with one
  exception: an approval whose ``expires_at`` has passed counts as no decision, and the
  gate moves it back to ``pending`` (a new request) when the call asks again.
- Every change bumps ``revision`` by one; stores swap records by revision (CAS), so two
  deciders racing on one request cannot both win.
- Every backend stores ``dump_approval``'s JSON text and reads it back with
  ``load_approval`` (the same bytes on SQLite, PostgreSQL and in memory).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from ..checkpoint import compact_json
from ..checkpoint.model import Binding, check_time, fingerprint, format_time, parse_time
from ..errors import InvalidArgumentError, InvalidCheckpointError

__all__ = [
    "APPROVAL_SCHEMA_VERSION",
    "CAS_ROUNDS",
    "TEXT_MAX",
    "ApprovalRecord",
    "ApprovalStatus",
    "action_digest",
    "approval_statuses",
    "binding_fingerprint",
    "dump_approval",
    "latest_denial",
    "load_approval",
    "prepare_put",
    "stored_action",
]

APPROVAL_SCHEMA_VERSION = 1
#: Characters of each free text stored with an approval (by, reason, justification,
#: description, ticket): longer text is refused when decided, clipped when requested.
TEXT_MAX = 4096
#: Read/compare-and-swap rounds on one approval record before a writer gives up.
CAS_ROUNDS = 16


class ApprovalStatus(str, Enum):
    """Where an approval request stands; the values are the stored strings."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"

    def __str__(self) -> str:
        return self.value


def binding_fingerprint(binding: Binding) -> str:
    """Return ``"sha256:<hex>"`` of the binding (the value ``run.approval`` records too)."""
    return fingerprint(binding.to_dict())


def action_digest(binding: Binding) -> str:
    """Return ``"sha256:<hex>"`` of the binding's action (tool name, revision, input
    fingerprint): the ``action`` column a denial is looked up by (its namespace and
    conversation are columns of their own)."""
    return fingerprint([binding.tool_name, binding.tool_revision, binding.input_fingerprint])


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """One call's approval request and, once made, its decision.

    Args:
        binding: The call this request is for (tool, revision, input fingerprint).
        status: ``pending``, ``approved`` or ``denied``.
        revision: 0 when first stored; +1 per change (CAS).
        requested_at: When the (latest) request was made.
        justification: Why the call is made (what the approver was shown).
        description: The tool's description.
        input: The call's input (exact JSON), so a human deciding later sees what they
            authorize; ``None`` when it was too large to keep (the fingerprint binds it).
        ticket: The approver's ticket for a pending request (``Pending(ticket)``).
        run_id: The run that asked.
        conversation_id: The conversation the call was asked in (the run's
            ``conversation_id``, else its run id); a denial holds for the same action asked
            again under a new call id in it. ``None`` on records stored before it was kept.
        by, reason, decided_at: The decision (``None`` while pending).
        expires_at: An approval stops counting after this time (``None``: never).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an inconsistent record.
    """

    binding: Binding
    status: ApprovalStatus
    revision: int
    requested_at: datetime
    justification: str | None = None
    description: str | None = None
    input: Any = None
    ticket: str | None = None
    run_id: str | None = None
    by: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    expires_at: datetime | None = None
    conversation_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.binding, Binding):
            raise InvalidArgumentError(message="binding must be a Binding")
        if not isinstance(self.status, ApprovalStatus):
            object.__setattr__(self, "status", ApprovalStatus(self.status))
        if type(self.revision) is not int or self.revision < 0:
            raise InvalidArgumentError(message="revision must be an int >= 0")
        check_time(self.requested_at, "requested_at")
        for name in (
            "justification",
            "description",
            "ticket",
            "run_id",
            "by",
            "reason",
            "conversation_id",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > TEXT_MAX):
                raise InvalidArgumentError(
                    message=f"{name} must be a str of at most {TEXT_MAX} characters",
                    details={"argument": name},
                )
        decided = self.status is not ApprovalStatus.PENDING
        if decided and (not self.by or self.decided_at is None):
            raise InvalidArgumentError(message="a decided approval needs by and decided_at")
        if not decided and (self.by is not None or self.decided_at is not None):
            raise InvalidArgumentError(message="a pending approval has no decision fields")
        for name in ("decided_at", "expires_at"):
            value = getattr(self, name)
            if value is not None:
                check_time(value, name)

    @property
    def key(self) -> tuple[str, str]:
        """The store key, ``(namespace, call_id)``."""
        return self.binding.key

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.binding.call_id

    @property
    def binding_fingerprint(self) -> str:
        """``"sha256:<hex>"`` of the binding this request is for."""
        return binding_fingerprint(self.binding)

    def expired(self, at: datetime) -> bool:
        """Whether this is an approval whose expiry has passed at ``at``."""
        return (
            self.status is ApprovalStatus.APPROVED
            and self.expires_at is not None
            and self.expires_at <= at
        )

    def decided(self, at: datetime) -> bool:
        """Whether this record holds a decision that counts at ``at``."""
        return self.status is not ApprovalStatus.PENDING and not self.expired(at)

    def next(self, **changes: Any) -> ApprovalRecord:
        """Return the record with ``changes`` applied and ``revision + 1``."""
        return dataclasses.replace(self, revision=self.revision + 1, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (the stored document)."""

        def t(value: datetime | None) -> str | None:
            return None if value is None else format_time(value)

        data: dict[str, Any] = {
            "v": APPROVAL_SCHEMA_VERSION,
            "binding": self.binding.to_dict(),
            "status": self.status.value,
            "revision": self.revision,
            "requested_at": format_time(self.requested_at),
            "justification": self.justification,
            "description": self.description,
            "input": self.input,
            "ticket": self.ticket,
            "run_id": self.run_id,
            "by": self.by,
            "reason": self.reason,
            "decided_at": t(self.decided_at),
            "expires_at": t(self.expires_at),
        }
        if self.conversation_id is not None:  # absent on older rows: same bytes for them
            data["conversation_id"] = self.conversation_id
        return data


def dump_approval(record: ApprovalRecord) -> str:
    """Return the stored JSON text of ``record``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``input`` is not exact JSON.
    """
    return compact_json(record.to_dict())


def load_approval(text: str, namespace: str, call_id: str) -> ApprovalRecord:
    """Parse a stored approval.

    Raises:
        InvalidCheckpointError: ``INVALID_CHECKPOINT`` naming the key when the row is
            damaged or was stored under another key.
    """
    try:
        data = json.loads(text)
        if data.get("v") != APPROVAL_SCHEMA_VERSION:
            raise ValueError(f"unsupported approval schema {data.get('v')!r}")

        def t(name: str) -> datetime | None:
            value = data.get(name)
            return None if value is None else parse_time(value, name)

        requested = t("requested_at")
        if requested is None:
            raise ValueError("requested_at missing")
        record = ApprovalRecord(
            binding=Binding.from_dict(data["binding"]),
            status=ApprovalStatus(data["status"]),
            revision=data["revision"],
            requested_at=requested,
            justification=data.get("justification"),
            description=data.get("description"),
            input=data.get("input"),
            ticket=data.get("ticket"),
            run_id=data.get("run_id"),
            by=data.get("by"),
            reason=data.get("reason"),
            decided_at=t("decided_at"),
            expires_at=t("expires_at"),
            conversation_id=data.get("conversation_id"),
        )
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
        InvalidArgumentError,
    ) as exc:
        raise InvalidCheckpointError(
            message=f"stored approval {namespace}/{call_id} is damaged: {exc}",
            details={"namespace": namespace, "call_id": call_id},
        ) from exc
    if record.key != (namespace, call_id):
        raise InvalidCheckpointError(
            message=f"stored approval {namespace}/{call_id} names another key",
            details={"namespace": namespace, "call_id": call_id},
        )
    return record


def prepare_put(record: ApprovalRecord, expected_revision: int) -> str:
    """Check an ``approval_put`` call and return the text to store (every backend uses it).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``record`` is not an
            ``ApprovalRecord`` or its revision does not follow ``expected_revision``.
    """
    if not isinstance(record, ApprovalRecord):
        raise InvalidArgumentError(message="approval_put needs an ApprovalRecord")
    if type(expected_revision) is not int or record.revision != expected_revision + 1:
        raise InvalidArgumentError(
            message=f"approval revision {record.revision} does not follow {expected_revision!r}",
            details={"revision": record.revision, "expected_revision": expected_revision},
        )
    return dump_approval(record)


def stored_action(text: str) -> tuple[str | None, str | None]:
    """Return ``(action, conversation_id)`` of a stored approval's JSON text (a migration
    backfills the columns with it); ``(None, None)`` for a damaged row, which no lookup
    by action finds (reading it by key still reports it damaged)."""
    try:
        data = json.loads(text)
        binding = Binding.from_dict(data["binding"])
        conversation = data.get("conversation_id")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, InvalidArgumentError):
        return None, None
    return action_digest(binding), conversation if isinstance(conversation, str) else None


def latest_denial(
    records: Iterable[ApprovalRecord], binding: Binding, conversation: str
) -> ApprovalRecord | None:
    """Return the latest denial among ``records`` of ``binding``'s action in
    ``conversation`` under another call id (``records`` in ``list_approvals`` order: a tie
    on the decision time goes to the later one), or ``None``. Every backend's
    ``find_denial`` and the scan for stores without it decide with this."""
    found: ApprovalRecord | None = None
    for rec in records:
        other = rec.binding
        if (
            rec.status is ApprovalStatus.DENIED
            and rec.conversation_id == conversation
            and other.namespace == binding.namespace
            and other.call_id != binding.call_id
            and (other.tool_name, other.tool_revision, other.input_fingerprint)
            == (binding.tool_name, binding.tool_revision, binding.input_fingerprint)
            and (found is None or _decided_at(rec) >= _decided_at(found))
        ):
            found = rec
    return found


def _decided_at(rec: ApprovalRecord) -> datetime:
    return rec.decided_at or rec.requested_at


def approval_statuses(status: Any) -> list[str] | None:
    """Normalise a ``list_approvals`` status filter to stored strings (``None``: any).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown status.
    """
    if status is None:
        return None
    items = [status] if isinstance(status, str) else list(status)
    try:
        return sorted({ApprovalStatus(s).value for s in items})
    except ValueError as exc:
        raise InvalidArgumentError(message=f"unknown approval status in {items!r}") from exc
