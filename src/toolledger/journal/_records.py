"""The journal's record format, canonical JSON, hashing and merging. Pure; no I/O.

Stored layout (``EventRow.data``, compact JSON)::

    {"header": {...}, "content": {...}}                       # a live record
    {"header": {...}, "erased": {"at": ..., "reason": ...}}   # after retention

The *header* is small and never erased: ``v, run_id, event_id, seq, parent_id, kind, name,
status, phase`` (``start`` / ``end`` / ``point``), ``at``, ``justification_source``,
``justification_missing``, ``checkpoint`` (``{"namespace", "call_id", "revision"}``),
``trace_id``, ``span_id``, ``content_sha256``, on a run's closing record only,
``run_end: true``, and on a ``point`` record of an event that lasted (a step whose start
record was still buffered when it ended: the writer stores the whole event as one
record), ``ended_at``. The fields that are also indexed columns
of the row (``COLUMN_KEYS``) are not repeated in ``data``: the full header is the stored
header plus the columns, and that full header is what is hashed. The *content* holds what
users wrote: ``inputs, outputs, justification, error, meta, approval, text, artifact``.

Hashing (tamper evidence that survives erasure):

- ``content_sha256 = sha256(canonical_json(content))``, stored in the header;
- ``hash = sha256(prev_hash + canonical_json(header))`` where ``prev_hash`` is the previous
  record's hash, and for ``seq`` 0 the run's *genesis* hash:
  ``sha256(canonical_json(run_header))`` (run id, namespace, agent, start time and the hash
  of the goal). Because the chain covers content *hashes*, erasing content keeps ``verify``
  passing; editing content (or the header, or the order) breaks it.

Canonical JSON is RFC 8785 (``toolledger.checkpoint.canonical_json``). ``canonical`` takes a
fast path (``json.dumps(sort_keys=True)``) that is byte-identical when the value holds no
float and no character outside the BMP; a property test pins that equality.

Readers merge a step's start and end records into one *event* (``_merge``); a ``point``
record is an event of its own, started at its ``at`` and ended at its ``ended_at`` (or
at ``at`` without one). Unknown
fields (a newer writer) are kept: unknown header/content keys appear in the merged event
under ``extra``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from ..checkpoint import canonical_json, sorted_dumps, sorted_dumps_acyclic
from ._content import JUSTIFICATION_MISSING
from ._values import to_json

__all__ = [
    "COLUMN_KEYS",
    "CONTENT_KEYS",
    "FORMAT_VERSION",
    "HEADER_KEYS",
    "RUN_FORMAT_VERSION",
    "KINDS",
    "canonical",
    "KEY_ENV",
    "MAC_HMAC_SHA256",
    "chain_hash",
    "journal_key",
    "key_id",
    "content_hash",
    "content_json",
    "erase_content",
    "header_json",
    "check_readable",
    "event_summary_text",
    "MAX_READ_DEPTH",
    "parse_document",
    "RecordParser",
    "parse_many",
    "parse_record",
    "stored_header",
    "run_genesis",
]

FORMAT_VERSION = 1
#: The run header's format: 2 chains the run's end (a closing ``finish`` record whose
#: header has ``run_end: true``); 1 (older runs) did not.
RUN_FORMAT_VERSION = 2

#: Event kinds the journal writes (readers accept others, for newer writers).
KINDS = ("step", "tool_call", "approval", "artifact", "note", "finish", "resolution")

HEADER_KEYS = frozenset(
    {
        "v",
        "run_id",
        "event_id",
        "seq",
        "parent_id",
        "kind",
        "name",
        "status",
        "phase",
        "at",
        "justification_source",
        JUSTIFICATION_MISSING,
        "checkpoint",
        "trace_id",
        "span_id",
        "content_sha256",
        "run_end",
        "ended_at",
    }
)
#: Header fields stored as indexed columns of the row, not repeated in its ``data``: the
#: hashed header is ``data["header"]`` plus these columns.
COLUMN_KEYS = ("run_id", "event_id", "seq", "parent_id", "kind", "name", "status", "at")

CONTENT_KEYS = frozenset(
    {"inputs", "outputs", "justification", "error", "meta", "approval", "text", "artifact"}
)

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_dumps = sorted_dumps  # checkpoint._json's C encoder paths
_dumps_acyclic = sorted_dumps_acyclic


def canonical(value: Any, *, maybe_float: bool = True, acyclic: bool = False) -> str:
    """Return RFC 8785 canonical JSON of exact-JSON ``value``.

    Args:
        value: Exact JSON.
        maybe_float: ``False`` promises that ``value`` holds no float; then the C encoder is
            used (identical output unless a string holds a non-BMP character).
        acyclic: ``True`` promises that ``value`` holds no cycle (it is made of what
            ``to_json`` returns): the C encoder skips its cycle bookkeeping.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``value`` is not exact JSON.
    """
    if not maybe_float:
        text: str = _dumps_acyclic(value) if acyclic else _dumps(value)
        if text.isascii() or not _ASTRAL.search(text):
            return text
    return canonical_json(value)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_sha256 = hashlib.sha256
#: The content text and hash of a record without content.
_EMPTY_CONTENT = ("{}", _sha("{}"))


def content_json(content: dict[str, Any], floats: bool, acyclic: bool = False) -> tuple[str, str]:
    """Return a record's canonical content JSON and its hex SHA-256.

    ``floats``: whether a float may be in ``content``; ``acyclic``: every value in
    ``content`` was made by ``to_json`` or ``encoded_json`` (bounded in depth) or is a str
    (see ``canonical``).
    """
    if not content:
        return _EMPTY_CONTENT
    if floats or not acyclic:
        text = canonical(content, maybe_float=floats, acyclic=acyclic)
    else:  # ``canonical``'s usual case, inline: the C encoder without cycle bookkeeping
        text = _dumps_acyclic(content)
        if not text.isascii() and _ASTRAL.search(text):
            text = canonical_json(content)
    try:
        return text, _sha256(text.encode("utf-8")).hexdigest()  # ``_sha``, inline
    except UnicodeEncodeError:
        # A lone surrogate slipped in (an exception message, a file name): mark it.
        content, floats = to_json(content)
        text = canonical(content, maybe_float=floats)
        return text, _sha(text)


def content_hash(content: Mapping[str, Any], *, maybe_float: bool = True) -> str:
    """Return the hex SHA-256 of ``content``'s canonical JSON."""
    return _sha(canonical(content, maybe_float=maybe_float))


