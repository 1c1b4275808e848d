"""OpenAI Agents SDK tools, guarded: resuming a saved run twice sends one email.

Offline: ``agents.testing.ScriptedModel`` plays the model (it asks for ``send_email`` with
call id ``call_01``); the tool needs approval, so the run stops with an interruption, is
approved and saved (``RunState.to_string``). The saved state is then resumed twice, as two
workers picking up the same job would: the stock tool runs twice, the guarded one once,
and the approval is recorded in the ledger as the call's decision.

Run it:  python examples/framework_openai_agents.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, function_tool, set_trace_processors
from agents.testing import ScriptedModel, assistant_message, function_call

import toolledger
from toolledger.integrations.openai_agents import guarded_tools

set_trace_processors([])  # keep the SDK's traces in this process
outbox: list[str] = []


@function_tool(needs_approval=True)
def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


async def approve_save_and_resume_twice(tools: list[Any]) -> None:
    model = ScriptedModel(
        [[function_call("send_email", {"to": "ana@example.com"}, call_id="call_01")]]
    )
    first = await Runner.run(Agent(name="mailer", model=model, tools=tools), "Tell Ana")
    state = first.to_state()
    state.approve(first.interruptions[0])
    saved = state.to_string()
    for _ in range(2):
        agent = Agent(
            name="mailer", model=ScriptedModel([[assistant_message("Sent.")]]), tools=tools
        )
        result = await Runner.run(agent, await RunState.from_string(agent, saved))
        print("agent:", result.final_output)


def main() -> None:
    asyncio.run(approve_save_and_resume_twice([send_email]))
    print(f"stock tool, the saved run resumed twice: {len(outbox)} emails")
    stock = len(outbox)
    outbox.clear()
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    with toolledger.run("Tell Ana her order shipped", db=str(db)) as run:
        asyncio.run(approve_save_and_resume_twice(guarded_tools(run, [send_email])))
        decision = toolledger.approvals.get_approval(run.store, run.namespace, "call_01")
    print(f"guarded tool, the saved run resumed twice: {len(outbox)} email")
    print(f"the call's decision in the ledger: {decision.status} by {decision.by}")
    assert (stock, len(outbox)) == (2, 1)


if __name__ == "__main__":
    main()
