"""Convert arbitrary Python values into exact JSON: one set of rules. Pure; no I/O.

The journal records every value by these rules (``journal._values`` re-exports them), and
the guard stores a tool result that is not exact JSON by the very same rules
(``encode_result``), so what a replay compares is equal byte for byte.

Rules this module keeps:

- Exact JSON (``None``, ``bool``, ``str``, safe ``int``, finite ``float``, ``list``, ``dict``
  with ``str`` keys) passes through unchanged (containers are copied).
- Anything else is converted *with a marker* so that nothing is invented and nothing is
  written as invalid JSON: ``{"$float": "NaN"}``, ``{"$int": "123…"}`` (outside ±(2**53-1)),
  ``{"$bytes": n, "sha256": …}``, ``{"$type": "datetime", "value": iso}``,
  ``{"$cycle": true}``, ``{"$truncated": "depth"}``, ``{"$repr": …, "$type": qualname}``.
  Tuples and sets become lists; a dict with non-``str`` keys becomes
  ``{"$dict": [[key, value], …]}``; dataclasses and objects with ``model_dump()`` (pydantic)
  become their fields with a ``"$type"`` entry.
- Strings that are not valid Unicode (lone surrogates) are replaced with a marker
  ``{"$str": <escaped>}``.
- The walk is bounded (``MAX_DEPTH`` levels), so it never hits Python's recursion limit.

``to_json`` also reports whether the result contains a float, so that the hashing code can
take the fast path (``json.dumps(sort_keys=True)`` equals RFC 8785 output without floats).

``encode_result`` (a tool result) applies the same rules and refuses only what they cannot
carry faithfully: an object of a type no rule knows (the journal keeps its ``$repr``), a
reference cycle, nesting beyond ``MAX_DEPTH``. It names the first such value; the guard
then stores an ``is_error`` result saying so (``unencodable_result``), and the call
completes either way.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import hashlib
import math
import os
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ._json import EXACT_DEPTH, exact_shape, prove_exact

__all__ = [
    "MAX_DEPTH",
    "encode_result",
    "encoded_json",
    "exact_floats",
    "stored_result",
    "to_json",
    "unencodable_result",
]

#: Nesting beyond this many levels is replaced by ``{"$truncated": "depth"}``.
MAX_DEPTH = 64
if MAX_DEPTH != EXACT_DEPTH:  # pragma: no cover (exact_floats walks with exact_shape)
    raise AssertionError("the journal's depth bound must be exact_shape's")
_MAX_SAFE_INT = 2**53 - 1
_REPR_LIMIT = 500


class _Walk:
    __slots__ = ("floats", "on_path", "problems")

    def __init__(self, *, strict: bool = False) -> None:
        self.floats = False
        self.on_path: set[int] = set()
        #: ``encode_result``'s walk: what no rule carries faithfully (else ``None``).
        self.problems: list[str] | None = [] if strict else None

    def lossy(self, problem: str) -> None:
        if self.problems is not None:
            self.problems.append(problem)


def encode_result(value: Any) -> tuple[Any, str | None]:
    """Return a tool result as exact JSON by the journal's rules, or why it cannot be.

    Returns ``(json, None)``: ``value`` itself when it is exact JSON already (the caller's
    transition keeps a private copy), else its encoding (a ``datetime`` becomes
    ``{"$type": "datetime", "value": iso}``, a tuple or a set a list, …). Returns
    ``(None, problem)`` when it holds a value no rule encodes faithfully (an object of an
    unknown type, a reference cycle, nesting beyond ``MAX_DEPTH``); ``problem`` names it.
    Never raises for a value's content.
    """
    if exact_floats(value) is not None:
        return value, None
    return _encoded(value)


def _encoded(value: Any) -> tuple[Any, str | None]:
    """``encode_result`` for a value that is not exact JSON as it is."""
    walk = _Walk(strict=True)
    out = _convert(value, walk, 0)
    if walk.problems:
        return None, walk.problems[0]
    return out, None


def unencodable_result(problem: str) -> dict[str, str]:
    """The ``is_error`` result stored for a tool result that cannot be stored as it is."""
    return {
        "error": "UnencodableResult",
        "message": f"the tool returned a result that cannot be stored: {problem}",
    }


def stored_result(value: Any, is_error: bool) -> tuple[Any, bool]:
    """Return ``(payload, is_error)`` to store for a tool's result (see ``encode_result``).

    The encoded value with ``is_error`` as given, or, when no rule carries it,
    ``unencodable_result(problem)`` with ``is_error=True``: the call completes either way.
    Exact JSON is returned as it is, proven (``prove_exact``): the transition that stores
    it next checks its types and measures it from that proof, not by another walk.
    """
    if prove_exact(value):
        return value, is_error
    encoded, problem = _encoded(value)
    if problem is None:
        return encoded, is_error
    return unencodable_result(problem), True


def to_json(value: Any) -> tuple[Any, bool]:
    """Return ``(exact_json_value, contains_float)`` for any Python value.

    Never raises for a value's content; conversions are marked (see the module docstring).
    """
    if type(value) is dict and _flat(value):
        return dict(value), False
    walk = _Walk()
    if type(value) is dict or type(value) is list:
        try:
            return _exact(value, walk, 0), walk.floats
        except _NotExact:
            walk.floats = False
    out = _convert(value, walk, 0)
    return out, walk.floats


def encoded_json(value: Any) -> tuple[Any, bool]:
    """``to_json`` for a value encoded at once and not kept: exact JSON is not copied.

    Returns ``(value, contains_float)`` when ``to_json`` would return an unchanged copy of
    ``value`` (the same checks), else ``to_json(value)``. Nothing may keep the result: it
    may be the caller's own object.
    """
    if type(value) is dict and _flat(value):
        return value, False
    floats = exact_floats(value)
    if floats is None:
        return to_json(value)
    return value, floats


def _flat(value: dict[Any, Any]) -> bool:
    """The fast path: a flat dict of ASCII str keys and ASCII str, bool, ``None`` or safe
    int values (the usual **inputs), exact JSON without a float."""
    for k, v in value.items():
        tv = type(v)
        if type(k) is not str or not k.isascii():
            return False
        if tv is str:
            if not v.isascii():
                return False
        elif not (v is None or tv is bool or (tv is int and -_MAX_SAFE_INT <= v <= _MAX_SAFE_INT)):
            return False
    return True


def exact_floats(value: Any) -> bool | None:
    """Return whether ``value`` holds a float if ``to_json`` would copy it unchanged, else
    ``None``.

    For a value encoded at once and not kept (nothing to protect from later changes),
    ``value`` itself then stands for ``to_json(value)[0]``: ``_exact``'s checks (the
    checkpoint layer's ``exact_shape`` walk, its depth bound ``MAX_DEPTH``), without
    building the copy.
    """
    # The walk checks the value as an item of a list at depth 0: a container is walked at
    # depth 1 directly (the same checks and bound), a scalar wrapped in that list.
    if type(value) is dict or type(value) is list:
        shape = exact_shape(value, 1, None)
    else:
        shape = exact_shape([value], 0, None)
    return None if shape is None else shape[2]


class _NotExact(Exception):
    """``_exact`` met a value that needs a marker: ``_convert`` walks it instead."""


def _encodable(text: str) -> None:
    """Raise ``_NotExact`` for a str holding a lone surrogate (no UTF-8 form)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _NotExact from None


