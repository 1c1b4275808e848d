"""Benchmark: what each framework adapter costs per tool call, beyond the guard itself.

For each adapter, one tool call is driven through the framework's own per-call hook (the
place the adapter plugs into), interleaved batch by batch in one run on one SQLite file
(``durability="normal"``):

- ``stock``: the framework's hook with its own tool (nothing guarded);
- ``guard + stock``: a plain ``run.call``/``run.acall`` whose ``execute`` is that same stock
  hook: the guard and the framework's work, without the adapter;
- ``guarded``: the hook with the adapter (a new call id every time), and ``replayed`` (the
  same ids again: the stored result, the tool not run);
- ``guard``: a plain guarded call of a trivial ``toolledger.Tool`` (new, and replayed).

The adapter's own cost is ``guarded - guard + stock`` (medians); the target is at most
10 % of a guarded call (``guard``). On replay: ``replayed - guard replayed``. Hooks:
anthropic ``BaseSyncToolRunner._run_tool``; openai-agents ``FunctionTool.on_invoke_tool``;
langgraph the ``wrap_tool_call`` wrapper around the tool node's handler; pydantic-ai
``GuardedToolset.call_tool``. (``guard + stock`` is slower than ``guard`` plus ``stock``
measured apart: the framework's code runs colder between the guard's commits.)

Run: ``.venv/bin/python bench/bench_frameworks.py [--calls N]``. Prints a table; nothing here
is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import percentile

import toolledger as tl
from toolledger.store import SQLiteStore

__all__ = ["main"]


def args(call_id: str) -> dict[str, str]:
    """A call's arguments: each call id its own action (the same input is the same action)."""
    return {"to": f"{call_id}@example.com"}


BATCH = 25
_ids = itertools.count()


def new_id() -> str:
    return f"call_{next(_ids)}"


Case = tuple[Callable[[str], Any], bool]  # (one call for an id, is it async)


def anthropic_cases(run: tl.Run) -> dict[str, Case]:
    import anthropic
    import httpx2
    from anthropic import beta_tool
    from anthropic.types.beta import BetaToolUseBlock

    from toolledger.integrations.anthropic import guarded_tool_runner

    @beta_tool
    def send_email(to: str) -> str:
        """Send one email."""
        return "sent"

    client = anthropic.Anthropic(
        api_key="k",
        http_client=anthropic.DefaultHttpxClient(
            transport=httpx2.MockTransport(lambda r: httpx2.Response(500))
        ),
    )
    params = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
    stock = client.beta.messages.tool_runner(tools=[send_email], **params)
    guarded = guarded_tool_runner(run, client, tools=[send_email], **params)

    def block(call_id: str) -> Any:
        return BetaToolUseBlock(id=call_id, name="send_email", input=args(call_id), type="tool_use")

    return {
        "stock": (lambda cid: stock._run_tool(send_email, block(cid)), False),
        "guarded": (lambda cid: guarded._run_tool(send_email, block(cid)), False),
    }


def openai_agents_cases(run: tl.Run) -> dict[str, Case]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    from toolledger.integrations.openai_agents import guarded_tools

    @function_tool
    def send_email(to: str) -> str:
        """Send one email."""
        return "sent"

    (guarded,) = guarded_tools(run, [send_email])

    def ctx(call_id: str) -> Any:
        return ToolContext(
            context=None,
            tool_name="send_email",
            tool_call_id=call_id,
            tool_arguments=json.dumps(args(call_id)),
        )

    return {
        "stock": (lambda cid: send_email.on_invoke_tool(ctx(cid), json.dumps(args(cid))), True),
        "guarded": (lambda cid: guarded.on_invoke_tool(ctx(cid), json.dumps(args(cid))), True),
    }


def langgraph_cases(run: tl.Run) -> dict[str, Case]:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from toolledger.integrations.langgraph import guard_tool_calls

    @tool
    def send_email(to: str) -> str:
        """Send one email."""
        return "sent"

    wrap = guard_tool_calls(run)

    def handler(request: Any) -> Any:
        tc = request.tool_call
        return ToolMessage(send_email.invoke(tc["args"]), tool_call_id=tc["id"], name=tc["name"])

    def request(call_id: str) -> Any:
        call = {"name": "send_email", "args": args(call_id), "id": call_id, "type": "tool_call"}
        return ToolCallRequest(tool_call=call, tool=send_email, state={}, runtime=None)  # type: ignore[arg-type]

    return {
        "stock": (lambda cid: handler(request(cid)), False),
        "guarded": (lambda cid: wrap(request(cid), handler), False),
    }


