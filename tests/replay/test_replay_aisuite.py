"""aisuite's ``JournaledClient``: a replayed run's completions come from the record (as
aisuite's own response objects), its guarded tools from their checkpoints."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import toolledger

pytest.importorskip("aisuite")

from aisuite.framework.chat_completion_chunk import (
    ChatCompletionChunk,
    ChoiceDelta,
    ChoiceDeltaFunction,
    ChoiceDeltaToolCall,
    StreamChoice,
)
from aisuite.framework.message import CompletionUsage

from toolledger.integrations.aisuite import JournaledClient

from ..integrations.test_aisuite import SENT, client_with, response, send_email


def _script() -> list[object]:
    return [
        response(calls=[("call_1", "send_email", {"to": "a@b.c", "justification": "Asked."})]),
        response(text="Sent."),
    ]


def _ask(run: toolledger.Run, client: object, prompt: str) -> str:
    out = JournaledClient(run, client).chat.completions.create(
        "openai:gpt-test",
        [{"role": "user", "content": prompt}],
        tools=[send_email],
        max_turns=3,
    )
    return str(out.choices[0].message.content)


def test_aisuite_replay_serves_both_turns_and_never_reruns_the_tool(tmp_path: Path) -> None:
    """The same answer with no provider request; the tool ran once, in the recording."""
    SENT.clear()
    db = tmp_path / "aisuite.db"
    client, stub = client_with(_script())
    with toolledger.run("aisuite", db=db) as run:
        assert _ask(run, client, "mail a@b.c") == "Sent."
    offline, empty = client_with([])
    with toolledger.run("aisuite", db=db, replay_of=run.run_id) as again:
        assert _ask(again, offline, "mail a@b.c") == "Sent."
    assert (len(stub.requests), empty.requests) == (2, [])
    assert SENT == [{"to": "a@b.c", "subject": "hi"}]
    report = again.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls) == (2, 1)
    SENT.clear()


def test_aisuite_changed_prompt_diverges_before_the_provider_is_asked(tmp_path: Path) -> None:
    """REPLAY_DIVERGED at the first completion; the provider gets no request."""
    db = tmp_path / "aisuite.db"
    client, _ = client_with(_script())
    with toolledger.run("aisuite", db=db) as run:
        _ask(run, client, "mail a@b.c")
    offline, empty = client_with([])
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("aisuite", db=db, replay_of=run.run_id) as again,
    ):
        _ask(again, offline, "mail b@c.d")
    assert caught.value.divergence.field == "messages[0]"
    assert empty.requests == []
    SENT.clear()


def _chunks() -> list[Any]:
    """A streamed answer in aisuite's own chunks: text, a tool call, the finish."""
    call = ChoiceDeltaToolCall(
        index=0,
        id="call_9",
        type="function",
        function=ChoiceDeltaFunction(name="send_email", arguments='{"to": "a@b.c"}'),
    )
    return [
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="Sen"))]),
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="ding"))]),
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(tool_calls=[call]))]),
        ChatCompletionChunk(
            choices=[StreamChoice(finish_reason="tool_calls")],
            usage=CompletionUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        ),
    ]


def _plain_chunks() -> list[Any]:
    """The same answer as plain objects (a provider's own chunk type): not stored whole."""
    return [
        SimpleNamespace(
            choices=[SimpleNamespace(index=0, delta=SimpleNamespace(content=t), finish_reason=None)]
        )
        for t in ("Sen", "ding")
    ] + [
        SimpleNamespace(
            choices=[
                SimpleNamespace(
                    index=0,
                    delta=SimpleNamespace(
                        tool_calls=[
                            SimpleNamespace(
                                index=0,
                                id="call_9",
                                type="function",
                                function=SimpleNamespace(
                                    name="send_email", arguments='{"to": "a@b.c"}'
                                ),
                            )
                        ]
                    ),
                    finish_reason=None,
                )
            ]
        ),
        SimpleNamespace(
            choices=[SimpleNamespace(index=0, delta=SimpleNamespace(), finish_reason="tool_calls")],
            usage=SimpleNamespace(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        ),
    ]


def _read(chunks: list[Any]) -> tuple[str, list[Any], list[Any]]:
    text = "".join(getattr(c.choices[0].delta, "content", None) or "" for c in chunks)
    calls = [
        (t.id, t.function.name, t.function.arguments)
        for c in chunks
        for ch in c.choices
        for t in (getattr(ch.delta, "tool_calls", None) or [])
    ]
    reasons = [ch.finish_reason for c in chunks for ch in c.choices if ch.finish_reason]
    return text, calls, reasons


def _stream(run: toolledger.Run, client: object, *, is_async: bool) -> list[Any]:
    chat = JournaledClient(run, client).chat.completions
    messages = [{"role": "user", "content": "mail a@b.c"}]
    if not is_async:
        return list(chat.create("openai:gpt-test", messages, stream=True))

    async def read() -> list[Any]:
        return [c async for c in await chat.acreate("openai:gpt-test", messages, stream=True)]

    return asyncio.run(read())


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("make", [_chunks, _plain_chunks], ids=["chunks", "plain"])
def test_aisuite_stream_is_served_from_the_record(
    tmp_path: Path, is_async: bool, make: Callable[[], list[Any]]
) -> None:
    """A replayed stream is aisuite's own chunks with the recorded text, tool calls and
    finish reasons (from the stored chunks, or rebuilt from the stored content), and the
    provider gets no request."""
    db = tmp_path / "aisuite.db"
    client, stub = client_with([make()])
    with toolledger.run("aisuite", db=db) as run:
        live = _read(_stream(run, client, is_async=is_async))
    (recorded,) = [e for e in toolledger.load_run(db, run.run_id).events if e.kind == "llm_call"]
    assert ("stream" in recorded.outputs) is (make is _chunks)  # else rebuilt from content
    offline, empty = client_with([])
    with toolledger.run("aisuite", db=db, replay_of=run.run_id) as again:
        served = _stream(again, offline, is_async=is_async)
    assert all(isinstance(c, ChatCompletionChunk) for c in served)
    assert _read(served) == live
    assert live == ("Sending", [("call_9", "send_email", '{"to": "a@b.c"}')], ["tool_calls"])
    assert (len(stub.requests), empty.requests) == (1, [])
    report = again.replay_report
    assert report is not None
    assert (report.served_model_calls, report.divergence) == (1, None)
    (call,) = [e for e in toolledger.load_run(db, again.run_id).events if e.kind == "llm_call"]
    assert call.outputs["content"][0]["content"] == "Sending"
