"""``journaled(client, run)``: every completion of the real SDK clients is an ``llm_call``."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import canonical_json
from toolledger.testing import stored_run

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from toolledger.integrations.anthropic import journaled  # noqa: E402

from ._llm_wire import (  # noqa: E402
    ANTHROPIC_CONTENT,
    ANTHROPIC_MESSAGE,
    CHAT_CONTENT,
    RESPONSE,
    anthropic_client,
    openai_client,
)

MESSAGES = [{"role": "user", "content": "Mail a@b.c please."}]


def sha(messages: Any, content: Any) -> str:
    text = canonical_json({"messages": messages, "response": content})
    return hashlib.sha256(text.encode()).hexdigest()


def llm_calls(db: Path, run_id: str) -> list[dict[str, Any]]:
    return [e for e in stored_run(db, run_id).events if e["kind"] == "llm_call"]


def written(run: toolledger.Run) -> int:
    """How many llm_call events have ended so far."""
    run.flush()
    return sum(
        1
        for e in stored_run(run.store, run.run_id).events
        if e["kind"] == "llm_call" and e["status"] != "running"
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "llm.db"


#: Per-request facts the tests below check on their own (``test_request_facts_*``).
REQUEST_FACTS = ("api", "request", "server", "response_id", "stream", "time_to_first_chunk")


def core(meta: dict[str, Any]) -> dict[str, Any]:
    """An llm_call's meta without the per-request facts."""
    return {k: v for k, v in meta.items() if k not in REQUEST_FACTS}


ANTHROPIC_META = {
    "provider": "anthropic",
    "model": "claude-x-1",
    "response_model": "claude-x-1-20260101",
    "finish_reasons": ["tool_use"],
    "usage": {"input_tokens": 10, "output_tokens": 25},
    "tool_call_ids": ["toolu_1"],
    "tool_calls": [{"id": "toolu_1", "name": "send_email"}],
    "content_sha256": sha(MESSAGES, ANTHROPIC_CONTENT),
    "justification_source": "developer",
}
CHAT_META = {
    "provider": "openai",
    "model": "gpt-x",
    "response_model": "gpt-x-2026",
    "finish_reasons": ["tool_calls"],
    "usage": {"input_tokens": 9, "output_tokens": 4},
    "tool_call_ids": ["call_1"],
    "tool_calls": [{"id": "call_1", "name": "send_email"}],
    "content_sha256": sha(MESSAGES, CHAT_CONTENT),
    "justification_source": "developer",
}


