"""A hand-written agent loop over the real Anthropic or OpenAI SDK, for the crash matrix.

Usage: ``_handloop_child.py PROVIDER WORKDIR MODE SCENARIO``

- PROVIDER: ``anthropic`` (Messages API) or ``openai`` (Chat Completions).
- MODE: ``first`` (a new conversation; SIGKILLed at the scenario's point), ``resume`` (the
  same run id and conversation, the saved transcript: the tool calls of its last
  assistant turn are run again, as ``examples/anthropic_loop.py`` does), ``repair`` (the
  same, but the orphaned calls get their results from ``repair_transcript`` and the
  repaired transcript is sent to the model) or ``replan`` (the saved transcript is lost:
  the same conversation, a new run, and the model is asked again).
- SCENARIO: ``after-effect`` (one payment; killed inside the tool right after its effect),
  ``at-post`` (one payment; killed when the next model request carries its result) or
  ``parallel`` (three different payments in one turn; killed inside the first, right after
  its effect).

The loop is the documented one (docs/integrations.md, docs/guard.md): a journaled client,
``with_justification`` schemas, ``run_tool_calls`` for each assistant turn and
``deliver_results`` for the request that carries the results; the transcript is saved
after every model response. The model is scripted offline (a ``MockTransport``) and acts
like a real one that retries: a tool result that does not read as a success is asked for
once more, under a new call id; the model is stateless (it reads only the conversation).
The tool writes its operation journal just before the effect and appends one line per
effect to ``effects.log``. Every request the model gets is appended to ``requests.jsonl``
(the tool results it carries, as ``[call_id, text]`` pairs). The last stdout line is
``{"answer": ...}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import toolledger

try:
    import httpx2
except ImportError:  # SDK releases before the httpx2 switch
    import httpx as httpx2  # type: ignore[no-redef]

MODELS = {"anthropic": "claude-x-1-20260101", "openai": "gpt-x-2026"}
CONVERSATION = "conv-1"
PROMPT = "Pay my open invoices."
#: The scenario's payments, in the order the model asks for them (one turn).
PAYMENTS = {
    "after-effect": [{"to": "ana", "cents": 500}],
    "at-post": [{"to": "ana", "cents": 500}],
    "parallel": [
        {"to": "ana", "cents": 500},
        {"to": "bob", "cents": 700},
        {"to": "cy", "cents": 900},
    ],
}
SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "maxLength": 64, "description": "Payee."},
        "cents": {"type": "integer", "description": "Amount in cents."},
    },
    "required": ["to", "cents"],
    "additionalProperties": False,
}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def pay_tool(workdir: Path, kill: bool) -> toolledger.Tool:
    """The payment tool, written as docs/guard.md shows (journal entry before the effect)."""
    effects = workdir / "effects.log"

    @toolledger.tool(revision="1")
    def pay(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
        """Pay an invoice."""
        payment_id = f"pay-{ctx.call_id}"
        ctx.operation.write({"payment_id": payment_id})  # just before the effect
        with effects.open("a") as f:
            f.write(f"{input['to']} {input['cents']}\n")
        if kill and input["to"] == "ana":
            _die()  # right after the effect: the result is never stored
        return {"payment_id": payment_id, "to": input["to"], "cents": input["cents"]}

    return pay


# -- the scripted model: a provider-neutral conversation reader ---------------------------


def _succeeded(text: str) -> bool:
    """A result reads as a success only when it is the tool's payment record."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "payment_id" in value


def _strip(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != "justification"}


