"""Replay, fork and resume of Anthropic's tool runner (``client.beta.messages.tool_runner``)
given a journaled client: its turns go through ``journaled(...).beta.messages``, so they are
recorded with content and answered from the record; its tool calls go through the guard."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations.anthropic import guarded_tool_runner, journaled

anthropic = pytest.importorskip("anthropic")
from anthropic import beta_async_tool, beta_tool  # noqa: E402

from ..integrations._fake_messages import MODEL, FakeMessages, httpx2  # noqa: E402


class Wire(FakeMessages):
    """The scripted ``/v1/messages``; ``failing`` refuses every request (a replay sends none)."""

    def __init__(self, *, failing: bool = False) -> None:
        super().__init__()
        self.failing = failing

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        if self.failing:
            raise AssertionError(f"a replay reached the network: {request.url}")
        return super().handler(request)


VARIANTS = [
    pytest.param(False, {}, id="sync"),
    pytest.param(False, {"stream": True}, id="sync-stream"),
    pytest.param(False, {"stream": True, "run_tools_eagerly": True}, id="sync-eager"),
    pytest.param(True, {}, id="async"),
    pytest.param(True, {"stream": True}, id="async-stream"),
]


class Agent:
    """The runner over a journaled client; ``sent`` is the tool's irreversible effect."""

    def __init__(self, is_async: bool, extra: dict[str, Any]) -> None:
        self.is_async = is_async
        self.extra = extra
        self.sent: list[str] = []

    def tool(self) -> Any:
        return self._async_tool() if self.is_async else self._sync_tool()

    def _sync_tool(self) -> Any:
        @beta_tool
        def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            return f"sent to {to}"

        return send_email

    def _async_tool(self) -> Any:
        @beta_async_tool
        async def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            return f"sent to {to}"

        return send_email

    def __call__(self, run: toolledger.Run, wire: Wire, prompt: str = "Tell Ana.") -> str:
        client = journaled(wire.client(is_async=self.is_async), run)
        runner = guarded_tool_runner(
            run,
            client,
            tools=[self.tool()],
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": prompt}],
            **self.extra,
        )
        final = asyncio.run(runner.until_done()) if self.is_async else runner.until_done()
        return str(final.content[0].text)


def _llm_calls(db: Path, run_id: str) -> list[toolledger.Event]:
    return [e for e in toolledger.load_run(db, run_id).events if e.kind == "llm_call"]


@pytest.mark.parametrize(("is_async", "extra"), VARIANTS)
def test_tool_runner_replays_diverges_forks_and_resumes_from_its_record(
    tmp_path: Path, is_async: bool, extra: dict[str, Any]
) -> None:
    """Record: two turns and one email. Replay: 0 requests, the email not sent again.
    A changed prompt: ``REPLAY_DIVERGED`` at ``messages[0]``, 0 requests. Fork at the
    second turn: 1 request, the tool answered by its checkpoint. Resume: 0 requests."""
    db = tmp_path / "runner.db"
    agent = Agent(is_async, extra)
    recorded = Wire()
    with toolledger.run("tell ana", db=db, run_id="r1") as run:
        answer = agent(run, recorded)
    assert (answer, agent.sent, len(recorded.requests)) == ("Done.", ["ana@example.com"], 2)
    calls = _llm_calls(db, "r1")
    assert len(calls) == 2
    assert calls[0].inputs["messages"] == [{"role": "user", "content": "Tell Ana."}]
    assert calls[0].meta["tool_calls"] == [{"id": "toolu_1", "name": "send_email"}]

    offline = Wire(failing=True)
    with toolledger.run("tell ana", db=db, replay_of="r1") as replayed:
        assert agent(replayed, offline) == "Done."
    report = replayed.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls, report.divergence) == (2, 1, None)
    assert (len(offline.requests), agent.sent) == (0, ["ana@example.com"])

    offline = Wire(failing=True)
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("tell ana", db=db, replay_of="r1") as changed,
    ):
        agent(changed, offline, prompt="Tell Bob.")
    divergence = caught.value.divergence
    assert (divergence.index, divergence.kind, divergence.field) == (0, "llm_call", "messages[0]")
    assert (divergence.recorded["content"], divergence.now["content"]) == ("Tell Ana.", "Tell Bob.")
    assert len(offline.requests) == 0

    live = Wire()
    at = calls[1].event_id
    with toolledger.run("tell ana", db=db, replay_of="r1", fork_at=at) as forked:
        assert agent(forked, live) == "Done."
    report = forked.replay_report
    assert report is not None
    assert (report.served_model_calls, report.live_from) == (1, at)
    assert (len(live.requests), agent.sent) == (1, ["ana@example.com"])
    assert toolledger.load_run(db, forked.run_id).source == {
        "mode": "fork",
        "run_id": "r1",
        "event_id": at,
    }

    resumed_wire = Wire()
    with toolledger.run("tell ana", db=db, run_id="r1") as resumed:
        assert agent(resumed, resumed_wire) == "Done."
    report = resumed.replay_report
    assert report is not None
    assert report.served_model_calls == 2
    assert (len(resumed_wire.requests), agent.sent) == (0, ["ana@example.com"])
