"""Checkpoint records: the data. Pure and immutable; no I/O.

Records are frozen dataclasses changed only through the transitions in ``transitions.py``
(which use ``dataclasses.replace``). ``to_dict``/``from_dict`` give the JSON-ready stored
form (schema version 1); ``from_dict`` validates, so a malformed stored row is refused,
never silently repaired.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, TypeGuard

from ..errors import InvalidArgumentError
from ._json import canonical_json

__all__ = [
    "AGE_UNITS",
    "SCHEMA_VERSION",
    "Action",
    "Binding",
    "CheckpointRecord",
    "Decision",
    "RESOLUTION_OUTCOMES",
    "Resolution",
    "Result",
    "Status",
    "Transition",
    "check_identifier",
    "check_reason",
    "check_time",
    "fingerprint",
    "parse_age",
    "format_time",
    "is_identifier",
    "is_known_valid",
    "mark_valid",
    "parse_iso",
    "parse_time",
    "remember_valid",
    "replaced_record",
    "with_result",
]

SCHEMA_VERSION = 1

# Explicit ASCII classes with fullmatch: no \w (Unicode digits) and no $ (matches before "\n").
_IDENTIFIER = re.compile(r"[A-Za-z0-9._:-]{1,128}")
#: Whether a str passes ``check_identifier`` (a match, else ``None``), without a Python frame.
is_identifier = _IDENTIFIER.fullmatch
_FINGERPRINT = re.compile(r"[A-Za-z0-9._:+/=-]{1,256}")
# A binding's five fields at once, joined by NUL (in neither class, so each field is
# matched alone, whole): it matches exactly when each field passes its check_identifier.
_BINDING_FIELDS = re.compile(r"(?:[A-Za-z0-9._:-]{1,128}\x00){4}[A-Za-z0-9._:+/=-]{1,256}")


class Status(str, Enum):
    """Where a tool call stands. Values are the stored strings."""

    READY = "ready"
    EXECUTING = "executing"
    UNCERTAIN = "uncertain"
    COMPLETED = "completed"
    DELIVERING = "delivering"
    DELIVERED = "delivered"

    def __str__(self) -> str:
        return self.value


class Action(str, Enum):
    """What the caller must do next. Values are the stored strings."""

    EXECUTE = "execute"
    RECONCILE_EXECUTION = "reconcile-execution"
    DELIVER = "deliver"
    RECONCILE_DELIVERY = "reconcile-delivery"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


def check_identifier(value: object, name: str, *, fingerprint: bool = False) -> str:
    """Return ``value`` if it is a valid identifier, else raise ``INVALID_ARGUMENT``.

    Identifiers are 1-128 ASCII characters from ``[A-Za-z0-9._:-]``; fingerprints are 1-256
    from ``[A-Za-z0-9._:+/=-]``.
    """
    pattern = _FINGERPRINT if fingerprint else _IDENTIFIER
    if type(value) is not str or pattern.fullmatch(value) is None:
        allowed = "1-256 of [A-Za-z0-9._:+/=-]" if fingerprint else "1-128 of [A-Za-z0-9._:-]"
        raise InvalidArgumentError(
            message=f"{name} must be a str of {allowed}; got {value!r:.200}",
            details={"argument": name},
        )
    return value


def check_reason(value: object, name: str = "reason") -> str:
    """Return ``value`` if it is a str of 1-1024 characters of valid Unicode.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` otherwise (a lone surrogate could not
            be stored as UTF-8).
    """
    if isinstance(value, str) and type(value) is str and 1 <= len(value) <= 1024:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return value
    raise InvalidArgumentError(
        message=f"{name} must be a str of 1-1024 characters of valid Unicode",
        details={"argument": name},
    )


def check_time(value: object, name: str = "at") -> datetime:
    """Return ``value`` normalised to UTC if it is a timezone-aware datetime.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a naive datetime or another type.
    """
    if not isinstance(value, datetime):
        raise InvalidArgumentError(
            message=f"{name} must be a timezone-aware datetime; got {type(value).__name__}",
            details={"argument": name},
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(
            message=f"{name} must be timezone-aware (e.g. datetime.now(timezone.utc))",
            details={"argument": name},
        )
    return value.astimezone(timezone.utc)


# A record is serialised several times over its life (every transition re-dumps it, the
# store writes its time columns too), and its times rarely change: remember the text.
_TIME_TEXT: dict[datetime, str] = {}


def format_time(value: datetime) -> str:
    """Return the stored form of a time: ISO-8601 in UTC with microseconds."""
    text = _TIME_TEXT.get(value) if value.tzinfo is not None else None
    if text is None:
        text = value.astimezone(timezone.utc).isoformat(timespec="microseconds")
        if value.tzinfo is not None:
            if len(_TIME_TEXT) >= 4096:
                _TIME_TEXT.clear()
            _TIME_TEXT[value] = text
    return text


def _parse_iso_310(text: str) -> datetime:
    """``datetime.fromisoformat`` as Python 3.11 reads it, on 3.10: a ``Z`` offset, and a
    fraction of any length (3.10 takes only 3 or 6 digits; more are cut to microseconds)."""
    if isinstance(text, str):
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        frac = _FRACTION.search(text)
        if frac is not None and len(frac.group(1)) not in (3, 6):
            text = text[: frac.start(1)] + frac.group(1)[:6].ljust(6, "0") + text[frac.end(1) :]
    return datetime.fromisoformat(text)


#: The fraction of seconds in an ISO-8601 time (after ``HH:MM:SS``).
_FRACTION = re.compile(r"T\d\d:\d\d:\d\d[.,](\d+)")

#: ``datetime.fromisoformat`` (3.11+), or the same reading on 3.10: every ISO-8601 time
#: toolledger reads from stored or imported records goes through this one function.
parse_iso: Callable[[str], datetime] = (
    datetime.fromisoformat if sys.version_info >= (3, 11) else _parse_iso_310
)


def parse_time(value: object, name: str) -> datetime:
    """Parse a stored ISO-8601 time; it must carry an offset."""
    if type(value) is not str:
        raise ValueError(f"{name} must be an ISO-8601 string")
    parsed = parse_iso(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{name} has no UTC offset")
    return parsed.astimezone(timezone.utc)


#: The units of an age (``parse_age``), in seconds.
AGE_UNITS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_AGE = re.compile(r"(\d+)\s*(w|d|h|m|s)")
#: The longest age a ``timedelta`` holds.
_MAX_AGE_SECONDS = int(timedelta.max.total_seconds())


def parse_age(text: str) -> timedelta:
    """Parse an age such as ``30d``, ``12h``, ``1w2d`` or ``90s``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for anything else.
    """
    cleaned = text.strip().lower() if isinstance(text, str) else ""
    if not cleaned or _AGE.sub("", cleaned).strip():
        raise InvalidArgumentError(
            message=f"an age is like 30d, 12h, 1w2d, 45m or 90s; got {text!r}",
            details={"argument": "older_than"},
        )
    seconds = sum(int(n) * AGE_UNITS[u] for n, u in _AGE.findall(cleaned))
    if seconds > _MAX_AGE_SECONDS:
        raise InvalidArgumentError(
            message=f"an age must be at most {timedelta.max.days} days; got {text!r:.40}",
            details={"argument": "older_than"},
        )
    return timedelta(seconds=seconds)


def fingerprint(value: object) -> str:
    """Return ``"sha256:<hex>"`` over the canonical JSON of ``value`` (RFC 8785 style).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``value`` is not exact JSON.
    """
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


class _Keyed:
    """A binding's ``key`` slot, outside its dataclass fields: equality, ``repr`` and the
    stored form are the five fields; ``__init__`` sets it."""

    __slots__ = ("key",)
    #: The store key, ``(namespace, call_id)``: read at every step of a call, so it is made
    #: once (a property ran a Python frame per read).
    key: tuple[str, str]


@dataclass(frozen=True, slots=True, init=False)
class Binding(_Keyed):
    """What a checkpoint is for: the key ``(namespace, call_id)`` and what it must match.

    A record found under the key whose binding differs in any field is a
    ``BINDING_CONFLICT``, never a cache hit.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a malformed identifier.
    """

    namespace: str
    call_id: str
    tool_name: str
    tool_revision: str
    input_fingerprint: str

    def __init__(
        self,
        namespace: str,
        call_id: str,
        tool_name: str,
        tool_revision: str,
        input_fingerprint: str,
    ) -> None:
        # The dataclass's __init__ with its checks and the key in it (not a __post_init__
        # after it: one frame per binding). Frozen: fields are set as that __init__ does.
        if not (
            type(namespace) is str
            and type(call_id) is str
            and type(tool_name) is str
            and type(tool_revision) is str
            and type(input_fingerprint) is str
            # The five at once (one match instead of five; see _BINDING_FIELDS).
            and _BINDING_FIELDS.fullmatch(
                f"{namespace}\x00{call_id}\x00{tool_name}\x00{tool_revision}\x00{input_fingerprint}"
            )
            is not None
        ):
            check_identifier(namespace, "namespace")
            check_identifier(call_id, "call_id")
            check_identifier(tool_name, "tool_name")
            check_identifier(tool_revision, "tool_revision")
            check_identifier(input_fingerprint, "input_fingerprint", fingerprint=True)
            # The joined match fails only where a check above raises.
            raise AssertionError("a field passed alone but not joined")  # pragma: no cover
        set_field = object.__setattr__
        set_field(self, "namespace", namespace)
        set_field(self, "call_id", call_id)
        set_field(self, "tool_name", tool_name)
        set_field(self, "tool_revision", tool_revision)
        set_field(self, "input_fingerprint", input_fingerprint)
        set_field(self, "key", (namespace, call_id))

    def __reduce__(self) -> tuple[type[Binding], tuple[str, str, str, str, str]]:
        # Copies and pickles go through __init__, so they get their key (the dataclass's
        # own state would restore the five fields only).
        return (
            Binding,
            (
                self.namespace,
                self.call_id,
                self.tool_name,
                self.tool_revision,
                self.input_fingerprint,
            ),
        )

    def to_dict(self) -> dict[str, str]:
        """Return the JSON-ready form."""
        return {
            "namespace": self.namespace,
            "call_id": self.call_id,
            "tool_name": self.tool_name,
            "tool_revision": self.tool_revision,
            "input_fingerprint": self.input_fingerprint,
        }

    @classmethod
    def from_dict(cls, data: object) -> Binding:
        """Build a binding from its JSON form; raises ``INVALID_ARGUMENT`` when malformed."""
        if not isinstance(data, dict):
            raise InvalidArgumentError(message="binding must be an object")
        fields = ("namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint")
        if set(data) != set(fields):
            raise InvalidArgumentError(
                message=f"binding must have exactly the keys {', '.join(fields)}",
                details={"keys": sorted(map(str, data))},
            )
        return cls(*(data[f] for f in fields))


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A stored tool result: the exact JSON ``payload``, and whether it reports an error.

    The payload may be ``None`` (JSON ``null``): ``record.result is None`` means "no result",
    ``record.result.payload is None`` means "the result is null".
    """

    payload: Any
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form."""
        return {"payload": self.payload, "is_error": self.is_error}


#: What a person may settle a stuck call as (``toolledger.resolve``).
RESOLUTION_OUTCOMES = ("not_executed", "completed", "failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    """A person's decision that settled a stuck call: the outcome, who, why and when.

    Set only on the record a ``resolve_*`` transition made (``at`` is its ``updated_at``);
    the next transition clears it, so the decision stays in the checkpoint's history.
    ``outcome`` is one of ``RESOLUTION_OUTCOMES``; ``forced``: the call was ``executing``
    (a live attempt may have held it) and the person overrode that.
    """

    outcome: str
    by: str
    reason: str
    at: datetime
    forced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form."""
        return {
            "outcome": self.outcome,
            "by": self.by,
            "reason": self.reason,
            "at": format_time(self.at),
            "forced": self.forced,
        }


class _Provable:
    """A record's known-valid mark (see ``remember_valid``), a slot outside its dataclass
    fields: no copy, ``replace`` or pickle carries it. Records stay weakly referenceable."""

    __slots__ = ("__weakref__", "_known_valid")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecord(_Provable):
    """One tool call's persisted checkpoint, schema version 1.

    Build one with ``create_checkpoint``; change it only with the transition functions.
    """

    schema_version: int = SCHEMA_VERSION
    binding: Binding
    status: Status
    revision: int
    created_at: datetime
    updated_at: datetime
    execution_fence: str | None = None
    execution_claimed_at: datetime | None = None
    uncertain_reason: str | None = None
    result: Result | None = None
    completed_at: datetime | None = None
    delivery_fence: str | None = None
    delivery_attempts: int = 0
    delivered_at: datetime | None = None
    resolution: Resolution | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The store key, ``(namespace, call_id)``."""
        return self.binding.key

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready stored form (binding nested, times as ISO-8601 UTC)."""

        def t(value: datetime | None) -> str | None:
            return None if value is None else format_time(value)

        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "binding": self.binding.to_dict(),
            "status": self.status.value,
            "revision": self.revision,
            "created_at": t(self.created_at),
            "updated_at": t(self.updated_at),
            "execution_fence": self.execution_fence,
            "execution_claimed_at": t(self.execution_claimed_at),
            "uncertain_reason": self.uncertain_reason,
            "result": None if self.result is None else self.result.to_dict(),
            "completed_at": t(self.completed_at),
            "delivery_fence": self.delivery_fence,
            "delivery_attempts": self.delivery_attempts,
            "delivered_at": t(self.delivered_at),
        }
        # Only when set: a record no person settled keeps the stored form it always had.
        if self.resolution is not None:
            out["resolution"] = self.resolution.to_dict()
        return out

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], *, max_payload_bytes: int | None = None
    ) -> CheckpointRecord:
        """Build and validate a record from its stored form.

        Raises:
            UnsupportedSchemaError: ``UNSUPPORTED_SCHEMA`` for another schema version.
            InvalidCheckpointError: ``INVALID_CHECKPOINT`` for anything malformed.
        """
        from .validate import validate_checkpoint

        return validate_checkpoint(data, max_payload_bytes=max_payload_bytes)


# ``dataclasses.replace`` builds a keyword dict of every field and runs ``__init__``
# (frozen: ``object.__setattr__`` per field); the slots' own descriptors copy a record at
# about half the cost. A record has no ``__post_init__``: nothing is skipped. Every
# transition builds one or two, and every read of a proven stored text one.
_SLOTS = tuple(
    (f.name, vars(CheckpointRecord)[f.name].__get__, vars(CheckpointRecord)[f.name].__set__)
    for f in dataclasses.fields(CheckpointRecord)
)
_FIELD_NAMES = frozenset(name for name, _, _ in _SLOTS)
_new_record = object.__new__


def replaced_record(rec: CheckpointRecord, changes: Mapping[str, Any]) -> CheckpointRecord:
    """``dataclasses.replace(rec, **changes)`` for a record (the same fields checked)."""
    if not changes.keys() <= _FIELD_NAMES:
        raise TypeError(f"not CheckpointRecord fields: {sorted(changes.keys() - _FIELD_NAMES)}")
    out: CheckpointRecord = _new_record(CheckpointRecord)
    for name, get, set_ in _SLOTS:
        set_(out, changes[name] if name in changes else get(rec))
    return out


_FIELDS = tuple(f.name for f in dataclasses.fields(CheckpointRecord))
if _FIELDS != (  # pragma: no cover
    "schema_version", "binding", "status", "revision", "created_at", "updated_at",
    "execution_fence", "execution_claimed_at", "uncertain_reason", "result", "completed_at",
    "delivery_fence", "delivery_attempts", "delivered_at", "resolution",
) or any(hasattr(c, "__post_init__") for c in (CheckpointRecord, Result)):  # fmt: skip
    raise AssertionError("with_result must set every field of CheckpointRecord, in order")
# with_result spells out each field (a loop over the slots costs about a half more).
(
    _SET_SCHEMA_VERSION,
    _SET_BINDING,
    _SET_STATUS,
    _SET_REVISION,
    _SET_CREATED_AT,
    _SET_UPDATED_AT,
    _SET_EXECUTION_FENCE,
    _SET_EXECUTION_CLAIMED_AT,
    _SET_UNCERTAIN_REASON,
    _SET_RESULT,
    _SET_COMPLETED_AT,
    _SET_DELIVERY_FENCE,
    _SET_DELIVERY_ATTEMPTS,
    _SET_DELIVERED_AT,
    _SET_RESOLUTION,
) = (set_ for _, _, set_ in _SLOTS)
# Result has no __post_init__ either: its slots are set as a record's are.
_SET_PAYLOAD = vars(Result)["payload"].__set__
_SET_IS_ERROR = vars(Result)["is_error"].__set__
if tuple(f.name for f in dataclasses.fields(Result)) != ("payload", "is_error"):  # pragma: no cover
    raise AssertionError("with_result must set every field of Result")


def with_result(rec: CheckpointRecord, payload: object, is_error: bool) -> CheckpointRecord:
    """``replaced_record(rec, {"result": Result(payload=payload, is_error=is_error)})``."""
    result: Result = _new_record(Result)
    _SET_PAYLOAD(result, payload)
    _SET_IS_ERROR(result, is_error)
    out: CheckpointRecord = _new_record(CheckpointRecord)
    _SET_SCHEMA_VERSION(out, rec.schema_version)
    _SET_BINDING(out, rec.binding)
    _SET_STATUS(out, rec.status)
    _SET_REVISION(out, rec.revision)
    _SET_CREATED_AT(out, rec.created_at)
    _SET_UPDATED_AT(out, rec.updated_at)
    _SET_EXECUTION_FENCE(out, rec.execution_fence)
    _SET_EXECUTION_CLAIMED_AT(out, rec.execution_claimed_at)
    _SET_UNCERTAIN_REASON(out, rec.uncertain_reason)
    _SET_RESULT(out, result)
    _SET_COMPLETED_AT(out, rec.completed_at)
    _SET_DELIVERY_FENCE(out, rec.delivery_fence)
    _SET_DELIVERY_ATTEMPTS(out, rec.delivery_attempts)
    _SET_DELIVERED_AT(out, rec.delivered_at)
    _SET_RESOLUTION(out, rec.resolution)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What ``decide_checkpoint`` concluded: the action, and the status/revision it saw."""

    action: Action
    status: Status
    revision: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """A proposed change: act only after the store's CAS from ``expected_revision`` to ``next``.

    ``name`` is the transition function's name (``claim_execution``, …).
    """

    action: Action
    expected_revision: int
    next: CheckpointRecord
    name: str


# Records toolledger itself built or validated and whose contents nobody else holds carry a
# mark: the output of a transition (built from a valid record and checked arguments, with a
# private copy of the result payload), a record loaded from a store, a validated
# payload-free record (all of its fields are immutable). ``validate_checkpoint`` skips the
# walk for them, so the hot path (get -> transition -> CAS) validates each record once. The
# mark is on the very object: an equal copy (``replace``, ``copy``, pickle, the record
# builders above) is checked again, and the mark dies with its record.
#: ``mark_valid(record, True)``: ``remember_valid`` without a Python frame (the slot's own
#: setter), for the transitions, which mark every record they make.
mark_valid: Callable[[CheckpointRecord, bool], None] = vars(_Provable)["_known_valid"].__set__


def remember_valid(record: CheckpointRecord) -> CheckpointRecord:
    """Mark ``record`` as valid (see above) and return it."""
    mark_valid(record, True)
    return record


def is_known_valid(record: object) -> TypeGuard[CheckpointRecord]:
    """Return whether ``record`` itself (not an equal copy) was marked valid."""
    return isinstance(record, CheckpointRecord) and getattr(record, "_known_valid", False) is True
