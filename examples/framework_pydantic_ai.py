"""Pydantic AI tools, guarded: a pending tool call resumed twice sends one email.

Offline: ``FunctionModel`` plays the model (it asks for ``send_email`` with call id
``call_01``). The history ending with that call (what an application saves before its
tools run) is resumed twice: the stock toolset runs the tool twice,
``GuardedToolset(toolset, run=run)`` once, and both resumes show the model the same result.

Run it:  python examples/framework_pydantic_ai.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import toolledger
from toolledger.integrations.pydantic_ai import GuardedToolset

outbox: list[str] = []


def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"Done: {returns[-1].content}")])
    return ModelResponse(parts=[ToolCallPart("send_email", {"to": "ana@example.com"}, "call_01")])


PENDING = [
    ModelRequest.user_text_prompt("Tell Ana her order shipped."),
    ModelResponse(parts=[ToolCallPart("send_email", {"to": "ana@example.com"}, "call_01")]),
]


def resume_twice(toolset: Any) -> None:
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    for _ in range(2):
        print("agent:", agent.run_sync(None, message_history=PENDING).output)


def main() -> None:
    resume_twice(FunctionToolset([send_email]))
    print(f"stock toolset, resumed twice: {len(outbox)} emails")
    stock = len(outbox)
    outbox.clear()
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    with toolledger.run("Tell Ana her order shipped", db=str(db)) as run:
        resume_twice(GuardedToolset(FunctionToolset([send_email]), run=run))
    print(f"guarded toolset, resumed twice: {len(outbox)} email")
    assert (stock, len(outbox)) == (2, 1)


if __name__ == "__main__":
    main()
