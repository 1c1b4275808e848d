"""aisuite ``JournaledClient``: completions journaled, function tools justified and guarded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.testing import stored_run

aisuite = pytest.importorskip("aisuite")
from aisuite.framework.chat_completion_chunk import (  # noqa: E402
    ChatCompletionChunk,
    ChoiceDelta,
    StreamChoice,
)
from aisuite.framework.chat_completion_response import ChatCompletionResponse  # noqa: E402
from aisuite.framework.message import (  # noqa: E402
    ChatCompletionMessageToolCall,
    CompletionUsage,
    Function,
)
from aisuite.provider import Provider  # noqa: E402

from toolledger.integrations.aisuite import JournaledClient  # noqa: E402


def response(*, text: str | None = None, calls: list[tuple[str, str, dict[str, Any]]] = ()) -> Any:
    r = ChatCompletionResponse()
    r.choices[0].message.content = text
    if calls:
        r.choices[0].message.tool_calls = [
            ChatCompletionMessageToolCall(
                id=cid, type="function", function=Function(name=name, arguments=json.dumps(args))
            )
            for cid, name, args in calls
        ]
        r.choices[0].finish_reason = "tool_calls"
    else:
        r.choices[0].finish_reason = "stop"
    r.usage = CompletionUsage(prompt_tokens=11, completion_tokens=7, total_tokens=18)
    return r


class StubProvider(Provider):
    """Answers from a script; remembers every request it got."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__()
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []

    def chat_completions_create(self, model: str, messages: Any, **kwargs: Any) -> Any:
        self.requests.append({"model": model, "messages": list(messages), **kwargs})
        return self.script.pop(0)

    def chat_completions_create_stream(self, model: str, messages: Any, **kwargs: Any) -> Any:
        self.requests.append({"model": model, "messages": list(messages), **kwargs})
        return iter(self.script.pop(0))

    async def achat_completions_create_stream(
        self, model: str, messages: Any, **kwargs: Any
    ) -> Any:
        self.requests.append({"model": model, "messages": list(messages), **kwargs})
        for chunk in self.script.pop(0):
            yield chunk


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "aisuite.db"


def client_with(script: list[Any]) -> tuple[Any, StubProvider]:
    client = aisuite.Client()
    stub = StubProvider(script)
    client.providers["openai"] = stub  # a supported key, served by the stub
    return client, stub


SENT: list[dict[str, Any]] = []


def send_email(to: str, subject: str = "hi") -> dict[str, Any]:
    """Send one email.

    Args:
        to: The recipient's address.
        subject: The subject line.
    """
    SENT.append({"to": to, "subject": subject})
    return {"sent_to": to}


@pytest.fixture(autouse=True)
def _reset_sent() -> Iterator[None]:
    SENT.clear()
    yield
    SENT.clear()


