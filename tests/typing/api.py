"""Typed use of the public API, checked by mypy (``tests/test_typing_surface.py``); never run.

Each ``assert_type`` pins what a user's type checker sees; each ``type: ignore[code]`` is a
call that must stay an error (strict mypy reports an ignore that is no longer needed).
"""

from __future__ import annotations

from typing import Any, TypedDict

from typing_extensions import assert_type

import toolledger


class Order(TypedDict):
    sku: str
    quantity: int


class Placed(TypedDict):
    order_id: str


@toolledger.tool(revision="1")
def place_order(input: Order, ctx: toolledger.ExecuteContext) -> Placed:
    """Place an order."""
    return {"order_id": f"o-{input['sku']}"}


@toolledger.tool(revision="1", approval="effect-only")
async def refund(input: Placed, ctx: toolledger.ExecuteContext) -> bool:
    """Refund an order."""
    return True


def count_words(input: str, ctx: toolledger.ExecuteContext) -> int:
    return len(input.split())


@toolledger.tool(revision="1")
def untyped(input, ctx):  # type: ignore[no-untyped-def]
    """A tool without annotations is a ``Tool[Any, Any]``."""
    return input


words = toolledger.tool("count_words", revision="1", execute=count_words)


def use(run: toolledger.Run) -> None:
    # @toolledger.tool and toolledger.tool(execute=) read the types from execute.
    assert_type(place_order, toolledger.Tool[Order, Placed])
    assert_type(refund, toolledger.Tool[Placed, bool])
    assert_type(words, toolledger.Tool[str, int])
    assert_type(untyped, toolledger.Tool[Any, Any])

    # run.call returns the tool's result type. Its input is not checked against the tool's
    # (the guard checks it at run time, as exact JSON): mypy infers an argument without the
    # other arguments' types, so it would refuse a TypedDict literal such as this one.
    outcome = run.call(place_order, call_id="c1", input={"sku": "a", "quantity": 1})
    assert_type(outcome, toolledger.ToolOutcome[Placed])
    assert_type(outcome.payload["order_id"], str)
    assert_type(run.call(words, call_id="c2", input="a b"), toolledger.ToolOutcome[int])
    assert_type(run.call(untyped, call_id="c3", input=object()).payload, Any)

    # approval= and on_error= take only their values.
    mode: toolledger.ApprovalMode = "always"
    run.call(words, call_id="c6", input="x", approval=mode, on_error="result")
    run.call(words, call_id="c7", input="x", approval="sometimes")  # type: ignore[arg-type]
    toolledger.tool("t", revision="1", execute=count_words, approval="never")  # type: ignore[call-overload]

    # A bare Tool / ToolOutcome is any tool (the type parameters default to Any).
    some: toolledger.Tool = place_order
    assert_type(run.call(some, call_id="c8", input=1), toolledger.ToolOutcome[Any])


async def ause(run: toolledger.Run) -> None:
    outcome = await run.acall(refund, call_id="c1", input={"order_id": "o-1"})
    assert_type(outcome, toolledger.ToolOutcome[bool])
