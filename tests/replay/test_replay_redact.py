"""A run's ``redact=`` hook applies to the journaled model content: a secret in a message
(or in the model's answer) never reaches the database file, and the redacted record still
replays (the live request is compared in its redacted form; the stored answer is served)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anthropic
import pytest

import toolledger
from toolledger.integrations.anthropic import journaled

from ..integrations._llm_wire import httpx2

SECRET = "sk-live-4242"


def _message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x-1",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }


class EchoWire:
    """Anthropic over a mock transport: the answer repeats the prompt (secret included)."""

    def __init__(self, *, failing: bool = False) -> None:
        self.requests = 0
        self.failing = failing

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if self.failing:
            raise AssertionError("a replay reached the network")
        body = json.loads(request.content)
        text = f"noted: {body['messages'][-1]['content']}"
        if not body.get("stream"):
            return httpx2.Response(200, json=_message(text))
        start = {**_message(""), "content": [], "stop_reason": None}
        events = [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 4},
            },
            {"type": "message_stop"},
        ]
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    def client(self) -> Any:
        return anthropic.Anthropic(
            api_key="k",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
        )


def mask(attributes: dict[str, Any]) -> Mapping[str, Any]:
    """A telemetry-style hook: secrets in string values become ``[key]``."""
    return {
        k: re.sub(r"sk-live-\d+", "[key]", v) if isinstance(v, str) else v
        for k, v in attributes.items()
    }


def agent(run: toolledger.Run, wire: EchoWire) -> tuple[str, str]:
    claude = journaled(wire.client(), run)
    prompt = [{"role": "user", "content": f"Remember my key {SECRET}."}]
    first = claude.messages.create(model="claude-x-1", max_tokens=32, messages=prompt)
    chunks = claude.messages.create(model="claude-x-1", max_tokens=32, messages=prompt, stream=True)
    streamed = "".join(
        e.delta.text
        for e in chunks
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    return first.content[0].text, streamed


def _files_hold(tmp_path: Path, needle: str) -> bool:
    return any(needle.encode() in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())


def test_redact_hook_keeps_a_secret_out_of_the_database_and_the_record_replays(
    tmp_path: Path,
) -> None:
    """The message's and the answer's secret are stored masked; a replay with the same
    hook matches the live request in its masked form and serves the stored answer."""
    db = tmp_path / "ledger.db"
    with toolledger.run("remember", db=db, run_id="r1", redact=mask) as run:
        live = agent(run, EchoWire())
    assert live == (f"noted: Remember my key {SECRET}.",) * 2  # the agent saw the real answer
    assert not run.errors
    calls = [e for e in toolledger.load_run(db, "r1").events if e.kind == "llm_call"]
    assert [c.inputs["messages"][0]["content"] for c in calls] == ["Remember my key [key]."] * 2
    assert calls[0].outputs["response"]["content"][0]["text"] == "noted: Remember my key [key]."
    assert calls[1].outputs["stream"][2]["delta"]["text"] == "noted: Remember my key [key]."
    offline = EchoWire(failing=True)
    with toolledger.run("remember", db=db, replay_of="r1", redact=mask) as replayed:
        served = agent(replayed, offline)
    assert served == ("noted: Remember my key [key].",) * 2  # the stored answer
    assert offline.requests == 0
    report = replayed.replay_report
    assert report is not None
    assert (report.served_model_calls, report.divergence) == (2, None)
    assert not _files_hold(tmp_path, SECRET)


def test_redact_hook_that_fails_stores_no_content_and_the_run_cannot_be_replayed(
    tmp_path: Path,
) -> None:
    """A hook that raises: the model content is not journaled (fail closed), the failure
    is in ``run.errors``, and a replay of the run is ``REPLAY_UNAVAILABLE``."""

    def broken(attributes: dict[str, Any]) -> Mapping[str, Any]:
        raise RuntimeError("no")

    db = tmp_path / "ledger.db"
    with (
        pytest.warns(toolledger.JournalWarning),
        toolledger.run("remember", db=db, run_id="r1", redact=broken) as run,
    ):
        agent(run, EchoWire())
    assert run.errors
    assert {type(e).__name__ for e in run.errors} == {"InvalidArgumentError"}
    calls = [e for e in toolledger.load_run(db, "r1").events if e.kind == "llm_call"]
    assert [(c.inputs, c.outputs) for c in calls] == [(None, None)] * 2
    assert not _files_hold(tmp_path, SECRET)
    with (
        pytest.raises(toolledger.ReplayUnavailableError),
        toolledger.run("remember", db=db, replay_of="r1"),
    ):
        pass


def test_replay_with_another_redact_hook_diverges_at_the_masked_message(tmp_path: Path) -> None:
    """The live request is compared in its redacted form: without the hook the real
    secret differs from the stored mask, named as ``messages[0]``, nothing sent."""
    db = tmp_path / "ledger.db"
    with toolledger.run("remember", db=db, run_id="r1", redact=mask) as run:
        agent(run, EchoWire())
    offline = EchoWire(failing=True)
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("remember", db=db, replay_of="r1") as replayed,
    ):
        agent(replayed, offline)
    divergence = caught.value.divergence
    assert (divergence.field, divergence.recorded["content"]) == (
        "messages[0]",
        "Remember my key [key].",
    )
    assert offline.requests == 0
