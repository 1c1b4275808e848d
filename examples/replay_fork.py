"""Record an agent loop, replay it offline, try a changed prompt, fork it from its second turn.

Offline: the real ``anthropic`` client talks to a scripted ``MockTransport``. The loop:
turn 1 asks for ``send_email`` (guarded: it runs once), turn 2 answers after the result.

1. Record it (2 requests, 1 email).
2. Replay it with a transport that refuses every request: the same answer, 0 requests,
   0 emails; ``run.replay_report`` says what was served.
3. Replay it with a changed prompt: ``ReplayDivergedError`` names the message, nothing sent.
4. Fork it at turn 2: turn 1 from the record, turn 2 live, the email not sent again.

Run it:  python examples/replay_fork.py   (prints one JSON summary)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from _scripted import ScriptedAPI
from anthropic import Anthropic

import toolledger
from toolledger.integrations.anthropic import journaled

DB = Path(tempfile.mkdtemp(prefix="toolledger-replay-")) / "replay-example.db"


def _message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 12, "output_tokens": 8},
    }


class Model(ScriptedAPI):
    """The scripted API: turn 1 asks for ``send_email``, turn 2 answers."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if isinstance(last["content"], list):  # the tool result: answer
            return _message([{"type": "text", "text": "Sent."}], "end_turn")
        use = {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "send_email",
            "input": {"to": "ana@example.com"},
        }
        return _message([use], "tool_use")

    def client(self) -> Anthropic:
        transport = httpx2.MockTransport(self.handle)
        return Anthropic(api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport))


SENT: list[Any] = []
SEND = toolledger.tool(
    "send_email", revision="1", execute=lambda i, ctx: SENT.append(i) or {"queued": True}
)


def agent(run: toolledger.Run, model: Model, prompt: str) -> str:
    claude = journaled(model.client(), run)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    first = claude.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages)
    use = next(b for b in first.content if b.type == "tool_use")
    outcome = run.call(SEND, call_id=use.id, input=use.input)
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": json.dumps(outcome.payload),
                }
            ],
        },
    ]
    second = claude.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages)
    return str(second.content[0].text)


def main() -> None:
    prompt = "Email Ana that the report is ready."
    live = Model()
    with toolledger.run("notify ana", db=DB) as recorded:
        answer = agent(recorded, live, prompt)

    offline = Model(offline=True)
    with toolledger.run("notify ana", db=DB, replay_of=recorded.run_id) as replayed:
        replayed_answer = agent(replayed, offline, prompt)
    report = replayed.replay_report
    assert report is not None

    try:
        with toolledger.run("notify ana", db=DB, replay_of=recorded.run_id) as changed:
            agent(changed, Model(offline=True), "Email Bob instead.")
        diverged = None
    except toolledger.ReplayDivergedError as exc:
        diverged = {"index": exc.divergence.index, "field": exc.divergence.field}

    turn2 = [e for e in toolledger.load_run(DB, recorded.run_id).events if e.kind == "llm_call"][1]
    forked_model = Model()
    with toolledger.run(
        "notify ana", db=DB, replay_of=recorded.run_id, fork_at=turn2.event_id
    ) as forked:
        forked_answer = agent(forked, forked_model, prompt)

    summary = {
        "answer": answer,
        "replay": {"answer": replayed_answer, "requests": offline.requests, **report.as_dict()},
        "changed_prompt": diverged,
        "fork": {"answer": forked_answer, "requests": forked_model.requests},
        "emails_sent": len(SENT),
    }
    print(json.dumps(summary, indent=2))
    assert replayed_answer == answer == forked_answer
    assert (offline.requests, forked_model.requests, len(SENT)) == (0, 1, 1)
    assert diverged == {"index": 0, "field": "messages[0]"}


if __name__ == "__main__":
    main()