def _exact(value: Any, walk: _Walk, depth: int) -> Any:
    """Copy a value that is exact JSON already (what ``_convert`` returns unchanged).

    Raises ``_NotExact`` at the first value ``_convert`` would mark (a tuple, a lone
    surrogate, an unsafe int, a non-finite float, nesting at ``MAX_DEPTH``, a cycle).
    """
    tp = type(value)
    if tp is str:
        if not value.isascii():
            _encodable(value)
        return value
    if value is None or tp is bool:
        return value
    if tp is int:
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return value
        raise _NotExact
    if tp is float:
        if math.isfinite(value):
            walk.floats = True
            return value
        raise _NotExact
    if depth >= MAX_DEPTH:
        raise _NotExact  # (a cycle ends here too)
    if tp is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotExact
            if not key.isascii():
                _encodable(key)
            out[key] = _exact(item, walk, depth + 1)
        return out
    if tp is list:
        return [_exact(item, walk, depth + 1) for item in value]
    raise _NotExact


def _convert(value: Any, walk: _Walk, depth: int) -> Any:
    tp = type(value)
    if value is None or tp is bool:
        return value
    if tp is str:
        return _str(value)
    if tp is int:
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return value
        return {"$int": str(value)}
    if tp is float:
        if math.isfinite(value):
            walk.floats = True
            return value
        return {"$float": repr(value).replace("inf", "Infinity").replace("nan", "NaN")}
    if depth >= MAX_DEPTH:
        walk.lossy(f"it is nested deeper than {MAX_DEPTH} levels")
        return {"$truncated": "depth"}
    if tp is dict or tp is list or tp is tuple or isinstance(value, (Mapping, list, tuple)):
        ident = id(value)
        if ident in walk.on_path:
            walk.lossy(f"it contains itself (a {type(value).__name__} in a reference cycle)")
            return {"$cycle": True}
        walk.on_path.add(ident)
        try:
            if isinstance(value, Mapping):
                items = list(value.items())
                if all(type(k) is str for k, _ in items):
                    return {_str_key(k): _convert(v, walk, depth + 1) for k, v in items}
                return {
                    "$dict": [
                        [_convert(k, walk, depth + 1), _convert(v, walk, depth + 1)]
                        for k, v in items
                    ]
                }
            return [_convert(v, walk, depth + 1) for v in value]
        finally:
            walk.on_path.discard(ident)
    return _other(value, walk, depth)


