"""An agent loop over the real SDKs and their mock transports, recorded and replayed.

The loop: an Anthropic ``messages.create`` turn asks for a tool call (guarded), an
Anthropic ``messages.stream`` turn answers after the tool result, then an async OpenAI
client streams a chat completion and makes a Responses API call. Every transport counts
its requests; a ``failing`` wire refuses any request (replay must send none).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai

import toolledger
from toolledger.integrations.anthropic import journaled

from ..integrations._llm_wire import anthropic_handler, httpx2, openai_handler


class Wire:
    """Mock transports for both SDKs; ``requests`` counts what reached them."""

    def __init__(self, *, failing: bool = False, tool_id: str = "toolu_1") -> None:
        self.requests: list[str] = []
        self.failing = failing
        self.tool_id = tool_id

    def _anthropic(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(str(request.url.path))
        if self.failing:
            raise AssertionError(f"a replay reached the network: {request.url}")
        response = anthropic_handler()(request)
        if self.tool_id == "toolu_1":
            return response
        body = response.read().replace(b"toolu_1", self.tool_id.encode())
        return httpx2.Response(200, headers=response.headers, content=body)

    def _openai(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(str(request.url.path))
        if self.failing:
            raise AssertionError(f"a replay reached the network: {request.url}")
        return openai_handler(request)

    def anthropic(self) -> Any:
        return anthropic.Anthropic(
            api_key="k",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self._anthropic)),
        )

    def async_openai(self) -> Any:
        return openai.AsyncOpenAI(
            api_key="k",
            base_url="http://test/v1",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._openai)),
        )


class Effects:
    """The tool's side effects (what replay must never repeat)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def tool(self) -> toolledger.Tool:
        def send(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            self.sent.append(input)
            return {"sent_to": input["to"]}

        return toolledger.tool("send_email", revision="1", execute=send)


def agent(run: toolledger.Run, wire: Wire, effects: Effects, prompt: str) -> dict[str, Any]:
    """The loop; returns what it saw (the final answer and the SDK objects)."""
    claude = journaled(wire.anthropic(), run)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    first = claude.messages.create(model="claude-x-1", max_tokens=64, messages=messages)
    (use,) = [b for b in first.content if b.type == "tool_use"]
    outcome = run.call(effects.tool(), call_id=use.id, input=use.input)
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": json.dumps(outcome.payload),
                }
            ],
        },
    ]
    with claude.messages.stream(model="claude-x-1", max_tokens=64, messages=messages) as stream:
        second = stream.get_final_message()

    async def summarize() -> tuple[list[Any], Any]:
        gpt = journaled(wire.async_openai(), run)
        chunks = [
            c
            async for c in await gpt.chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": prompt}], stream=True
            )
        ]
        response = await gpt.responses.create(model="gpt-x", input="Summarize.")
        return chunks, response

    chunks, response = asyncio.run(summarize())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return {
        "answer": f"{second.content[0].text} | {text} | {response.output[0].name}",
        "first": first,
        "second": second,
        "chunks": chunks,
        "response": response,
        "payload": outcome.payload,
        "replayed_tool": outcome.replayed,
    }
