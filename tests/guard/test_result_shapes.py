"""A tool result that is not exact JSON completes the call: encoded, or an error result.

On every store: the stored result is the journal's encoding (so the journal's recorded
output and a replay of the call agree byte for byte), and a value no rule carries becomes
an ``is_error`` result naming it; the call never becomes ``uncertain`` for its shape.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

import toolledger as tl
from toolledger.checkpoint import Status
from toolledger.testing import stored_run

from .._internals import to_json
from ._stores import STORE_KINDS, open_kind


class Tier(enum.Enum):
    GOLD = "gold"


@dataclasses.dataclass
class Receipt:
    id: int
    at: dt.datetime


class Charge(pydantic.BaseModel):
    amount: Decimal
    currency: str


class Handle:
    def __repr__(self) -> str:
        return "<Handle fd=3>"


WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)

#: Every non-JSON type the docs list.
VALUES: dict[str, Any] = {
    "datetime": WHEN,
    "date": WHEN.date(),
    "time": WHEN.timetz(),
    "Decimal": Decimal("12.30"),
    "UUID": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "Enum": Tier.GOLD,
    "dataclass": Receipt(7, WHEN),
    "pydantic": Charge(amount=Decimal("5.00"), currency="EUR"),
    "bytes": b"\x00pdf",
    "set": {3, 1, 2},
    "frozenset": frozenset({"b", "a"}),
    "tuple": (1, "a"),
}


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_kind(request.param, tmp_path)


def test_non_json_results_complete_encoded_on_every_store(store: Any) -> None:
    """Each type completes with the journal's encoding; a replay returns the same bytes."""
    with tl.run("shapes", db=store) as run:
        for name, value in VALUES.items():
            tool = tl.tool(f"t_{name}", revision="1", execute=lambda i, c, v=value: {"v": v})
            out = run.call(tool, call_id=f"c_{name}", input={})
            assert (out.status, out.is_error) == ("completed", False), name
            assert out.payload == {"v": to_json(value)[0]}, name
            again = run.call(tool, call_id=f"c_{name}", input={})
            assert again.replayed
            assert again.payload == out.payload, name
        run_id = run.run_id
    outputs = {
        e["name"]: e["outputs"]
        for e in stored_run(store, run_id).events
        if e["kind"] == "tool_call" and e["status"] == "completed"
    }
    for name, value in VALUES.items():
        rec = store.get("default", f"c_{name}")
        assert rec.status is Status.COMPLETED
        assert rec.result.payload == {"v": to_json(value)[0]}
        assert f"t_{name}" in outputs


def test_unencodable_result_is_an_error_result_and_completes(store: Any) -> None:
    """An object no rule carries: an is_error result naming it; the call is completed."""
    runs = 0

    def execute(input: Any, ctx: Any) -> Any:
        nonlocal runs
        runs += 1
        return {"handle": Handle()}

    tool = tl.tool("opener", revision="1", execute=execute)
    with tl.run("shapes", db=store) as run:
        out = run.call(tool, call_id="c1", input={})
        again = run.call(tool, call_id="c1", input={})
    assert (out.status, out.is_error) == ("completed", True)
    assert out.payload["error"] == "UnencodableResult"
    assert "Handle" in out.payload["message"]
    assert (again.replayed, again.payload, runs) == (True, out.payload, 1)
    assert store.get("default", "c1").status is Status.COMPLETED


def test_result_over_its_bound_is_an_error_result_and_completes(store: Any) -> None:
    """Too large to store: an is_error result naming the bound, never uncertain."""
    tool = tl.tool("big", revision="1", execute=lambda i, c: "x" * 100, max_result_bytes=10)
    with tl.run("shapes", db=store) as run:
        out = run.call(tool, call_id="c1", input={})
    assert (out.status, out.is_error) == ("completed", True)
    assert "PAYLOAD_LIMIT" in out.payload["message"]
    assert store.get("default", "c1").status is Status.COMPLETED


def test_outcome_unknown_message_points_at_resolve_and_reconcile(store: Any) -> None:
    """OUTCOME_UNKNOWN says how to settle the call: reconcile or resolve, not a new id."""

    def execute(input: Any, ctx: Any) -> Any:
        ctx.operation.write({"order": "o-1"})
        raise ConnectionError("no answer")

    with tl.run("stuck", db=store) as run, pytest.raises(tl.OutcomeUnknownError) as info:
        run.call(tl.tool("pay", revision="1", execute=execute), call_id="c1", input={})
    assert tl.errors.SETTLE_HINT in info.value.message
    assert "toolledger resolve" in info.value.message
    assert "toolledger reconcile" in info.value.message
