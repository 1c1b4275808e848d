"""``llm_call`` spans: ``chat {model}`` with exact GenAI attributes, parent of its tool calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.testing import stored_run

pytest.importorskip("anthropic")
pytest.importorskip("openai")
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from toolledger.integrations import anthropic as tl_anthropic
from toolledger.integrations import openai as tl_openai

from ._llm_wire import anthropic_client, openai_client

MESSAGES = [{"role": "user", "content": "Mail a@b.c please."}]


pytestmark = pytest.mark.usefixtures("clean_telemetry_env")


def sent_to(input: Any, ctx: Any) -> Any:
    return {"sent_to": input["to"]}


SEND = toolledger.tool("send_email", revision="1", execute=sent_to)


def spans_named(exporter: InMemorySpanExporter, prefix: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_anthropic_chat_span_exact_attributes(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``chat {requested model}``: a CLIENT span with exactly the GenAI chat attributes."""
    from opentelemetry.trace import SpanKind

    with toolledger.run("llm", db=tmp_path / "s.db", tracer_provider=provider) as run:
        tl_anthropic.journaled(anthropic_client(), run).messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES
        )
        (event,) = [e for e in _events(run) if e["kind"] == "llm_call"]
    (span,) = spans_named(exporter, "chat ")
    assert span.name == "chat claude-x-1"
    assert span.kind is SpanKind.CLIENT
    assert event["meta"]["tool_calls"] == [{"id": "toolu_1", "name": "send_email"}]
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-x-1",
        "gen_ai.request.max_tokens": 64,
        "server.address": "api.anthropic.com",
        "server.port": 443,
        "gen_ai.response.model": "claude-x-1-20260101",
        "gen_ai.response.id": "msg_1",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 25,
        "gen_ai.response.finish_reasons": ("tool_use",),
        "toolledger.chat.tool_call.names": ("send_email",),  # not content: always
        "toolledger.chat.tool_call.ids": ("toolu_1",),
        "toolledger.event.id": event["event_id"],
        "openinference.span.kind": "LLM",
        "llm.model_name": "claude-x-1-20260101",
        "llm.provider": "anthropic",
        "llm.invocation_parameters": '{"max_tokens": 64}',
        "llm.token_count.prompt": 10,
        "llm.token_count.completion": 25,
        "llm.token_count.total": 35,
    }
    (agent,) = spans_named(exporter, "invoke_agent")
    assert span.parent.span_id == agent.context.span_id


def test_chat_span_with_content_capture_adds_messages(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """With capture on: the conventions' messages (parts), and their OpenInference view."""
    with toolledger.run(
        "llm", db=tmp_path / "s.db", tracer_provider=provider, capture_content=True
    ) as run:
        stream = tl_openai.journaled(openai_client(), run).chat.completions.create(
            model="gpt-x", messages=MESSAGES, stream=True, temperature=0.5
        )
        for _ in stream:
            pass
        (event,) = [e for e in _events(run) if e["kind"] == "llm_call"]
    assert event["outputs"]["content"][0]["content"] == "Sending it."
    (span,) = spans_named(exporter, "chat ")
    attrs = dict(span.attributes)
    ttfc = attrs.pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(ttfc, float)
    response_id = attrs.pop("gen_ai.response.id")
    assert isinstance(response_id, str)
    out = json.dumps(
        [
            {
                "finish_reason": "tool_calls",
                "parts": [
                    {"content": "Sending it.", "type": "text"},
                    {
                        "arguments": {"to": "a@b.c"},
                        "id": "call_1",
                        "name": "send_email",
                        "type": "tool_call",
                    },
                ],
                "role": "assistant",
            }
        ],
        separators=(",", ":"),
    )
    history = '[{"parts":[{"content":"Mail a@b.c please.","type":"text"}],"role":"user"}]'
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.stream": True,
        "server.address": "test",
        "server.port": 80,
        "gen_ai.response.model": "gpt-x-2026",
        "gen_ai.usage.input_tokens": 9,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "toolledger.chat.tool_call.names": ("send_email",),
        "toolledger.chat.tool_call.ids": ("call_1",),
        "gen_ai.input.messages": history,
        "gen_ai.output.messages": out,
        "toolledger.event.id": event["event_id"],
        "openinference.span.kind": "LLM",
        "input.value": history,
        "input.mime_type": "application/json",
        "output.value": out,
        "output.mime_type": "application/json",
        "llm.model_name": "gpt-x-2026",
        "llm.provider": "openai",
        "llm.invocation_parameters": '{"stream": true, "temperature": 0.5}',
        "llm.token_count.prompt": 9,
        "llm.token_count.completion": 4,
        "llm.token_count.total": 13,
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Mail a@b.c please.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Sending it.",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "send_email",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
            '{"to": "a@b.c"}'
        ),
    }


