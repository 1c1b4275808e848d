"""LangGraph: ``guard_tool_calls``/``aguard_tool_calls`` for ``ToolNode``; the middleware."""

from __future__ import annotations

import asyncio
import importlib
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

import toolledger
from toolledger.integrations import ConversationWarning, ToolGate
from toolledger.integrations.langgraph import (
    DurabilityWarning,
    ToolledgerMiddleware,
    aguard_tool_calls,
    guard_tool_calls,
)
from toolledger.testing import stored_run

CALL = {
    "name": "send_email",
    "args": {"to": "ana@example.com"},
    "id": "call_1",
    "type": "tool_call",
}


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tool(self, *, fail: bool = False) -> Any:
        @tool
        def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            if fail:
                raise ValueError("mailbox full")
            return f"sent to {to}"

        return send_email


def model_node(state: MessagesState) -> dict[str, Any]:
    """The model: one tool call (id ``call_1``), then ``done`` once it sees the result."""
    if state["messages"][-1].type == "tool":
        return {"messages": [AIMessage(content="done")]}
    return {"messages": [AIMessage(content="", tool_calls=[CALL])]}


def graph(tools_node: ToolNode, checkpointer: Any = None, **compile: Any) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("model", model_node)
    g.add_node("tools", tools_node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer, **compile)


def thread(tid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid}}


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_tool_node_runs_a_call_once_and_replays_it(run: toolledger.Run) -> None:
    """Two threads whose model issues the same id: one email, the same message twice."""
    box = Outbox()
    app = graph(ToolNode([box.tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    outs = [app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync") for t in "ab"]
    assert box.sent == ["ana@example.com"]
    (first,), (second,) = (tool_messages(o) for o in outs)
    assert first.content == second.content == "sent to ana@example.com"
    assert (first.tool_call_id, first.name) == ("call_1", "send_email")
    assert run.store.get(run.namespace, "call_1").status.value == "completed"


def test_resuming_from_the_checkpoint_twice_runs_the_tool_once(
    run: toolledger.Run, tmp_path: Path
) -> None:
    """SqliteSaver: resume the thread from the checkpoint before the tools node, twice."""
    for guarded, expected in ((False, 2), (True, 1)):
        box = Outbox()
        node = ToolNode([box.tool()], wrap_tool_call=guard_tool_calls(run) if guarded else None)
        with SqliteSaver.from_conn_string(str(tmp_path / f"cp{guarded}.db")) as saver:
            app = graph(node, saver, interrupt_before=["tools"])
            app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
            before_tools = app.get_state(thread("t")).config
            results = [app.invoke(None, before_tools, durability="sync") for _ in range(2)]
        assert box.sent == ["ana@example.com"] * expected, guarded
        assert [m.content for r in results for m in tool_messages(r)] == [
            "sent to ana@example.com"
        ] * 2


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_async_tool_node_runs_a_call_once(run: toolledger.Run) -> None:
    """``awrap_tool_call`` + ``ainvoke``: once, then the stored result."""
    sent: list[str] = []

    @tool
    async def send_email(to: str) -> str:
        """Send one email."""
        sent.append(to)
        return f"sent to {to}"

    node = ToolNode([send_email], awrap_tool_call=aguard_tool_calls(run))
    app = graph(node, InMemorySaver())

    async def go() -> list[Any]:
        return [
            await app.ainvoke({"messages": [("user", "go")]}, thread(t), durability="sync")
            for t in "ab"
        ]

    outs = asyncio.run(go())
    assert sent == ["ana@example.com"]
    assert [m.content for o in outs for m in tool_messages(o)] == ["sent to ana@example.com"] * 2


class FakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools (``create_agent`` binds them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_middleware_guards_create_agent(run: toolledger.Run) -> None:
    """``create_agent(..., middleware=[ToolledgerMiddleware(run)])``: one email for one id."""
    box = Outbox()
    middleware = ToolledgerMiddleware(run)
    for t in "ab":
        model = FakeModel(
            messages=iter([AIMessage(content="", tool_calls=[CALL]), AIMessage("done")])
        )
        agent = create_agent(
            model, [box.tool()], middleware=[middleware], checkpointer=InMemorySaver()
        )
        out = agent.invoke({"messages": [("user", "go")]}, thread(t), durability="sync")
        assert [m.content for m in tool_messages(out)] == ["sent to ana@example.com"]
    assert box.sent == ["ana@example.com"]


CALL_2 = {**CALL, "id": "call_2", "args": {"to": "bo@example.com"}}


def status(run: toolledger.Run, call_id: str) -> str:
    return run.store.get(run.namespace, call_id).status.value


def test_middleware_marks_results_seen_when_the_model_turn_completes(run: toolledger.Run) -> None:
    """``after_model``: each result the model's next turn carried is seen (``delivered``)."""
    model = FakeModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[CALL]),
                AIMessage(content="", tool_calls=[CALL_2]),
                AIMessage("done"),
            ]
        )
    )
    agent = create_agent(
        model,
        [Outbox().tool()],
        middleware=[ToolledgerMiddleware(run)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    assert (status(run, "call_1"), status(run, "call_2")) == ("delivered", "delivered")


def test_tool_node_marks_earlier_results_seen_at_the_next_call(run: toolledger.Run) -> None:
    """``guard_tool_calls`` sees a model turn when its calls run: the last result stays unseen."""
    turns = iter([[CALL], [CALL_2], []])

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="", tool_calls=next(turns))]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(run)))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    assert (status(run, "call_1"), status(run, "call_2")) == ("delivered", "completed")


