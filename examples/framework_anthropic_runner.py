"""The Anthropic SDK's own tool runner, guarded: the same tool call never runs twice.

Offline: a real ``anthropic`` client talks to a scripted ``httpx2.MockTransport`` whose
model asks once to send an email (tool-use id ``toolu_01``), then ends its turn. The
conversation is run twice, as a restart with the saved transcript would: the stock runner
sends two emails, ``guarded_tool_runner`` one (the second time the stored result is sent).

Run it:  python examples/framework_anthropic_runner.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from anthropic import beta_tool

import toolledger
from toolledger.integrations.anthropic import guarded_tool_runner

MODEL = "claude-sonnet-4-5"


def fake_messages(request: httpx2.Request) -> httpx2.Response:
    """The model: one ``send_email`` call, then ``end_turn`` once it has the result."""
    body = json.loads(request.content)
    done = isinstance(body["messages"][-1]["content"], list)
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": "Sent."}]
        if done
        else [
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "send_email",
                "input": {"to": "ana@example.com"},
            }
        ]
    )
    return httpx2.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": "end_turn" if done else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )


def client() -> anthropic.Anthropic:
    transport = httpx2.MockTransport(fake_messages)
    return anthropic.Anthropic(
        api_key="offline", http_client=anthropic.DefaultHttpxClient(transport=transport)
    )


outbox: list[str] = []


@beta_tool
def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


PARAMS: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "Tell Ana her order shipped."}],
}


def main() -> None:
    for _ in range(2):
        client().beta.messages.tool_runner(tools=[send_email], **PARAMS).until_done()
    print(f"stock runner, the conversation run twice: {len(outbox)} emails")
    stock = len(outbox)
    outbox.clear()
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    with toolledger.run("Tell Ana her order shipped", db=str(db)) as run:
        for _ in range(2):
            final = guarded_tool_runner(run, client(), tools=[send_email], **PARAMS).until_done()
            print("model:", final.content[0].text)
    print(f"guarded runner, the conversation run twice: {len(outbox)} email")
    assert (stock, len(outbox)) == (2, 1)


if __name__ == "__main__":
    main()
