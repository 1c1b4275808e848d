"""A two-turn Anthropic agent loop that survives a failed result post and a restart.

Offline: the real ``anthropic`` client talks to a scripted ``MockTransport``. Turn 1: the
model asks to send an email; the tool runs (once). Posting the tool result fails (the
network drops), and the process dies. A new process loads the transcript, runs the same
tool calls again (the stored result is replayed; nothing is sent twice) and posts the same
bytes; the model answers.

Run it:  python examples/anthropic_loop.py [--workdir DIR]
(it runs each phase in its own process and prints a JSON summary).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import toolledger
from toolledger.integrations import anthropic as tl_anthropic

MODEL = "claude-sonnet-4-5"
TOOLS = [
    {
        "name": "send_email",
        "description": "Send an email.",
        "input_schema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
    }
]


def scripted_model(workdir: Path, phase: str) -> Any:
    """The fake API: turn 1 asks for a tool; the results post fails in phase 'first'."""
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        last = body["messages"][-1]
        carries_results = isinstance(last["content"], list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        )
        if not carries_results:
            return httpx2.Response(
                200, json=_message("msg_1", [_text("I'll send it."), _tool_use()])
            )
        n = len(list(workdir.glob("results-post-*.json")))
        (workdir / f"results-post-{n + 1}.json").write_bytes(request.content)
        if phase == "first":
            raise httpx2.ConnectError("connection reset while posting tool results")
        return httpx2.Response(200, json=_message("msg_2", [_text("Done: the email was sent.")]))

    import anthropic

    return anthropic.Anthropic(
        api_key="offline",
        base_url="http://scripted.invalid",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(transport=httpx2.MockTransport(handler)),
    )


def _message(msg_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool_use() -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": "toolu_01A09q90qw90lq917835lq9",
        "name": "send_email",
        "input": {
            "to": "ana@example.com",
            "subject": "Your order shipped",
            "justification": "The user asked to be told when the order ships.",
        },
    }


def send_email_tool(workdir: Path) -> toolledger.Tool:
    outbox = workdir / "outbox.log"

    @toolledger.tool(revision="1")
    def send_email(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
        """Send an email (appends to an outbox file: the irreversible effect)."""
        message_id = f"msg-{ctx.call_id}"
        ctx.operation.write({"message_id": message_id})  # just before the effect
        with outbox.open("a") as f:
            f.write(f"{message_id} {input['to']} {input['subject']}\n")
        return {"message_id": message_id, "status": "sent"}

    return send_email


def phase(workdir: Path, name: str) -> int:
    client = scripted_model(workdir, name)
    transcript = workdir / "transcript.json"
    tools = [send_email_tool(workdir)]
    with toolledger.run(
        "Tell the user their order shipped", agent="mail-bot", db=workdir / "ledger.db"
    ) as run:
        if name == "first":
            messages: list[Any] = [{"role": "user", "content": "Email me when my order ships."}]
            response = client.messages.create(
                model=MODEL,
                max_tokens=512,
                messages=messages,
                tools=tl_anthropic.with_justification(TOOLS),
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        b.model_dump(mode="json", exclude_none=True) for b in response.content
                    ],
                }
            )
            transcript.write_text(json.dumps(messages))  # the app persists its transcript
        else:
            messages = json.loads(transcript.read_text())
            response = messages[-1]  # the assistant turn whose results were never delivered
        results = tl_anthropic.run_tool_calls(run, response, tools)
        request = [*messages, {"role": "user", "content": results}]

        def post(_payloads: dict[str, Any]) -> Any:
            return client.messages.create(
                model=MODEL,
                max_tokens=512,
                messages=request,
                tools=tl_anthropic.with_justification(TOOLS),
            )

        try:
            final = tl_anthropic.deliver_results(run, response, post)
        except Exception as exc:  # the network dropped: the process gives up here
            print(f"posting the tool results failed: {type(exc).__name__}", file=sys.stderr)
            return 3
        print(json.dumps({"answer": final.content[0].text}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--phase", choices=["first", "second"])
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="toolledger-anthropic-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.phase:
        return phase(workdir, args.phase)
    env = {**os.environ}
    codes = []
    answer = None
    for name in ("first", "second"):
        proc = subprocess.run(
            [sys.executable, __file__, "--workdir", str(workdir), "--phase", name],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        codes.append(proc.returncode)
        if name == "second":
            answer = (
                json.loads(proc.stdout.strip().splitlines()[-1])["answer"]
                if proc.returncode == 0
                else None
            )
    posts = sorted(workdir.glob("results-post-*.json"))
    outbox = (workdir / "outbox.log").read_text().splitlines()
    summary = {
        "exit_codes": codes,
        "emails_sent": len(outbox),
        "result_posts": len(posts),
        "same_bytes_posted_again": len(posts) == 2
        and posts[0].read_bytes() == posts[1].read_bytes(),
        "answer": answer,
        "workdir": str(workdir),
    }
    print(json.dumps(summary, indent=2))
    ok = codes == [3, 0] and summary["emails_sent"] == 1 and summary["same_bytes_posted_again"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