def test_tool_reaches_its_call_context(run: toolledger.Run) -> None:
    """``toolledger.current_call()`` inside a tool (a worker thread): its id and operation."""

    @tool
    def send_email(to: str) -> str:
        """Send one email."""
        ctx = toolledger.current_call()
        assert ctx is not None
        ctx.operation.write({"message_id": "m-1"})
        return ctx.call_id

    app = graph(ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    out = app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    assert [m.content for m in tool_messages(out)] == ["call_1"]
    assert toolledger.current_call() is None


def test_durability_async_warns_once(run: toolledger.Run) -> None:
    """A graph whose durability can lose the tool calls: one clear warning per wrapper."""
    box = Outbox()
    wrapper, line = guard_tool_calls(run), sys._getframe().f_lineno
    app = graph(ToolNode([box.tool()], wrap_tool_call=wrapper), InMemorySaver())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in "ab":
            app.invoke({"messages": [("user", "go")]}, thread(t))
    (warning,) = [w for w in caught if w.category is DurabilityWarning]
    assert 'durability="async"' in str(warning.message)
    assert (warning.filename, warning.lineno) == (__file__, line)  # the app's line
    assert box.sent == ["ana@example.com"]


def test_pending_gate_interrupts_the_graph_and_a_toolledger_decision_resumes_it(
    run: toolledger.Run,
) -> None:
    """A gate a person decides: ``interrupt()``; ``toolledger approve`` then the graph's
    ``Command(resume=...)``: the call runs once."""
    box = Outbox()
    node = ToolNode(
        [box.tool()], wrap_tool_call=guard_tool_calls(run, gates={"send_email": ToolGate()})
    )
    app = graph(node, InMemorySaver())
    paused = app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    (pause,) = paused["__interrupt__"]
    assert pause.value == {
        "toolledger": "awaiting_approval",
        "call_id": "call_1",
        "tool": "send_email",
        "args": {"to": "ana@example.com"},
    }
    assert box.sent == []
    toolledger.decide_approval(run.store, run.namespace, "call_1", True, "ops", "checked")
    out = app.invoke(Command(resume=True), thread("t"), durability="sync")
    assert [m.content for m in tool_messages(out)] == ["sent to ana@example.com"]
    assert box.sent == ["ana@example.com"]


def test_decision_passed_with_command_resume_is_stored_and_a_denial_told(
    run: toolledger.Run,
) -> None:
    """``Command(resume={"approved": False, ...})``: stored in toolledger; the model is told."""
    box = Outbox()
    node = ToolNode(
        [box.tool()], wrap_tool_call=guard_tool_calls(run, gates={"send_email": ToolGate()})
    )
    app = graph(node, InMemorySaver())
    app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    decision = {"approved": False, "by": "ops", "reason": "not today"}
    out = app.invoke(Command(resume=decision), thread("t"), durability="sync")
    (told,) = tool_messages(out)
    assert (told.content, told.status) == ("denied by ops: not today", "error")
    assert box.sent == []
    rec = toolledger.approvals.get_approval(run.store, run.namespace, "call_1")
    assert (rec.status.value, rec.by) == ("denied", "ops")


def test_thread_id_becomes_the_runs_conversation(run: toolledger.Run) -> None:
    """A run the app named no conversation takes the graph's ``thread_id`` at its first call."""
    assert run.conversation_id is None
    app = graph(ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    app.invoke({"messages": [("user", "go")]}, thread("chat-7"), durability="sync")
    assert run.conversation_id == "chat-7"


def test_conversation_the_app_named_wins_over_the_thread(tmp_path: Path) -> None:
    """``toolledger.run(conversation_id=...)`` keeps its name; no warning for any thread."""
    with toolledger.run("t", db=str(tmp_path / "l.db"), conversation_id="chat-1") as named:
        node = ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(named))
        app = graph(node, InMemorySaver())
        for t in "ab":
            app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync")
        assert named.conversation_id == "chat-1"


def test_second_thread_on_a_bound_run_warns_once(run: toolledger.Run) -> None:
    """A run bound to a first thread stays bound to it; other threads are told, once."""
    app = graph(ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    app.invoke({"messages": [("user", "go")]}, thread("a"), durability="sync")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in "bc":
            app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync")
    (warning,) = [w for w in caught if w.category is ConversationWarning]
    assert "conversation 'b' is not the run's ('a')" in str(warning.message)
    assert run.conversation_id == "a"


def test_no_checkpointer_warns(run: toolledger.Run) -> None:
    """A graph without a checkpointer cannot resume: the warning says so."""
    app = graph(ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(run)))
    with pytest.warns(DurabilityWarning, match="no checkpointer"):
        app.invoke({"messages": [("user", "go")]})


def test_durability_sync_does_not_warn(run: toolledger.Run) -> None:
    """A checkpointer and ``durability="sync"``: silent."""
    app = graph(ToolNode([Outbox().tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")


def test_handled_tool_error_releases_the_claim(run: toolledger.Run) -> None:
    """An error ToolMessage is a failure: released, and the model gets the node's text."""
    box = Outbox()
    node = ToolNode(
        [box.tool(fail=True)], wrap_tool_call=guard_tool_calls(run), handle_tool_errors=True
    )
    app = graph(node, InMemorySaver())
    out = app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert "mailbox full" in msg.content
    assert run.store.get(run.namespace, "call_1").status.value == "ready"


def test_unhandled_tool_error_propagates_released(run: toolledger.Run) -> None:
    """An exception the node does not handle fails the graph; the claim is released."""
    node = ToolNode(
        [Outbox().tool(fail=True)], wrap_tool_call=guard_tool_calls(run), handle_tool_errors=False
    )
    with pytest.raises(ValueError, match="mailbox full"):
        graph(node, InMemorySaver()).invoke(
            {"messages": [("user", "go")]}, thread("t"), durability="sync"
        )
    assert run.store.get(run.namespace, "call_1").status.value == "ready"


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_tool_error_as_result_is_stored_and_replayed(run: toolledger.Run) -> None:
    """``on_error="result"``: the node's error text is stored and sent again, not re-run."""
    box = Outbox()
    node = ToolNode(
        [box.tool(fail=True)],
        wrap_tool_call=guard_tool_calls(run, on_error="result"),
        handle_tool_errors=True,
    )
    app = graph(node, InMemorySaver())
    outs = [app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync") for t in "ab"]
    assert box.sent == ["ana@example.com"]
    (first,), (second,) = (tool_messages(o) for o in outs)
    assert first.content == second.content
    assert "mailbox full" in first.content
    assert first.status == second.status == "error"


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_command_results_are_stored_and_rebuilt(run: toolledger.Run) -> None:
    """A tool returning a ``Command``: its update is stored and rebuilt on replay."""
    sent: list[str] = []

    @tool
    def send_email(to: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Send one email."""
        sent.append(to)
        return Command(
            update={"messages": [ToolMessage(f"sent to {to}", tool_call_id=tool_call_id)]}
        )

    app = graph(ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    outs = [app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync") for t in "ab"]
    assert sent == ["ana@example.com"]
    assert [m.content for o in outs for m in tool_messages(o)] == ["sent to ana@example.com"] * 2


def test_models_justification_is_journaled(run: toolledger.Run) -> None:
    """A tool whose schema has ``justification``: the model's text is the event's."""

    @tool
    def send_email(to: str, justification: str) -> str:
        """Send one email."""
        return "ok"

    call = {**CALL, "args": {"to": "ana@example.com", "justification": "Ana asked."}}

    def model(state: MessagesState) -> dict[str, Any]:
        if state["messages"][-1].type == "tool":
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    g.compile(checkpointer=InMemorySaver()).invoke(
        {"messages": [("user", "go")]}, thread("t"), durability="sync"
    )
    run.flush()
    (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert event["justification"] == "Ana asked."
    assert event["inputs"] == {"to": "ana@example.com"}


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without LangGraph, importing the adapter raises an ImportError naming the extra."""
    for name in [m for m in sys.modules if m == "langgraph" or m.startswith("langgraph.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.langgraph")
    with pytest.raises(ImportError, match=r"toolledger\[langgraph\]"):
        importlib.import_module("toolledger.integrations.langgraph")


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_content_and_artifact_tool_replays_both(run: toolledger.Run) -> None:
    """``response_format="content_and_artifact"``: the pair is stored; a replay gives the
    model the same content and the graph the same artifact."""
    sent: list[str] = []

    @tool(response_format="content_and_artifact")
    def send_email(to: str) -> tuple[str, dict[str, Any]]:
        """Send one email."""
        sent.append(to)
        return f"sent to {to}", {"message_id": "m-1", "to": [to]}

    app = graph(ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    outs = [app.invoke({"messages": [("user", "go")]}, thread(t), durability="sync") for t in "ab"]
    assert sent == ["ana@example.com"]
    (first,), (second,) = (tool_messages(o) for o in outs)
    assert first.content == second.content == "sent to ana@example.com"
    assert first.artifact == second.artifact == {"message_id": "m-1", "to": ["ana@example.com"]}
    assert second.status == "success"


def test_invalid_arguments_are_refused_before_the_guard(run: toolledger.Run) -> None:
    """The tool validates the model's arguments first: an invalid call is the node's error
    message, nothing runs and nothing is recorded."""
    box = Outbox()
    bad = {**CALL, "args": {"recipient": "ana@example.com"}}

    def model(state: MessagesState) -> dict[str, Any]:
        if state["messages"][-1].type == "tool":
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=[bad])]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([box.tool()], wrap_tool_call=guard_tool_calls(run)))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    out = g.compile(checkpointer=InMemorySaver()).invoke(
        {"messages": [("user", "go")]}, thread("t"), durability="sync"
    )
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert "to" in msg.content
    assert box.sent == []
    assert run.store.get(run.namespace, "call_1") is None


@pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
def test_result_an_earlier_version_stored_replays_as_its_message(run: toolledger.Run) -> None:
    """Earlier versions stored the tool node's ``ToolMessage``: a replay is that message."""
    stored = {"tool_message": {"content": "sent (v1)", "status": "success", "artifact": [1]}}
    run.call(
        toolledger.tool("send_email", revision="1", execute=lambda _input, _ctx: stored),
        call_id="call_1",
        input={"to": "ana@example.com"},
    )
    box = Outbox()
    app = graph(ToolNode([box.tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    out = app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    (msg,) = tool_messages(out)
    assert (msg.content, msg.artifact, msg.tool_call_id, msg.name) == (
        "sent (v1)",
        [1],
        "call_1",
        "send_email",
    )
    assert box.sent == []


def test_telemetry_failure_never_costs_the_call(
    run: toolledger.Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instrumentation that raises while the adapter looks for its span: the call runs."""
    from openinference.instrumentation import langchain as oi

    asked: list[str] = []

    def broken() -> Any:
        asked.append("span")
        raise RuntimeError("instrumentation bug")

    monkeypatch.setattr(oi.LangChainInstrumentor, "is_instrumented_by_opentelemetry", True)
    monkeypatch.setattr(oi, "get_current_span", broken)
    box = Outbox()
    app = graph(ToolNode([box.tool()], wrap_tool_call=guard_tool_calls(run)), InMemorySaver())
    out = app.invoke({"messages": [("user", "go")]}, thread("t"), durability="sync")
    assert [m.content for m in tool_messages(out)] == ["sent to ana@example.com"]
    assert box.sent == ["ana@example.com"]
    assert asked == ["span"]
