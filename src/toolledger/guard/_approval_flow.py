"""The approval gate's state machine: the first phase of every guarded call's flow.

``CallFlow.run`` reads the checkpoint and the stored approval for the key together
(``ReadGate``), for every call whatever its tool declares, and runs ``GateFlow.flow()``
when the call has a gate or a decision is stored for it, so the stored decision is
checked where the checkpoint is decided, once. No
I/O here: its reads and writes are requests it yields (``_call``), which the drivers
perform; they answer its ``ApprovalRequest`` with the approver.

Rules this module keeps:

- A stored decision binds every later attempt at the call, whatever ``Tool`` object the
  caller passes: a call without a gate (``mode is None``) that would execute still reads
  the stored approval for its key. Denied: final (``APPROVAL_DENIED``); pending, or an
  approval that expired: it waits (``awaiting_approval``); another binding under the key:
  ``BINDING_CONFLICT``; nothing stored: it proceeds, and nothing is written.
- It decides from stored facts first: the checkpoint (new / replayed / recovered) and the
  stored approval for the key. A stored decision for the same binding counts; a record
  for another binding is ``BINDING_CONFLICT``. The approver is asked at most once per
  evaluation, and only when no decision counts and no request is pending.
- A decision is stored durably (CAS on the approval's revision) *before* the call
  proceeds, so a crash after the approval and before execution does not ask twice. Of two
  callers deciding at once, one write wins and the other adopts the stored decision.
- A denial holds for the same action (tool name, revision, input fingerprint) asked
  again under a new call id in the same conversation (``Call.approval_scope``): a gated
  call with no stored record of its own first looks for such a denial (``FindDenial``)
  and, if one is stored, is denied with its ``by``/``reason`` (stored under its own key,
  the event naming ``same_action_as``) without asking the approver. An approval never
  carries over: it is for one call.
- A pending new call leaves its checkpoint in ``ready`` (created here if absent), never
  claimed. A denial never creates or claims a checkpoint.
- ``GateFlow.flow()`` is a generator: it yields the ``ApprovalRequest`` and the driver
  (sync or async) sends back what the approver answered.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import datetime
from typing import Any

from ..approvals import ApprovalRequest, Approved, Denied, Pending
from ..checkpoint import canonical_json
from ..checkpoint.model import CheckpointRecord, Status
from ..checkpoint.transitions import check_binding, create_checkpoint
from ..errors import (
    ApprovalDeniedError,
    BindingConflictError,
    InvalidArgumentError,
    StoreUnavailableError,
)
from ..store import TEXT_MAX, ApprovalRecord, ApprovalStatus, binding_fingerprint
from ..tools import ToolOutcome
from ._call import (
    Call,
    CreateReady,
    FindDenial,
    PutApproval,
    ReadApproval,
    RecordApproval,
    Request,
)
from ._seams import APPROVAL_ROUNDS, now, reached

__all__ = ["AWAITING_APPROVAL", "DENIED", "GateFlow"]

#: ``ToolOutcome.status`` of a call waiting for a decision.
AWAITING_APPROVAL = "awaiting_approval"
#: ``ToolOutcome.status`` of a denied call with ``on_error="result"``.
DENIED = "denied"
_INPUT_MAX = 65_536  # bytes of canonical JSON kept with a request for a human to read

Gate = Generator[Request, Any, ToolOutcome | None]


def _clip(text: str | None) -> str | None:
    """Bound free text stored with a request (the journal keeps the full justification)."""
    if text is None or len(text) <= TEXT_MAX:
        return text
    return text[: TEXT_MAX - 1] + "…"


def _kept_input(value: Any) -> Any:
    """The input stored with a request (``None`` when too large: the fingerprint binds it)."""
    try:
        return value if len(canonical_json(value).encode("utf-8")) <= _INPUT_MAX else None
    except Exception:
        return None


class GateFlow:
    """One gate evaluation: decide from stored facts, ask once, store, conclude."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.tool = call.tool
        self.binding = call.binding
        self.input = call.input
        self.justification = call.justification
        self.mode = call.approval
        self.on_error = call.on_error
        self.checkpoint: CheckpointRecord | None = None
        #: The call id of an earlier denial of the same action this call adopts.
        self.same_action_as: str | None = None
        # Without a gate nobody is asked: a stored decision is all that counts.
        self.approver: Callable[..., Any] | None = call.approver if self.mode is not None else None

    # -- the flow ---------------------------------------------------------------------

    def flow(
        self,
        rec: CheckpointRecord | None,
        first: Callable[[], ApprovalRecord | None] | None,
    ) -> Gate:
        """Evaluate the gate for the call whose checkpoint ``CallFlow.run`` read as ``rec``
        (its binding checked) with ``first``, the stored approval read with it (``None``
        for a store that reads it apart: then it is asked for here)."""
        key = self.call.binding.key
        self.checkpoint = rec
        replay = rec is not None and rec.status is not Status.READY
        if replay and self.mode != "always":
            return None  # a replayed or recovered call does not execute: no question
        answer: Any = None
        for _ in range(APPROVAL_ROUNDS):
            if first is not None:
                stored, first = first(), None
            else:
                stored = yield ReadApproval(key)
            if stored is None and self.mode is None:
                return None  # no gate and no decision stored for the call: proceed
            if stored is not None and stored.binding != self.binding:
                raise BindingConflictError(
                    message=f"an approval for {self.binding.namespace}/"
                    f"{self.binding.call_id} was requested for another binding "
                    f"({stored.binding.tool_name} rev {stored.binding.tool_revision}, "
                    f"{stored.binding.input_fingerprint}); it never authorizes this call",
                    details={"stored": stored.binding.to_dict(), "call": self.binding.to_dict()},
                )
            at = now()
            if stored is not None and stored.decided(at):
                return (yield from self._conclude(stored, source="stored"))
            if stored is not None and stored.status is ApprovalStatus.PENDING:
                if answer is None:
                    return (yield from self._awaiting(stored, new_event=False))
                if isinstance(answer, Pending):  # lost a race to another request: adopt it
                    return (yield from self._awaiting(stored, new_event=True))
            scope = self.call.approval_scope
            if answer is None and stored is None and scope is not None:
                # Denied earlier under another id in this conversation: denied again.
                earlier = yield FindDenial(self.binding, scope)
                if earlier is not None and earlier.by:
                    self.same_action_as = earlier.call_id
                    answer = Denied(earlier.by, earlier.reason)
            if answer is None:  # ask once per call, even when a write below loses a race
                if self.approver is None:
                    answer = Pending()
                else:
                    answer = yield self._request(replay)
            new = self._record(answer, stored, at)
            expected = -1 if stored is None else stored.revision
            if (yield PutApproval(new, expected)):
                reached("after-approval")
                if new.status is ApprovalStatus.PENDING:
                    return (yield from self._awaiting(new, new_event=True))
                source = "approver" if self.same_action_as is None else "same_action"
                return (yield from self._conclude(new, source=source))
            # Another caller decided or asked meanwhile: re-read and adopt what is stored.
        raise StoreUnavailableError(
            message=f"the approval of {self.binding.call_id} kept changing; nothing executed",
            details={"namespace": self.binding.namespace, "call_id": self.binding.call_id},
        )

    def _request(self, replay: bool) -> ApprovalRequest:
        assert self.mode is not None  # only a gated call has an approver to ask
        return ApprovalRequest(
            binding=self.binding,
            tool_name=self.tool.name,
            description=self.tool.description,
            input=self.input,
            input_fingerprint=self.binding.input_fingerprint,
            justification=self.justification,
            mode=self.mode,
            replay=replay,
            run_id=self._run_id(),
        )

    def _run_id(self) -> str | None:
        run_id = self.call.run_id
        return run_id if isinstance(run_id, str) and run_id else None

    def _record(self, answer: Any, stored: ApprovalRecord | None, at: datetime) -> ApprovalRecord:
        if isinstance(answer, Approved):
            if answer.expires_at is not None and answer.expires_at <= at:
                raise InvalidArgumentError(message="Approved.expires_at is in the past")
            changes: dict[str, Any] = {
                "status": ApprovalStatus.APPROVED,
                "by": answer.by,
                "reason": answer.reason,
                "decided_at": at,
                "expires_at": answer.expires_at,
                "ticket": None,
            }
        elif isinstance(answer, Denied):
            changes = {
                "status": ApprovalStatus.DENIED,
                "by": answer.by,
                "reason": answer.reason,
                "decided_at": at,
                "expires_at": None,
                "ticket": None,
            }
        elif isinstance(answer, Pending):
            changes = {
                "status": ApprovalStatus.PENDING,
                "by": None,
                "reason": None,
                "decided_at": None,
                "expires_at": None,
                "ticket": answer.ticket,
            }
        else:
            raise InvalidArgumentError(
                message=f"the approver of {self.tool.name} returned "
                f"{type(answer).__name__}, not Approved, Denied or Pending",
                details={"tool": self.tool.name},
            )
        if stored is None or stored.status is not ApprovalStatus.PENDING:
            requested = at  # a new request (or one replacing an expired approval)
        else:
            requested = stored.requested_at
        common = {
            "requested_at": requested,
            "justification": _clip(self.justification),
            "description": _clip(self.tool.description),
            "input": _kept_input(self.input),
            "run_id": self._run_id(),
            "conversation_id": self.call.approval_scope,
        }
        if stored is None:
            return ApprovalRecord(binding=self.binding, revision=0, **common, **changes)
        return stored.next(**common, **changes)

    # -- outcomes ---------------------------------------------------------------------

    def _conclude(self, rec: ApprovalRecord, *, source: str) -> Gate:
        yield self._event(rec, source=source)
        if rec.status is ApprovalStatus.APPROVED:
            return None
        text = f"denied by {rec.by}" + (f": {rec.reason}" if rec.reason else "")
        if self.on_error == "result":
            cp = self.checkpoint
            return ToolOutcome(
                call_id=self.binding.call_id,
                tool_name=self.binding.tool_name,
                payload=text,
                is_error=True,
                status=DENIED,
                revision=cp.revision if cp is not None else -1,
            )
        raise ApprovalDeniedError(
            message=f"call {self.binding.namespace}/{self.binding.call_id} "
            f"({self.binding.tool_name}) was {text}; nothing was executed",
            details={
                "namespace": self.binding.namespace,
                "call_id": self.binding.call_id,
                "tool_name": self.binding.tool_name,
                "by": rec.by,
                "reason": rec.reason,
                **({} if self.same_action_as is None else {"same_action_as": self.same_action_as}),
            },
        )

    def _awaiting(self, rec: ApprovalRecord, *, new_event: bool) -> Gate:
        cp = self.checkpoint
        if cp is None:
            # The call waits in ``ready``: its id is taken for this binding, nothing claimed.
            cp = yield CreateReady(create_checkpoint(self.binding, at=now()))
            assert cp is not None
            check_binding(cp, self.binding)
            self.checkpoint = cp
        if new_event:
            yield self._event(rec, source="approver")
        return ToolOutcome(
            call_id=self.binding.call_id,
            tool_name=self.binding.tool_name,
            payload=None,
            is_error=False,
            status=AWAITING_APPROVAL,
            revision=cp.revision,
        )

    def _event(self, rec: ApprovalRecord, *, source: str) -> RecordApproval:
        """The request recording the decision (or the request) as an ``approval`` event."""
        if rec.status is ApprovalStatus.PENDING:
            granted: bool | None = None
            outcome, status = "require_approval", "pending"
        elif rec.status is ApprovalStatus.APPROVED:
            granted, outcome, status = True, "allow", "granted"
        else:
            granted, outcome, status = False, "deny", "refused"
        approval = {
            "granted": granted,
            "outcome": outcome,
            "by": rec.by,
            "reason": rec.reason,
            "for_call": self.binding.call_id,
            "binding_fingerprint": binding_fingerprint(self.binding),
            "tool_revision": self.binding.tool_revision,
            "input_fingerprint": self.binding.input_fingerprint,
            "decided_at": rec.decided_at.isoformat() if rec.decided_at else None,
            "expires_at": rec.expires_at.isoformat() if rec.expires_at else None,
            "ticket": rec.ticket,
            "source": source,
            "mode": self.mode,
        }
        if self.same_action_as is not None:
            approval["same_action_as"] = self.same_action_as
        cp = self.checkpoint
        link = {
            "namespace": self.binding.namespace,
            "call_id": self.binding.call_id,
            "revision": cp.revision if cp is not None else None,
        }
        # A call the gate stops ends here: its record is made visible at once.
        return RecordApproval(self.tool.name, status, approval, link, flush=not granted)
