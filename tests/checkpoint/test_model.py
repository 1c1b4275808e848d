"""Records' stored form (to_dict/from_dict) and fingerprints over canonical JSON."""

from __future__ import annotations

import copy
import dataclasses
import gc
import hashlib
import json
import pickle
import struct
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolledger as tl
from toolledger.checkpoint import (
    Action,
    Binding,
    CheckpointRecord,
    Result,
    Status,
    canonical_json,
    claim_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
)
from toolledger.checkpoint.model import (
    check_identifier,
    is_known_valid,
    parse_iso,
    parse_time,
    remember_valid,
    replaced_record,
    with_result,
)

from .._internals import copy_json, parse_iso_310
from ._ckpt_records import RECORDS, binding, json_values, walks

# -- to_dict / from_dict -----------------------------------------------------------------


def records() -> st.SearchStrategy[CheckpointRecord]:
    """A record reached by a random walk of legal moves (its last revision)."""
    return walks().map(lambda revisions: revisions[-1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_record_to_dict_from_dict_round_trips(rec: CheckpointRecord) -> None:
    """from_dict(to_dict(r)) == r, also through JSON text; to_dict is JSON-ready."""
    data = rec.to_dict()
    assert CheckpointRecord.from_dict(data) == rec
    text = json.dumps(data, allow_nan=False)
    again = CheckpointRecord.from_dict(json.loads(text))
    assert again == rec
    assert again.to_dict() == data
    assert json.dumps(again.to_dict()) == text


def test_record_to_dict_uses_documented_keys() -> None:
    """Keys are the field names; the binding nests; times are ISO-8601 UTC strings."""
    rec = create_checkpoint(
        binding(), at=tl.checkpoint.model.parse_time("2026-01-01T02:00:00+02:00", "t")
    )
    data = rec.to_dict()
    assert list(data) == [
        "schema_version",
        "binding",
        "status",
        "revision",
        "created_at",
        "updated_at",
        "execution_fence",
        "execution_claimed_at",
        "uncertain_reason",
        "result",
        "completed_at",
        "delivery_fence",
        "delivery_attempts",
        "delivered_at",
    ]
    assert data["binding"] == {
        "namespace": "ns",
        "call_id": "call-1",
        "tool_name": "send_email",
        "tool_revision": "1",
        "input_fingerprint": binding().input_fingerprint,
    }
    assert data["created_at"] == "2026-01-01T00:00:00.000000+00:00"


def test_status_and_action_values_are_the_stored_strings() -> None:
    """Enum values are the documented strings."""
    assert [s.value for s in Status] == [
        "ready",
        "executing",
        "uncertain",
        "completed",
        "delivering",
        "delivered",
    ]
    assert [a.value for a in Action] == [
        "execute",
        "reconcile-execution",
        "deliver",
        "reconcile-delivery",
        "none",
    ]
    assert str(Status.READY) == "ready"
    assert str(Action.RECONCILE_DELIVERY) == "reconcile-delivery"


# -- fingerprint and canonical JSON -------------------------------------------------------


def test_fingerprint_is_sha256_of_canonical_json() -> None:
    """fingerprint(v) == "sha256:" + hex sha256 of the canonical UTF-8 bytes."""
    value = {"b": [1, 2.5, "é"], "a": None}
    expected = hashlib.sha256('{"a":null,"b":[1,2.5,"é"]}'.encode()).hexdigest()
    assert fingerprint(value) == f"sha256:{expected}"
    assert len(fingerprint(value)) == len("sha256:") + 64


def test_fingerprint_is_a_valid_binding_fingerprint() -> None:
    """A fingerprint can be used as Binding.input_fingerprint."""
    assert binding(input_fingerprint=fingerprint([1])).input_fingerprint.startswith("sha256:")


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=5),
        st.integers(-5, 5),
        max_size=6,
    ),
    st.randoms(),
)
def test_fingerprint_ignores_key_order(value: dict[str, int], rnd: Any) -> None:
    """Insertion order of object keys does not change the fingerprint."""
    items = list(value.items())
    rnd.shuffle(items)
    assert fingerprint(dict(items)) == fingerprint(value)


def test_fingerprint_nested_key_order_and_whitespace_free() -> None:
    """Nested objects are sorted too; output has no whitespace."""
    assert canonical_json({"z": {"b": 1, "a": [True, False]}, "a": []}) == (
        '{"a":[],"z":{"a":[true,false],"b":1}}'
    )


def _f(hex_bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(hex_bits))[0])


# RFC 8785 Appendix B: IEEE-754 bit patterns and their ECMAScript serialisation.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), RFC8785_NUMBERS)
def test_canonical_json_numbers_follow_rfc8785(bits: str, text: str) -> None:
    """Floats are written as ECMAScript's Number.prototype.toString writes them."""
    assert canonical_json(_f(bits)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-1.0, "-1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (0.1, "0.1"),
        (-0.0, "0"),
        (123.456, "123.456"),
        (1.5e-10, "1.5e-10"),
        (2**53 - 1, "9007199254740991"),
        (-(2**53 - 1), "-9007199254740991"),
        (0, "0"),
    ],
)
def test_canonical_json_number_examples(value: float, text: str) -> None:
    """1.0 -> "1", 1e21 -> "1e+21", 1e-7 -> "1e-7"; ints as written."""
    assert canonical_json(value) == text


