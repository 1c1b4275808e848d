"""A denial holds for the same action asked again under a new call id in the conversation.

Issue 29, point 6: the re-plan is denied with the stored decision (who, why, and the earlier
call id as ``same_action_as``) without a second question to the approver and without a new
pending request; another conversation is asked again, and an approval never carries over.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.errors import ApprovalDeniedError
from toolledger.store import Store

from .conftest import Approver, Effects, approval_events
from .test_stores import store  # noqa: F401  (the memory / sqlite / postgres fixture)

INPUT = {"to": "ana@example.com"}


def _statuses(db: Store) -> dict[str, str]:
    return {r.call_id: r.status.value for r in toolledger.approvals.list_approvals(db)}


def test_denied_then_replanned_is_denied_without_asking(
    store: Store,  # noqa: F811
    effects: Effects,
) -> None:
    approver = Approver(Denied("bob", "wrong recipient"))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=store, conversation_id="conv-1") as run:
        with pytest.raises(ApprovalDeniedError):
            run.call(gated, call_id="c1", input=INPUT)
        with pytest.raises(ApprovalDeniedError) as again:
            run.call(gated, call_id="c2", input=INPUT)
        out = run.call(gated, call_id="c3", input=INPUT, on_error="result")
    assert len(approver.requests) == 1  # the re-plans were never asked about
    assert effects.sent == []
    assert again.value.details["same_action_as"] == "c1"
    assert (again.value.details["by"], again.value.details["reason"]) == (
        "bob",
        "wrong recipient",
    )
    assert (out.status, out.is_error, out.payload) == (
        "denied",
        True,
        "denied by bob: wrong recipient",
    )
    # Recorded as denials under their own ids: no pending request was filed.
    assert _statuses(store) == {"c1": "denied", "c2": "denied", "c3": "denied"}
    events = approval_events(store, run.run_id)
    assert [(e["status"], e["approval"].get("same_action_as")) for e in events] == [
        ("refused", None),
        ("refused", "c1"),
        ("refused", "c2"),  # the latest denial of the action
    ]
    assert [e["approval"]["source"] for e in events] == ["approver", "same_action", "same_action"]
    assert toolledger.verify(store, run.run_id).ok


def test_operator_denial_of_a_pending_call_holds_for_the_replan(
    store: Store,  # noqa: F811
    effects: Effects,
) -> None:
    """Pending → `toolledger deny` → the re-plan is denied, not a second pending request."""
    approver = Approver(Pending("T-1"))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=store) as run:  # no conversation_id: the run is the scope
        assert run.call(gated, call_id="c1", input=INPUT).status == "awaiting_approval"
        toolledger.decide_approval(store, "default", "c1", False, "ops", "no")
        out = run.call(gated, call_id="c2", input=INPUT, on_error="result")
        # Another input is another action: asked.
        other = run.call(gated, call_id="c3", input={"to": "bo@example.com"}, on_error="result")
    assert (out.status, out.payload) == ("denied", "denied by ops: no")
    assert other.status == "awaiting_approval"
    assert len(approver.requests) == 2
    assert [r.call_id for r in approver.requests] == ["c1", "c3"]
    assert _statuses(store) == {"c1": "denied", "c2": "denied", "c3": "pending"}


def test_a_denial_in_another_conversation_does_not_carry_over(
    store: Store,  # noqa: F811
    effects: Effects,
) -> None:
    approver = Approver(Denied("bob", "no"))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=store, conversation_id="conv-1") as run:
        assert run.call(gated, call_id="c1", input=INPUT, on_error="result").status == "denied"
    approver.answer = Approved("alice")
    with toolledger.run("g", db=store, conversation_id="conv-2") as run:
        assert run.call(gated, call_id="c2", input=INPUT).status == "completed"
    with toolledger.run("g", db=store) as run:  # no conversation: its own run id
        assert run.call(gated, call_id="c3", input=INPUT).status == "completed"
    assert [r.call_id for r in approver.requests] == ["c1", "c2", "c3"]
    assert effects.sent == [INPUT, INPUT]


def test_an_approval_does_not_carry_over(
    store: Store,  # noqa: F811
    effects: Effects,
) -> None:
    """An approval is for one call: the re-plan is asked again (then the same-action rules
    decide whether it runs or is served the first result)."""
    approver = Approver(Approved("alice"))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=store, conversation_id="conv-1") as run:
        first = run.call(gated, call_id="c1", input=INPUT)
        run.mark_seen([first.call_id])
        approver.answer = Denied("bob", "once is enough")
        out = run.call(gated, call_id="c2", input=INPUT, on_error="result")
    assert [r.call_id for r in approver.requests] == ["c1", "c2"]
    assert out.status == "denied"
    assert effects.sent == [INPUT]


def test_an_ungated_call_never_looks_for_a_denial(
    store: Store,  # noqa: F811
    effects: Effects,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lookup is the gate's: a call without a gate adds no read for it."""
    looked: list[Any] = []
    real = toolledger.approvals.find_denial

    def spy(*args: Any) -> Any:
        looked.append(args[1].call_id)
        return real(*args)

    monkeypatch.setattr("toolledger.guard._drivers.find_denial", spy)
    gated = effects.tool("always", Approver(Denied("bob", "no")))
    with toolledger.run("g", db=store) as run:
        run.call(gated, call_id="c1", input=INPUT, on_error="result")
        run.call(gated, call_id="c1", input=INPUT, on_error="result")  # its own stored denial
        assert (
            run.call(effects.tool(None, None), call_id="u1", input={"to": "x"}).status
            == "completed"
        )
    assert looked == ["c1"]
