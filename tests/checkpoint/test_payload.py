"""Result payloads: exact JSON only, within bytes, depth and value-count bounds."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    HARD_MAX_PAYLOAD_BYTES,
    CheckpointRecord,
    Transition,
    claim_delivery,
    complete_execution,
    validate_checkpoint,
)

from ._ckpt_records import RECORDS, at


def _complete(result: Any, **kwargs: Any) -> Transition:
    return complete_execution(
        RECORDS["executing"](), attempt_id="a1", at=at(5), result=result, **kwargs
    )


def _code(result: Any, **kwargs: Any) -> str:
    with pytest.raises(tl.CheckpointError) as info:
        _complete(result, **kwargs)
    return info.value.code


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


# -- bytes -----------------------------------------------------------------------------

# (name, value of exactly 65,536 bytes, value of exactly 65,537 bytes)
BYTE_EDGES = [
    ("ascii", "x" * 65_534, "x" * 65_535),
    ("e-acute", "é" * 32_767, "é" * 32_767 + "x"),
    ("newline", "\n" * 32_767, "\n" * 32_767 + "x"),
]


@pytest.mark.parametrize(("kind", "fits", "too_big"), BYTE_EDGES, ids=[e[0] for e in BYTE_EDGES])
def test_payload_byte_limit_is_65536_bytes_of_compact_utf8_json(
    kind: str, fits: str, too_big: str
) -> None:
    """65,536 bytes fit; 65,537 are PAYLOAD_LIMIT (UTF-8, escapes counted as written)."""
    assert _size(fits) == DEFAULT_MAX_PAYLOAD_BYTES == 65_536
    assert _size(too_big) == 65_537
    rec = _complete(fits).next
    assert rec.result is not None
    assert rec.result.payload == fits
    with pytest.raises(tl.PayloadLimitError) as info:
        _complete(too_big)
    assert info.value.details == {"limit": "bytes", "max": 65_536, "actual": 65_537}


def test_payload_byte_limit_counts_compact_separators() -> None:
    """Size is that of compact JSON (no spaces after , and :)."""
    value = {"k": ["x" * 65_520]}
    assert _size(value) == 65_520 + 10
    _complete(value)


# -- depth -----------------------------------------------------------------------------


def _nested(levels: int, kind: str = "list") -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_payload_32_levels_fit_33_do_not(kind: str) -> None:
    """32 levels of nesting fit; 33 are PAYLOAD_LIMIT."""
    _complete(_nested(32, kind))
    with pytest.raises(tl.PayloadLimitError) as info:
        _complete(_nested(33, kind))
    assert info.value.details == {"limit": "depth", "max": 32, "actual": 33}


def test_payload_depth_far_beyond_recursion_limit_is_payload_limit() -> None:
    """A very deep payload is measured without recursion and refused cleanly."""
    assert _code(_nested(50_000)) == "PAYLOAD_LIMIT"


# -- value count -----------------------------------------------------------------------


def test_payload_10000_values_fit_10001_do_not() -> None:
    """Every value node counts (the list itself included)."""
    _complete(list(range(9_999)))
    with pytest.raises(tl.PayloadLimitError) as info:
        _complete(list(range(10_000)))
    assert info.value.details == {"limit": "values", "max": 10_000, "actual": 10_001}


def test_payload_object_keys_do_not_count_as_values() -> None:
    """An object with 9,999 members is 10,000 values."""
    big = 1_000_000  # keys take bytes; only the value count is under test here
    _complete({f"k{i}": i for i in range(9_999)}, max_payload_bytes=big)
    assert _code({f"k{i}": i for i in range(10_000)}, max_payload_bytes=big) == "PAYLOAD_LIMIT"


def test_payload_shared_subtrees_count_every_occurrence() -> None:
    """A list referenced twice counts twice (the JSON text holds it twice)."""
    shared = list(range(5_000))
    assert _code([shared, shared]) == "PAYLOAD_LIMIT"
    rec = _complete([shared[:4_000], shared[:4_000]]).next
    assert rec.result is not None
    assert rec.result.payload == [shared[:4_000]] * 2


# -- types -----------------------------------------------------------------------------


class _Str(str):
    pass


def _cycle_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cycle_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = {"inner": value}
    return value


NOT_JSON: list[tuple[str, Any]] = [
    ("int 2**53", 2**53),
    ("int -(2**53)", -(2**53)),
    ("nested 2**53", {"a": [2**53]}),
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", [float("-inf")]),
    ("cycle list", _cycle_list()),
    ("cycle dict", _cycle_dict()),
    ("tuple", (1, 2)),
    ("nested tuple", {"a": (1,)}),
    ("int key", {1: "a"}),
    ("bool key", {True: "a"}),
    ("none key", {None: "a"}),
    ("bytes", b"abc"),
    ("bytearray", bytearray(b"abc")),
    ("set", {1, 2}),
    ("frozenset", frozenset()),
    ("decimal", Decimal("1.5")),
    ("object", object()),
    ("str subclass", _Str("x")),
    ("lone surrogate", "a\ud800"),
    ("surrogate key", {"\udc00": 1}),
]


@pytest.mark.parametrize("value", [v for _, v in NOT_JSON], ids=[n for n, _ in NOT_JSON])
def test_payload_not_exact_json_is_invalid_argument(value: Any) -> None:
    """Non-JSON values are type errors (INVALID_ARGUMENT), however small."""
    assert _code(value) == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "value",
    [
        2**53 - 1,
        -(2**53 - 1),
        0,
        -0.0,
        1e308,
        5e-324,
        None,
        True,
        "",
        [],
        {},
        {"é": ["\u2028", "\x00", "😀"]},
    ],
    ids=repr,
)
def test_payload_exact_json_round_trips(value: Any) -> None:
    """Exact JSON values are stored as given, including null and edge numbers."""
    rec = _complete(value).next
    assert rec.result is not None
    assert rec.result.payload == value
    assert type(rec.result.payload) is type(value)
    again = validate_checkpoint(json.loads(json.dumps(rec.to_dict())))
    assert again.result == rec.result


def test_payload_error_message_names_the_path() -> None:
    """The refusal names where the bad value sits."""
    with pytest.raises(tl.InvalidArgumentError) as info:
        _complete({"a": [1, {"b": float("nan")}]})
    assert info.value.details["path"] == "$['a'][1]['b']"


def test_payload_same_list_twice_is_not_a_cycle() -> None:
    """Sharing without a cycle is fine (it is written out twice)."""
    shared = [1, 2]
    rec = _complete({"a": shared, "b": shared}).next
    assert rec.result is not None
    assert rec.result.payload == {"a": [1, 2], "b": [1, 2]}


# -- max_payload_bytes -----------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 10_485_761, True, 1.5, "65536"])
def test_max_payload_bytes_out_of_range_is_invalid_argument(limit: Any) -> None:
    """max_payload_bytes must be an int from 1 to 10,485,760."""
    assert _code(1, max_payload_bytes=limit) == "INVALID_ARGUMENT"


def test_max_payload_bytes_one_allows_one_byte() -> None:
    """With limit 1, ``1`` (one byte) fits and ``""`` (two bytes) does not."""
    _complete(1, max_payload_bytes=1)
    assert _code("", max_payload_bytes=1) == "PAYLOAD_LIMIT"


def test_max_payload_bytes_hard_maximum_is_accepted() -> None:
    """The hard maximum, 10,485,760 bytes, fits exactly."""
    assert HARD_MAX_PAYLOAD_BYTES == 10_485_760
    value = "x" * (HARD_MAX_PAYLOAD_BYTES - 2)
    rec = _complete(value, max_payload_bytes=HARD_MAX_PAYLOAD_BYTES).next
    assert validate_checkpoint(rec.to_dict()).result == rec.result
    assert _code(value + "x", max_payload_bytes=HARD_MAX_PAYLOAD_BYTES) == "PAYLOAD_LIMIT"


def test_payload_stored_under_raised_limit_stays_readable() -> None:
    """validate_checkpoint defaults to the hard maximum, so raised-limit results load."""
    value = "x" * 100_000
    rec = _complete(value, max_payload_bytes=200_000).next
    assert validate_checkpoint(rec.to_dict()) == rec
    assert CheckpointRecord.from_dict(rec.to_dict()) == rec
    with pytest.raises(tl.InvalidCheckpointError):
        validate_checkpoint(rec.to_dict(), max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES)
    delivering = claim_delivery(rec, delivery_id="d", at=at(6)).next
    assert delivering.result == rec.result


def test_stored_payload_depth_bound_always_applies() -> None:
    """Depth and value bounds apply to stored payloads whatever the byte limit."""
    data = RECORDS["completed"]().to_dict()
    data["result"] = {"payload": _nested(33), "is_error": False}
    with pytest.raises(tl.InvalidCheckpointError):
        validate_checkpoint(data, max_payload_bytes=HARD_MAX_PAYLOAD_BYTES)


def test_payload_shared_graph_expanding_exponentially_is_refused_quickly() -> None:
    """60 levels of [x, x] sharing is 2**61 values of JSON: refused, not walked forever."""
    value: Any = []
    for _ in range(60):
        value = [value, value]
    with pytest.raises(tl.PayloadLimitError) as info:
        _complete(value)
    assert info.value.details["limit"] == "depth"
    wide: Any = [1]
    for _ in range(20):
        wide = [wide, wide]  # depth 21; values: w(k) = 1 + 2 w(k-1), w(0) = 2
    with pytest.raises(tl.PayloadLimitError) as info:
        _complete(wide)
    assert info.value.details == {"limit": "values", "max": 10_000, "actual": 3 * 2**20 - 1}


def test_payload_shape_of_shared_subtrees_is_exact() -> None:
    """Reused measurements give the same depth and count as a full walk."""
    from .._internals import check_types

    leaf: Any = {"a": [1, {"b": None}]}
    shared = [leaf, [leaf, [leaf]]]
    copied = json.loads(json.dumps(shared))
    assert check_types(shared) == check_types(copied)
    assert check_types(copied).depth == 6


class TestProvenResult:
    """A result ``stored_result`` proved is stored from its proof; any other is checked."""

    def test_proven_result_is_stored_as_proven(self) -> None:
        """The stored payload is a private copy equal to the result at its proof, with the
        shape a full walk measures."""
        from .._internals import check_types, stored_result

        value = {"ok": True, "items": [1, 2.5, "é", {"k": None}]}
        payload, _ = stored_result(value, False)
        assert payload is value
        t = _complete(payload)
        assert t.next.result is not None
        assert t.next.result.payload == {"ok": True, "items": [1, 2.5, "é", {"k": None}]}
        assert t.next.result.payload is not value
        assert check_types(value) == check_types(t.next.result.payload)

    def test_result_changed_after_its_proof_is_stored_as_proven(self) -> None:
        """A change made after the proof (a set, a NaN) reaches neither the check nor the
        stored payload: what is stored is valid exact JSON, as proven."""
        from .._internals import stored_result

        value: dict[str, Any] = {"n": [1]}
        payload, _ = stored_result(value, False)
        value["bad"] = {1, 2}
        value["n"].append(float("nan"))
        t = _complete(payload)
        assert t.next.result is not None
        assert t.next.result.payload == {"n": [1]}

    def test_proof_is_used_once_then_the_result_is_checked(self) -> None:
        """A second transition with the same object walks it again: a change fails there."""
        from .._internals import stored_result

        value: dict[str, Any] = {"n": 1}
        payload, _ = stored_result(value, False)
        _complete(payload)
        value["bad"] = (1, 2)
        assert _code(payload) == "INVALID_ARGUMENT"

    @pytest.mark.parametrize(
        ("limit", "code"), [(None, None), (8, "PAYLOAD_LIMIT")], ids=["within", "over"]
    )
    def test_proven_result_bytes_are_bounded(self, limit: int | None, code: str | None) -> None:
        """The byte bound applies to a proven result as to any other."""
        from .._internals import stored_result

        payload, _ = stored_result({"message": "x" * 20}, False)
        if code is None:
            assert _complete(payload, max_payload_bytes=limit).next.result is not None
        else:
            assert _code(payload, max_payload_bytes=limit) == code

    def test_proven_result_depth_and_values_are_bounded(self) -> None:
        """Depth and value count are bounded for a proven result too."""
        from .._internals import stored_result

        deep: Any = 0
        for _ in range(40):
            deep = [deep]
        payload, _ = stored_result(deep, False)
        assert _code(payload) == "PAYLOAD_LIMIT"
        payload, _ = stored_result(list(range(10_001)), False)
        assert _code(payload) == "PAYLOAD_LIMIT"

    @pytest.mark.parametrize("value", [None, True, 0, -(2**53) + 1, 1.5, "x", "é", [], {}])
    def test_proven_scalar_or_empty_result_measures_as_check_types(self, value: Any) -> None:
        """A proof's shape is check_types' own, scalars and empty containers included."""
        from .._internals import check_types, stored_result, take_proof

        payload, _ = stored_result(value, False)
        assert take_proof(payload) == check_types(value)