def read_anthropic(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``({call_id: input}, [(call_id, text) of the last message's results])``."""
    uses: dict[str, Any] = {}
    for msg in body["messages"]:
        if msg["role"] == "assistant" and isinstance(msg["content"], list):
            for b in msg["content"]:
                if b["type"] == "tool_use":
                    uses[b["id"]] = _strip(b["input"])
    last = body["messages"][-1]["content"]
    results = []
    for b in last if isinstance(last, list) else []:
        if b["type"] == "tool_result":
            text = b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
            results.append((b["tool_use_id"], text))
    return uses, results


def read_openai(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    uses: dict[str, Any] = {}
    for msg in body["messages"]:
        for c in msg.get("tool_calls") or []:
            uses[c["id"]] = _strip(json.loads(c["function"]["arguments"]))
    results: list[tuple[str, str]] = []
    for msg in reversed(body["messages"]):
        if msg["role"] != "tool":
            break
        results.insert(0, (msg["tool_call_id"], msg["content"]))
    return uses, results


def decide(uses: dict[str, Any], results: list[tuple[str, str]], scenario: str) -> list[Any]:
    """The inputs of the tool calls the model asks for next (``[]``: the turn ends)."""
    if not results:
        return list(PAYMENTS[scenario])
    asked = list(uses.values())
    retry = []
    for call_id, text in results:
        action = uses[call_id]
        if not _succeeded(text) and asked.count(action) < 2:
            retry.append(action)  # it reads as a failure: ask once more, under a new id
    return retry


def anthropic_answer(model: str, n: int, calls: list[Any]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "Paying." if calls else "Done."}]
    for i, args in enumerate(calls):
        why = "The user asked to pay the open invoices."
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_r{n}_{i}",
                "name": "pay",
                "input": {**args, "justification": why},
            }
        )
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def openai_answer(model: str, n: int, calls: list[Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else "Done."}
    if calls:
        why = "The user asked to pay the open invoices."
        message["tool_calls"] = [
            {
                "id": f"call_r{n}_{i}",
                "type": "function",
                "function": {"name": "pay", "arguments": json.dumps({**a, "justification": why})},
            }
            for i, a in enumerate(calls)
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }


def scripted_client(provider: str, workdir: Path, scenario: str, kill_at_post: bool) -> Any:
    log = workdir / "requests.jsonl"
    model = MODELS[provider]

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        reader = read_anthropic if provider == "anthropic" else read_openai
        uses, results = reader(body)
        with log.open("a") as f:
            f.write(json.dumps(results) + "\n")
        n = len(log.read_text().splitlines())
        if results and kill_at_post:
            _die()  # the request that carries the result is on its way
        calls = decide(uses, results, scenario)
        answer = anthropic_answer if provider == "anthropic" else openai_answer
        return httpx2.Response(200, json=answer(model, n, calls))

    transport = httpx2.MockTransport(handler)
    if provider == "anthropic":
        import anthropic

        return anthropic.Anthropic(
            api_key="offline",
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(transport=transport),
        )
    import openai

    return openai.OpenAI(
        api_key="offline",
        base_url="http://scripted.invalid/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=transport),
    )


# -- the loop ------------------------------------------------------------------------------


def main() -> int:
    provider, folder, mode, scenario = sys.argv[1:5]
    workdir = Path(folder)
    first = mode == "first"
    if provider == "anthropic":
        from toolledger.integrations import anthropic as adapter
    else:
        from toolledger.integrations import openai as adapter  # type: ignore[no-redef]
    tool_schema: dict[str, Any]
    if provider == "anthropic":
        tool_schema = {"name": "pay", "description": "Pay an invoice.", "input_schema": SCHEMA}
    else:
        tool_schema = {
            "type": "function",
            "function": {"name": "pay", "description": "Pay an invoice.", "parameters": SCHEMA},
        }
    schemas = adapter.with_justification([tool_schema])
    tools = [pay_tool(workdir, kill=first and scenario in ("after-effect", "parallel"))]
    transcript = workdir / "transcript.json"
    run_id = "run-2" if mode == "replan" else "run-1"  # resume and repair: the same run
    model = MODELS[provider]

    with toolledger.run(
        "Pay the open invoices",
        agent="payer",
        db=workdir / "ledger.db",
        run_id=run_id,
        conversation_id=CONVERSATION,
    ) as run:
        client = adapter.journaled(
            scripted_client(provider, workdir, scenario, first and scenario == "at-post"), run
        )

        def create(messages: list[Any]) -> Any:
            if provider == "anthropic":
                return client.messages.create(
                    model=model, max_tokens=512, messages=messages, tools=schemas
                )
            return client.chat.completions.create(model=model, messages=messages, tools=schemas)

        def assistant(response: Any) -> dict[str, Any]:
            if provider == "anthropic":
                content = [b.model_dump(mode="json", exclude_none=True) for b in response.content]
                return {"role": "assistant", "content": content}
            return dict(response.choices[0].message.model_dump(mode="json", exclude_none=True))

        if mode == "resume":
            messages: list[Any] = json.loads(transcript.read_text())
            turn: Any = messages[-1]  # the assistant turn whose results were never posted
        elif mode == "repair":  # the orphaned calls get their results from the ledger
            messages = adapter.repair_transcript(json.loads(transcript.read_text()), run)
            turn = assistant(create(messages))
            messages.append(turn)
            transcript.write_text(json.dumps(messages))
        else:
            messages = [{"role": "user", "content": PROMPT}]
            turn = assistant(create(messages))
            messages.append(turn)
            transcript.write_text(json.dumps(messages))  # the app saves its transcript
        for _ in range(10):
            if not adapter.tool_calls(turn):
                break
            results = adapter.run_tool_calls(run, turn, tools)
            carried = (
                [*messages, {"role": "user", "content": results}]
                if provider == "anthropic"
                else [*messages, *results]
            )

            def post(_payloads: Any, carried: list[Any] = carried) -> Any:
                return create(carried)

            # A post a crash may have cut short is posted again (a model request may repeat).
            response = adapter.deliver_results(run, turn, post, redeliver=True)
            if response is None:  # every result was delivered before: ask with them again
                response = create(carried)
            messages = carried
            turn = assistant(response)
            messages.append(turn)
            transcript.write_text(json.dumps(messages))
        else:
            raise RuntimeError("the model never ended its turn")
    answer = turn["content"][0]["text"] if provider == "anthropic" else turn["content"]
    print(json.dumps({"answer": answer}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
