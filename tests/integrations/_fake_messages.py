"""A fake ``/v1/messages`` for the tool-runner tests: real SDK clients over ``MockTransport``.

The model asks for ``send_email`` once (tool-use id ``tool_use_id``; with a
``justification`` argument when the tool's schema declares one) and ends the turn when the
request carries a tool result. With
``stream=True`` it answers with server-sent events.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

MODEL = "claude-x-1-20260101"


class FakeMessages:
    """Scripted ``/v1/messages``: one tool call per conversation, then ``end_turn``."""

    def __init__(self, tool_use_id: str = "toolu_1", *, to: str = "ana@example.com") -> None:
        self.tool_use_id = tool_use_id
        self.to = to
        self.requests: list[dict[str, Any]] = []

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        content = last.get("content")
        results = [
            b for b in (content if isinstance(content, list) else []) if b["type"] == "tool_result"
        ]
        if results:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": "Done."}]
            stop = "end_turn"
        else:
            args: dict[str, Any] = {"to": self.to}
            schema = next(
                (
                    t.get("input_schema", {})
                    for t in body.get("tools", [])
                    if t["name"] == "send_email"
                ),
                {},
            )
            if "justification" in schema.get("properties", {}):
                args["justification"] = "The user asked for it."
            blocks = [
                {"type": "text", "text": "Sending it."},
                {
                    "type": "tool_use",
                    "id": self.tool_use_id,
                    "name": "send_email",
                    "input": args,
                },
            ]
            stop = "tool_use"
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        msg = self.message(body)
        if not body.get("stream"):
            return httpx2.Response(200, json=msg)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=_sse(msg)
        )

    def client(self, *, is_async: bool = False, **options: Any) -> Any:
        """A client over the fake (``options``: more client options, e.g. ``open_telemetry``)."""
        transport = httpx2.MockTransport(self.handler)
        if is_async:
            return anthropic.AsyncAnthropic(
                api_key="k",
                max_retries=0,
                http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
                **options,
            )
        return anthropic.Anthropic(
            api_key="k",
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(transport=transport),
            **options,
        )

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block the fake was sent, in order."""
        out = []
        for body in self.requests:
            content = body["messages"][-1].get("content")
            if isinstance(content, list):
                out.extend(b for b in content if b["type"] == "tool_result")
        return out


def _sse(msg: dict[str, Any]) -> bytes:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**msg, "content": [], "stop_reason": None},
        }
    ]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events += [
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "text_delta", "text": block["text"]},
                },
            ]
        else:
            start = {**block, "input": {}}
            events += [
                {"type": "content_block_start", "index": i, "content_block": start},
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json.dumps(block["input"]),
                    },
                },
            ]
        events.append({"type": "content_block_stop", "index": i})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
