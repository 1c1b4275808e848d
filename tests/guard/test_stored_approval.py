"""A stored approval decision binds every later attempt at the call, whatever tool object.

The decision (denied: final; pending: blocks) is stored under the call's key; a ``Tool``
defined without ``approval=`` for the same call (name, revision, input) must not run it,
through ``run.call``, ``run.acall``, ``run.call_many`` and the Anthropic adapter alike,
on every backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.checkpoint import Status
from toolledger.integrations import anthropic

from ._stores import STORE_KINDS, open_kind

INPUT = {"to": "ana@example.com"}
ENTRY_POINTS = ["call", "acall", "call_many", "anthropic.run_tool_calls"]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_kind(request.param, tmp_path)


class Sent:
    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def tool(self, **gate: Any) -> toolledger.Tool:
        def send_email(input: Any, ctx: Any) -> dict[str, Any]:
            self.inputs.append(input)
            return {"sent_to": input["to"]}

        return toolledger.tool("send_email", revision="1", execute=send_email, **gate)


def _attempt(run: toolledger.Run, entry: str, tool: toolledger.Tool) -> Any:
    """Make the call through ``entry``; return its outcome, result block or exception."""
    try:
        if entry == "call":
            return run.call(tool, call_id="c1", input=INPUT)
        if entry == "acall":
            return asyncio.run(run.acall(tool, call_id="c1", input=INPUT))
        if entry == "call_many":
            return run.call_many([{"tool": tool, "call_id": "c1", "input": INPUT}])[0]
        response = {
            "content": [{"type": "tool_use", "id": "c1", "name": "send_email", "input": INPUT}]
        }
        return anthropic.run_tool_calls(run, response, [tool])[0]
    except toolledger.CheckpointError as exc:
        return exc


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_stored_denial_is_final_for_an_ungated_tool(store: Any, entry: str) -> None:
    """Denied through the gate, then the same call with a plain Tool: nothing runs."""
    sent = Sent()
    with toolledger.run("refund", db=store) as run:
        with pytest.raises(toolledger.ApprovalDeniedError):
            run.call(
                sent.tool(approval="effect-only", approver=lambda r: Denied("bob", "no")),
                call_id="c1",
                input=INPUT,
            )
        for _ in range(2):  # and again: a denial stays final
            got = _attempt(run, entry, sent.tool())
            if entry == "anthropic.run_tool_calls":
                assert got["is_error"] is True
                assert got["content"] == "denied by bob: no"
            else:
                assert isinstance(got, toolledger.ApprovalDeniedError)
                assert got.code == "APPROVAL_DENIED"
    assert sent.inputs == []
    assert store.get("default", "c1") is None  # never created, never claimed


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_stored_pending_request_blocks_an_ungated_tool(store: Any, entry: str) -> None:
    """Pending through the gate, then a plain Tool: it waits, unclaimed; approval lets it run."""
    sent = Sent()
    with toolledger.run("refund", db=store) as run:
        first = run.call(
            sent.tool(approval="always", approver=lambda r: Pending("T-1")),
            call_id="c1",
            input=INPUT,
        )
        assert first.status == "awaiting_approval"
        got = _attempt(run, entry, sent.tool())
        if entry == "anthropic.run_tool_calls":
            assert (got["is_error"], got["content"]) == (
                True,
                "awaiting approval; not executed yet",
            )
        else:
            assert isinstance(got, toolledger.ToolOutcome)
            assert (got.status, got.payload) == ("awaiting_approval", None)
        assert sent.inputs == []
        rec = store.get("default", "c1")
        assert (rec.status, rec.revision) == (Status.READY, 0)
        toolledger.decide_approval(store, "default", "c1", True, "alice", "ok")
        done = _attempt(run, entry, sent.tool())
        if entry == "anthropic.run_tool_calls":
            assert done.get("is_error", False) is False
            assert done["content"] == '{"sent_to":"ana@example.com"}'
        else:
            assert done.payload == {"sent_to": "ana@example.com"}
    assert sent.inputs == [INPUT]


def test_stored_approval_for_another_input_never_authorizes_an_ungated_tool(
    store: Any,
) -> None:
    """A decision stored for another binding under the key is BINDING_CONFLICT, not a pass."""
    sent = Sent()
    with toolledger.run("refund", db=store) as run:
        run.call(
            sent.tool(approval="always", approver=lambda r: Approved("alice")),
            call_id="c1",
            input={"to": "x@example.com"},
        )
        # the approved call ran; a plain tool with another input under the same id conflicts
        with pytest.raises(toolledger.BindingConflictError):
            run.call(sent.tool(), call_id="c1", input=INPUT)
        with pytest.raises(toolledger.ApprovalDeniedError):
            run.call(
                sent.tool(approval="always", approver=lambda r: Denied("bob", "no")),
                call_id="c2",
                input=INPUT,
            )
        with pytest.raises(toolledger.BindingConflictError):
            run.call(sent.tool(), call_id="c2", input={"to": "y@example.com"})
    assert sent.inputs == [{"to": "x@example.com"}]


def test_replay_ignores_a_damaged_approval_it_does_not_need(tmp_path: Path) -> None:
    """The gate reads checkpoint and approval at once; a damaged approval fails only a
    call that needs it, never a replay (which does not ask)."""
    import sqlite3

    db = tmp_path / "ledger.db"
    sent = Sent()
    with toolledger.run("refund", db=db) as run:
        run.call(
            sent.tool(approval="effect-only", approver=lambda r: Approved("alice")),
            call_id="c1",
            input=INPUT,
        )
        conn = sqlite3.connect(str(db), isolation_level=None)
        conn.execute("UPDATE approvals SET record = '{broken' WHERE call_id = 'c1'")
        conn.close()
        again = run.call(sent.tool(), call_id="c1", input=INPUT)  # ungated: a replay
        assert (again.replayed, again.payload) == (True, {"sent_to": "ana@example.com"})
        with pytest.raises(toolledger.InvalidCheckpointError):
            run.call(
                sent.tool(approval="always", approver=lambda r: Approved("bob")),
                call_id="c1",
                input=INPUT,
            )
    assert sent.inputs == [INPUT]