def test_canonical_json_sorts_keys_by_utf16_code_units() -> None:
    """RFC 8785 §3.2.3: keys sort by UTF-16 code units (an emoji before U+FB33)."""
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(json.loads(canonical_json(value)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert sorted(value) != keys  # code-point order would differ


def test_canonical_json_string_escapes() -> None:
    """Only the mandatory escapes; control characters as lowercase \\u00xx; UTF-8 kept."""
    assert canonical_json('\u001f\n\t"\\é\u2028/') == '"\\u001f\\n\\t\\"\\\\é\u2028/"'


@pytest.mark.parametrize("value", [float("nan"), (1,), {1: 2}, b"x", {1}, 2**53])
def test_fingerprint_non_json_is_invalid_argument(value: Any) -> None:
    """Only exact JSON has a fingerprint."""
    with pytest.raises(tl.InvalidArgumentError):
        fingerprint(value)


def test_fingerprint_distinguishes_types() -> None:
    """1 and "1" and true differ; 1 and 1.0 are the same JSON number."""
    assert fingerprint(1) != fingerprint("1")
    assert fingerprint(1) != fingerprint(True)
    assert fingerprint(1) == fingerprint(1.0)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_canonical_json_float_round_trips_in_shortest_form(x: float) -> None:
    """Every finite float is written so that it parses back to itself, digits as repr's."""
    text = canonical_json(x)
    assert float(text) == x
    digits = lambda s: s.split("e")[0].replace("-", "").replace(".", "").strip("0")  # noqa: E731
    assert digits(text) == digits(repr(abs(x))) or x == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_stored_json_is_compact_json_of_to_dict(rec: CheckpointRecord) -> None:
    """The store's direct encoder writes exactly compact_json(record.to_dict())."""
    from .._internals import compact_json, dump_record

    assert dump_record(rec) == compact_json(rec.to_dict())
    assert CheckpointRecord.from_dict(json.loads(dump_record(rec))) == rec


@pytest.mark.parametrize(
    "reason", ['quote " backslash \\ tab \t', "\x00\x1f\u2028é😀", "x" * 1024, "</script>"]
)
def test_stored_json_escapes_uncertain_reason_like_json(reason: str) -> None:
    """Free text is escaped exactly as the JSON encoder escapes it."""
    from .._internals import compact_json, dump_record

    rec = create_checkpoint(
        binding(), at=tl.checkpoint.model.parse_time("2026-01-01T00:00:00+00:00", "t")
    )
    rec = claim_execution(rec, attempt_id="a", at=rec.updated_at).next
    rec = mark_execution_uncertain(rec, attempt_id="a", at=rec.updated_at, reason=reason).next
    assert dump_record(rec) == compact_json(rec.to_dict())


class TestRecordCopies:
    """The fast record builders give what the dataclass machinery gives."""

    @pytest.mark.parametrize("record_name", sorted(RECORDS))
    @pytest.mark.parametrize("is_error", [False, True])
    @pytest.mark.parametrize("payload", [None, 0, "x", [1, 2.5], {"a": {"b": [None]}}])
    def test_with_result_equals_replace(
        self, record_name: str, is_error: bool, payload: Any
    ) -> None:
        """with_result is dataclasses.replace with a new Result holding the payload itself."""
        rec = RECORDS[record_name]()
        out = with_result(rec, payload, is_error)
        assert out == dataclasses.replace(rec, result=Result(payload=payload, is_error=is_error))
        assert out is not rec
        assert out.result is not None
        assert out.result.payload is payload
        assert type(out.result) is Result

    def test_known_valid_is_the_object_itself(self) -> None:
        """A record marked valid is known valid; an equal copy is not, until marked."""
        rec = remember_valid(replaced_record(RECORDS["completed"](), {}))
        copy = replaced_record(rec, {})
        assert is_known_valid(rec)
        assert not is_known_valid(copy)
        assert is_known_valid(remember_valid(copy))

    def test_known_valid_mark_dies_with_its_record(self) -> None:
        """A record made later, at a dead marked record's address, is not known valid; no
        copy of a marked record (replace, copy, pickle) is either."""
        rec = remember_valid(replaced_record(RECORDS["completed"](), {}))
        assert not is_known_valid(dataclasses.replace(rec))
        assert not is_known_valid(copy.copy(rec))
        assert not is_known_valid(copy.deepcopy(rec))
        assert not is_known_valid(pickle.loads(pickle.dumps(rec)))
        assert copy.copy(rec) == rec
        assert pickle.loads(pickle.dumps(rec)) == rec
        base = RECORDS["ready"]()
        dead = [remember_valid(replaced_record(base, {})) for _ in range(100)]
        addresses = {id(r) for r in dead}
        del dead
        gc.collect()
        # The allocator usually hands some freed blocks out again: whatever address a later
        # record has, it is not known valid until marked.
        later = [replaced_record(base, {}) for _ in range(100)]
        assert len(addresses) == 100
        assert not any(is_known_valid(r) for r in later)
        assert not is_known_valid({"schema_version": 1})

    def test_binding_key_survives_copies(self) -> None:
        """A binding's key is its (namespace, call_id) after replace, copy and pickle, and
        is no part of its equality, repr or stored form."""
        b = binding()
        assert b.key == (b.namespace, b.call_id)
        for other in (copy.copy(b), copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
            assert other == b
            assert other.key == b.key
        moved = dataclasses.replace(b, call_id="other")
        assert moved.key == (b.namespace, "other")
        assert "key" not in repr(b)
        assert set(b.to_dict()) == {f.name for f in dataclasses.fields(b)}
        assert hash(b) == hash(copy.copy(b))


_ID_CHARS = st.sampled_from(list("aZ09._:-+/= \x00\n\t\u00e9\U0001f600"))
_VALID_ID = st.text(st.sampled_from(list("aZ09._:-")), min_size=1, max_size=8)
_ID_TEXT = st.one_of(
    _VALID_ID,
    _VALID_ID,
    _VALID_ID,
    st.text(_ID_CHARS, max_size=6),
    st.integers(0, 3).flatmap(
        lambda k: st.sampled_from(["a" * (127 + k), "a" * (255 + k), "sha256:" + "f" * (64 + k)])
    ),
)


class _Str(str):
    """A str subclass: check_identifier refuses it (``type(value) is not str``)."""


def _first_failing(fields: tuple[Any, ...]) -> str | None:
    names = ("namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint")
    for name, value in zip(names, fields, strict=True):
        try:
            check_identifier(value, name, fingerprint=name == "input_fingerprint")
        except tl.InvalidArgumentError:
            return name
    return None


@settings(max_examples=500)
@given(st.tuples(_ID_TEXT, _ID_TEXT, _ID_TEXT, _ID_TEXT, _ID_TEXT), st.integers(-1, 4))
def test_binding_accepts_exactly_what_each_field_check_accepts(
    fields: tuple[str, ...], subclass: int
) -> None:
    """Binding's one joined match accepts a binding iff each field passes check_identifier,
    and a refused one names the first failing field, as the five checks did."""
    values: tuple[Any, ...] = fields
    if subclass >= 0:
        values = (*fields[:subclass], _Str(fields[subclass]), *fields[subclass + 1 :])
    failing = _first_failing(values)
    if failing is None:
        assert Binding(*values).to_dict() == dict(
            zip(
                ("namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint"),
                values,
                strict=True,
            )
        )
    else:
        with pytest.raises(tl.InvalidArgumentError) as info:
            Binding(*values)
        assert info.value.details == {"argument": failing}


def _containers(value: Any) -> list[Any]:
    """Every dict and list in ``value``, outermost first."""
    if type(value) is dict:
        return [value] + [c for v in value.values() for c in _containers(v)]
    if type(value) is list:
        return [value] + [c for v in value for c in _containers(v)]
    return []


def _recursive_copy(value: Any) -> Any:
    """The plain recursive copy copy_json stands for (its former definition)."""
    if type(value) is dict:
        return {k: _recursive_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_recursive_copy(v) for v in value]
    return value


@given(json_values)
def test_copy_json_is_the_recursive_copy_sharing_no_container(value: Any) -> None:
    """copy_json equals the plain recursive copy, key order kept, and shares no container
    with the value (scalars are shared)."""
    out = copy_json(value)
    assert canonical_json(out) == canonical_json(value)
    assert json.dumps(out) == json.dumps(_recursive_copy(value))  # same key order
    ids = {id(c) for c in _containers(value)}
    assert not any(id(c) in ids for c in _containers(out))


UTC = timezone.utc


class TestParseIso:
    """Times read the same on every supported Python: 3.10's ``fromisoformat`` takes no
    ``Z`` and only 3 or 6 fraction digits; ``parse_iso`` reads them as 3.11 does."""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
            ("2026-01-01T00:00:01.5+00:00", datetime(2026, 1, 1, 0, 0, 1, 500_000, UTC)),
            ("2026-01-01T00:00:01.25Z", datetime(2026, 1, 1, 0, 0, 1, 250_000, UTC)),
            ("2026-01-01T00:00:01.1234567+00:00", datetime(2026, 1, 1, 0, 0, 1, 123_456, UTC)),
            ("2026-01-01T00:00:01.123456+02:00", datetime(2025, 12, 31, 22, 0, 1, 123_456, UTC)),
        ],
    )
    def test_every_form_reads_as_python_3_11_reads_it(self, text: str, expected: datetime) -> None:
        """The 3.10 reading and the one in use agree with the expected instant."""
        assert parse_iso_310(text) == expected
        assert parse_iso(text) == expected
        assert parse_time(text, "at") == expected

    def test_bad_text_is_refused_as_before(self) -> None:
        """Not a time: ``ValueError`` from both."""
        for parse in (parse_iso_310, parse_iso):
            with pytest.raises(ValueError):
                parse("yesterday")
