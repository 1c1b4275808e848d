"""``guarded_tools``: OpenAI Agents SDK tools through the guard, keyed by ``tool_call_id``."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Runner,
    RunState,
    SQLiteSession,
    WebSearchTool,
    function_tool,
    set_trace_processors,
)
from agents.testing import ScriptedModel, assistant_message, function_call

import toolledger
from toolledger import Pending
from toolledger.approvals import get_approval, list_approvals
from toolledger.integrations import ToolGate
from toolledger.integrations.openai_agents import SDK_APPROVER, apply_decisions, guarded_tools
from toolledger.testing import stored_run


@pytest.fixture(autouse=True)
def _local_traces() -> None:
    set_trace_processors([])  # traces stay in the process: nothing is exported


@pytest.fixture(autouse=True)
def _own_event_loop() -> Iterator[None]:
    """``Runner.run_sync`` runs on the thread's default event loop and leaves it open with
    its async generators shut down; a later ``run_sync`` of another SDK (Pydantic AI's
    reuses an open default loop) then fails on it. Each test gets its own loop, closed and
    unset after it."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


def scripted(call_id: str = "call_1", args: dict[str, Any] | None = None) -> ScriptedModel:
    """A model that calls ``send_email`` once, then says ``done``."""
    return ScriptedModel(
        [
            [function_call("send_email", args or {"to": "ana@example.com"}, call_id=call_id)],
            [assistant_message("done")],
        ]
    )


def tool_output(model: ScriptedModel) -> Any:
    """What the model was sent as the tool's output (from its last request)."""
    items = model.calls[-1].input
    (out,) = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return out["output"]


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tool(self, *, fail: bool = False, **options: Any) -> FunctionTool:
        @function_tool(**options)
        def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            if fail:
                raise ValueError("mailbox full")
            return f"sent to {to}"

        return send_email


def test_tool_runs_once_and_the_same_call_replays_its_result(run: toolledger.Run) -> None:
    """Two runs whose model issues the same call id: one email, the same output twice."""
    box = Outbox()
    tools = guarded_tools(run, [box.tool()])
    outputs = []
    for _ in range(2):
        model = scripted()
        result = Runner.run_sync(Agent(name="mailer", model=model, tools=tools), "Tell Ana")
        assert result.final_output == "done"
        outputs.append(tool_output(model))
    assert box.sent == ["ana@example.com"]
    assert outputs == ["sent to ana@example.com"] * 2
    assert run.store.get(run.namespace, "call_1").result.payload == "sent to ana@example.com"


def test_resuming_a_saved_run_state_twice_runs_the_tool_once(run: toolledger.Run) -> None:
    """The SDK's resume path: an approved RunState, saved and resumed twice."""

    async def scenario(tools: list[Any]) -> None:
        agent = Agent(name="mailer", model=scripted(), tools=tools)
        first = await Runner.run(agent, "Tell Ana")
        assert [i.raw_item.call_id for i in first.interruptions] == ["call_1"]
        state = first.to_state()
        state.approve(first.interruptions[0])
        saved = state.to_string()
        for _ in range(2):
            again = Agent(
                name="mailer", model=ScriptedModel([[assistant_message("done")]]), tools=tools
            )
            resumed = await Runner.run(again, await RunState.from_string(again, saved))
            assert resumed.final_output == "done"

    stock = Outbox()
    asyncio.run(scenario([stock.tool(needs_approval=True)]))
    assert stock.sent == ["ana@example.com", "ana@example.com"]  # the SDK alone: twice
    box = Outbox()
    asyncio.run(scenario(guarded_tools(run, [box.tool(needs_approval=True)])))
    assert box.sent == ["ana@example.com"]
    decision = toolledger.approvals.get_approval(run.store, run.namespace, "call_1")
    assert (decision.status.value, decision.by) == ("approved", SDK_APPROVER)


