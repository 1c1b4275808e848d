"""Recorded answers served through the SDK itself: a mock transport, never the network.

A model call the run's replay controller answers from the record (``guard._replay``) is
made on a copy of the SDK client whose HTTP client has a mock transport: the transport
answers with the recorded response (JSON, or the stream's server-sent events), and the SDK
parses it as it parses the provider's answer, so the caller gets the SDK's own objects
(streams, stream helpers, ``get_final_message`` …), equal to the original.

Rules this module keeps:

- No SDK import: the SDK's HTTP library (``httpx2``, or ``httpx`` for older SDK releases)
  is imported when a first answer is served; clients are copied with ``with_options``.
- Each served request carries a one-time token header; the transport answers only a
  token it holds (concurrent calls get their own answers) and refuses anything else
  (HTTP 599, never the network).
- A stream is answered with the recorded events when they were stored (``stream=True``),
  else with events rebuilt from the recorded response (a ``stream`` helper's record):
  one event per content block, in the provider's order.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ReplayUnavailableError

__all__ = ["TOKEN_HEADER", "ReplayAnswers", "sse_body"]

#: The header that names a served answer to the mock transport.
TOKEN_HEADER = "x-toolledger-replay"


def _http() -> Any:
    try:
        import httpx2

        return httpx2
    except ImportError:  # SDK releases before the httpx2 switch
        import httpx

        return httpx


def _anthropic_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    msg = dict(message)
    blocks = msg.pop("content", None) or []
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(blocks):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            first = {**block, "text": ""}
            deltas.append({"type": "text_delta", "text": block.get("text", "")})
        elif kind == "tool_use":
            first = {**block, "input": {}}
            deltas.append(
                {"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}
            )
        elif kind == "thinking":
            first = {**block, "thinking": "", "signature": ""}
            deltas.append({"type": "thinking_delta", "thinking": block.get("thinking", "")})
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            first = block
        events.append({"type": "content_block_start", "index": i, "content_block": first})
        events.extend({"type": "content_block_delta", "index": i, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": i})
    usage = dict(msg.get("usage") or {})
    usage.setdefault("output_tokens", 0)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
            "usage": usage,
        }
    )
    events.append({"type": "message_stop"})
    return events


def _chat_events(completion: dict[str, Any]) -> list[dict[str, Any]]:
    head = {
        "id": completion.get("id"),
        "object": "chat.completion.chunk",
        "created": completion.get("created", 0),
        "model": completion.get("model"),
    }
    events = []
    for choice in completion.get("choices") or []:
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        calls = message.get("tool_calls") or []
        if calls:
            delta["tool_calls"] = [{**c, "index": j} for j, c in enumerate(calls)]
        index = choice.get("index", 0)
        events.append({**head, "choices": [{"index": index, "delta": delta}]})
        events.append(
            {
                **head,
                "choices": [
                    {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}
                ],
            }
        )
    if completion.get("usage") is not None:
        events.append({**head, "choices": [], "usage": completion["usage"]})
    return events


def _responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    created = {**response, "status": "in_progress", "output": []}
    return [
        {"type": "response.created", "sequence_number": 0, "response": created},
        {"type": "response.completed", "sequence_number": 1, "response": response},
    ]


_REBUILD: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "anthropic": _anthropic_events,
    "openai": _chat_events,
    "openai.responses": _responses_events,
}


def sse_body(api: str, events: list[Any]) -> bytes:
    """Server-sent events as the provider sends them (OpenAI chat: unnamed, ``[DONE]``)."""
    named = api != "openai"
    parts = []
    for e in events:
        head = f"event: {e.get('type')}\n" if named and isinstance(e, dict) else ""
        parts.append(f"{head}data: {json.dumps(e, ensure_ascii=False)}\n\n")
    if not named:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode("utf-8")


def answer_body(api: str, outputs: dict[str, Any], *, stream: bool) -> tuple[bytes, str]:
    """The recorded answer as the provider's HTTP body and its content type.

    Raises:
        ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` when the record lacks it.
    """
    response = outputs.get("response")
    events = outputs.get("stream")
    if stream:
        if not isinstance(events, list):
            rebuild = _REBUILD.get(api)
            if rebuild is None or not isinstance(response, dict):
                raise ReplayUnavailableError(message="the recorded call holds no stream")
            events = rebuild(response)
        return sse_body(api, events), "text/event-stream"
    if not isinstance(response, dict):
        raise ReplayUnavailableError(
            message="the recorded call was streamed; this request is not (a divergence the "
            "record cannot answer)"
        )
    return json.dumps(response, ensure_ascii=False).encode("utf-8"), "application/json"


class ReplayAnswers:
    """The recorded answers a journaled client serves, and the client copy serving them.

    Args:
        client: The SDK client (its ``with_options`` makes the serving copy).
        is_async: The client is async (the copy gets an async HTTP client).
    """

    def __init__(self, client: Any, *, is_async: bool) -> None:
        self._client = client
        self._async = is_async
        self._lock = threading.Lock()
        self._bodies: dict[str, tuple[bytes, str]] = {}
        self._ids = itertools.count()
        self._copy: Any = None

    def _handle(self, request: Any) -> Any:
        http = _http()
        token = request.headers.get(TOKEN_HEADER)
        with self._lock:
            body = self._bodies.pop(token, None) if token else None
        if body is None:
            return http.Response(599, json={"error": "toolledger replay: no recorded answer"})
        return http.Response(200, headers={"content-type": body[1]}, content=body[0])

    def serving_client(self) -> Any:
        """The client copy whose transport serves the recorded answers (made once)."""
        with self._lock:
            if self._copy is None:
                http = _http()
                transport = http.MockTransport(self._handle)
                http_client = (
                    http.AsyncClient(transport=transport)
                    if self._async
                    else http.Client(transport=transport)
                )
                self._copy = self._client.with_options(http_client=http_client, max_retries=0)
            return self._copy

    def add(self, body: tuple[bytes, str]) -> dict[str, str]:
        """Hold one answer; return the ``extra_headers`` that ask for it."""
        token = f"{next(self._ids)}"
        with self._lock:
            self._bodies[token] = body
        return {TOKEN_HEADER: token}
