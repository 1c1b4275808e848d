"""validate_checkpoint: schema version, types, status invariants, time order, payloads."""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    CheckpointRecord,
    Result,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    validate_checkpoint,
)

from ._ckpt_records import RECORDS, STATUS_RECORDS, at, binding

INVARIANT_FIELDS = [
    "execution_fence",
    "execution_claimed_at",
    "uncertain_reason",
    "result",
    "completed_at",
    "delivery_fence",
    "delivered_at",
]
# status -> fields that must be set (every other invariant field must be None).
MUST_BE_SET = {
    "ready": set(),
    "executing": {"execution_fence", "execution_claimed_at"},
    "uncertain": {"execution_fence", "execution_claimed_at", "uncertain_reason"},
    "completed": {"execution_fence", "execution_claimed_at", "result", "completed_at"},
    "delivering": {
        "execution_fence",
        "execution_claimed_at",
        "result",
        "completed_at",
        "delivery_fence",
    },
    "delivered": {
        "execution_fence",
        "execution_claimed_at",
        "result",
        "completed_at",
        "delivery_fence",
        "delivered_at",
    },
}
FILLERS: dict[str, Any] = {
    "execution_fence": "a9",
    "execution_claimed_at": "2026-01-01T00:00:00.500000+00:00",
    "uncertain_reason": "why",
    "result": {"payload": 1, "is_error": False},
    "completed_at": "2026-01-01T00:00:00.500000+00:00",
    "delivery_fence": "d9",
    "delivered_at": "2026-01-01T00:00:00.500000+00:00",
}


def _dict(name: str) -> dict[str, Any]:
    return copy.deepcopy(RECORDS[name]().to_dict())


def _code(data: Any) -> str:
    with pytest.raises(tl.CheckpointError) as info:
        validate_checkpoint(data)
    return info.value.code


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_validate_every_reachable_record_is_valid(name: str) -> None:
    """Records built by transitions validate, as records and as dicts."""
    rec = RECORDS[name]()
    assert validate_checkpoint(rec) is rec
    assert validate_checkpoint(rec.to_dict()) == rec


@pytest.mark.parametrize("status", sorted(MUST_BE_SET))
@pytest.mark.parametrize("field", INVARIANT_FIELDS)
def test_validate_status_invariant_violation_is_invalid_checkpoint(status: str, field: str) -> None:
    """Setting a field that must be empty, or clearing one that must be set, is refused."""
    data = _dict(status)
    data[field] = None if field in MUST_BE_SET[status] else FILLERS[field]
    with pytest.raises(tl.InvalidCheckpointError) as info:
        validate_checkpoint(data)
    assert field in info.value.message
    assert info.value.details["call_id"] == "call-1"