def _other(value: Any, walk: _Walk, depth: int) -> Any:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, enum.Enum):
        return {"$type": _qualname(value), "value": _convert(value.value, walk, depth + 1)}
    if isinstance(value, int):
        return _convert(int(value), walk, depth)
    if isinstance(value, float):
        return _convert(float(value), walk, depth)
    if isinstance(value, str):
        return _str(str(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"$bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return {"$type": type(value).__name__, "value": value.isoformat()}
    if isinstance(value, _dt.timedelta):
        walk.floats = True
        return {"$type": "timedelta", "seconds": value.total_seconds()}
    if isinstance(value, (Decimal, uuid.UUID)):
        return {"$type": type(value).__name__, "value": str(value)}
    if isinstance(value, os.PathLike):
        return {"$type": "path", "value": _str(os.fspath(value))}
    if isinstance(value, (set, frozenset)):
        items = [_convert(v, walk, depth + 1) for v in value]
        items.sort(key=repr)  # a stable order for an unordered set
        return items
    ident = id(value)
    if ident in walk.on_path:
        walk.lossy(f"it contains itself (a {_qualname(value)} in a reference cycle)")
        return {"$cycle": True}
    walk.on_path.add(ident)
    try:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            out = {k: _convert(v, walk, depth + 1) for k, v in fields.items()}
            return {"$type": _qualname(value), **out}
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            try:
                dumped = dump(mode="json")
            except Exception:
                dumped = None
            if dumped is not None:
                return {"$type": _qualname(value), "value": _convert(dumped, walk, depth + 1)}
    finally:
        walk.on_path.discard(ident)
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break recording
        text = f"<unrepresentable: {type(exc).__name__}>"
    if len(text) > _REPR_LIMIT:
        text = text[:_REPR_LIMIT] + "…"
    walk.lossy(f"a value of type {_qualname(value)} has no JSON rule ({text[:200]})")
    return {"$type": _qualname(value), "$repr": _str(text)}


def _qualname(value: Any) -> str:
    tp = type(value)
    return f"{tp.__module__}.{tp.__qualname__}"


def _str(s: str) -> Any:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return {"$str": s.encode("utf-8", "backslashreplace").decode("utf-8")}
    return s


def _str_key(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s