def chain_hash(prev_hash: str | None, header_json: str, key: bytes | None = None) -> str:
    """Return ``sha256(prev_hash + header_json)`` as hex (``prev_hash`` ``None`` is ``""``).

    With ``key`` (a keyed run), ``HMAC-SHA256(key, prev_hash + header_json)`` instead.
    """
    if key is None and (prev_hash is None or prev_hash.isascii()):
        # The same bytes hashed in one call (an ASCII prev_hash is its UTF-8 too).
        return _sha256(((prev_hash or "") + header_json).encode("utf-8")).hexdigest()
    if key is not None:
        mac = hmac.new(key, (prev_hash or "").encode("ascii"), hashlib.sha256)
        mac.update(header_json.encode("utf-8"))
        return mac.hexdigest()
    h = hashlib.sha256((prev_hash or "").encode("ascii"))
    h.update(header_json.encode("utf-8"))
    return h.hexdigest()


#: The environment variable holding the journal key (``toolledger.run(key=...)``).
KEY_ENV = "TOOLLEDGER_JOURNAL_KEY"
#: The run header's ``mac`` value for a keyed run.
MAC_HMAC_SHA256 = "hmac-sha256"


def journal_key(key: str | bytes | None) -> bytes | None:
    """Return the key to chain or verify with: ``key``, else ``$TOOLLEDGER_JOURNAL_KEY``.

    ``None`` (and an empty value) means unkeyed. A str is used as its UTF-8 bytes.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a key that is not str or bytes.
    """
    if key is None:
        key = os.environ.get(KEY_ENV) or None
    if key is None:
        return None
    if isinstance(key, str):
        try:
            key = key.encode("utf-8")
        except UnicodeEncodeError as exc:
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError(message="the journal key is not valid Unicode") from exc
    if not isinstance(key, (bytes, bytearray)):
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(
            message=f"the journal key must be str or bytes; got {type(key).__name__}"
        )
    return bytes(key) or None


def key_id(key: bytes) -> str:
    """Return the public id of a key (16 hex digits), kept in a keyed run's header."""
    return hashlib.sha256(b"toolledger-journal-key-id\0" + key).hexdigest()[:16]


def stored_header(header: Mapping[str, Any]) -> dict[str, Any]:
    """Return the part of a full header stored in ``data`` (the rest are row columns)."""
    return {k: v for k, v in header.items() if k not in COLUMN_KEYS}


_encode_str = json.encoder.encode_basestring  # the escaping canonical_json uses for strings
_COLUMN_SET = frozenset(COLUMN_KEYS)


