"""A new event's parts, checked: ids, times, names, text and content, errors, checkpoint
links, artifacts. No I/O but the clock, ``os.urandom`` and reading an artifact to hash it.

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

import hashlib
import mimetypes
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, InvalidArgumentError
from ._values import to_json

__all__ = [
    "JUSTIFICATION_MISSING",
    "Artifact",
    "check_event_args",
    "check_name",
    "check_source",
    "check_text",
    "checked_content",
    "checkpoint_link",
    "error_info",
    "event_content",
    "hash_artifact",
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


def check_event_args(
    name: object,
    what: str,
    justification: object,
    justification_source: object,
    kind: object = None,
) -> None:
    """``check_name(name, what)``, ``check_text(justification, "justification")`` and
    ``check_source(justification_source)`` in one call (with ``kind``:
    ``check_name(kind, "kind")`` first): an ASCII name and justification pass on their
    types and lengths alone, anything else goes through those checks.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` as those checks raise it.
    """
    if kind is not None and (
        type(kind) is not str or not 0 < len(kind) <= 256 or not kind.isascii()
    ):
        check_name(kind, "kind")
    if type(name) is not str or not 0 < len(name) <= 256 or not name.isascii():
        check_name(name, what)
    if justification is not None and (
        type(justification) is not str or not justification.isascii()
    ):
        check_text(justification, "justification")
    if justification_source not in _JUSTIFICATION_SOURCES:
        check_source(justification_source)


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
    check_event_args(name, "name", justification, justification_source)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """An artifact recorded by hash: the bytes stay where they were."""

    name: str
    sha256: str
    size: int
    media_type: str | None
    path: str | None
    event_id: str


def error_info(error: BaseException | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Return the journal form of an error: ``{"type", "message"}`` (+ ``code``)."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        tp = type(error)
        info: dict[str, Any] = {"type": tp.__qualname__, "message": _safe_str(error)}
        if tp.__module__ not in ("builtins", "__main__"):
            info["module"] = tp.__module__
        if isinstance(error, CheckpointError):
            info["code"] = error.code
        return info
    value, _ = to_json(dict(error))
    return dict(value)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:4000]
    except Exception:
        return f"<unprintable {type(exc).__qualname__}>"


def checkpoint_link(link: Mapping[str, Any]) -> dict[str, Any]:
    if type(link) is not dict and not isinstance(link, Mapping):
        raise InvalidArgumentError(message="checkpoint must be a mapping")
    out = {
        "namespace": link.get("namespace"),
        "call_id": link.get("call_id"),
        "revision": link.get("revision"),
    }
    if not isinstance(out["namespace"], str) or not isinstance(out["call_id"], str):
        raise InvalidArgumentError(message="checkpoint needs str namespace and call_id")
    rev = out["revision"]
    if rev is not None and (type(rev) is not int or rev < 0):
        raise InvalidArgumentError(message="checkpoint revision must be a non-negative int")
    return out


def hash_artifact(
    path_or_bytes: str | os.PathLike[str] | bytes, name: str, media_type: str | None
) -> dict[str, Any]:
    """Return the artifact's journal form; the bytes are hashed, never copied.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a missing file or bad argument.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(message="artifact name must be a non-empty str")
    if media_type is not None and not isinstance(media_type, str):
        raise InvalidArgumentError(message="media_type must be a str or None")
    for what, text in (("artifact name", name), ("media_type", media_type)):
        if text is not None and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgumentError(
                    message=f"{what} is not valid Unicode (a lone surrogate at {exc.start})"
                ) from exc
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        return {
            "name": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "media_type": media_type or "application/octet-stream",
            "path": None,
        }
    if not isinstance(path_or_bytes, (str, os.PathLike)):
        raise InvalidArgumentError(
            message=f"an artifact is a path or bytes; got {type(path_or_bytes).__name__}"
        )
    path = Path(path_or_bytes).resolve()
    digest = hashlib.sha256()
    size = 0
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise InvalidArgumentError(
            message=f"cannot read artifact {str(path)!r}: {exc.strerror or exc}",
            details={"path": str(path)},
        ) from exc
    guessed = mimetypes.guess_type(path.name)[0]
    return {
        "name": name,
        "sha256": digest.hexdigest(),
        "size": size,
        "media_type": media_type or guessed or "application/octet-stream",
        "path": str(path),
    }