def test_anthropic_usage_adds_cache_tokens_to_input(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Anthropic: input = input + cache read + cache creation; the cache counts are set."""
    import anthropic

    from ._llm_wire import ANTHROPIC_MESSAGE, httpx2

    body = {
        **ANTHROPIC_MESSAGE,
        "usage": {
            "input_tokens": 7,
            "output_tokens": 3,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 50,
        },
    }
    client = anthropic.Anthropic(
        api_key="k",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(
            transport=httpx2.MockTransport(lambda request: httpx2.Response(200, json=body))
        ),
    )
    with toolledger.run("llm", db=tmp_path / "s.db", tracer_provider=provider) as run:
        tl_anthropic.journaled(client, run).messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES
        )
    (span,) = spans_named(exporter, "chat ")
    assert span.attributes["gen_ai.usage.input_tokens"] == 1057
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 50
    assert span.attributes["llm.token_count.prompt_details.cache_read"] == 1000


def test_chat_span_parent_of_requested_tool_calls(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The tool calls a completion requested are children of its chat span and event."""
    with toolledger.run("llm", db=tmp_path / "s.db", tracer_provider=provider) as run:
        client = tl_anthropic.journaled(anthropic_client(), run)
        message = client.messages.create(model="claude-x-1", max_tokens=64, messages=MESSAGES)
        results = tl_anthropic.run_tool_calls(run, message, [SEND])
        events = _events(run)
    assert results[0]["tool_use_id"] == "toolu_1"
    (chat,) = spans_named(exporter, "chat ")
    (tool_span,) = spans_named(exporter, "execute_tool ")
    assert tool_span.parent.span_id == chat.context.span_id
    assert tool_span.context.trace_id == chat.context.trace_id
    llm = next(e for e in events if e["kind"] == "llm_call")
    tool_event = next(e for e in events if e["kind"] == "tool_call")
    assert tool_event["parent_id"] == llm["event_id"]


def test_chat_span_parent_of_tool_calls_async_openai(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Async client, OpenAI shapes: the same parentage through ``run_tool_calls``."""

    async def main() -> None:
        async with toolledger.run("llm", db=tmp_path / "s.db", tracer_provider=provider) as run:
            client = tl_openai.journaled(openai_client(is_async=True), run)
            out = await client.chat.completions.create(model="gpt-x", messages=MESSAGES)
            tl_openai.run_tool_calls(run, out, [SEND])

    asyncio.run(main())
    (chat,) = spans_named(exporter, "chat ")
    (tool_span,) = spans_named(exporter, "execute_tool ")
    assert tool_span.parent.span_id == chat.context.span_id


def test_chat_span_failed_call_error_type(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A failed completion: status ERROR and ``error.type`` the exception's qualname."""
    import anthropic

    with (
        toolledger.run("llm", db=tmp_path / "s.db", tracer_provider=provider) as run,
        pytest.raises(anthropic.InternalServerError),
    ):
        tl_anthropic.journaled(anthropic_client(status=500), run).messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES
        )
    (span,) = spans_named(exporter, "chat ")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "InternalServerError"
    assert span.attributes["gen_ai.request.model"] == "claude-x-1"
    assert "gen_ai.response.model" not in span.attributes


def test_chat_span_reexported_like_live(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Re-export rebuilds the chat span with the same name, attributes and ids."""
    db = tmp_path / "s.db"
    with toolledger.run("llm", db=db, tracer_provider=provider) as run:
        tl_anthropic.journaled(anthropic_client(), run).messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES
        )
    (live,) = spans_named(exporter, "chat ")
    again = InMemorySpanExporter()
    toolledger.reexport(db, run.run_id, again)
    (rebuilt,) = [s for s in again.get_finished_spans() if s.name.startswith("chat ")]
    assert rebuilt.name == live.name
    assert dict(rebuilt.attributes) == dict(live.attributes)
    assert rebuilt.context.span_id == live.context.span_id


def _events(run: toolledger.Run) -> list[dict[str, Any]]:
    run.flush()
    return stored_run(run.store, run.run_id).events


def test_show_names_the_tool_calls_a_model_call_asked_for(tmp_path: Path) -> None:
    """``toolledger show``: a model call's line says which tool calls it requested, by name
    and id, from its event alone (without content: journal_content=False)."""
    from click.testing import CliRunner

    from toolledger.cli import main as cli

    db = tmp_path / "s.db"
    toolledger.SQLiteStore(db).close()
    with toolledger.run("llm", db=db, journal_content=False) as run:
        client = tl_anthropic.journaled(anthropic_client(), run)
        client.messages.create(model="claude-x-1", max_tokens=64, messages=MESSAGES)
        run_id = run.run_id
    shown = CliRunner().invoke(cli, ["--db", str(db), "show", run_id])
    assert shown.exit_code == 0, shown.output
    assert "asked for send_email(toolu_1)" in shown.output