def header_json(header: Mapping[str, Any]) -> tuple[str, str]:
    """Return ``(canonical full header, canonical stored header)`` in one pass.

    Equal to ``canonical(header)`` and ``canonical(stored_header(header))`` (a property
    test pins it): keys are sorted ASCII, strings escaped as ``canonical_json`` does,
    and any value that is not a str, int, bool or ``None`` is encoded by ``canonical``.
    """
    shape = tuple(header)
    plan = _PLANS.get(shape)
    if plan is None:
        plan = _plan(shape)
    if not plan:
        return _header_json_any(header)
    full: list[str] = []
    stored: list[str] = []
    for key, prefix, keep in plan:
        value = header[key]
        tp = type(value)
        if tp is str:
            if not value.isascii() and _ASTRAL.search(value):
                text = canonical(value)
            else:
                text = _encode_str(value)
        elif value is None:
            text = "null"
        elif tp is bool:
            text = "true" if value else "false"
        elif tp is int:
            text = canonical(value) if abs(value) > 2**53 - 1 else str(value)
        elif tp is dict and _flat(value):
            text = canonical(value, maybe_float=False)  # e.g. the checkpoint link
        else:
            text = canonical(value)
        item = prefix + text
        full.append(item)
        if keep:
            stored.append(item)
    return "{" + ",".join(full) + "}", "{" + ",".join(stored) + "}"


#: ``'"key":'`` of every header key the journal writes, and whether ``data`` stores it.
_KEY_TEXT = {key: (f'"{key}":', key not in _COLUMN_SET) for key in HEADER_KEYS}
#: Per header shape (its keys in insertion order; the writer builds few shapes): the keys
#: in canonical order with their ``'"key":'`` and whether ``data`` stores them; ``()`` for a
#: shape holding a key the journal does not write. Bounded.
_PLANS: dict[tuple[str, ...], tuple[tuple[str, str, bool], ...]] = {}


