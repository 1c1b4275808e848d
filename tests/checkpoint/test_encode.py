"""``encode_result``: a tool result that is not exact JSON, by the journal's own rules."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import uuid
from decimal import Decimal
from typing import Any

import pydantic
import pytest

from .._internals import encode_result, stored_result, to_json, unencodable_result


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    when: dt.date


class Order(pydantic.BaseModel):
    id: int
    placed: dt.datetime


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque handle>"


WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")

#: Every non-JSON type the docs list, with the JSON it is stored as.
CASES: dict[str, tuple[Any, Any]] = {
    "datetime": (WHEN, {"$type": "datetime", "value": "2026-01-02T03:04:05.000006+00:00"}),
    "date": (dt.date(2026, 1, 2), {"$type": "date", "value": "2026-01-02"}),
    "time": (dt.time(3, 4, 5), {"$type": "time", "value": "03:04:05"}),
    "Decimal": (Decimal("10.50"), {"$type": "Decimal", "value": "10.50"}),
    "UUID": (UID, {"$type": "UUID", "value": str(UID)}),
    "Enum": (Color.RED, {"$type": f"{__name__}.Color", "value": "red"}),
    "dataclass": (
        Point(1, dt.date(2026, 1, 2)),
        {"$type": f"{__name__}.Point", "x": 1, "when": {"$type": "date", "value": "2026-01-02"}},
    ),
    "pydantic": (
        Order(id=7, placed=WHEN),
        {"$type": f"{__name__}.Order", "value": {"id": 7, "placed": "2026-01-02T03:04:05.000006Z"}},
    ),
    "bytes": (b"\x00\x01", {"$bytes": 2, "sha256": hashlib.sha256(b"\x00\x01").hexdigest()}),
    "set": ({3, 1, 2}, [1, 2, 3]),
    "frozenset": (frozenset({"b", "a"}), ["a", "b"]),
    "tuple": ((1, "a", None), [1, "a", None]),
    "nested": ({"at": [WHEN]}, {"at": [{"$type": "datetime", "value": WHEN.isoformat()}]}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_encode_result_non_json_type_uses_the_journal_rule(name: str) -> None:
    """Each listed type is encoded exactly as the journal records it."""
    value, expected = CASES[name]
    encoded, problem = encode_result(value)
    assert problem is None
    assert encoded == expected
    assert encoded == to_json(value)[0]


def test_encode_result_exact_json_is_returned_as_is() -> None:
    """Exact JSON is not walked again (the transition keeps a private copy)."""
    value = {"a": [1, 2.5, None, True, "x"]}
    assert encode_result(value)[0] is value


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (Opaque(), "Opaque"),
        ({"handle": [Opaque()]}, "has no JSON rule"),
        (None, "reference cycle"),  # replaced below by a list holding itself
    ],
)
def test_encode_result_unencodable_value_names_the_problem(value: Any, names: str) -> None:
    """An object no rule carries (or a cycle) is refused with a message naming it."""
    if value is None:
        value = []
        value.append(value)
    encoded, problem = encode_result(value)
    assert encoded is None
    assert problem is not None
    assert names in problem
    payload = unencodable_result(problem)
    assert payload["error"] == "UnencodableResult"
    assert problem in payload["message"]


def test_encode_result_too_deep_is_refused() -> None:
    """Nesting beyond the journal's depth bound cannot be stored faithfully."""
    deep: Any = "x"
    for _ in range(70):
        deep = (deep,)
    encoded, problem = encode_result(deep)
    assert encoded is None
    assert problem is not None
    assert "deeper than 64" in problem


def test_stored_result_keeps_is_error_or_names_the_problem() -> None:
    """An encodable result keeps its flag; an unencodable one is an error result."""
    assert stored_result((1, 2), False) == ([1, 2], False)
    assert stored_result("boom", True) == ("boom", True)
    payload, is_error = stored_result({"h": Opaque()}, False)
    assert is_error is True
    assert payload["error"] == "UnencodableResult"
    assert "Opaque" in payload["message"]