class TestAnthropic:
    def test_create_records_llm_call_facts_without_content(self, db: Path) -> None:
        """``journal_content=False``: one llm_call; content hashed, not stored; the tool
        calls' ids and names still are."""
        with toolledger.run("llm", db=db, journal_content=False) as run:
            msg = journaled(anthropic_client(), run).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES
            )
        assert isinstance(msg, anthropic.types.Message)
        (call,) = llm_calls(db, run.run_id)
        assert (call["name"], call["status"]) == ("claude-x-1", "completed")
        assert core(call["meta"]) == ANTHROPIC_META
        assert call["inputs"] is None
        assert call["outputs"] is None

    def test_create_stores_request_and_response_by_default(self, db: Path) -> None:
        """By default the request (messages, system, tools, parameters) and the response
        (content, and the whole SDK response) are kept; transport options are not."""
        tools = [{"name": "send_email", "input_schema": {"type": "object"}}]
        with toolledger.run("llm", db=db) as run:
            journaled(anthropic_client(), run).messages.create(
                model="claude-x-1",
                max_tokens=64,
                messages=MESSAGES,
                system="Be brief.",
                tools=tools,
                stop_sequences=["END"],
                extra_headers={"x-secret": "s"},
                timeout=3,
            )
        (call,) = llm_calls(db, run.run_id)
        assert call["inputs"] == {
            "messages": MESSAGES,
            "system": "Be brief.",
            "tools": tools,
            "parameters": {"max_tokens": 64, "stop_sequences": ["END"]},
        }
        response = {k: v for k, v in ANTHROPIC_MESSAGE.items() if v is not None}
        assert call["outputs"] == {"content": ANTHROPIC_CONTENT, "response": response}

    def test_journal_content_off_even_with_telemetry_capture_on(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The journal's content is ``journal_content``'s alone: the telemetry capture
        setting (env or ``capture_content=``) neither turns it on nor off."""
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        with toolledger.run("llm", db=db, journal_content=False, capture_content=True) as run:
            journaled(anthropic_client(), run).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES
            )
        with toolledger.run("llm", db=db, capture_content=False) as run2:
            journaled(anthropic_client(), run2).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES
            )
        assert llm_calls(db, run.run_id)[0]["outputs"] is None
        assert llm_calls(db, run2.run_id)[0]["outputs"]["content"] == ANTHROPIC_CONTENT

    def test_create_stream_written_when_consumed_same_facts(self, db: Path) -> None:
        """``stream=True``: the event ends when the stream is consumed, with the same facts."""
        with toolledger.run("llm", db=db) as run:
            stream = journaled(anthropic_client(), run).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES, stream=True
            )
            assert written(run) == 0
            types = [event.type for event in stream]
            assert written(run) == 1
        assert types[0] == "message_start"
        assert types[-1] == "message_stop"
        (call,) = llm_calls(db, run.run_id)
        assert core(call["meta"]) == ANTHROPIC_META

    def test_stream_helper_written_at_exit(self, db: Path) -> None:
        """``messages.stream``: the event is written when the helper's block exits."""
        with toolledger.run("llm", db=db) as run:
            with journaled(anthropic_client(), run).messages.stream(
                model="claude-x-1", max_tokens=64, messages=MESSAGES
            ) as stream:
                text = "".join(stream.text_stream)
                assert written(run) == 0
            assert written(run) == 1
        assert text == "Sending it."
        assert core(llm_calls(db, run.run_id)[0]["meta"]) == ANTHROPIC_META

    def test_create_stream_closed_early_records_partial(self, db: Path) -> None:
        """Closing a stream before its end records what arrived, flagged as closed early."""
        with toolledger.run("llm", db=db) as run:
            stream = journaled(anthropic_client(), run, capture_content=True).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES, stream=True
            )
            for _ in range(3):
                next(stream)
            stream.close()
        (call,) = llm_calls(db, run.run_id)
        assert call["status"] == "completed"
        assert call["meta"]["stream_closed_early"] is True
        assert call["meta"]["finish_reasons"] == []
        assert call["outputs"] == {"content": [{"type": "text", "text": "Sending"}]}

    def test_create_http_error_failed_event_error_reraised(self, db: Path) -> None:
        """An SDK error is recorded as a failed llm_call and re-raised unchanged."""
        with (
            toolledger.run("llm", db=db) as run,
            pytest.raises(anthropic.InternalServerError),
        ):
            journaled(anthropic_client(status=500), run).messages.create(
                model="claude-x-1", max_tokens=64, messages=MESSAGES
            )
        (call,) = llm_calls(db, run.run_id)
        assert call["status"] == "failed"
        assert call["error"]["type"] == "InternalServerError"

    def test_async_create_and_stream_recorded(self, db: Path) -> None:
        """The async client: ``await create`` and ``async for`` over a stream."""

        async def main() -> str:
            async with toolledger.run("llm", db=db) as run:
                client = journaled(anthropic_client(is_async=True), run)
                await client.messages.create(model="claude-x-1", max_tokens=64, messages=MESSAGES)
                stream = await client.messages.create(
                    model="claude-x-1", max_tokens=64, messages=MESSAGES, stream=True
                )
                async for _ in stream:
                    pass
                async with client.messages.stream(
                    model="claude-x-1", max_tokens=64, messages=MESSAGES
                ) as helper:
                    await helper.get_final_message()
                return run.run_id

        run_id = asyncio.run(main())
        assert [core(c["meta"]) for c in llm_calls(db, run_id)] == [ANTHROPIC_META] * 3


