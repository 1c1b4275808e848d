"""Exact-JSON payload checks and canonical encoding. Pure; no I/O.

A payload is *exact JSON*: ``None``, ``bool``, ``int`` within ±(2**53-1), finite ``float``,
``str`` (valid Unicode), ``list`` and ``dict`` with ``str`` keys. Anything else (tuples,
sets, bytes, NaN, cycles, non-str keys, too-large ints) is a type error, reported as
``INVALID_ARGUMENT`` before bounds are looked at. Bounds (``PAYLOAD_LIMIT``) are checked
separately so that callers can order their checks as the transition rules demand.

The walk is iterative: depth is bounded by policy, never by Python's recursion limit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError, PayloadLimitError

__all__ = [
    "copy_json",
    "prove_exact",
    "take_proof",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "HARD_MAX_PAYLOAD_BYTES",
    "EXACT_DEPTH",
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "MAX_VALUES",
    "PayloadShape",
    "canonical_json",
    "check_bounds",
    "check_types",
    "compact_json",
    "exact_shape",
]

DEFAULT_MAX_PAYLOAD_BYTES = 65_536
HARD_MAX_PAYLOAD_BYTES = 10_485_760
MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_SAFE_INT = 2**53 - 1


@dataclass(frozen=True, slots=True)
class PayloadShape:
    """What a type walk measured: container nesting depth (a scalar is 0) and value count."""

    depth: int
    values: int
    floats: bool = False  # whether a float occurs (canonical_json's fast path needs none)
    #: The payload's compact JSON when ``prove_exact`` made this shape (``check_bounds``
    #: then measures it instead of encoding the payload again).
    text: str | None = field(default=None, compare=False, repr=False)


def check_types(value: Any, *, what: str = "payload") -> PayloadShape:
    """Check that ``value`` is exact JSON and measure it.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` naming the path of the first bad value.
    """
    tp = type(value)
    if tp is dict or tp is list:
        quick = exact_shape(value, 1, _QUICK_VALUES)
        if quick is not None:
            return PayloadShape(depth=quick[1], values=quick[0], floats=quick[2])
    return _walk_types(value, what)


#: The quick walk's value bound: past it (or at any value it would refuse) the full walk
#: answers, which names the path, tells a cycle apart and measures a shared container once.
_QUICK_VALUES = 4096
#: The deepest container ``exact_shape`` walks (a cycle ends there too).
EXACT_DEPTH = 64


def exact_shape(node: Any, depth: int, max_values: int | None) -> tuple[int, int, bool] | None:
    """``(values, depth, floats)`` of an acyclic exact-JSON tree (``node`` a container at
    nesting level ``depth``), without a copy.

    ``None`` when the tree holds anything ``_walk_types`` would refuse, nests a container
    past ``EXACT_DEPTH`` (a cycle does), or holds more than ``max_values`` values. The
    counts are ``_walk_types``' own: every value once per place it occurs, a container's
    depth its nesting level. The journal's ``exact_floats`` walks with it too.
    """
    if depth > EXACT_DEPTH:
        return None
    values = 1
    deepest = depth
    floats = False
    if type(node) is dict:
        for key in node:
            if type(key) is not str or not (key.isascii() or _encodes(key)):
                return None
        items: Any = node.values()
    else:
        items = node
    for item in items:
        tp = type(item)
        if tp is str:
            if not (item.isascii() or _encodes(item)):
                return None
        elif tp is int:
            if not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                return None
        elif tp is float:
            if not math.isfinite(item):
                return None
            floats = True
        elif tp is dict or tp is list:
            inner = exact_shape(item, depth + 1, max_values)
            if inner is None:
                return None
            values += inner[0] - 1
            if inner[1] > deepest:
                deepest = inner[1]
            if inner[2]:
                floats = True
            if max_values is not None and values > max_values:
                return None
        elif item is not None and tp is not bool:
            return None
        values += 1
    return values, deepest, floats


#: Values proven exact JSON by ``prove_exact`` and not used since: id -> (value, shape).
#: An entry holds its value, so no other object has its id while it lasts. Used up by
#: ``take_proof``; a few at most are waiting (a result is proven just before its
#: transition stores it), the bound only drops proofs nobody came for.
_PROVEN: dict[int, tuple[Any, PayloadShape]] = {}
_PROVEN_MAX = 64


def prove_exact(value: Any) -> bool:
    """Return whether ``value`` is exact JSON, and if so remember the proof for ``check_types``.

    The proof is ``value``'s shape and compact JSON as they are now: ``take_proof(value)``
    returns that shape (``check_types``' own answer) once, and ``check_bounds`` measures
    its text instead of encoding the value. A transition that takes the proof stores that
    text: a value someone changes after its proof is stored as it was proven. Never raises
    for a value's content.
    """
    tp = type(value)
    if tp is dict or tp is list:
        measured = exact_shape(value, 1, None)
        wrapped = 0
    else:  # checked as the item of a list around it, which is not counted
        measured = exact_shape([value], 0, None)
        wrapped = 1
    if measured is None:
        return False
    try:
        text = compact_json(value)
    except (TypeError, ValueError):  # pragma: no cover (changed by another thread meanwhile)
        return False
    if len(_PROVEN) >= _PROVEN_MAX:
        _PROVEN.clear()
    shape = PayloadShape(
        depth=measured[1], values=measured[0] - wrapped, floats=measured[2], text=text
    )
    _PROVEN[id(value)] = (value, shape)
    return True


def take_proof(value: Any) -> PayloadShape | None:
    """Return the shape ``prove_exact`` proved for this very ``value`` and forget it, or
    ``None`` (then check it with ``check_types``). The shape carries the proven text: store
    what ``check_bounds`` returns for it, not ``value``."""
    proven = _PROVEN.pop(id(value), None)
    return None if proven is None else proven[1]


def _encodes(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk_types(value: Any, what: str) -> PayloadShape:
    """``check_types``' full walk: any tree, the path of the first bad value."""
    max_depth = 0
    count = 0
    floats = False
    on_path: set[int] = set()
    # A container met again (shared, not a cycle) is not walked again: its measured
    # (values, height) is reused, so a small object graph that expands to a huge JSON text
    # is measured in linear time and refused by the bounds instead of hanging here.
    done: dict[int, tuple[int, int]] = {}
    heights: list[int] = []  # per open container: the deepest level reached inside it
    # Stack items: (value, depth, path) to enter, or (None, -1, (id, start, depth)) markers
    # to leave a container.
    stack: list[tuple[Any, int, Any]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        if depth < 0:
            ident, start, level = path
            on_path.discard(ident)
            deepest = heights.pop()
            if heights and deepest > heights[-1]:
                heights[-1] = deepest
            done[ident] = (count - start, deepest - level)
            continue
        count += 1
        if node is None or isinstance(node, bool):
            continue
        tp = type(node)
        if tp is int:
            if not -MAX_SAFE_INT <= node <= MAX_SAFE_INT:
                raise _type_error(what, path, "integer outside ±(2**53-1)")
            continue
        if tp is float:
            if not math.isfinite(node):
                raise _type_error(what, path, "float is not finite (NaN or infinity)")
            floats = True
            continue
        if tp is str:
            _check_str(node, what, path)
            continue
        if tp is list or tp is dict:
            ident = id(node)
            if ident in on_path:
                raise _type_error(what, path, "cycle: a container contains itself")
            seen = done.get(ident)
            if seen is not None:
                count += seen[0] - 1
                reached = depth + seen[1]
                if reached > max_depth:
                    max_depth = reached
                if heights and reached > heights[-1]:
                    heights[-1] = reached
                continue
            if depth > max_depth:
                max_depth = depth
            on_path.add(ident)
            heights.append(depth)
            stack.append((None, -1, (ident, count - 1, depth)))
            if tp is list:
                for i in range(len(node) - 1, -1, -1):
                    stack.append((node[i], depth + 1, _Path(path, i)))
            else:
                for key in reversed(list(node)):
                    if type(key) is not str:
                        raise _type_error(
                            what, path, f"object key {key!r} is {type(key).__name__}, not str"
                        )
                    _check_str(key, what, path)
                    stack.append((node[key], depth + 1, _Path(path, key)))
            continue
        raise _type_error(what, path, f"{tp.__name__} is not a JSON type")
    return PayloadShape(depth=max_depth, values=count, floats=floats)


class _Path:
    """Lazily rendered JSON path, so the walk costs nothing for paths never shown."""

    __slots__ = ("key", "parent")

    def __init__(self, parent: Any, key: Any) -> None:
        self.parent = parent
        self.key = key

    def __str__(self) -> str:
        parts: list[str] = []
        node: Any = self
        while isinstance(node, _Path):
            parts.append(f"[{node.key}]" if isinstance(node.key, int) else f"[{node.key!r}]")
            node = node.parent
        return str(node) + "".join(reversed(parts))


def _check_str(s: str, what: str, path: Any) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _type_error(what, path, "string is not valid Unicode (lone surrogate)") from exc


def _type_error(what: str, path: Any, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        message=f"{what} is not exact JSON at {path}: {why}",
        details={"path": str(path), "reason": why},
    )


def copy_json(value: Any) -> Any:
    """Return a private copy of exact JSON: its dicts and lists copied, scalars shared.

    Exact JSON is bounded in depth (``MAX_DEPTH``), so a recursive copy of the two mutable
    container types is complete.
    """
    tp = type(value)
    if tp is dict:
        out = value.copy()  # scalars stay as they are; containers are copied below
        for key, item in value.items():
            kind = type(item)
            if kind is dict or kind is list:
                out[key] = copy_json(item)
        return out
    if tp is list:
        items = value.copy()
        for i, item in enumerate(value):
            kind = type(item)
            if kind is dict or kind is list:
                items[i] = copy_json(item)
        return items
    return value


def check_bounds(
    value: Any,
    shape: PayloadShape,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    max_values: int = MAX_VALUES,
    what: str = "payload",
    size_known: bool = False,
) -> str:
    """Check ``value``'s bounds and return its compact JSON.

    ``size_known``: the caller proved the byte bound already; only depth and value count
    are checked and ``""`` is returned. A shape ``prove_exact`` made carries the text.

    Raises:
        PayloadLimitError: ``PAYLOAD_LIMIT`` for depth, value count or byte size.
    """
    if shape.depth > max_depth:
        raise PayloadLimitError(
            message=f"{what} nests {shape.depth} levels; the limit is {max_depth}",
            details={"limit": "depth", "max": max_depth, "actual": shape.depth},
        )
    if shape.values > max_values:
        raise PayloadLimitError(
            message=f"{what} has {shape.values} values; the limit is {max_values}",
            details={"limit": "values", "max": max_values, "actual": shape.values},
        )
    if size_known:
        return ""
    text = compact_json(value) if shape.text is None else shape.text
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadLimitError(
            message=f"{what} is {size} bytes of compact JSON; the limit is {max_bytes}",
            details={"limit": "bytes", "max": max_bytes, "actual": size},
        )
    return text


def canonical_json(value: object) -> str:
    """Encode ``value`` canonically (RFC 8785 style): sorted keys, no whitespace, ES6 numbers.

    Raises:
        InvalidArgumentError: when ``value`` is not exact JSON.
        PayloadLimitError: when it nests deeper than 512 levels.
    """
    if type(value) is dict:
        # A flat dict (the usual tool input): ASCII str keys to ASCII str, bool, None or safe
        # int values. Exact JSON by construction: the type walk below would prove nothing
        # more, and the C encoder's text is the canonical one (ASCII keys sort the same by
        # code point and by UTF-16 unit). Its values are scalars, so it holds no cycle: the
        # encoder made once serves it.
        for key, item in value.items():
            tp = type(item)
            if not (
                type(key) is str
                and key.isascii()
                and (
                    (tp is str and item.isascii())
                    or item is None
                    or tp is bool
                    or (tp is int and -MAX_SAFE_INT <= item <= MAX_SAFE_INT)
                )
            ):
                break
        else:
            return sorted_dumps_acyclic(value)
    shape = check_types(value, what="value")
    if shape.depth > 512:
        raise PayloadLimitError(
            message=f"value nests {shape.depth} levels; canonical JSON allows 512",
            details={"limit": "depth", "max": 512, "actual": shape.depth},
        )
    if not shape.floats:
        # Without floats the C encoder (sorted keys) writes the same text, unless a string
        # holds a non-BMP character (RFC 8785 sorts keys by UTF-16 code units).
        text: str = sorted_dumps(value)
        if text.isascii() or not _ASTRAL.search(text):
            return text
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make_dumps(*, sort_keys: bool = True, check_circular: bool = True) -> Any:
    """``JSONEncoder.encode`` (compact, non-ASCII kept, no NaN) in one Python frame.

    ``JSONEncoder.encode`` runs ``encode`` and ``iterencode`` and makes a new
    ``c_make_encoder`` per call; one made per call with the arguments ``iterencode`` passes
    and a fresh ``markers`` dict (so a cycle still raises) writes the same text.
    ``check_circular=False``: one encoder made once, without markers, for values that
    cannot hold a cycle.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover (no C accelerator: PyPy, some builds)
        return json.JSONEncoder(
            sort_keys=sort_keys,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            check_circular=check_circular,
        ).encode
    escape = json.encoder.encode_basestring
    if not check_circular:
        encode_acyclic = make(None, _not_json, escape, None, ":", ",", sort_keys, False, False)

        def dumps_acyclic(value: Any) -> str:
            if type(value) is str:
                return str(escape(value))
            return "".join(encode_acyclic(value, 0))

        return dumps_acyclic

    def dumps(value: Any) -> str:
        if type(value) is str:
            return str(escape(value))
        encode = make({}, _not_json, escape, None, ":", ",", sort_keys, False, False)
        return "".join(encode(value, 0))

    return dumps


#: Encode ``value`` as compact JSON, key order kept, non-ASCII kept (the stored form).
compact_json: Callable[[Any], str] = _make_dumps(sort_keys=False)
#: Compact JSON with sorted keys, non-ASCII kept, no NaN (the canonical text of exact JSON
#: without floats or non-BMP characters).
sorted_dumps: Callable[[Any], str] = _make_dumps()
#: ``sorted_dumps`` of a value that holds no cycle (fresh containers of bounded depth, as
#: ``journal._values.to_json`` returns): no cycle bookkeeping (a cycle would recurse until
#: ``RecursionError``).
sorted_dumps_acyclic: Callable[[Any], str] = _make_dumps(check_circular=False)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif type(value) is int:
        out.append(str(value))
    elif type(value) is float:
        out.append(_es6_number(value))
    elif type(value) is str:
        out.append(json.dumps(value, ensure_ascii=False))
    elif type(value) is list:
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        out.append("{")
        # RFC 8785 orders keys by UTF-16 code units.
        for i, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be"))):
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(value[key], out)
        out.append("}")


def _es6_number(x: float) -> str:
    """Format a finite float the way ECMAScript's Number.toString does (RFC 8785 §3.2.2.3)."""
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) <= MAX_SAFE_INT:
        # Exact and already the shortest form. Larger integral floats need the shortest
        # round-trip digits padded with zeros (2**68 -> 295147905179352830000), below.
        return str(int(x))
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    if int_part.strip("0"):
        n = len(int_part.lstrip("0")) + exp
    else:
        n = exp - (len(frac_part) - len(frac_part.lstrip("0")))
    digits = (int_part + frac_part).lstrip("0").rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp_str = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    if k == 1:
        return sign + digits + exp_str
    return sign + digits[0] + "." + digits[1:] + exp_str