def test_tool_error_reaches_the_guard_then_the_sdks_failure_policy(run: toolledger.Run) -> None:
    """``on_error="raise"``: claim released, the model gets the SDK's own error text."""
    stock = scripted()
    Runner.run_sync(Agent(name="mailer", model=stock, tools=[Outbox().tool(fail=True)]), "go")
    box = Outbox()
    tools = guarded_tools(run, [box.tool(fail=True)])
    model = scripted()
    Runner.run_sync(Agent(name="mailer", model=model, tools=tools), "go")
    assert tool_output(model) == tool_output(stock)
    assert tool_output(model).startswith("An error occurred while running the tool")
    assert run.store.get(run.namespace, "call_1").status.value == "ready"
    Runner.run_sync(Agent(name="mailer", model=scripted(), tools=tools), "go")
    assert box.sent == ["ana@example.com"] * 2  # released: a retry may run it


def test_tool_without_failure_function_fails_the_run(run: toolledger.Run) -> None:
    """A tool made with ``failure_error_function=None`` still fails the run, released."""
    box = Outbox()
    tools = guarded_tools(run, [box.tool(fail=True, failure_error_function=None)])
    with pytest.raises(Exception, match="mailbox full"):
        Runner.run_sync(Agent(name="mailer", model=scripted(), tools=tools), "go")
    assert run.store.get(run.namespace, "call_1").status.value == "ready"


def test_tool_error_as_result_is_stored_and_replayed(run: toolledger.Run) -> None:
    """``on_error="result"``: the error is stored; the replay sends it without running."""
    box = Outbox()
    tools = guarded_tools(run, [box.tool(fail=True)], on_error="result")
    outputs = []
    for _ in range(2):
        model = scripted()
        Runner.run_sync(Agent(name="mailer", model=model, tools=tools), "go")
        outputs.append(tool_output(model))
    assert box.sent == ["ana@example.com"]
    assert outputs[0] == outputs[1] == '{"error":"ValueError","message":"mailbox full"}'


def test_toolledger_decision_answers_the_sdks_needs_approval(run: toolledger.Run) -> None:
    """A decision made in toolledger is the call's decision: the SDK does not interrupt."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Pending("HELP-1"))}
    tools = guarded_tools(run, [box.tool(needs_approval=True)], gates=gates)
    # An earlier attempt at the call filed the request; a person approved it in toolledger.
    waiting = toolledger.tool(
        "send_email",
        revision="1",
        execute=lambda i, c: None,
        approval="effect-only",
        approver=lambda request: Pending("HELP-1"),
    )
    out = run.call(waiting, call_id="call_1", input={"to": "ana@example.com"})
    assert out.status == "awaiting_approval"
    toolledger.decide_approval(run.store, run.namespace, "call_1", True, "alice", "checked")
    model = scripted()
    result = Runner.run_sync(Agent(name="mailer", model=model, tools=tools), "go")
    assert result.interruptions == []
    assert box.sent == ["ana@example.com"]
    assert tool_output(model) == "sent to ana@example.com"


def test_toolledger_gate_pending_runs_nothing(run: toolledger.Run) -> None:
    """A toolledger gate with no decision: the model is told the call waits."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Pending("HELP-1"))}
    model = scripted()
    Runner.run_sync(
        Agent(name="mailer", model=model, tools=guarded_tools(run, [box.tool()], gates=gates)),
        "go",
    )
    assert box.sent == []
    assert tool_output(model) == "awaiting approval; not executed yet"


@pytest.mark.parametrize(
    ("granted", "told"), [(True, "sent to ana@example.com"), (False, "denied by ops: no")]
)
def test_sdk_pause_is_a_toolledger_request_decided_with_toolledger(
    run: toolledger.Run, granted: bool, told: str
) -> None:
    """An SDK ``needs_approval`` pause files a toolledger request; ``decide_approval`` (the
    CLI's ``approve``/``deny``) decides it, and ``apply_decisions`` resumes the SDK."""
    box = Outbox()
    model = scripted()
    agent = Agent(
        name="mailer", model=model, tools=guarded_tools(run, [box.tool(needs_approval=True)])
    )
    first = Runner.run_sync(agent, "go")
    assert [i.raw_item.call_id for i in first.interruptions] == ["call_1"]
    (pending,) = list_approvals(run.store, namespace=run.namespace)
    assert (pending.binding.call_id, pending.status.value) == ("call_1", "pending")
    toolledger.decide_approval(
        run.store, run.namespace, "call_1", granted, "ops", None if granted else "no"
    )
    state = first.to_state()
    assert apply_decisions(state, run) == ["call_1"]
    result = Runner.run_sync(agent, state)
    assert result.interruptions == []
    assert box.sent == (["ana@example.com"] if granted else [])
    assert tool_output(model) == told


