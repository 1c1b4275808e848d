"""Replay a Pydantic AI agent and an OpenAI Agents SDK agent from their records, offline.

Each framework's model takes a provider client: give it ``journaled(AsyncOpenAI(...), run)``
and its tools through toolledger's adapter (``GuardedToolset`` / ``guarded_tools``). The
scripted API (a ``MockTransport``) asks for ``send_email`` once, then answers. Each agent
is recorded, then replayed with a transport that refuses every request: the same answer,
no request, no second email.

Run it:  python examples/replay_frameworks.py   (prints one JSON summary)
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from _scripted import ScriptedAPI
from openai import AsyncOpenAI

import toolledger
from toolledger.integrations.openai import journaled

OUTBOX: list[str] = []


def send_email(to: str) -> str:
    """Send one email."""
    OUTBOX.append(to)
    return f"sent to {to}"


class API(ScriptedAPI):
    """The scripted OpenAI API."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        done = any(m["role"] == "tool" for m in body["messages"])
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "send_email", "arguments": '{"to": "ana@example.com"}'},
        }
        message = (
            {"role": "assistant", "content": "Sent."}
            if done
            else {"role": "assistant", "content": "", "tool_calls": [call]}
        )
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {"index": 0, "finish_reason": "stop" if done else "tool_calls", "message": message}
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        }

    def client(self, run: toolledger.Run) -> Any:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return journaled(AsyncOpenAI(api_key="k", max_retries=0, http_client=http), run)


def pydantic_ai(run: toolledger.Run, api: API) -> str:
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from toolledger.integrations.pydantic_ai import GuardedToolset

    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=api.client(run)))
    tools = GuardedToolset(FunctionToolset([send_email]), run=run)
    return str(asyncio.run(Agent(model, toolsets=[tools]).run("Tell Ana")).output)


def openai_agents(run: toolledger.Run, api: API) -> str:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    from toolledger.integrations.openai_agents import guarded_tools

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel("gpt-4o", openai_client=api.client(run))
    agent = Agent(name="mailer", model=model, tools=guarded_tools(run, [function_tool(send_email)]))
    # asyncio.run(...) rather than the SDKs' run_sync, which leave the thread's default
    # event loop open (the Agents SDK's with its async generators shut down, so a second
    # run_sync on it warns).
    return str(asyncio.run(Runner.run(agent, "Tell Ana")).final_output)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="toolledger-replay-"))
    agents: dict[str, Callable[[toolledger.Run, API], str]] = {
        "pydantic_ai": pydantic_ai,
        "openai_agents": openai_agents,
    }
    summary = {}
    for name, agent in agents.items():
        OUTBOX.clear()
        db = work / f"{name}.db"  # each agent's own ledger (both use the call id call_1)
        with toolledger.run(f"tell ana ({name})", db=db) as recorded:
            answer = agent(recorded, API())
        offline = API(offline=True)
        with toolledger.run(f"tell ana ({name})", db=db, replay_of=recorded.run_id) as again:
            replayed = agent(again, offline)
        report = again.replay_report
        assert report is not None
        summary[name] = {
            "answer": answer,
            "replayed_answer": replayed,
            "requests_in_replay": offline.requests,
            "emails": len(OUTBOX),
            "served_model_calls": report.served_model_calls,
            "served_tool_calls": report.served_tool_calls,
        }
        assert (answer, replayed, offline.requests, len(OUTBOX)) == ("Sent.", "Sent.", 0, 1)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
