"""Claude Agent SDK tools, guarded: a session resumed twice sends one email.

Offline: the SDK's real ``query`` talks to a stand-in for the ``claude`` CLI
(``_fake_claude_cli.FakeCLI``, an SDK ``Transport`` that speaks the CLI's control protocol
with a scripted model). The model asks for the in-process MCP tool ``send_email`` with
``tool_use_id`` ``toolu_01``; the session is saved before its tools run, and resumed twice
from there. The stock server runs the tool on each resume; the guarded one
(``ToolledgerHooks``: ``server(...)`` plus ``hooks()``) once, and both resumes show the
model the same result.

Run it:  python examples/framework_claude_agent_sdk.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from _fake_claude_cli import FakeCLI, tool_results
from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, query, tool

import toolledger
from toolledger.integrations.claude_agent_sdk import ToolledgerHooks

outbox: list[str] = []


@tool("send_email", "Send one email.", {"to": str})
async def send_email(args: dict[str, Any]) -> dict[str, Any]:
    outbox.append(args["to"])  # the irreversible effect
    return {"content": [{"type": "text", "text": f"sent to {args['to']}"}]}


def model(history: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return []  # the saved session already holds the model's tool call


SAVED = [
    {"role": "user", "content": "Tell Ana her order shipped."},
    {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "mcp__mail__send_email",
                "input": {"to": "ana@example.com"},
            }
        ],
    },
]


def resume_twice(options: ClaudeAgentOptions, folder: Path) -> None:
    async def resume() -> None:
        session = folder / "session.json"
        session.write_text(json.dumps(SAVED))  # the session as saved before its tools ran
        cli = FakeCLI(model, transcript=session)
        async for _ in query(prompt="continue", options=options, transport=cli):
            pass
        print("model saw:", tool_results(cli.history)["toolu_01"][0])

    for _ in range(2):
        asyncio.run(resume())


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    stock = create_sdk_mcp_server("mail", tools=[send_email])
    resume_twice(ClaudeAgentOptions(mcp_servers={"mail": stock}), folder)
    print(f"stock server, resumed twice: {len(outbox)} emails")
    stock_count = len(outbox)
    outbox.clear()
    with toolledger.run("Tell Ana her order shipped", db=str(folder / "ledger.db")):
        guard = ToolledgerHooks()
        options = ClaudeAgentOptions(
            mcp_servers={"mail": guard.server("mail", [send_email])}, hooks=guard.hooks()
        )
        resume_twice(options, folder)
    print(f"guarded server, resumed twice: {len(outbox)} email")
    assert (stock_count, len(outbox)) == (2, 1)


if __name__ == "__main__":
    main()