def _plan(shape: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
    plan: tuple[tuple[str, str, bool], ...] = ()
    if all(type(key) is str and key in _KEY_TEXT for key in shape):
        plan = tuple((key, *_KEY_TEXT[key]) for key in sorted(shape))
    if len(_PLANS) >= 256:
        _PLANS.clear()
    _PLANS[shape] = plan
    return plan


def _header_json_any(header: Mapping[str, Any]) -> tuple[str, str]:
    """``header_json`` of a header holding a key the journal does not write (a newer one)."""
    return canonical(header), canonical(stored_header(header))


def _flat(value: dict[Any, Any]) -> bool:
    """Whether ``value`` maps str keys to str, bool, ``None`` or safe ints only (no float)."""
    for key, item in value.items():
        if type(key) is not str:
            return False
        tp = type(item)
        if tp is int:
            if abs(item) > 2**53 - 1:
                return False
        elif not (tp is str or tp is bool or item is None):
            return False
    return True


def run_genesis(run_header: Mapping[str, Any]) -> str:
    """Return the genesis hash of a run: the ``prev_hash`` of its record 0."""
    return _sha(canonical(run_header))


#: Stored records nested deeper than this are unreadable (writers bound values to
#: the encoder's ``MAX_DEPTH`` levels; this leaves room for the record's own levels).
MAX_READ_DEPTH = 200
#: A JSON escape of a UTF-16 surrogate: the only way a lone surrogate gets into parsed text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_readable(text: str, doc: Any) -> None:
    """Reject what stored JSON text may decode to but no journal writer stores.

    Cheap unless the text could hold it: nesting deeper than ``MAX_READ_DEPTH`` (only
    walked when the text has that many brackets) or a lone surrogate (only checked when
    the text holds a surrogate escape).

    Raises:
        ValueError: nested too deep.
        UnicodeEncodeError: a lone surrogate.
    """
    if text.count("[") + text.count("{") >= MAX_READ_DEPTH and _depth(doc) > MAX_READ_DEPTH:
        raise ValueError(f"nested deeper than {MAX_READ_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _check_all_readable(joined: str, texts: list[str], docs: list[Any]) -> None:
    """``check_readable`` of every record, given their joined text (one pass when clean).

    The depth bound is per record: the joined text has as many brackets as all records
    together, so only a record that alone holds ``MAX_READ_DEPTH`` brackets is walked (a
    record nested deeper than that is at least twice as many characters long).
    """
    if joined.count("[") + joined.count("{") >= MAX_READ_DEPTH:
        shortest = 2 * MAX_READ_DEPTH
        for text, doc in zip(texts, docs, strict=True):
            if len(text) > shortest:
                check_readable(text, doc)
    if _SURROGATE_ESCAPE.search(joined):
        json.dumps(docs, ensure_ascii=False).encode("utf-8")


def _depth(doc: Any) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > deepest:
                deepest = depth
                if deepest > MAX_READ_DEPTH:
                    return deepest
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return deepest


class RecordParser:
    """Parse stored records, noting whether each holds a float (one decoder, reused)."""

    __slots__ = ("_decode", "_seen")

    def __init__(self) -> None:
        self._seen = False
        self._decode = json.JSONDecoder(parse_float=self._float, parse_constant=_no_constant).decode

    def _float(self, text: str) -> float:
        self._seen = True
        return float(text)

    def parse(self, data: str) -> tuple[dict[str, Any], bool]:
        """Return ``(document, contains_float)``.

        Raises:
            ValueError: the text is not a JSON object (``NaN`` and ``Infinity`` are not
                JSON), or is nested too deep.
            UnicodeEncodeError: it holds a lone surrogate.
            RecursionError, TypeError: nested too deep for the decoder; not text.
        """
        self._seen = False
        doc = self._decode(data)
        if not isinstance(doc, dict):
            raise ValueError("a journal record must be a JSON object")
        check_readable(data, doc)
        return doc, self._seen


def parse_record(data: str) -> tuple[dict[str, Any], bool]:
    """Parse a stored record; return ``(document, contains_float)``.

    Raises:
        ValueError: the text is not a JSON object.
    """
    return RecordParser().parse(data)


_strict_loads = json.JSONDecoder(parse_constant=_no_constant).decode
_READ_ERRORS = (ValueError, UnicodeError, RecursionError, TypeError)
_STR, _DICT = frozenset({str}), frozenset({dict})


def parse_many(texts: list[Any]) -> list[dict[str, Any]]:
    """Parse many stored records at once; an unreadable one becomes ``{"unreadable": True}``.

    Unreadable: not a JSON object, ``NaN``/``Infinity``, a lone surrogate, nesting deeper
    than ``MAX_READ_DEPTH``, or not text at all (a BLOB). Never raises for any of them.
    """
    if set(map(type, texts)) <= _STR:  # every text a str (the types gathered in C)
        joined = "[" + ",".join(texts) + "]"
        try:
            docs = _strict_loads(joined)
            if len(docs) == len(texts) and set(map(type, docs)) <= _DICT:
                _check_all_readable(joined, texts, docs)
                return list(docs)
        except _READ_ERRORS:
            pass
    out: list[dict[str, Any]] = []
    for text in texts:
        try:
            doc = _strict_loads(text)
            if isinstance(doc, dict):
                check_readable(text, doc)
        except _READ_ERRORS:
            doc = None
        out.append(doc if isinstance(doc, dict) else {"unreadable": True})
    return out


def parse_document(text: Any) -> dict[str, Any]:
    """Parse one stored JSON object (a run document); ``{}`` when unreadable."""
    (doc,) = parse_many([text])
    return {} if doc.get("unreadable") is True and len(doc) == 1 else doc


def erase_content(event_data_json: str, *, at: str, reason: str) -> str:
    """Return a stored record with its content removed and an ``erased`` marker.

    The header (and so every hash input) is unchanged: ``verify`` still passes and reports
    the record under ``content_erased``. Erasing an erased record keeps the first marker.

    Args:
        event_data_json: ``EventRow.data`` as stored.
        at: When the content was erased (ISO-8601).
        reason: Why (shown by readers and exports).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the text is not a journal record.
    """
    from ..errors import InvalidArgumentError

    try:
        doc = json.loads(event_data_json)
    except ValueError as exc:
        raise InvalidArgumentError(message=f"not a journal record: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("header"), dict):
        raise InvalidArgumentError(message="not a journal record: no header")
    if not isinstance(at, str) or not isinstance(reason, str):
        raise InvalidArgumentError(message="at and reason must be strings")
    doc.pop("content", None)
    doc.setdefault("erased", {"at": at, "reason": reason})
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def event_summary_text(ev: Mapping[str, Any]) -> str:
    """Return the searchable text of a merged event (names, intent, values; no raw JSON)."""
    parts: list[str] = []
    stack: list[Any] = [
        ev.get("name"),
        ev.get("kind"),
        ev.get("status"),
        ev.get("justification"),
        ev.get("text"),
        ev.get("error"),
        ev.get("approval"),
        ev.get("inputs"),
        ev.get("outputs"),
        ev.get("artifacts"),
    ]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        else:
            parts.append(str(item))
    return " ".join(reversed(parts))
