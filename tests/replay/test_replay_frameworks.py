"""Replay, fork and resume through frameworks whose model takes a journaled provider
client: Pydantic AI and the OpenAI Agents SDK, their tools guarded by the adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

import toolledger
from toolledger.integrations.openai import journaled

openai = pytest.importorskip("openai")

from ._wire import Wire, tool_then_answer  # noqa: E402


def _wire(*, failing: bool = False) -> Wire:
    return Wire(tool_then_answer, failing=failing)


def pydantic_ai_agent(run: toolledger.Run, wire: Wire, sent: list[str]) -> str:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from toolledger.integrations.pydantic_ai import GuardedToolset

    def send_email(to: str) -> str:
        sent.append(to)
        return "sent"

    model = OpenAIChatModel(
        "gpt-x", provider=OpenAIProvider(openai_client=journaled(wire.async_client(), run))
    )
    tools = GuardedToolset(FunctionToolset([send_email]), run=run)
    return str(Agent(model, toolsets=[tools]).run_sync("Mail a@b.c").output)


def openai_agents_agent(run: toolledger.Run, wire: Wire, sent: list[str]) -> str:
    pytest.importorskip("agents")
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    from toolledger.integrations.openai_agents import guarded_tools

    set_tracing_disabled(True)

    @function_tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    model = OpenAIChatCompletionsModel("gpt-x", openai_client=journaled(wire.async_client(), run))
    agent = Agent(name="mailer", model=model, tools=guarded_tools(run, [send_email]))
    try:
        # asyncio.run, not Runner.run_sync: run_sync leaves the thread's default loop open
        # with its async generators shut down, and the next run on it warns.
        return str(asyncio.run(Runner.run(agent, "Mail a@b.c")).final_output)
    finally:
        set_tracing_disabled(False)  # the SDK's default, for the tests after this one


AGENTS: dict[str, Callable[[toolledger.Run, Wire, list[str]], str]] = {
    "pydantic_ai": pydantic_ai_agent,
    "openai_agents": openai_agents_agent,
}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_framework_replay_fork_and_resume(tmp_path: Path, name: str) -> None:
    """Replay: 0 requests, the tool answered by its checkpoint; fork at the second model
    call: one live request; resume: the recorded turns answered, the tool not re-run."""
    agent = AGENTS[name]
    db = tmp_path / f"{name}.db"
    sent: list[str] = []
    with toolledger.run("mail", db=db, run_id="r1") as run:
        answer = agent(run, _wire(), sent)
    offline = _wire(failing=True)
    with toolledger.run("mail", db=db, replay_of="r1") as replayed:
        assert agent(replayed, offline, sent) == answer
    second = [e for e in toolledger.load_run(db, "r1").events if e.kind == "llm_call"][1]
    live = _wire()
    with toolledger.run("mail", db=db, replay_of="r1", fork_at=second.event_id) as forked:
        assert agent(forked, live, sent) == answer
    resumed_wire = _wire()
    with toolledger.run("mail", db=db, run_id="r1") as resumed:
        assert agent(resumed, resumed_wire, sent) == answer
    assert answer == "done"
    assert sent == ["a@b.c"]
    assert offline.requests == 0
    report = replayed.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls) == (2, 1)
    assert live.requests == 1
    assert resumed_wire.requests == 0
    resumed_report = resumed.replay_report
    assert resumed_report is not None
    assert resumed_report.served_model_calls == 2
