"""LangGraph: a model node that calls a journaled provider client, tools in a guarded
``ToolNode``; the graph replays, forks and resumes from the record with no second email."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations.openai import journaled

pytest.importorskip("openai")
pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from toolledger.integrations.langgraph import guard_tool_calls

from ._wire import Wire, tool_then_answer


def _wire(message: Any) -> dict[str, Any]:
    if message.type == "human":
        return {"role": "user", "content": message.content}
    if message.type == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for c in message.tool_calls
    ]
    return {
        "role": "assistant",
        "content": message.content,
        **({"tool_calls": calls} if calls else {}),
    }


def graph(run: toolledger.Run, wire: Wire, outbox: list[str]) -> str:
    gpt = journaled(wire.client(), run)

    @tool
    def send_email(to: str) -> str:
        """Send one email."""
        outbox.append(to)
        return f"sent to {to}"

    def model(state: MessagesState) -> dict[str, Any]:
        out = gpt.chat.completions.create(
            model="gpt-x", messages=[_wire(m) for m in state["messages"]]
        )
        message = out.choices[0].message
        calls = [
            {"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id}
            for c in message.tool_calls or []
        ]
        return {"messages": [AIMessage(content=message.content or "", tool_calls=calls)]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=InMemorySaver())
    out = app.invoke(
        {"messages": [("user", "Tell Ana")]},
        {"configurable": {"thread_id": "ana"}},
        durability="sync",
    )
    return str(out["messages"][-1].content)


def test_langgraph_replay_fork_and_resume_no_second_email(tmp_path: Path) -> None:
    """The graph's model node is answered from the record, its ToolNode by the checkpoint:
    replay sends no request; a fork at the second model call sends one; a resume none."""
    db = tmp_path / "graph.db"
    outbox: list[str] = []
    with toolledger.run("tell ana", db=db, run_id="r1") as run:
        assert graph(run, Wire(tool_then_answer), outbox) == "done"
    offline = Wire(tool_then_answer, failing=True)
    with toolledger.run("tell ana", db=db, replay_of=run.run_id) as again:
        assert graph(again, offline, outbox) == "done"
    assert outbox == ["a@b.c"]
    assert offline.requests == 0
    report = again.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls) == (2, 1)
    second = [e for e in toolledger.load_run(db, "r1").events if e.kind == "llm_call"][1]
    live = Wire(tool_then_answer)
    with toolledger.run("tell ana", db=db, replay_of="r1", fork_at=second.event_id) as forked:
        assert graph(forked, live, outbox) == "done"
    report = forked.replay_report
    assert report is not None
    assert (report.served_model_calls, report.live_from, live.requests) == (
        1,
        second.event_id,
        1,
    )
    resumed_wire = Wire(tool_then_answer)
    with toolledger.run("tell ana", db=db, run_id="r1") as resumed:
        assert graph(resumed, resumed_wire, outbox) == "done"
    assert resumed_wire.requests == 0
    assert outbox == ["a@b.c"]
