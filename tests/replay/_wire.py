"""An OpenAI wire for replay tests: the real SDK over a mock transport that counts requests.

``failing`` refuses every request (a replay must send none). ``answer`` is the scripted
API (default: ``_llm_wire.openai_handler``); ``tool_then_answer`` asks for ``send_email``
once, then answers after the tool result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai

from ..integrations._llm_wire import httpx2, openai_handler

Answer = Callable[[httpx2.Request], httpx2.Response]


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """A chat completion body with one choice."""
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def tool_then_answer(request: httpx2.Request) -> httpx2.Response:
    """Ask for ``send_email`` until a tool result is in the request; then answer ``done``."""
    messages = json.loads(request.content)["messages"]
    if any(m.get("role") == "tool" for m in messages):
        return httpx2.Response(
            200, json=completion({"role": "assistant", "content": "done"}, "stop")
        )
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "send_email", "arguments": '{"to": "a@b.c"}'},
    }
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    return httpx2.Response(200, json=completion(message, "tool_calls"))


class Wire:
    """Real OpenAI clients over a counting mock transport."""

    def __init__(self, answer: Answer = openai_handler, *, failing: bool = False) -> None:
        self.requests = 0
        self.failing = failing
        self._answer = answer

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if self.failing:
            raise AssertionError("a replay reached the network")
        return self._answer(request)

    def client(self) -> Any:
        return openai.OpenAI(
            api_key="k",
            base_url="http://test/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
        )

    def async_client(self) -> Any:
        return openai.AsyncOpenAI(
            api_key="k",
            base_url="http://test/v1",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )
