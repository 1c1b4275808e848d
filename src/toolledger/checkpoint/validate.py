"""Structural validation of checkpoint records. Pure; no I/O.

``validate_checkpoint`` accepts a record or its stored dict and either returns a valid
``CheckpointRecord`` or raises. It never repairs: a record that fails is quarantined by
its caller, never reset.

A record object toolledger itself built or validated, whose contents nobody else can
change (see ``model.remember_valid``), is not walked again: the hot path (get, transition,
compare-and-swap) validates each record once. Dicts and records built by callers around
their own payload objects are checked every time.

Rules (schema version 1):

- ``schema_version`` is the int 1 (another int: ``UNSUPPORTED_SCHEMA``).
- identifiers and fences are bounded ASCII identifiers; ``revision`` and
  ``delivery_attempts`` are non-negative ints.
- status invariants (X = must be set, - = must be None):

  ========== ===== ======= ========= ====== ========= ====== ==========
  status     fence claimed uncertain result completed dfence delivered
  ========== ===== ======= ========= ====== ========= ====== ==========
  ready      -     -       -         -      -         -      -
  executing  X     X       -         -      -         -      -
  uncertain  X     X       X         -      -         -      -
  completed  X     X       -         X      X         -      -
  delivering X     X       -         X      X         X      -
  delivered  X     X       -         X      X         X      X
  ========== ===== ======= ========= ====== ========= ====== ==========

  ``delivery_attempts`` is 0 before completion and at least 1 while delivering/delivered.
- ``resolution`` (optional; absent means none) is a person's decision, set only on the
  record a ``resolve_*`` transition made: its ``at`` is the record's ``updated_at``; an
  outcome ``not_executed`` is on a ``ready`` record, ``completed``/``failed`` on a
  ``completed`` one whose result's ``is_error`` is false/true.
- times: ``created_at <= execution_claimed_at <= completed_at <= delivered_at`` and every
  time ``<= updated_at``.
- the result payload is exact JSON within the depth and value bounds, and within
  ``max_payload_bytes`` (default: the hard maximum, so a result stored under a raised
  limit stays readable).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import CheckpointError, InvalidCheckpointError, UnsupportedSchemaError
from ._json import HARD_MAX_PAYLOAD_BYTES, check_bounds, check_types
from .model import (
    RESOLUTION_OUTCOMES,
    SCHEMA_VERSION,
    Binding,
    CheckpointRecord,
    Resolution,
    Result,
    Status,
    check_identifier,
    check_reason,
    is_known_valid,
    parse_time,
    remember_valid,
)

__all__ = ["validate_checkpoint", "validate_stored"]

_FIELDS = (
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
)

# status -> (fence, claimed, uncertain, result, completed, delivery_fence, delivered)
_SET = True
_NONE = False
_INVARIANTS: dict[Status, tuple[bool, ...]] = {
    Status.READY: (_NONE, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE),
    Status.EXECUTING: (_SET, _SET, _NONE, _NONE, _NONE, _NONE, _NONE),
    Status.UNCERTAIN: (_SET, _SET, _SET, _NONE, _NONE, _NONE, _NONE),
    Status.COMPLETED: (_SET, _SET, _NONE, _SET, _SET, _NONE, _NONE),
    Status.DELIVERING: (_SET, _SET, _NONE, _SET, _SET, _SET, _NONE),
    Status.DELIVERED: (_SET, _SET, _NONE, _SET, _SET, _SET, _SET),
}
_INVARIANT_NAMES = (
    "execution_fence",
    "execution_claimed_at",
    "uncertain_reason",
    "result",
    "completed_at",
    "delivery_fence",
    "delivered_at",
)


#: Compact JSON is at most this many times the bytes of any JSON text it was parsed from
#: (whitespace and escapes only shrink; the longest growth is a float token such as
#: ``1e15`` -> ``1000000000000000.0``, 4.5x).
_EXPANSION = 8


def validate_stored(data: Any, stored_bytes: int) -> CheckpointRecord:
    """``validate_checkpoint(data)`` for a dict just parsed from ``stored_bytes`` of text.

    Every check runs; the payload's byte bound is proven from the text's size when that is
    small enough (see ``_EXPANSION``) instead of encoding the payload a second time.

    Raises:
        UnsupportedSchemaError, InvalidCheckpointError: as ``validate_checkpoint``.
    """
    return validate_checkpoint(data, stored_bytes=stored_bytes)


def validate_checkpoint(
    record: CheckpointRecord | dict[str, Any],
    *,
    max_payload_bytes: int | None = None,
    stored_bytes: int | None = None,
) -> CheckpointRecord:
    """Validate a record (or its stored dict) and return it as a ``CheckpointRecord``.

    Args:
        record: A ``CheckpointRecord`` or the dict produced by ``to_dict()``.
        max_payload_bytes: Byte bound for the result payload; default the hard maximum
            (10,485,760). Depth and value-count bounds always apply.
        stored_bytes: For a dict parsed from stored JSON text: that text's size in bytes
            (lets the byte bound be proven without re-encoding; see ``validate_stored``).

    Raises:
        UnsupportedSchemaError: ``UNSUPPORTED_SCHEMA`` when the schema version is another int.
        InvalidCheckpointError: ``INVALID_CHECKPOINT`` naming the first broken rule.
    """
    if max_payload_bytes is None and is_known_valid(record):
        return record
    limit = HARD_MAX_PAYLOAD_BYTES if max_payload_bytes is None else max_payload_bytes
    if isinstance(record, CheckpointRecord):
        _check_schema(record.schema_version)
        rec = record
        try:
            _check_fields(rec)
        except (ValueError, TypeError, CheckpointError) as exc:
            raise _invalid(rec.binding if isinstance(rec.binding, Binding) else None, exc) from exc
    elif isinstance(record, dict):
        _check_schema(record.get("schema_version"))
        try:
            rec = _from_dict(record)
            _check_fields(rec)
        except (ValueError, TypeError, KeyError, CheckpointError) as exc:
            raise _invalid(_binding_hint(record), exc) from exc
    else:
        raise InvalidCheckpointError(
            message=f"expected a CheckpointRecord or dict, got {type(record).__name__}"
        )
    if rec.result is not None:
        try:
            shape = check_types(rec.result.payload, what="result payload")
            if stored_bytes is not None and stored_bytes * _EXPANSION <= limit:
                # Parsed from stored text of ``stored_bytes``: its compact form cannot
                # exceed ``_EXPANSION`` times that, so the byte bound holds without
                # encoding the payload again. Depth and value count are checked as always.
                check_bounds(None, shape, max_bytes=limit, what="result payload", size_known=True)
            else:
                check_bounds(rec.result.payload, shape, max_bytes=limit, what="result payload")
        except CheckpointError as exc:
            raise _invalid(rec.binding, exc) from exc
    elif max_payload_bytes is None:
        # Every field of a payload-free record is immutable: it stays valid.
        remember_valid(rec)
    return rec


def _check_schema(version: object) -> None:
    if type(version) is int and version != SCHEMA_VERSION:
        raise UnsupportedSchemaError(
            message=f"checkpoint schema version {version} is not supported "
            f"(this toolledger reads version {SCHEMA_VERSION}); upgrade toolledger",
            details={"schema_version": version, "supported": [SCHEMA_VERSION]},
        )
    if type(version) is not int:
        raise InvalidCheckpointError(
            message=f"schema_version must be an int, got {version!r:.50}",
        )


def _binding_hint(data: dict[str, Any]) -> dict[str, Any] | None:
    b = data.get("binding")
    if isinstance(b, dict):
        return {k: b.get(k) for k in ("namespace", "call_id") if isinstance(b.get(k), str)}
    return None


def _invalid(
    binding: Binding | dict[str, Any] | None, exc: BaseException
) -> InvalidCheckpointError:
    if isinstance(binding, Binding):
        where: dict[str, Any] = {"namespace": binding.namespace, "call_id": binding.call_id}
    else:
        where = dict(binding or {})
    why = exc.message if isinstance(exc, CheckpointError) else str(exc)
    key = "/".join(str(where.get(k)) for k in ("namespace", "call_id")) if where else "?"
    return InvalidCheckpointError(
        message=f"checkpoint {key} is invalid: {why}",
        details={**where, "reason": why},
    )


def _opt_time(data: dict[str, Any], name: str) -> datetime | None:
    value = data[name]
    return None if value is None else parse_time(value, name)


_STATUSES: dict[str, Status] = {s.value: s for s in Status}
_BINDING_FIELDS = ("namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint")
#: Bindings already built (and so checked) from stored rows, by their five strings: a
#: ``Binding`` is immutable and its checks depend on those strings only. Bounded.
_BINDINGS: dict[tuple[str, ...], Binding] = {}
_BINDINGS_MAX = 4096


def _binding(data: Any) -> Binding:
    """``Binding.from_dict(data)``, reusing a binding already checked for the same strings."""
    if type(data) is dict and len(data) == 5:
        try:
            key = tuple(data[f] for f in _BINDING_FIELDS)
        except KeyError:
            return Binding.from_dict(data)
        if all(type(v) is str for v in key):
            found = _BINDINGS.get(key)
            if found is not None:
                return found
            made = Binding.from_dict(data)
            if len(_BINDINGS) >= _BINDINGS_MAX:
                _BINDINGS.clear()
            _BINDINGS[key] = made
            return made
    return Binding.from_dict(data)


def _from_dict(data: dict[str, Any]) -> CheckpointRecord:
    missing = [f for f in _FIELDS if f not in data]
    if missing:
        raise ValueError(f"missing fields: {', '.join(missing)}")
    extra = sorted(set(data) - set(_FIELDS) - {"resolution"})
    if extra:
        raise ValueError(f"unknown fields: {', '.join(map(str, extra))}")
    raw_result = data["result"]
    result: Result | None
    if raw_result is None:
        result = None
    else:
        if not isinstance(raw_result, dict) or set(raw_result) != {"payload", "is_error"}:
            raise ValueError("result must be null or {payload, is_error}")
        if type(raw_result["is_error"]) is not bool:
            raise ValueError("result.is_error must be a bool")
        result = Result(payload=raw_result["payload"], is_error=raw_result["is_error"])
    status = data["status"]
    if type(status) is not str:
        raise ValueError("status must be a string")
    created = parse_time(data["created_at"], "created_at")
    updated = parse_time(data["updated_at"], "updated_at")
    return CheckpointRecord(
        schema_version=data["schema_version"],
        binding=_binding(data["binding"]),
        status=_STATUSES.get(status) or Status(status),
        revision=data["revision"],
        created_at=created,
        updated_at=updated,
        execution_fence=data["execution_fence"],
        execution_claimed_at=_opt_time(data, "execution_claimed_at"),
        uncertain_reason=data["uncertain_reason"],
        result=result,
        completed_at=_opt_time(data, "completed_at"),
        delivery_fence=data["delivery_fence"],
        delivery_attempts=data["delivery_attempts"],
        delivered_at=_opt_time(data, "delivered_at"),
        resolution=_resolution(data.get("resolution")),
    )


def _resolution(raw: Any) -> Resolution | None:
    if raw is None:
        return None
    keys = {"outcome", "by", "reason", "at", "forced"}
    if not isinstance(raw, dict) or set(raw) != keys:
        raise ValueError(f"resolution must be null or {{{', '.join(sorted(keys))}}}")
    return Resolution(
        outcome=raw["outcome"],
        by=raw["by"],
        reason=raw["reason"],
        at=parse_time(raw["at"], "resolution.at"),
        forced=raw["forced"],
    )


def _check_resolution(rec: CheckpointRecord) -> None:
    res = rec.resolution
    if not isinstance(res, Resolution):
        raise ValueError("resolution must be a Resolution or None")
    if res.outcome not in RESOLUTION_OUTCOMES:
        raise ValueError(f"resolution.outcome must be one of {', '.join(RESOLUTION_OUTCOMES)}")
    check_reason(res.by, "resolution.by")
    check_reason(res.reason, "resolution.reason")
    _aware(res.at, "resolution.at", required=True)
    if type(res.forced) is not bool:
        raise ValueError("resolution.forced must be a bool")
    if res.at != rec.updated_at:
        raise ValueError("resolution.at must be the updated_at of the record it settled")
    if res.outcome == "not_executed":
        if rec.status is not Status.READY:
            raise ValueError("a not_executed resolution is on a ready record only")
    elif rec.status is not Status.COMPLETED or rec.result is None:
        raise ValueError(f"a {res.outcome} resolution is on a completed record only")
    elif rec.result.is_error != (res.outcome == "failed"):
        raise ValueError(f"a {res.outcome} resolution's result has the wrong is_error")


def _check_fields(rec: CheckpointRecord) -> None:
    if not isinstance(rec.binding, Binding):
        raise ValueError("binding must be a Binding")
    if not isinstance(rec.status, Status):
        raise ValueError(f"unknown status {rec.status!r}")
    if type(rec.revision) is not int or rec.revision < 0:
        raise ValueError("revision must be a non-negative int")
    if type(rec.delivery_attempts) is not int or rec.delivery_attempts < 0:
        raise ValueError("delivery_attempts must be a non-negative int")
    for name in ("created_at", "updated_at"):
        _aware(getattr(rec, name), name, required=True)
    for name in ("execution_claimed_at", "completed_at", "delivered_at"):
        _aware(getattr(rec, name), name, required=False)
    if rec.execution_fence is not None:
        check_identifier(rec.execution_fence, "execution_fence")
    if rec.delivery_fence is not None:
        check_identifier(rec.delivery_fence, "delivery_fence")
    if rec.uncertain_reason is not None:
        check_reason(rec.uncertain_reason, "uncertain_reason")
    if rec.result is not None and not isinstance(rec.result, Result):
        raise ValueError("result must be a Result or None")
    if rec.result is not None and type(rec.result.is_error) is not bool:
        raise ValueError("result.is_error must be a bool")

    expected = _INVARIANTS[rec.status]
    for name, must_be_set in zip(_INVARIANT_NAMES, expected, strict=True):
        is_set = getattr(rec, name) is not None
        if is_set != must_be_set:
            state = "must be set" if must_be_set else "must be empty"
            raise ValueError(f"{name} {state} when status is {rec.status.value}")
    if rec.status in (Status.READY, Status.EXECUTING, Status.UNCERTAIN):
        if rec.delivery_attempts != 0:
            raise ValueError(f"delivery_attempts must be 0 when status is {rec.status.value}")
    elif rec.status in (Status.DELIVERING, Status.DELIVERED) and rec.delivery_attempts < 1:
        raise ValueError(f"delivery_attempts must be >= 1 when status is {rec.status.value}")
    if rec.status is Status.READY and rec.revision == 0 and rec.created_at != rec.updated_at:
        raise ValueError("a ready record at revision 0 must have created_at == updated_at")
    if rec.resolution is not None:
        _check_resolution(rec)

    chain = [rec.created_at, rec.execution_claimed_at, rec.completed_at, rec.delivered_at]
    names = ["created_at", "execution_claimed_at", "completed_at", "delivered_at"]
    last, last_name = rec.created_at, "created_at"
    for value, name in zip(chain, names, strict=True):
        if value is None:
            continue
        if value < last:
            raise ValueError(f"{name} is earlier than {last_name}")
        if value > rec.updated_at:
            raise ValueError(f"{name} is later than updated_at")
        last, last_name = value, name


def _aware(value: object, name: str, *, required: bool) -> None:
    if value is None:
        if required:
            raise ValueError(f"{name} is required")
        return
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime")