@pytest.mark.parametrize("status", sorted(MUST_BE_SET))
@pytest.mark.parametrize("field", INVARIANT_FIELDS)
def test_validate_record_object_invariant_violation_is_invalid_checkpoint(
    status: str, field: str
) -> None:
    """The same rules hold for CheckpointRecord objects."""
    rec = STATUS_RECORDS[status]()
    value: Any
    if field in MUST_BE_SET[status]:
        value = None
    elif field == "result":
        value = Result(payload=1)
    elif field.endswith("_at"):
        value = rec.created_at
    else:
        value = "x9"
    bad = dataclasses.replace(rec, **{field: value})
    assert _code(bad) == "INVALID_CHECKPOINT"


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("ready", {"delivery_attempts": 1}),
        ("executing", {"delivery_attempts": 1}),
        ("delivering", {"delivery_attempts": 0}),
        ("delivered", {"delivery_attempts": 0}),
        ("ready", {"delivery_attempts": -1}),
        ("ready", {"delivery_attempts": True}),
        ("ready", {"revision": -1}),
        ("ready", {"revision": True}),
        ("ready", {"revision": 1.0}),
        ("ready", {"revision": "0"}),
        ("ready", {"status": "done"}),
        ("ready", {"status": None}),
        ("ready", {"created_at": "2026-01-01T00:00:00"}),  # no offset
        ("ready", {"created_at": "yesterday"}),
        ("ready", {"updated_at": None}),
        ("ready", {"created_at": "2026-01-01T00:00:01.000000+00:00"}),  # != updated_at at rev 0
        ("executing", {"execution_claimed_at": "2025-12-31T23:59:59.000000+00:00"}),
        ("executing", {"execution_claimed_at": "2026-01-01T00:00:05.000000+00:00"}),
        ("completed", {"completed_at": "2026-01-01T00:00:00.500000+00:00"}),
        ("delivered", {"delivered_at": "2026-01-01T00:00:01.500000+00:00"}),
        ("delivered", {"updated_at": "2026-01-01T00:00:03.500000+00:00"}),
        ("executing", {"execution_fence": "bad fence"}),
        ("delivering", {"delivery_fence": ""}),
        ("uncertain", {"uncertain_reason": ""}),
        ("uncertain", {"uncertain_reason": "r" * 1025}),
        ("uncertain", {"uncertain_reason": 5}),
        ("uncertain", {"uncertain_reason": "lone \udc00"}),
        ("completed", {"result": {"payload": 1}}),
        ("completed", {"result": {"payload": 1, "is_error": 0}}),
        ("completed", {"result": {"payload": 1, "is_error": False, "x": 1}}),
        ("completed", {"result": [1]}),
        ("completed", {"result": {"payload": float("nan"), "is_error": False}}),
        ("completed", {"result": {"payload": 2**53, "is_error": False}}),
        ("completed", {"result": {"payload": "é\ud800", "is_error": False}}),
        ("ready", {"binding": {"namespace": "ns"}}),
        ("ready", {"binding": "ns/call-1"}),
        ("ready", {"binding": {**binding().to_dict(), "call_id": "a b"}}),
        ("ready", {"binding": {**binding().to_dict(), "extra": "x"}}),
    ],
)
def test_validate_broken_dict_is_invalid_checkpoint(name: str, change: dict[str, Any]) -> None:
    """Types, bounds and the time order are checked; failures are INVALID_CHECKPOINT."""
    data = {**_dict(name), **change}
    assert _code(data) == "INVALID_CHECKPOINT"


def test_validate_missing_field_is_invalid_checkpoint() -> None:
    """Every field is required."""
    data = _dict("ready")
    del data["delivered_at"]
    with pytest.raises(tl.InvalidCheckpointError) as info:
        validate_checkpoint(data)
    assert "delivered_at" in info.value.message


def test_validate_unknown_field_is_invalid_checkpoint() -> None:
    """Unknown fields are refused, not ignored."""
    assert _code({**_dict("ready"), "lease_expires_at": None}) == "INVALID_CHECKPOINT"


@pytest.mark.parametrize("version", [0, 2, 99, -1])
def test_validate_other_schema_version_is_unsupported_schema(version: int) -> None:
    """Another int schema version is UNSUPPORTED_SCHEMA, naming the version."""
    with pytest.raises(tl.UnsupportedSchemaError) as info:
        validate_checkpoint({**_dict("ready"), "schema_version": version})
    assert info.value.details["schema_version"] == version


@pytest.mark.parametrize("version", ["1", 1.0, True, None])
def test_validate_non_int_schema_version_is_invalid_checkpoint(version: Any) -> None:
    """A schema version that is not an int is INVALID_CHECKPOINT."""
    assert _code({**_dict("ready"), "schema_version": version}) == "INVALID_CHECKPOINT"


def test_validate_missing_schema_version_is_invalid_checkpoint() -> None:
    """No schema version at all is INVALID_CHECKPOINT."""
    data = _dict("ready")
    del data["schema_version"]
    assert _code(data) == "INVALID_CHECKPOINT"


