"""The OpenAI adapter: Chat Completions and Responses API shapes, with the real SDK types."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import toolledger
from toolledger.integrations import OUTCOME_UNKNOWN
from toolledger.integrations import openai as tl

pytest.importorskip("openai")
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

CHAT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}},
                "required": ["to"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "no_params"}},
]
RESPONSES_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "send_email",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    },
    {"type": "web_search"},
]


def completion(*calls: tuple[str, str, str]) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "cc_1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                            for i, n, a in calls
                        ],
                    },
                }
            ],
        }
    )


def response(*calls: tuple[str, str, str]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                *(
                    {
                        "type": "function_call",
                        "id": f"fc_{i}",
                        "call_id": i,
                        "name": n,
                        "arguments": a,
                        "status": "completed",
                    }
                    for i, n, a in calls
                ),
            ],
        }
    )


class TestWithJustification:
    def test_with_justification_chat_tools(self) -> None:
        """Chat tools get it in function.parameters (strict schemas stay valid)."""
        out = tl.with_justification(CHAT_TOOLS)
        params = out[0]["function"]["parameters"]
        assert params["required"] == ["to", "justification"]
        assert params["additionalProperties"] is False
        assert out[1]["function"]["parameters"]["required"] == ["justification"]

    def test_with_justification_responses_tools_skip_builtin(self) -> None:
        """Responses tools get it in parameters; built-in tools are returned as is."""
        out = tl.with_justification(RESPONSES_TOOLS)
        assert "justification" in out[0]["parameters"]["properties"]
        assert out[1] is RESPONSES_TOOLS[1]

    def test_with_justification_idempotent_no_mutation(self) -> None:
        """Twice equals once; inputs untouched; justified tools returned as is."""
        before = copy.deepcopy(CHAT_TOOLS)
        once = tl.with_justification(CHAT_TOOLS)
        twice = tl.with_justification(once)
        assert twice == once
        assert twice[0] is once[0]
        assert before == CHAT_TOOLS


class TestToolCalls:
    def test_tool_calls_chat_completion(self) -> None:
        """Chat tool calls parse from the SDK object; justification split off."""
        cc = completion(
            ("call_1", "send_email", '{"to":"a","justification":"Asked."}'),
            ("call_2", "send_email", "{not json"),
        )
        a, b = tl.tool_calls(cc)
        assert (a.id, a.args, a.justification, a.provider) == (
            "call_1",
            {"to": "a"},
            "Asked.",
            "openai.chat",
        )
        assert b.error is not None
        assert b.error.startswith("arguments are not JSON")

    def test_tool_calls_responses_use_call_id(self) -> None:
        """Responses function calls are keyed by call_id (not the item id)."""
        (c,) = tl.tool_calls(response(("call_9", "send_email", '{"to":"a"}')))
        assert (c.id, c.args, c.justification, c.provider) == (
            "call_9",
            {"to": "a"},
            None,
            "openai.responses",
        )


class TestRunToolCalls:
    def test_run_tool_calls_chat_gives_tool_messages(self, run, calls) -> None:
        """role: tool messages, one per call, stable across re-runs."""
        cc = completion(
            ("call_1", "send_email", '{"to":"a"}'),
            ("call_2", "failing", '{"to":"b"}'),
            ("call_3", "send_email", "{bad"),
        )
        first = tl.run_tool_calls(run, cc, calls.tools())
        assert first[0] == {"role": "tool", "tool_call_id": "call_1", "content": '{"sent_to":"a"}'}
        assert json.loads(first[1]["content"]) == {"error": "ValueError", "message": "mailbox full"}
        assert first[2]["content"].startswith("invalid arguments: arguments are not JSON")
        assert tl.run_tool_calls(run, cc, calls.tools()) == first
        assert len(calls.seen) == 2

    def test_run_tool_calls_responses_gives_function_call_outputs(self, run, calls) -> None:
        """function_call_output items carry call_id and the stored text."""
        out = tl.run_tool_calls(
            run, response(("call_9", "send_email", '{"to":"a"}')), calls.tools()
        )
        assert out == [
            {"type": "function_call_output", "call_id": "call_9", "output": '{"sent_to":"a"}'}
        ]


class TestRepairTranscript:
    def test_repair_transcript_chat_inserts_tool_messages(self, run, calls) -> None:
        """Orphaned chat tool calls get tool messages after the existing ones."""
        tools = calls.tools()
        run.call(tools[0], call_id="call_done", input={"to": "a"})
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(tools[2], call_id="call_lost", input={"to": "b"})
        assistant = (
            completion(
                ("call_done", "send_email", '{"to":"a"}'),
                ("call_lost", "lossy", '{"to":"b"}'),
                ("call_never", "send_email", '{"to":"c"}'),
                ("call_answered", "send_email", '{"to":"d"}'),
            )
            .choices[0]
            .message
        )
        history: list[Any] = [
            {"role": "user", "content": "go"},
            assistant,
            {"role": "tool", "tool_call_id": "call_answered", "content": "ok"},
            {"role": "user", "content": "next"},
        ]
        fixed = tl.repair_transcript(history, run)
        assert len(history) == 4
        assert [(m.get("tool_call_id"), m.get("content")) for m in fixed[2:6]] == [
            ("call_answered", "ok"),
            ("call_done", '{"sent_to":"a"}'),
            (
                "call_lost",
                OUTCOME_UNKNOWN,
            ),
            ("call_never", "not executed"),
        ]
        assert fixed[6] == {"role": "user", "content": "next"}

    def test_repair_transcript_responses_items(self, run, calls) -> None:
        """Orphaned function_call items get a function_call_output right after them."""
        run.call(calls.tools()[0], call_id="call_done", input={"to": "a"})
        items = [
            {"role": "user", "content": "go"},
            {
                "type": "function_call",
                "call_id": "call_done",
                "name": "send_email",
                "arguments": "{}",
            },
            {
                "type": "function_call",
                "call_id": "call_ok",
                "name": "send_email",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_ok", "output": "fine"},
        ]
        fixed = tl.repair_transcript(items, run)
        assert fixed[2] == {
            "type": "function_call_output",
            "call_id": "call_done",
            "output": '{"sent_to":"a"}',
        }
        assert fixed[3:] == items[2:]