def events(db: Path, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [e for e in stored_run(db, run_id).events if kind is None or e["kind"] == kind]


def test_create_with_max_turns_journals_each_turn_and_guards_tools(db: Path) -> None:
    """Each completion is an llm_call; the tool runs once through the guard, justified."""
    script = [
        response(calls=[("call_1", "send_email", {"to": "a@b.c", "justification": "Asked."})]),
        response(text="Sent."),
    ]
    client, stub = client_with(script)
    with toolledger.run("aisuite", db=db) as run:
        out = JournaledClient(run, client).chat.completions.create(
            "openai:gpt-test",
            [{"role": "user", "content": "mail a@b.c"}],
            tools=[send_email],
            max_turns=3,
        )
    assert out.choices[0].message.content == "Sent."
    assert SENT == [{"to": "a@b.c", "subject": "hi"}]
    spec = stub.requests[0]["tools"][0]["function"]
    assert spec["name"] == "send_email"
    assert spec["parameters"]["required"] == ["to", "justification"]
    assert spec["parameters"]["properties"]["justification"]["type"] == "string"
    assert (
        "Why this call is needed"
        in spec["parameters"]["properties"]["justification"]["description"]
    )
    assert spec["parameters"]["properties"]["to"]["description"] == "The recipient's address."
    kinds = [(e["kind"], e["name"]) for e in events(db, run.run_id) if e["kind"] != "finish"]
    assert kinds == [
        ("llm_call", "gpt-test"),
        ("tool_call", "send_email"),
        ("llm_call", "gpt-test"),
    ]
    first, tool_call, second = events(db, run.run_id)[:3]
    assert first["meta"]["provider"] == "openai"
    assert first["meta"]["finish_reasons"] == ["tool_calls"]
    assert first["meta"]["tool_call_ids"] == ["call_1"]
    assert first["meta"]["usage"] == {"input_tokens": 11, "output_tokens": 7}
    assert second["meta"]["finish_reasons"] == ["stop"]
    assert tool_call["justification"] == "Asked."
    assert tool_call["justification_source"] == "model"
    assert tool_call["inputs"] == {"to": "a@b.c", "subject": "hi"}
    assert tool_call["checkpoint"]["call_id"] == "call_1"
    assert tool_call["parent_id"] == first["event_id"]  # the turn that requested it
    # the tool's result went back to the model as aisuite's tool message
    tool_message = stub.requests[1]["messages"][-1]
    assert tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"]) == {"sent_to": "a@b.c"}


def test_create_model_omits_required_justification_tool_not_run(db: Path) -> None:
    """aisuite refuses arguments missing the required justification; the tool never runs."""
    client, _ = client_with(
        [response(calls=[("call_2", "send_email", {"to": "x@y.z"})]), response(text="ok")]
    )
    # aisuite validates arguments against the schema: a missing required argument fails
    # in aisuite before the tool runs; that is aisuite's contract, kept unchanged.
    with (
        toolledger.run("aisuite", db=db) as run,
        pytest.raises(ValueError, match="justification"),
    ):
        JournaledClient(run, client).chat.completions.create(
            "openai:gpt-test",
            [{"role": "user", "content": "x"}],
            tools=[send_email],
            max_turns=2,
        )
    assert SENT == []
    assert [e["kind"] for e in events(db, run.run_id, "tool_call")] == []


def test_create_without_max_turns_forwards_justified_schema_runs_nothing(db: Path) -> None:
    """Without max_turns the schema (justification included) is sent; no tool is run."""
    client, stub = client_with(
        [response(calls=[("call_3", "send_email", {"to": "a@b.c", "justification": "j"})])]
    )
    with toolledger.run("aisuite", db=db) as run:
        out = JournaledClient(run, client).chat.completions.create(
            "openai:gpt-test", [{"role": "user", "content": "x"}], tools=[send_email]
        )
    assert out.choices[0].message.tool_calls[0].id == "call_3"
    assert "justification" in stub.requests[0]["tools"][0]["function"]["parameters"]["required"]
    assert SENT == []
    assert [e["kind"] for e in events(db, run.run_id)][:1] == ["llm_call"]


def test_create_old_aisuite_without_max_turns_refuses_tools(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An aisuite that drops tools without max_turns gets INVALID_ARGUMENT, not silence."""
    from aisuite.client import Completions

    monkeypatch.delattr(Completions, "_provider_ready_tools")
    client, stub = client_with([response(text="never")])
    with (
        toolledger.run("aisuite", db=db) as run,
        pytest.raises(toolledger.InvalidArgumentError) as info,
    ):
        JournaledClient(run, client).chat.completions.create(
            "openai:gpt-test", [{"role": "user", "content": "x"}], tools=[send_email]
        )
    assert info.value.code == "INVALID_ARGUMENT"
    assert "max_turns" in info.value.message
    assert stub.requests == []


def test_acreate_async_tool_guarded(db: Path) -> None:
    """``acreate`` journals each turn; an async tool runs once through ``run.acall``."""
    ran: list[str] = []

    async def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: The city name.
        """
        ran.append(city)
        return f"sunny in {city}"

    client, _ = client_with(
        [
            response(calls=[("call_4", "lookup", {"city": "Oslo", "justification": "Asked."})]),
            response(text="It is sunny."),
        ]
    )

    async def main() -> Any:
        async with toolledger.run("aisuite", db=db) as run:
            out = await JournaledClient(run, client).chat.completions.acreate(
                "openai:gpt-test",
                [{"role": "user", "content": "weather?"}],
                tools=[lookup],
                max_turns=2,
            )
            return out, run.run_id

    out, run_id = asyncio.run(main())
    assert out.choices[0].message.content == "It is sunny."
    assert ran == ["Oslo"]
    tool_calls = events(db, run_id, "tool_call")
    assert [(e["name"], e["outputs"]["result"]) for e in tool_calls] == [
        ("lookup", "sunny in Oslo")
    ]
    assert len(events(db, run_id, "llm_call")) == 2


def test_create_stream_event_written_when_consumed(db: Path) -> None:
    """A stream's llm_call is written when it is consumed, with the folded facts."""
    chunks = [
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="Hel"))]),
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="lo"))]),
        ChatCompletionChunk(
            choices=[StreamChoice(finish_reason="stop")],
            usage=CompletionUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        ),
    ]
    client, _ = client_with([chunks])
    with toolledger.run("aisuite", db=db) as run:
        stream = JournaledClient(run, client, capture_content=True).chat.completions.create(
            "openai:gpt-test", [{"role": "user", "content": "hi"}], stream=True
        )
        assert events_so_far(run) == 0
        text = "".join(c.choices[0].delta.content or "" for c in stream)
    assert text == "Hello"
    (call,) = events(db, run.run_id, "llm_call")
    assert call["status"] == "completed"
    assert call["meta"]["finish_reasons"] == ["stop"]
    assert call["meta"]["usage"] == {"input_tokens": 3, "output_tokens": 2}
    assert call["outputs"]["content"] == [{"role": "assistant", "content": "Hello"}]


def events_so_far(run: toolledger.Run) -> int:
    run.flush()
    return sum(
        1
        for e in stored_run(run.store, run.run_id).events
        if e["kind"] == "llm_call" and e["status"] != "running"
    )


def test_acreate_stream_closed_early_recorded_partial(db: Path) -> None:
    """An async stream closed (``aclose``) before its end records what arrived."""
    chunks = [
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="Hel"))]),
        ChatCompletionChunk(choices=[StreamChoice(delta=ChoiceDelta(content="lo"))]),
        ChatCompletionChunk(choices=[StreamChoice(finish_reason="stop")]),
    ]
    client, _ = client_with([chunks])

    async def main() -> str:
        async with toolledger.run("aisuite", db=db) as run:
            stream = await JournaledClient(
                run, client, capture_content=True
            ).chat.completions.acreate(
                "openai:gpt-test", [{"role": "user", "content": "hi"}], stream=True
            )
            first = await stream.__anext__()
            assert first.choices[0].delta.content == "Hel"
            await stream.aclose()
            return run.run_id

    run_id = asyncio.run(main())
    (call,) = events(db, run_id, "llm_call")
    assert call["meta"]["stream_closed_early"] is True
    assert call["meta"]["finish_reasons"] == []
    assert call["outputs"]["content"] == [{"role": "assistant", "content": "Hel"}]