class TestOpenAI:
    def test_chat_create_records_llm_call_facts(self, db: Path) -> None:
        """A chat completion is one llm_call with its finish reasons, usage and tool calls."""
        with toolledger.run("llm", db=db) as run:
            out = journaled(openai_client(), run).chat.completions.create(
                model="gpt-x", messages=MESSAGES
            )
        assert out.choices[0].message.tool_calls[0].id == "call_1"
        (call,) = llm_calls(db, run.run_id)
        assert (call["name"], core(call["meta"])) == ("gpt-x", CHAT_META)

    def test_chat_create_stream_same_facts_as_plain(self, db: Path) -> None:
        """Streamed chunks fold into the same facts (and content hash) as the plain call."""
        with toolledger.run("llm", db=db) as run:
            stream = journaled(openai_client(), run, capture_content=True).chat.completions.create(
                model="gpt-x",
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            )
            assert written(run) == 0
            chunks = list(stream)
        assert len(chunks) == 7
        (call,) = llm_calls(db, run.run_id)
        assert core(call["meta"]) == CHAT_META
        assert call["outputs"]["content"] == CHAT_CONTENT

    def test_chat_stream_helper_written_at_exit(self, db: Path) -> None:
        """``chat.completions.stream``: the event is written when the block exits."""
        with toolledger.run("llm", db=db) as run:
            with journaled(openai_client(), run).chat.completions.stream(
                model="gpt-x", messages=MESSAGES
            ) as stream:
                final = stream.get_final_completion()
            assert final.choices[0].finish_reason == "tool_calls"
        (call,) = llm_calls(db, run.run_id)
        assert core(call["meta"]) == CHAT_META

    def test_responses_create_plain_and_stream_same_facts(self, db: Path) -> None:
        """Responses API: function calls give ``tool_calls`` and their call ids."""
        with toolledger.run("llm", db=db) as run:
            client = journaled(openai_client(), run)
            resp = client.responses.create(model="gpt-x", input=MESSAGES)
            for _ in client.responses.create(model="gpt-x", input=MESSAGES, stream=True):
                pass
        plain, streamed = llm_calls(db, run.run_id)
        assert core(plain["meta"]) == core(streamed["meta"])
        assert plain["meta"]["finish_reasons"] == ["tool_calls"]
        assert plain["meta"]["tool_call_ids"] == ["call_9"]
        assert plain["meta"]["usage"] == {
            "input_tokens": 5,
            "output_tokens": 2,
            "cache_read_input_tokens": 0,  # the Responses API's usage details
            "reasoning_output_tokens": 0,
        }
        content = [o.model_dump(mode="json", exclude_none=True) for o in resp.output]
        assert content[0]["call_id"] == RESPONSE["output"][0]["call_id"]
        assert plain["meta"]["content_sha256"] == sha(MESSAGES, content)

    def test_async_chat_create_and_stream_recorded(self, db: Path) -> None:
        """The async client: ``await create`` and an async stream."""

        async def main() -> str:
            async with toolledger.run("llm", db=db) as run:
                client = journaled(openai_client(is_async=True), run)
                await client.chat.completions.create(model="gpt-x", messages=MESSAGES)
                stream = await client.chat.completions.create(
                    model="gpt-x", messages=MESSAGES, stream=True
                )
                async with stream:
                    async for _ in stream:
                        pass
                return run.run_id

        run_id = asyncio.run(main())
        assert [core(c["meta"]) for c in llm_calls(db, run_id)] == [CHAT_META] * 2

    def test_journaled_client_delegates_other_attributes(self, db: Path) -> None:
        """Everything but the journaled endpoints is the client's own."""
        raw = openai_client()
        with toolledger.run("llm", db=db) as run:
            client = journaled(raw, run)
            assert client.api_key == "k"
            assert client.models is raw.models
            assert client.chat.completions.with_raw_response is not None


def test_journaled_other_client_invalid_argument(db: Path) -> None:
    """Only anthropic and openai clients are accepted."""
    with (
        toolledger.run("llm", db=db) as run,
        pytest.raises(toolledger.InvalidArgumentError) as info,
    ):
        journaled(object(), run)
    assert info.value.code == "INVALID_ARGUMENT"


def test_journaled_recording_failure_never_breaks_the_call(db: Path) -> None:
    """A journal that cannot record (the run is over) costs the event, not the completion."""
    with toolledger.run("llm", db=db) as run:
        client = journaled(openai_client(), run)
    out = client.chat.completions.create(model="gpt-x", messages=MESSAGES)
    assert out.choices[0].finish_reason == "tool_calls"
    assert any(isinstance(e, toolledger.InvalidArgumentError) for e in run.errors)


def test_journaled_with_options_stays_journaled(db: Path) -> None:
    """``with_options(...)`` returns a client that is still journaled (both SDKs)."""
    with toolledger.run("llm", db=db) as run:
        journaled(openai_client(), run).with_options(timeout=5).chat.completions.create(
            model="gpt-x", messages=MESSAGES
        )
        journaled(anthropic_client(), run).with_options(timeout=5).messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES
        )
    assert [core(c["meta"]) for c in llm_calls(db, run.run_id)] == [CHAT_META, ANTHROPIC_META]


def test_request_facts_recorded_for_plain_and_streamed_calls(db: Path) -> None:
    """Parameters, server, response id, the API shape; streams add stream and TTFC."""
    with toolledger.run("g", db=db) as run:
        client = journaled(anthropic_client(), run)
        client.messages.create(model="claude-x-1", max_tokens=64, messages=MESSAGES)
        stream = client.messages.create(
            model="claude-x-1", max_tokens=64, messages=MESSAGES, stream=True, stop_sequences=["X"]
        )
        for _ in stream:
            pass
    plain, streamed = llm_calls(db, run.run_id)
    assert {k: plain["meta"].get(k) for k in REQUEST_FACTS} == {
        "api": "anthropic",
        "request": {"max_tokens": 64},
        "server": {"address": "api.anthropic.com", "port": 443},
        "response_id": "msg_1",
        "stream": None,
        "time_to_first_chunk": None,
    }
    assert streamed["meta"]["request"] == {"max_tokens": 64, "stop_sequences": ["X"]}
    assert streamed["meta"]["stream"] is True
    ttfc = streamed["meta"]["time_to_first_chunk"]
    assert isinstance(ttfc, float)
    assert ttfc >= 0
