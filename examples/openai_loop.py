"""A two-turn OpenAI (Chat Completions) agent loop that survives a failed post and a restart.

Offline: the real ``openai`` client talks to a scripted ``MockTransport``. Turn 1: the
model calls ``refund_order``; the tool runs (once). Posting the tool result fails and the
process dies. A new process loads the transcript, runs the same tool calls again (the
stored result is replayed; nothing is refunded twice) and posts the same bytes.

Run it:  python examples/openai_loop.py [--workdir DIR]
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
from toolledger.integrations import openai as tl_openai

MODEL = "gpt-4.1"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "refund_order",
            "description": "Refund an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "cents": {"type": "integer"}},
                "required": ["order_id", "cents"],
            },
        },
    }
]


def _completion(cid: str, message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


TOOL_TURN = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_refund_0001",
            "type": "function",
            "function": {
                "name": "refund_order",
                "arguments": json.dumps(
                    {
                        "order_id": "A-1001",
                        "cents": 1999,
                        "justification": "The item arrived broken; policy allows a refund.",
                    }
                ),
            },
        }
    ],
}


def scripted_model(workdir: Path, phase: str) -> Any:
    """The fake API: turn 1 asks for a tool; the results post fails in phase 'first'."""
    import httpx2
    import openai

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["messages"][-1]["role"] != "tool":
            return httpx2.Response(200, json=_completion("cc_1", TOOL_TURN, "tool_calls"))
        n = len(list(workdir.glob("results-post-*.json")))
        (workdir / f"results-post-{n + 1}.json").write_bytes(request.content)
        if phase == "first":
            raise httpx2.ConnectError("connection reset while posting tool results")
        answer = {"role": "assistant", "content": "Refunded $19.99 for order A-1001."}
        return httpx2.Response(200, json=_completion("cc_2", answer, "stop"))

    return openai.OpenAI(
        api_key="offline",
        base_url="http://scripted.invalid/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(handler)),
    )


def refund_tool(workdir: Path) -> toolledger.Tool:
    ledger = workdir / "refunds.log"

    def execute(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
        refund_id = f"rf-{ctx.call_id}"
        ctx.operation.write({"refund_id": refund_id})  # just before the effect
        with ledger.open("a") as f:
            f.write(f"{refund_id} {input['order_id']} {input['cents']}\n")
        return {"refund_id": refund_id, "cents": input["cents"]}

    return toolledger.tool("refund_order", revision="2", execute=execute)


def phase(workdir: Path, name: str) -> int:
    client = scripted_model(workdir, name)
    transcript = workdir / "transcript.json"
    tools = [refund_tool(workdir)]
    db = workdir / "ledger.db"
    with toolledger.run("Handle a refund request", agent="support-bot", db=db) as run:
        if name == "first":
            messages: list[Any] = [{"role": "user", "content": "My order A-1001 arrived broken."}]
            response = client.chat.completions.create(
                model=MODEL, messages=messages, tools=tl_openai.with_justification(TOOLS)
            )
            assistant = response.choices[0].message.model_dump(mode="json", exclude_none=True)
            messages.append(assistant)
            transcript.write_text(json.dumps(messages))  # the app persists its transcript
        else:
            messages = json.loads(transcript.read_text())
            assistant = messages[-1]  # the turn whose results were never delivered
        results = tl_openai.run_tool_calls(run, assistant, tools)
        request = [*messages, *results]

        def post(_payloads: dict[str, Any]) -> Any:
            return client.chat.completions.create(
                model=MODEL, messages=request, tools=tl_openai.with_justification(TOOLS)
            )

        try:
            final = tl_openai.deliver_results(run, assistant, post)
        except Exception as exc:  # the network dropped: the process gives up here
            print(f"posting the tool results failed: {type(exc).__name__}", file=sys.stderr)
            return 3
        print(json.dumps({"answer": final.choices[0].message.content}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--phase", choices=["first", "second"])
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="toolledger-openai-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.phase:
        return phase(workdir, args.phase)
    codes, answer = [], None
    for name in ("first", "second"):
        proc = subprocess.run(
            [sys.executable, __file__, "--workdir", str(workdir), "--phase", name],
            env=dict(os.environ),
            capture_output=True,
            text=True,
            check=False,
        )
        codes.append(proc.returncode)
        if name == "second" and proc.returncode == 0:
            answer = json.loads(proc.stdout.strip().splitlines()[-1])["answer"]
    posts = sorted(workdir.glob("results-post-*.json"))
    refunds = (workdir / "refunds.log").read_text().splitlines()
    same = len(posts) == 2 and posts[0].read_bytes() == posts[1].read_bytes()
    summary = {
        "exit_codes": codes,
        "refunds_made": len(refunds),
        "result_posts": len(posts),
        "same_bytes_posted_again": same,
        "answer": answer,
        "workdir": str(workdir),
    }
    print(json.dumps(summary, indent=2))
    return 0 if codes == [3, 0] and len(refunds) == 1 and same else 1


if __name__ == "__main__":
    sys.exit(main())
