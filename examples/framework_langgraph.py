"""LangGraph tool calls, guarded: resuming a thread from its checkpoint sends one email.

Offline: a two-node graph (a scripted model node, a ``ToolNode``) on ``SqliteSaver``. The
thread is interrupted before its tools run, then resumed twice from that checkpoint (a
retry after a crash does the same): without the guard the tool runs twice; with
``wrap_tool_call=guard_tool_calls(run)`` once, and the second resume gets the stored
message. ``durability="sync"`` keeps the model's tool calls across a crash (the default
``"async"`` can lose them, and toolledger warns).

Run it:  python examples/framework_langgraph.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import toolledger
from toolledger.integrations.langgraph import guard_tool_calls

outbox: list[str] = []


@tool
def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


def model(state: MessagesState) -> dict[str, Any]:
    if state["messages"][-1].type == "tool":
        return {"messages": [AIMessage(content="Sent.")]}
    call = {
        "name": "send_email",
        "args": {"to": "ana@example.com"},
        "id": "call_01",
        "type": "tool_call",
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def resume_twice(tools_node: ToolNode, checkpoints: Path) -> None:
    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", tools_node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    config = {"configurable": {"thread_id": "ana"}}
    with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
        app = g.compile(checkpointer=saver, interrupt_before=["tools"])
        app.invoke({"messages": [("user", "Tell Ana")]}, config, durability="sync")
        before_tools = app.get_state(config).config
        for _ in range(2):
            out = app.invoke(None, before_tools, durability="sync")
            print(
                "tool message:", [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
            )


def main() -> None:
    work = Path(tempfile.mkdtemp())
    resume_twice(ToolNode([send_email]), work / "stock.db")
    print(f"stock ToolNode, resumed twice: {len(outbox)} emails")
    stock = len(outbox)
    outbox.clear()
    with toolledger.run("Tell Ana her order shipped", db=str(work / "ledger.db")) as run:
        resume_twice(
            ToolNode([send_email], wrap_tool_call=guard_tool_calls(run)), work / "guarded.db"
        )
    print(f"guarded ToolNode, resumed twice: {len(outbox)} email")
    assert (stock, len(outbox)) == (2, 1)


if __name__ == "__main__":
    main()
