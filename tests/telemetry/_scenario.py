"""The backend scenario: one run with everything a person looks for in a trace viewer.

A journaled model call (the real Anthropic SDK over a mock transport) requests two guarded
tools: ``send_email`` (gated, approved) and ``lookup_order`` (fails); ``send_email`` is then
called again (a replay); ``refund`` is denied; a step, a note, an artifact and ``finish``.
Used by the exact-attribute tests, the Phoenix end-to-end test and the screenshot script.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolledger
from toolledger import Approved, Denied
from toolledger.integrations.anthropic import journaled

try:
    import httpx2
except ImportError:  # SDK releases before the httpx2 switch
    import httpx as httpx2  # type: ignore[no-redef]

SYSTEM = "You are a support agent. Use the tools."
USER = "Refund order 42 and email Ana."
MESSAGE: dict[str, Any] = {
    "id": "msg_01scenario",
    "type": "message",
    "role": "assistant",
    "model": "claude-x-1-20260101",
    "content": [
        {"type": "text", "text": "I'll email Ana and look up the order."},
        {
            "type": "tool_use",
            "id": "toolu_email",
            "name": "send_email",
            "input": {"to": "ana@example.com"},
        },
        {"type": "tool_use", "id": "toolu_lookup", "name": "lookup_order", "input": {"order": 42}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 7,
        "output_tokens": 40,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
    },
}


IDS: dict[str, Any] = {"conversation_id": "conv-42", "user_id": "user-7"}


@dataclass(frozen=True, slots=True)
class Recorded:
    run_id: str
    db: Path
    conversation_id: str
    user_id: str


def _handler(request: Any) -> Any:
    return httpx2.Response(200, json=MESSAGE)


def anthropic_client() -> Any:
    import anthropic

    transport = httpx2.MockTransport(_handler)
    return anthropic.Anthropic(
        api_key="k",
        base_url="http://llm.test:8080",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(transport=transport),
    )


def send_email(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"sent_to": input["to"], "message_id": "m-1"}


def lookup_order(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    raise RuntimeError("boom: disk full")


def refund(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    raise AssertionError("a denied call never runs")


def record(db: Path, *, tracer_provider: Any = None, capture_content: bool = True) -> Recorded:
    """Record the scenario into ``db``; return its ids."""
    email = toolledger.tool(
        "send_email",
        revision="1",
        execute=send_email,
        description="Send an email.",
        approval="effect-only",
        approver=lambda request: Approved("alice", reason="customer asked"),
    )
    lookup = toolledger.tool("lookup_order", revision="1", execute=lookup_order)
    refund_tool = toolledger.tool(
        "refund",
        revision="1",
        execute=refund,
        approval="effect-only",
        approver=lambda request: Denied("bob", reason="over the limit"),
    )
    with toolledger.run(
        goal=USER,
        agent="support-bot",
        db=db,
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        **IDS,
    ) as run:
        client = journaled(anthropic_client(), run)
        reply = client.messages.create(
            model="claude-x-1",
            max_tokens=512,
            stop_sequences=["END"],
            system=SYSTEM,
            messages=[{"role": "user", "content": USER}],
            tools=[],
        )
        calls = [b for b in reply.content if b.type == "tool_use"]
        with run.step("plan", justification="Two tools requested.") as step:
            step.record_output(calls=len(calls))
        for block in calls:
            tool = email if block.name == "send_email" else lookup
            run.call(
                tool,
                call_id=block.id,
                input=dict(block.input),
                justification=f"The model asked for {block.name}.",
                on_error="result",
            )
        run.call(email, call_id="toolu_email", input={"to": "ana@example.com"})  # a replay
        run.call(refund_tool, call_id="toolu_refund", input={"order": 42}, on_error="result")
        run.note("Ana was emailed; the order lookup failed.")
        run.add_artifact(
            json.dumps({"order": 42}).encode(), name="order.json", media_type="application/json"
        )
        run.finish("Emailed Ana; lookup failed; refund denied.")
    return Recorded(run_id=run.run_id, db=db, conversation_id="conv-42", user_id="user-7")