@pytest.mark.parametrize("value", [None, [], "record", 1])
def test_validate_non_record_is_invalid_checkpoint(value: Any) -> None:
    """Only records and dicts are validated."""
    assert _code(value) == "INVALID_CHECKPOINT"


def test_validate_non_aware_record_time_is_invalid_checkpoint() -> None:
    """A record object holding a naive time is refused."""
    rec = dataclasses.replace(
        RECORDS["executing"](), execution_claimed_at=at(1).replace(tzinfo=None)
    )
    assert _code(rec) == "INVALID_CHECKPOINT"


def test_validate_does_not_modify_dict() -> None:
    """Validation never repairs: the input dict is left as it was."""
    data = _dict("completed")
    before = json.dumps(data, sort_keys=True)
    validate_checkpoint(data)
    data["status"] = "delivered"
    with pytest.raises(tl.InvalidCheckpointError):
        validate_checkpoint(data)
    assert json.dumps(data, sort_keys=True) == before.replace('"completed"', '"delivered"', 1)


def test_from_dict_validates() -> None:
    """CheckpointRecord.from_dict is validate_checkpoint for dicts."""
    data = _dict("delivered")
    assert CheckpointRecord.from_dict(data) == RECORDS["delivered"]()
    data["delivery_attempts"] = 0
    with pytest.raises(tl.InvalidCheckpointError):
        CheckpointRecord.from_dict(data)


def test_validate_times_may_be_equal() -> None:
    """Every time may equal the one before it."""
    rec = create_checkpoint(binding(), at=at(0))
    for step in (
        lambda r: claim_execution(r, attempt_id="a", at=at(0)),
        lambda r: complete_execution(r, attempt_id="a", at=at(0), result=None),
        lambda r: claim_delivery(r, delivery_id="d", at=at(0)),
        lambda r: complete_delivery(r, delivery_id="d", at=at(0)),
    ):
        rec = step(rec).next
    assert validate_checkpoint(rec.to_dict()) == rec
    assert rec.result == Result(payload=None)


def test_validate_payload_limit_argument_applies_to_stored_payload() -> None:
    """A stored payload is checked against the given byte limit, else the hard maximum."""
    rec = complete_execution(
        RECORDS["executing"](), attempt_id="a1", at=at(5), result="x" * 100
    ).next
    assert validate_checkpoint(rec.to_dict()) == rec
    assert validate_checkpoint(rec, max_payload_bytes=102) is rec
    with pytest.raises(tl.InvalidCheckpointError) as info:
        validate_checkpoint(rec, max_payload_bytes=101)
    assert "102 bytes" in info.value.message


def test_validate_record_later_than_updated_at_is_invalid() -> None:
    """No time may be later than updated_at."""
    rec = RECORDS["completed"]()
    bad = dataclasses.replace(rec, completed_at=rec.updated_at + timedelta(seconds=1))
    assert _code(bad) == "INVALID_CHECKPOINT"


def test_validate_hand_built_record_with_payload_is_checked_every_time() -> None:
    """A record built by the caller (sharing the caller's payload) is never trusted blindly."""
    payload: dict[str, Any] = {"x": [1]}
    good = RECORDS["completed"]()
    rec = dataclasses.replace(good, result=Result(payload=payload))
    assert validate_checkpoint(rec) is rec
    payload["x"].append(float("nan"))
    assert _code(rec) == "INVALID_CHECKPOINT"
    with pytest.raises(tl.InvalidCheckpointError):
        claim_delivery(rec, delivery_id="d", at=at(9))


def test_validate_payload_free_record_validated_once_stays_valid() -> None:
    """Validation results are reused only for the very same (immutable) record object."""
    rec = RECORDS["executing"]()
    copy_ = dataclasses.replace(rec)
    assert copy_ == rec
    assert validate_checkpoint(copy_) is copy_
    broken = dataclasses.replace(rec, execution_claimed_at=None)
    assert _code(broken) == "INVALID_CHECKPOINT"