def test_toolledger_gate_without_approver_pauses_the_sdk(run: toolledger.Run) -> None:
    """A toolledger gate decided by a person: the SDK's own interruption, nothing runs."""
    box = Outbox()
    tools = guarded_tools(run, [box.tool()], gates={"send_email": ToolGate()})
    first = Runner.run_sync(Agent(name="mailer", model=scripted(), tools=tools), "go")
    assert [i.raw_item.call_id for i in first.interruptions] == ["call_1"]
    assert get_approval(run.store, run.namespace, "call_1").status.value == "pending"
    assert box.sent == []


def test_models_justification_is_journaled(run: toolledger.Run) -> None:
    """A tool whose schema has ``justification``: the model's text is the event's."""

    @function_tool
    def send_email(to: str, justification: str) -> str:
        """Send one email.

        Args:
            to: The address.
            justification: Why this email is needed now.
        """
        return "ok"

    args = {"to": "ana@example.com", "justification": "Ana asked to be told."}
    tools = guarded_tools(run, [send_email])
    Runner.run_sync(Agent(name="mailer", model=scripted(args=args), tools=tools), "go")
    run.flush()
    (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert event["justification"] == "Ana asked to be told."
    assert event["inputs"] == {"to": "ana@example.com"}


def test_session_id_becomes_the_runs_conversation(run: toolledger.Run) -> None:
    """``guarded_tools(..., session=)``: the session's id is the run's conversation."""
    session = SQLiteSession("chat-9")
    tools = guarded_tools(run, [Outbox().tool()], session=session)
    Runner.run_sync(
        Agent(name="mailer", model=scripted(), tools=tools), "Tell Ana", session=session
    )
    assert run.conversation_id == "chat-9"


def test_outputs_in_a_turns_input_are_marked_seen(run: toolledger.Run) -> None:
    """A tool call's turn input carried the earlier outputs: they are seen; the last stays
    unseen (no tool call follows it)."""
    model = ScriptedModel(
        [
            [function_call("send_email", {"to": "ana@example.com"}, call_id="call_1")],
            [function_call("send_email", {"to": "bo@example.com"}, call_id="call_2")],
            [assistant_message("done")],
        ]
    )
    Runner.run_sync(
        Agent(name="mailer", model=model, tools=guarded_tools(run, [Outbox().tool()])), "go"
    )
    states = [run.store.get(run.namespace, c).status.value for c in ("call_1", "call_2")]
    assert states == ["delivered", "completed"]


def test_tool_reaches_its_call_context(run: toolledger.Run) -> None:
    """``toolledger.current_call()`` inside a function tool (run in a thread by the SDK)."""

    @function_tool
    def send_email(to: str) -> str:
        """Send one email."""
        ctx = toolledger.current_call()
        assert ctx is not None
        ctx.operation.write({"message_id": "m-1"})
        return ctx.call_id

    model = scripted()
    Runner.run_sync(Agent(name="mailer", model=model, tools=guarded_tools(run, [send_email])), "go")
    assert tool_output(model) == "call_1"


def test_hosted_tools_are_refused(run: toolledger.Run) -> None:
    """A hosted tool runs at the provider: guarding it is refused, not skipped."""
    with pytest.raises(toolledger.InvalidArgumentError) as info:
        guarded_tools(run, [WebSearchTool()])
    assert info.value.code == "INVALID_ARGUMENT"


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK, importing the adapter raises an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.openai_agents")
    with pytest.raises(ImportError, match=r"toolledger\[openai-agents\]"):
        importlib.import_module("toolledger.integrations.openai_agents")