def pydantic_ai_cases(run: tl.Run) -> dict[str, Case]:
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    from toolledger.integrations.pydantic_ai import GuardedToolset

    def send_email(to: str) -> str:
        """Send one email."""
        return "sent"

    stock = FunctionToolset([send_email])
    guarded = GuardedToolset(stock, run=run)
    model = TestModel()
    base = RunContext(deps=None, model=model, usage=RunUsage())
    tools = asyncio.run(stock.get_tools(base))
    tool_def = tools["send_email"]

    def ctx(call_id: str) -> Any:
        return RunContext(deps=None, model=model, usage=RunUsage(), tool_call_id=call_id)

    return {
        "stock": (lambda cid: stock.call_tool("send_email", args(cid), ctx(cid), tool_def), True),
        "guarded": (
            lambda cid: guarded.call_tool("send_email", args(cid), ctx(cid), tool_def),
            True,
        ),
    }


ADAPTERS: dict[str, Callable[[tl.Run], dict[str, Case]]] = {
    "anthropic": anthropic_cases,
    "openai-agents": openai_agents_cases,
    "langgraph": langgraph_cases,
    "pydantic-ai": pydantic_ai_cases,
}


def _time_batch(fn: Callable[[str], Any], is_async: bool, ids: list[str]) -> list[float]:
    out: list[float] = []
    if is_async:

        async def go() -> None:
            for cid in ids:
                t0 = time.perf_counter_ns()
                await fn(cid)
                out.append((time.perf_counter_ns() - t0) / 1000)

        asyncio.run(go())
        return out
    for cid in ids:
        t0 = time.perf_counter_ns()
        fn(cid)
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per case")
    n = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "frameworks.db", durability="normal")
        plain = tl.tool("send_email", revision="1", execute=lambda input, ctx: "sent")

        async def aplain(input: Any, ctx: Any) -> str:
            return "sent"

        aplain_tool = tl.tool("send_email", revision="1", execute=aplain)
        rows = []
        with tl.run("bench frameworks", agent="bench", db=store) as run:
            for name, build in ADAPTERS.items():
                cases = build(run)
                stock_fn, is_async = cases["stock"]
                if is_async:

                    async def around(input: Any, ctx: Any, fn: Any = stock_fn) -> Any:
                        await fn(ctx.call_id)
                        return "sent"

                    wrapped = tl.tool("send_email", revision="1", execute=around)
                    cases["guard + stock"] = (
                        lambda cid, t=wrapped: run.acall(t, call_id=cid, input=args(cid)),
                        True,
                    )
                    cases["guard"] = (
                        lambda cid: run.acall(aplain_tool, call_id=cid, input=args(cid)),
                        True,
                    )
                else:
                    wrapped = tl.tool(
                        "send_email",
                        revision="1",
                        execute=lambda input, ctx, fn=stock_fn: (fn(ctx.call_id), "sent")[1],
                    )
                    cases["guard + stock"] = (
                        lambda cid, t=wrapped: run.call(t, call_id=cid, input=args(cid)),
                        False,
                    )
                    cases["guard"] = (
                        lambda cid: run.call(plain, call_id=cid, input=args(cid)),
                        False,
                    )
                new: dict[str, list[float]] = {k: [] for k in cases}
                replay: dict[str, list[float]] = {"guarded": [], "guard": []}
                for _ in range(max(1, n // BATCH)):
                    for key, (fn, asy) in cases.items():
                        ids = [new_id() for _ in range(BATCH)]
                        new[key] += _time_batch(fn, asy, ids)
                        if key in replay:
                            replay[key] += _time_batch(fn, asy, ids)
                med = {k: statistics.median(v) for k, v in new.items()}
                rmed = {k: statistics.median(v) for k, v in replay.items()}
                own = med["guarded"] - med["guard + stock"]
                rown = rmed["guarded"] - rmed["guard"]
                rows.append(
                    (
                        name,
                        med["stock"],
                        med["guard"],
                        med["guard + stock"],
                        med["guarded"],
                        percentile(new["guarded"], 99),
                        own,
                        own / med["guard"],
                        rmed["guarded"],
                        rmed["guard"],
                        rown / rmed["guard"],
                    )
                )
        store.close()
    print(f"per tool call, microseconds (median); {n} calls per case, SQLite normal")
    print(
        "| adapter | stock | guard | guard + stock | guarded | p99 | adapter's own | / guard "
        "| replayed | guard replayed | / guard |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.0f} | "
            f"{r[6]:.1f} | {r[7]:.1%} | {r[8]:.1f} | {r[9]:.1f} | {r[10]:.1%} |"
        )
    print(
        "adapter's own = guarded - (guard + stock); replay: replayed - guard replayed; "
        "target <= 10 % of guard"
    )


if __name__ == "__main__":
    main()
