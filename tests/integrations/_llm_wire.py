"""Wire fixtures for journaled-client tests: real SDK clients over a ``MockTransport``.

Current SDK releases take ``httpx2`` clients; older ones ``httpx``: whichever is installed
next to the SDK provides the mock transport.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:
    import httpx2
except ImportError:  # SDK releases before the httpx2 switch
    import httpx as httpx2  # type: ignore[no-redef]

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x-1-20260101",
    "content": [
        {"type": "text", "text": "Sending it."},
        {"type": "tool_use", "id": "toolu_1", "name": "send_email", "input": {"to": "a@b.c"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 25},
}
ANTHROPIC_CONTENT = [
    {"type": "text", "text": "Sending it."},
    {"type": "tool_use", "id": "toolu_1", "name": "send_email", "input": {"to": "a@b.c"}},
]
ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            **ANTHROPIC_MESSAGE,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sending"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " it."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "send_email", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"to": '},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"a@b.c"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"type": "message_delta", "stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 25},
    },
    {"type": "message_stop"},
]

CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-x-2026",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Sending it.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to":"a@b.c"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
}
CHAT_CONTENT = [
    {
        "role": "assistant",
        "content": "Sending it.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "send_email", "arguments": '{"to":"a@b.c"}'},
            }
        ],
    }
]


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> Any:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-x-2026",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


CHAT_CHUNKS: list[dict[str, Any]] = [
    _chunk({"role": "assistant", "content": "Sending"}),
    _chunk({"content": " it."}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_email", "arguments": ""},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"to":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a@b.c"}'}}]}),
    _chunk({}, "tool_calls"),
    _chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
]

RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-x-2026",
    "status": "completed",
    "output": [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_9",
            "name": "send_email",
            "arguments": '{"to":"a@b.c"}',
            "status": "completed",
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 5,
        "output_tokens": 2,
        "total_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
RESPONSE_EVENTS: list[dict[str, Any]] = [
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {**RESPONSE, "status": "in_progress", "output": []},
    },
    {"type": "response.completed", "sequence_number": 1, "response": RESPONSE},
]


def sse(events: list[dict[str, Any]], *, named: bool, done: bool = False) -> bytes:
    """Server-sent events: ``event: <type>`` lines when ``named``; ``[DONE]`` when ``done``."""
    parts = []
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        parts.append(f"{head}data: {json.dumps(e)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def _stream(body: bytes) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def anthropic_handler(status: int = 200) -> Callable[[httpx2.Request], httpx2.Response]:
    """Answer ``/v1/messages`` with the message (or its stream when asked)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        if status != 200:
            return httpx2.Response(
                status, json={"type": "error", "error": {"type": "api_error", "message": "boom"}}
            )
        if json.loads(request.content).get("stream"):
            return _stream(sse(ANTHROPIC_EVENTS, named=True))
        return httpx2.Response(200, json=ANTHROPIC_MESSAGE)

    return handler


def openai_handler(request: httpx2.Request) -> httpx2.Response:
    """Answer chat completions and responses (streams when asked)."""
    body = json.loads(request.content)
    if request.url.path.endswith("/responses"):
        if body.get("stream"):
            return _stream(sse(RESPONSE_EVENTS, named=True))
        return httpx2.Response(200, json=RESPONSE)
    if body.get("stream"):
        return _stream(sse(CHAT_CHUNKS, named=False, done=True))
    return httpx2.Response(200, json=CHAT_COMPLETION)


def anthropic_client(*, is_async: bool = False, status: int = 200) -> Any:
    import anthropic

    transport = httpx2.MockTransport(anthropic_handler(status))
    if is_async:
        return anthropic.AsyncAnthropic(
            api_key="k",
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
        )
    return anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=anthropic.DefaultHttpxClient(transport=transport)
    )


def openai_client(*, is_async: bool = False) -> Any:
    import openai

    transport = httpx2.MockTransport(openai_handler)
    if is_async:
        return openai.AsyncOpenAI(
            api_key="k",
            base_url="http://test/v1",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(transport=transport),
        )
    return openai.OpenAI(
        api_key="k",
        base_url="http://test/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=transport),
    )
