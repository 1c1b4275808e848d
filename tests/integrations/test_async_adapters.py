"""The adapters' async forms: a turn's calls run concurrently, claim together, replay."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations import anthropic as tl_anthropic
from toolledger.integrations import openai as tl_openai
from toolledger.store import SQLiteStore

pytest.importorskip("anthropic")
pytest.importorskip("openai")
from anthropic.types import Message
from openai.types.responses import Response


class CountingStore(SQLiteStore):
    durable = 0

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        result = super().apply(ops, durable=durable)
        self.durable += int(durable)
        return result


def _tool(ran: list[Any]) -> toolledger.Tool:
    async def send(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        await asyncio.sleep(0)
        ran.append(input["to"])
        return {"sent_to": input["to"]}

    return toolledger.tool("send_email", revision="1", execute=send)


def test_arun_tool_calls_anthropic_claims_turn_together_and_replays(tmp_path: Path) -> None:
    """Three async calls: one claim commit + three completions; a re-run executes nothing."""
    msg = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}",
                    "name": "send_email",
                    "input": {"to": f"u{i}"},
                }
                for i in range(3)
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    ran: list[Any] = []
    store = CountingStore(tmp_path / "a.db", durability="full")
    with toolledger.run("async", db=store) as run:
        store.durable = 0
        first = asyncio.run(tl_anthropic.arun_tool_calls(run, msg, [_tool(ran)]))
        assert store.durable == 1 + 3
        again = asyncio.run(tl_anthropic.arun_tool_calls(run, msg, [_tool(ran)]))
    store.close()
    assert sorted(ran) == ["u0", "u1", "u2"]
    assert first == again
    assert [b["tool_use_id"] for b in first] == ["toolu_0", "toolu_1", "toolu_2"]


def test_adeliver_results_openai_responses_awaits_post(tmp_path: Path) -> None:
    """adeliver_results awaits an async post once; a second delivery posts nothing."""
    resp = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "send_email",
                    "arguments": '{"to":"a"}',
                    "status": "completed",
                }
            ],
        }
    )
    ran: list[Any] = []
    posted: list[Any] = []

    async def post(payloads: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        posted.append(payloads)
        return "next response"

    with toolledger.run("async", db=str(tmp_path / "o.db")) as run:

        async def turn() -> tuple[Any, Any, Any]:
            results = await tl_openai.arun_tool_calls(run, resp, [_tool(ran)])
            sent = await tl_openai.adeliver_results(run, resp, post)
            again = await tl_openai.adeliver_results(run, resp, post)
            return results, sent, again

        results, sent, again = asyncio.run(turn())
        status = run.store.get("default", "call_1").status.value
    assert results == [
        {"type": "function_call_output", "call_id": "call_1", "output": '{"sent_to":"a"}'}
    ]
    assert (sent, again, status) == ("next response", None, "delivered")
    assert posted == [{"call_1": {"sent_to": "a"}}]
