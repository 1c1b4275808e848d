"""Child process of the framework crash tests: one framework run, SIGKILLed after the effect.

Usage: python _framework_child.py ADAPTER DB DIR first|again|replan POINT

``first`` runs the framework with a tool whose effect appends a line to ``DIR/effects.log``
and SIGKILLs this process at POINT: ``after-effect`` (inside the tool, the effect done, its
result not stored) or ``after-completion`` (the guard's hook right after the result is
stored, before the framework saves or sends anything). ``again`` is the restarted process:
it takes the framework's resume path (the same call id) and prints the model-visible
result as JSON on its last line. ``replan`` is a restart that lost the model's turn: the
framework asks the model again, which issues the same action under a new id (the tools
have an effect key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import toolledger
from toolledger.testing import CRASH_POINTS, crash_at

#: Installed crash points stay installed until the process ends (or is killed).
CRASHING = contextlib.ExitStack()

CALL_ID = "call_crash_1"
#: The id the model gives the same action when the restarted framework asks it again.
REPLAN_ID = "call_replan_2"
#: Every tool of the child is keyed by its input too (re-plan safety).
EFFECT_KEYS: dict[str, Any] = {"send_email": "input"}


def append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class Script:
    def __init__(self, folder: Path, mode: str, point: str) -> None:
        self.effects = folder / "effects.log"
        self.mode = mode
        self.point = point
        self.call_id = REPLAN_ID if mode == "replan" else CALL_ID
        if mode == "first" and point in CRASH_POINTS:
            CRASHING.enter_context(crash_at(point))  # SIGKILL there, for the rest of the process

    def kill_at(self, name: str) -> None:
        if self.mode == "first" and name == self.point:
            os.kill(os.getpid(), signal.SIGKILL)

    def effect(self, to: str) -> str:
        append(self.effects, to)  # the irreversible effect
        self.kill_at("after-effect")
        return f"sent to {to}"

    def recover(self, ctx: toolledger.RecoverContext) -> Any:
        """Proves the effect from the outbox (the only thing a lost outcome leaves)."""
        if self.effects.exists() and "ana@example.com" in self.effects.read_text().split():
            return toolledger.Recovered("sent to ana@example.com")
        return toolledger.NotRecovered("no effect found")


def run_pydantic_ai(run: toolledger.Run, s: Script, folder: Path) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from toolledger.integrations.pydantic_ai import GuardedToolset

    saved = folder / "history.json"

    def model(messages: list[Any], info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(returns[-1].model_response_str())])
        response = ModelResponse(
            parts=[ToolCallPart("send_email", {"to": "ana@example.com"}, s.call_id)]
        )
        # The application saves the model's turn before its tools run.
        saved.write_bytes(ModelMessagesTypeAdapter.dump_json([*messages, response]))
        return response

    def send_email(to: str) -> str:
        """Send one email."""
        return s.effect(to)

    toolset = GuardedToolset(
        FunctionToolset([send_email]),
        run=run,
        recover={"send_email": s.recover},
        effect_keys=EFFECT_KEYS,
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    if s.mode in ("first", "replan"):
        return agent.run_sync("Tell Ana").output
    history = ModelMessagesTypeAdapter.validate_json(saved.read_bytes())
    assert isinstance(history[0], ModelRequest)
    return agent.run_sync(None, message_history=history).output


def run_anthropic(run: toolledger.Run, s: Script, folder: Path) -> Any:
    from anthropic import beta_tool

    from toolledger.integrations.anthropic import guarded_tool_runner

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _fake_messages import MODEL, FakeMessages

    @beta_tool
    def send_email(to: str) -> str:
        """Send one email."""
        return s.effect(to)

    fake = FakeMessages(s.call_id)
    # No resume in the SDK: the restart re-runs the conversation, and the model (scripted)
    # issues the same tool-use id, as a saved assistant turn would give it.
    runner = guarded_tool_runner(
        run,
        fake.client(),
        tools=[send_email],
        recover={"send_email": s.recover},
        effect_keys=EFFECT_KEYS,
        model=MODEL,
        max_tokens=100,
        messages=[{"role": "user", "content": "Tell Ana"}],
    )
    runner.until_done()
    return fake.tool_results()[-1]["content"]


def run_openai_agents(run: toolledger.Run, s: Script, folder: Path) -> Any:
    from agents import Agent, Runner, RunState, function_tool, set_trace_processors
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolledger.integrations.openai_agents import guarded_tools

    set_trace_processors([])
    saved = folder / "state.json"

    @function_tool(needs_approval=True)
    def send_email(to: str) -> str:
        """Send one email."""
        return s.effect(to)

    tools = guarded_tools(
        run, [send_email], recover={"send_email": s.recover}, effect_keys=EFFECT_KEYS
    )

    async def go() -> Any:
        if s.mode in ("first", "replan"):
            model = ScriptedModel(
                [[function_call("send_email", {"to": "ana@example.com"}, call_id=s.call_id)]]
            )
            first = await Runner.run(Agent(name="mailer", model=model, tools=tools), "Tell Ana")
            state = first.to_state()
            state.approve(first.interruptions[0])
            saved.write_text(state.to_string())  # the application saves the approved state
        agent = Agent(
            name="mailer", model=ScriptedModel([[assistant_message("done")]]), tools=tools
        )
        state = await RunState.from_string(agent, saved.read_text())
        result = await Runner.run(agent, state)
        outputs = [
            i.output for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"
        ]
        return outputs[-1]

    return asyncio.run(go())


def run_langgraph(run: toolledger.Run, s: Script, folder: Path) -> Any:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from toolledger.integrations.langgraph import guard_tool_calls

    @tool
    def send_email(to: str) -> str:
        """Send one email."""
        return s.effect(to)

    def model(state: MessagesState) -> dict[str, Any]:
        if state["messages"][-1].type == "tool":
            return {"messages": [AIMessage(content="done")]}
        call = {"name": "send_email", "args": {"to": "ana@example.com"}, "id": s.call_id}
        return {"messages": [AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    wrap = guard_tool_calls(run, recover={"send_email": s.recover}, effect_keys=EFFECT_KEYS)
    g.add_node("tools", ToolNode([send_email], wrap_tool_call=wrap))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    # A re-plan is a new thread: the checkpoint holding the model's calls was lost.
    config = {"configurable": {"thread_id": "replan" if s.mode == "replan" else "crash"}}
    with SqliteSaver.from_conn_string(str(folder / "checkpoints.db")) as saver:
        app = g.compile(checkpointer=saver)
        # The restart resumes the thread from its last checkpoint (the model's tool call).
        start = {"messages": [("user", "Tell Ana")]} if s.mode != "again" else None
        out = app.invoke(start, config, durability="sync")
    return [m.content for m in out["messages"] if isinstance(m, ToolMessage)][-1]


ADAPTERS = {
    "langgraph": run_langgraph,
    "anthropic": run_anthropic,
    "openai_agents": run_openai_agents,
    "pydantic_ai": run_pydantic_ai,
}


def main() -> None:
    adapter, db, folder, mode, point = sys.argv[1:6]
    s = Script(Path(folder), mode, point)
    with toolledger.run("crash test", db=db, run_id=None) as run:
        out = ADAPTERS[adapter](run, s, Path(folder))
    print(json.dumps({"result": out}))


if __name__ == "__main__":
    asyncio.set_event_loop(None)
    main()
