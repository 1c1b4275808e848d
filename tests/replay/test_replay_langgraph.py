"""LangGraph: a model node that calls a journaled provider client, tools in a guarded
``ToolNode``; the graph replays from the record with no request and no second email."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations.openai import journaled

openai = pytest.importorskip("openai")
pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

from toolledger.integrations.langgraph import guard_tool_calls  # noqa: E402

from ..integrations._llm_wire import httpx2  # noqa: E402
from .test_replay_frameworks import _completion  # noqa: E402


class Model:
    """Asks for ``send_email`` once, then answers; ``failing`` refuses every request."""

    def __init__(self, *, failing: bool = False) -> None:
        self.requests = 0
        self.failing = failing

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if self.failing:
            raise AssertionError("a replay reached the network")
        if json.loads(request.content)["messages"][-1]["role"] == "tool":
            return httpx2.Response(
                200, json=_completion({"role": "assistant", "content": "Sent."}, "stop")
            )
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "send_email", "arguments": '{"to": "ana@example.com"}'},
        }
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return httpx2.Response(200, json=_completion(message, "tool_calls"))


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


def graph(run: toolledger.Run, wire: Model, outbox: list[str]) -> str:
    gpt = journaled(
        openai.OpenAI(
            api_key="k",
            base_url="http://test/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(wire.handle)),
        ),
        run,
    )

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


def test_langgraph_replay_no_request_no_second_email(tmp_path: Path) -> None:
    """The graph's model node is answered from the record, its ToolNode by the checkpoint."""
    db = tmp_path / "graph.db"
    outbox: list[str] = []
    with toolledger.run("tell ana", db=db) as run:
        assert graph(run, Model(), outbox) == "Sent."
    offline = Model(failing=True)
    with toolledger.run("tell ana", db=db, replay_of=run.run_id) as again:
        assert graph(again, offline, outbox) == "Sent."
    assert outbox == ["ana@example.com"]
    assert offline.requests == 0
    report = again.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls) == (2, 1)
