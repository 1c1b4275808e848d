"""What a caller does with a payload it was handed never changes the stored result.

Every path that hands a stored payload to caller code (a call's outcome, a replay, the
payload ``post`` gets from every delivery entry point) hands a private copy: a ``post``
that mutates it, then fails or succeeds, leaves the checkpoint holding exactly what
``complete_execution`` stored, and every later delivery posts the same bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import (
    Binding,
    Status,
    canonical_json,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.integrations import anthropic

from .._internals import outcome_of
from ._stores import STORE_KINDS, open_kind

RESULT = {"rows": [1, 2, {"deep": ["x"]}], "note": "ok"}


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_kind(request.param, tmp_path)


def _tool() -> toolledger.Tool:
    return toolledger.tool(
        "report",
        revision="1",
        execute=lambda i, c: {"rows": [1, 2, {"deep": ["x"]}], "note": "ok"},
    )


def _vandalize(payload: Any) -> None:
    """What a careless post does to the object it was given."""
    payload["rows"][2]["deep"].clear()
    payload["rows"].append("added")
    payload["injected"] = True


def _stored(store: Any) -> str:
    rec = store.get("default", "c1")
    return canonical_json(rec.result.payload)


def _deliver(run: toolledger.Run, entry: str, post: Callable[[Any], Any]) -> Any:
    if entry == "deliver":
        return run.deliver("c1", post)
    if entry == "adeliver":

        async def apost(payload: Any) -> Any:
            return post(payload)

        return asyncio.run(run.adeliver("c1", apost))
    if entry == "deliver_many":
        return toolledger.guard.deliver_many(run, ["c1"], lambda p: post(p["c1"]))
    response = {"content": [{"type": "tool_use", "id": "c1", "name": "report", "input": {}}]}
    if entry == "anthropic.deliver_results":
        return anthropic.deliver_results(run, response, lambda p: post(p["c1"]))

    async def apost_all(payloads: Any) -> Any:
        return post(payloads["c1"])

    return asyncio.run(anthropic.adeliver_results(run, response, apost_all))


DELIVERIES = [
    "deliver",
    "adeliver",
    "deliver_many",
    "anthropic.deliver_results",
    "anthropic.adeliver_results",
]


@pytest.mark.parametrize("entry", DELIVERIES)
def test_mutating_then_failing_post_never_rewrites_the_stored_result(
    store: Any, entry: str
) -> None:
    """post mutates its payload and raises, then mutates and succeeds: bytes never change."""
    posted: list[str] = []

    def failing(payload: Any) -> None:
        posted.append(canonical_json(payload))
        _vandalize(payload)
        raise ConnectionError("model API down")

    def accepting(payload: Any) -> str:
        posted.append(canonical_json(payload))
        _vandalize(payload)
        return "accepted"

    with toolledger.run("report", db=store) as run:
        out = run.call(_tool(), call_id="c1", input={})
        stored = _stored(store)
        assert stored == canonical_json(RESULT)
        _vandalize(out.payload)  # the caller's outcome is its own copy too
        with pytest.raises(ConnectionError):
            _deliver(run, entry, failing)
        assert _stored(store) == stored
        assert _deliver(run, entry, accepting) == "accepted"
        assert _stored(store) == stored
        replay = run.call(_tool(), call_id="c1", input={})
        assert canonical_json(replay.payload) == stored
        _vandalize(replay.payload)
        assert canonical_json(run.call(_tool(), call_id="c1", input={}).payload) == stored
    assert posted == [stored, stored]
    assert store.get("default", "c1").status is Status.DELIVERED


def test_redelivery_after_a_vandalizing_post_posts_identical_bytes(store: Any) -> None:
    """redeliver=True posts again: the same bytes as the first delivery."""
    posted: list[str] = []

    def post(payload: Any) -> None:
        posted.append(canonical_json(payload))
        _vandalize(payload)

    with toolledger.run("report", db=store) as run:
        run.call(_tool(), call_id="c1", input={})
        run.deliver("c1", post)
        assert run.deliver("c1", post) is None  # delivered: not posted twice
    assert posted == [canonical_json(RESULT)]
    assert _stored(store) == canonical_json(RESULT)


@pytest.mark.parametrize("replayed", [False, True])
@pytest.mark.parametrize("recovered", [False, True])
@pytest.mark.parametrize("is_error", [False, True])
def test_outcome_equals_constructed_tool_outcome_with_a_private_copy(
    replayed: bool, recovered: bool, is_error: bool
) -> None:
    """The guard's outcome of a record is ToolOutcome(...) of its fields, payload copied."""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    binding = Binding("ns", "c1", "report", "1", fingerprint({}))
    rec = create_checkpoint(binding, at=now)
    rec = claim_execution(rec, attempt_id="a1", at=now).next
    rec = complete_execution(rec, attempt_id="a1", at=now, result=RESULT, is_error=is_error).next
    out = outcome_of(rec, replayed=replayed, recovered=recovered)
    assert out == toolledger.ToolOutcome(
        call_id="c1",
        tool_name="report",
        payload=RESULT,
        is_error=is_error,
        status="completed",
        revision=rec.revision,
        replayed=replayed,
        recovered=recovered,
    )
    assert out.deduplicated_from is None
    assert rec.result is not None
    _vandalize(out.payload)
    assert canonical_json(rec.result.payload) == canonical_json(RESULT)
