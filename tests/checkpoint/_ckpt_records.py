"""Records in every status, built only through the public transitions (test helpers)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    CheckpointRecord,
    Status,
    Transition,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RESULT = {"ok": True, "id": "msg-1", "n": [1, 2.5, None]}
REASON = "the connection dropped after the request was sent"


def at(seconds: float) -> datetime:
    """Return T0 + ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def binding(call_id: str = "call-1", **changes: str) -> Binding:
    """Return a valid binding; ``changes`` override single fields."""
    fields = {
        "namespace": "ns",
        "call_id": call_id,
        "tool_name": "send_email",
        "tool_revision": "1",
        "input_fingerprint": fingerprint({"to": "a@example.com"}),
    }
    fields.update(changes)
    return Binding(**fields)


def _ready() -> CheckpointRecord:
    return create_checkpoint(binding(), at=at(0))


def _executing() -> CheckpointRecord:
    return claim_execution(_ready(), attempt_id="a1", at=at(1)).next


def _uncertain() -> CheckpointRecord:
    return mark_execution_uncertain(_executing(), attempt_id="a1", at=at(2), reason=REASON).next


def _completed() -> CheckpointRecord:
    return complete_execution(_executing(), attempt_id="a1", at=at(2), result=RESULT).next


def _delivering() -> CheckpointRecord:
    return claim_delivery(_completed(), delivery_id="d1", at=at(3)).next


def _delivered() -> CheckpointRecord:
    return complete_delivery(_delivering(), delivery_id="d1", at=at(4)).next


def _ready_released() -> CheckpointRecord:
    return release_execution(_executing(), attempt_id="a1", at=at(2), evidence="journal-empty").next


def _completed_redelivery() -> CheckpointRecord:
    return release_delivery(_delivering(), delivery_id="d1", at=at(4)).next


#: Named records: one per status, plus the states reached by the two release moves.
RECORDS: dict[str, Callable[[], CheckpointRecord]] = {
    "ready": _ready,
    "executing": _executing,
    "uncertain": _uncertain,
    "completed": _completed,
    "delivering": _delivering,
    "delivered": _delivered,
    "ready-released": _ready_released,
    "completed-redelivery": _completed_redelivery,
}

STATUS_RECORDS = {s.value: RECORDS[s.value] for s in Status}


def owner_kwargs(name: str, when: datetime) -> dict[str, Any]:
    """Arguments with which the owning attempt/delivery calls transition ``name``."""
    kwargs: dict[str, Any] = {"at": when}
    if name.startswith("resolve_"):
        kwargs.update(by="ana", reason=REASON, force=True)
        if name == "resolve_completed":
            kwargs["result"] = RESULT
        return kwargs
    if name in ("claim_delivery", "release_delivery", "complete_delivery"):
        kwargs["delivery_id"] = "d1"
    else:
        kwargs["attempt_id"] = "a1"
    if name == "complete_execution":
        kwargs["result"] = RESULT
    elif name == "mark_execution_uncertain":
        kwargs["reason"] = REASON
    elif name == "release_execution":
        kwargs["evidence"] = "journal-empty"
    return kwargs


TRANSITION_FUNCTIONS: dict[str, Callable[..., Transition]] = {
    name: getattr(tl.checkpoint, name) for name in tl.checkpoint.TRANSITIONS
}


# -- random walks (hypothesis) -----------------------------------------------------------

ids = st.from_regex(r"[A-Za-z0-9._:-]{1,20}", fullmatch=True)
_texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), children, max_size=4
        )
    ),
    max_leaves=20,
)
MOVES = ["claim", "complete", "uncertain", "release", "claim_d", "release_d", "complete_d"]


@st.composite
def walks(draw: st.DrawFn) -> list[CheckpointRecord]:
    """Every revision of a record moved by legal moves at random, at increasing times."""
    b = Binding(draw(ids), draw(ids), draw(ids), draw(ids), draw(ids))
    when = T0
    out = [create_checkpoint(b, at=when)]
    for move in draw(st.lists(st.sampled_from(MOVES), max_size=10)):
        rec = out[-1]
        when += timedelta(microseconds=draw(st.integers(0, 10**9)))
        attempt, delivery = rec.execution_fence or draw(ids), rec.delivery_fence or draw(ids)
        try:
            if move == "claim":
                t = claim_execution(rec, attempt_id=attempt, at=when)
            elif move == "complete":
                t = complete_execution(
                    rec,
                    attempt_id=attempt,
                    at=when,
                    result=draw(json_values),
                    is_error=draw(st.booleans()),
                )
            elif move == "uncertain":
                reason = draw(_texts)
                t = mark_execution_uncertain(rec, attempt_id=attempt, at=when, reason=reason)
            elif move == "release":
                t = release_execution(rec, attempt_id=attempt, at=when, evidence="journal-empty")
            elif move == "claim_d":
                t = claim_delivery(rec, delivery_id=delivery, at=when)
            elif move == "release_d":
                t = release_delivery(rec, delivery_id=delivery, at=when)
            else:
                t = complete_delivery(rec, delivery_id=delivery, at=when)
        except (tl.InvalidTransitionError, tl.FenceConflictError, tl.InvalidArgumentError):
            continue
        out.append(t.next)
    return out
