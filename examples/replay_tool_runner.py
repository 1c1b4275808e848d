"""Replay and fork Anthropic's tool runner from its record, offline.

Give the runner a journaled client: ``guarded_tool_runner(run, journaled(client, run),
tools=[...], ...)`` (or ``journaled(client, run).beta.messages.tool_runner(...)`` with your
own guarded tools). Its turns then go through the journaled ``beta.messages``, so they are
recorded with their content and a replay answers them from the record; its tool calls go
through the guard. The scripted API (a ``MockTransport``) asks for ``send_email`` once,
then answers. The run is recorded, replayed with a transport that refuses every request
(the same answer, no request, no second email), and forked at its second turn (one
request, the email still sent once).

Run it:  python examples/replay_tool_runner.py   (prints one JSON summary)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from _scripted import ScriptedAPI
from anthropic import beta_tool

import toolledger
from toolledger.integrations.anthropic import guarded_tool_runner, journaled

OUTBOX: list[str] = []


@beta_tool
def send_email(to: str) -> str:
    """Send one email."""
    OUTBOX.append(to)
    return f"sent to {to}"


class API(ScriptedAPI):
    """The scripted Anthropic API."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        done = isinstance(last, list) and any(b["type"] == "tool_result" for b in last)
        use = {"type": "tool_use", "id": "toolu_1", "name": "send_email"}
        content = (
            [{"type": "text", "text": "Sent."}]
            if done
            else [{**use, "input": {"to": "ana@example.com"}}]
        )
        return {
            "id": f"msg_{self.requests}",
            "type": "message",
            "role": "assistant",
            "model": "claude-x-1",
            "content": content,
            "stop_reason": "end_turn" if done else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 5},
        }

    def client(self, run: toolledger.Run) -> Any:
        transport = httpx2.MockTransport(self.handle)
        raw = anthropic.Anthropic(
            api_key="offline", max_retries=0, http_client=httpx2.Client(transport=transport)
        )
        return journaled(raw, run)


def agent(run: toolledger.Run, api: API) -> str:
    runner = guarded_tool_runner(
        run,
        api.client(run),
        tools=[send_email],
        model="claude-x-1",
        max_tokens=256,
        messages=[{"role": "user", "content": "Tell Ana her order shipped."}],
    )
    return str(runner.until_done().content[0].text)


def main() -> None:
    db = Path(tempfile.mkdtemp(prefix="toolledger-runner-")) / "ledger.db"
    with toolledger.run("tell ana", db=db) as recorded:
        answer = agent(recorded, API())
    offline = API(offline=True)
    with toolledger.run("tell ana", db=db, replay_of=recorded.run_id) as again:
        replayed = agent(again, offline)
    turns = [e for e in toolledger.load_run(db, recorded.run_id).events if e.kind == "llm_call"]
    live = API()
    with toolledger.run(
        "tell ana", db=db, replay_of=recorded.run_id, fork_at=turns[1].event_id
    ) as forked:
        forked_answer = agent(forked, live)
    report = again.replay_report
    assert report is not None
    summary = {
        "answer": answer,
        "replayed_answer": replayed,
        "requests_in_replay": offline.requests,
        "served_model_calls": report.served_model_calls,
        "served_tool_calls": report.served_tool_calls,
        "forked_answer": forked_answer,
        "requests_in_fork": live.requests,
        "emails": len(OUTBOX),
    }
    assert (answer, replayed, forked_answer) == ("Sent.", "Sent.", "Sent.")
    assert (offline.requests, live.requests, len(OUTBOX)) == (0, 1, 1)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
