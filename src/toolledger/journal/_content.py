"""A new event's parts, checked: ids, times, names, text and content. No I/O but the clock
and ``os.urandom``.

Rules this module keeps:

- ``now`` is the text of ``datetime.now(timezone.utc).isoformat(timespec="microseconds")``
  and ``new_id`` 32 hex digits (the time in ms, then ``os.urandom``): the journal's own
  ASCII text, which ``_header.HeaderFormat`` writes without escaping.
- Names are non-empty str of at most 256 characters, text is str or ``None``, both valid
  Unicode (no lone surrogate); anything else is ``INVALID_ARGUMENT`` and nothing is written.
- Content is converted to exact JSON by ``to_json`` (``encoded_json`` where it is encoded
  at once and not kept).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidArgumentError
from ._values import to_json

__all__ = [
    "JUSTIFICATION_MISSING",
    "check_name",
    "check_source",
    "check_text",
    "checked_content",
    "event_content",
    "justification_missing",
    "new_id",
    "now",
]

_JUSTIFICATION_SOURCES = ("developer", "model")

#: The key (in a record's header, an event dict, ``Event``'s field) saying the model made
#: the call and gave no justification; ``justification_missing`` is its rule.
JUSTIFICATION_MISSING = "justification_missing"


def justification_missing(justification: str | None, source: str | None) -> bool:
    """Whether an event's justification is missing: the model made the call and gave none
    (a developer's event without one just has none)."""
    return justification is None and source == "model"


def now() -> str:
    """Return the current UTC time as stored (ISO-8601, microseconds).

    The text of ``datetime.now(timezone.utc).isoformat(timespec="microseconds")``; the
    date and time up to the second are formatted once per second.
    """
    global _second
    micros = time.time_ns() // 1000
    cached = _second
    if cached[0] != micros // 1_000_000:
        second = micros // 1_000_000
        at = datetime.fromtimestamp(second, timezone.utc)
        cached = _second = (second, at.isoformat(timespec="seconds")[:19])
    return f"{cached[1]}.{micros % 1_000_000:06d}+00:00"


#: The second ``now`` last formatted, and its text (``YYYY-MM-DDTHH:MM:SS``).
_second: tuple[int, str] = (-1, "")


def new_id() -> str:
    """Return a new 128-bit id (32 hex digits): 48 bits of Unix time in ms, 80 random.

    Time first, as in a UUIDv7: the ids of a run sort by creation, so an index on them
    appends at its end (one page a commit) instead of touching a random page. The random
    part comes from ``os.urandom`` 64 at a time: ``list.pop`` hands each to one caller
    (threads included), and a forked child drops the parent's unused ones.
    """
    try:
        tail = _ids.pop()
    except IndexError:
        block = os.urandom(10 * _ID_BLOCK).hex()
        _ids.extend([block[i : i + 20] for i in range(0, 20 * _ID_BLOCK, 20)])
        tail = _ids.pop()
    return f"{time.time_ns() // 1_000_000 & 0xFFFFFFFFFFFF:012x}{tail}"


_ID_BLOCK = 64
_ids: list[str] = []
# After fork: the parent hands out the same ids, so the child must not.
os.register_at_fork(after_in_child=_ids.clear)


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is a non-empty str of at most 256 characters.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` otherwise.
    """
    if not isinstance(value, str) or not value or len(value) > 256:
        raise InvalidArgumentError(
            message=f"{what} must be a non-empty str of at most 256 characters; got {value!r}"
        )
    return value if value.isascii() else _valid_unicode(value, what)


def check_text(value: object, what: str) -> str | None:
    """Return ``value`` if it is a str or ``None``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` otherwise.
    """
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(
            message=f"{what} must be a str or None; got {type(value).__name__}"
        )
    if value is None or value.isascii():
        return value
    return _valid_unicode(value, what)


def _valid_unicode(value: str, what: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                message=f"{what} is not valid Unicode (a lone surrogate at {exc.start})"
            ) from exc
    return value


def check_source(source: object) -> None:
    """Check a justification source.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` unless ``developer`` or ``model``.
    """
    if source not in _JUSTIFICATION_SOURCES:
        raise InvalidArgumentError(
            message=f"justification_source must be 'developer' or 'model'; got {source!r}"
        )


def event_content(
    kind: str,
    name: str | None,
    justification: str | None,
    justification_source: str,
    inputs: Any,
    meta: Mapping[str, Any] | None,
    convert: Callable[[Any], tuple[Any, bool]] = to_json,
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Check a new event's names and justification; return its content, meta and floats.

    ``floats`` says whether the inputs or meta held a float (the record keeps exact JSON).
    ``convert``: ``to_json``, or ``encoded_json`` when the content is encoded at once and
    neither it nor the meta is kept.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
    """
    check_name(kind, "kind")
    check_name(name, "name")
    check_text(justification, "justification")
    check_source(justification_source)
    return checked_content(justification, inputs, meta, convert)


def checked_content(
    justification: str | None,
    inputs: Any,
    meta: Mapping[str, Any] | None,
    convert: Callable[[Any], tuple[Any, bool]] = to_json,
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """``event_content`` of a justification checked already (``check_text``)."""
    content: dict[str, Any] = {}
    floats = False
    if inputs is not None:
        content["inputs"], floats = convert(inputs)
    if justification is not None:
        content["justification"] = justification
    meta_value: dict[str, Any] = {}
    if meta:
        meta_value, f2 = convert(meta if type(meta) is dict else dict(meta))
        floats |= f2
        content["meta"] = meta_value
    return content, meta_value, floats
