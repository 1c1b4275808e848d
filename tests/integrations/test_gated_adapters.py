"""Adapters with approval-gated tools: each gated call goes through run.call's gate."""

from __future__ import annotations

from typing import Any

import toolledger
from toolledger import approvals
from toolledger.integrations import anthropic as tl


def _message(*uses: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            # Each call its own input: a denial holds for the same action under another id.
            {"type": "tool_use", "id": i, "name": n, "input": {"to": i}}
            for i, n in uses
        ],
    }


def test_run_tool_calls_gated_tools_pending_denied_approved(run) -> None:
    """Pending: 'awaiting approval'; denied: the denial text; approved: it runs."""
    ran: list[str] = []

    def send(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        ran.append(ctx.call_id)
        return {"sent": True}

    answers = {
        "toolu_p": approvals.Pending("T-1"),
        "toolu_d": approvals.Denied("ana", "not today"),
        "toolu_a": approvals.Approved("ana"),
    }
    tool = toolledger.tool(
        "send_email",
        revision="1",
        execute=send,
        approval="always",
        approver=lambda request: answers[request.binding.call_id],
    )
    msg = _message(("toolu_p", "send_email"), ("toolu_d", "send_email"), ("toolu_a", "send_email"))
    blocks = tl.run_tool_calls(run, msg, [tool])
    got = [(b["tool_use_id"], b["content"], b.get("is_error", False)) for b in blocks]
    assert got == [
        ("toolu_p", "awaiting approval; not executed yet", True),
        ("toolu_d", "denied by ana: not today", True),
        ("toolu_a", '{"sent":true}', False),
    ]
    assert ran == ["toolu_a"]
