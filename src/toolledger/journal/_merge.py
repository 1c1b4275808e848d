"""Merging a run's stored records into events. Pure; no I/O.

Rules this module keeps:

- A step is two records under one ``event_id`` (its ``start``, then its ``end``); readers
  show one *event* per id, in first-seen (``seq``) order. The merge is written once
  (``_merge``): its state per event is a list in ``MERGED_KEYS`` order, finished either
  into the dicts exports read (``merge_records``) or straight into ``Event`` values
  (``merge_events``: ``load_run`` and ``search``), with no dict in between.
- Records come as tuples in ``RECORD_FIELDS`` order (``seq, event_id, parent_id, kind,
  name, status, at, hash, data``), all of one run; their columns complete the stored
  headers (``_records.COLUMN_KEYS``). Nothing here checks hashes: ``verify`` does.
- Unknown fields (a newer writer) are kept under ``extra``; a record whose header is not
  an object is read as a point event of its columns alone; an event a dead writer left
  ``running`` is ``interrupted``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, Field, fields
from datetime import datetime, timezone
from functools import partial
from typing import Any

from ..checkpoint.model import parse_iso
from ..store import RECORD_FIELDS
from ..store.base import EventRow
from ._content import JUSTIFICATION_MISSING
from ._records import CONTENT_KEYS, HEADER_KEYS
from ._view import Event

__all__ = ["MERGED_KEYS", "RECORD_FIELDS", "merge_events", "merge_records", "record_tuples"]

#: The keys of ``merge_records``' dicts, in order (``artifact`` follows when recorded).
MERGED_KEYS = (
    "run_id",
    "event_id",
    "seq",
    "parent_id",
    "kind",
    "name",
    "goal",
    "status",
    "started_at",
    "ended_at",
    "duration_ms",
    "justification",
    "justification_source",
    JUSTIFICATION_MISSING,
    "inputs",
    "outputs",
    "artifacts",
    "approval",
    "error",
    "text",
    "meta",
    "checkpoint",
    "trace_id",
    "span_id",
    "erased",
    "interrupted",
    "extra",
)
(
    _RUN_ID,
    _EVENT_ID,
    _SEQ,
    _PARENT_ID,
    _KIND,
    _NAME,
    _GOAL,
    _STATUS,
    _STARTED_AT,
    _ENDED_AT,
    _DURATION_MS,
    _JUSTIFICATION,
    _JUSTIFICATION_SOURCE,
    _JUSTIFICATION_MISSING,
    _INPUTS,
    _OUTPUTS,
    _ARTIFACTS,
    _APPROVAL,
    _ERROR,
    _TEXT,
    _META,
    _CHECKPOINT,
    _TRACE_ID,
    _SPAN_ID,
    _ERASED,
    _INTERRUPTED,
    _EXTRA,
) = range(len(MERGED_KEYS))
_ARTIFACT = len(MERGED_KEYS)  # the content's ``artifact``, kept only when recorded
_UNSET: Any = object()
#: Where each content key goes in an event's state.
_CONTENT_SLOTS = {
    "inputs": _INPUTS,
    "outputs": _OUTPUTS,
    "justification": _JUSTIFICATION,
    "error": _ERROR,
    "meta": _META,
    "approval": _APPROVAL,
    "text": _TEXT,
    "artifact": _ARTIFACT,
}
if set(_CONTENT_SLOTS) != CONTENT_KEYS:  # pragma: no cover
    raise AssertionError("_CONTENT_SLOTS must place every content key")
_NO_FIELDS: dict[str, Any] = {}  # an unreadable record's header and content (never written)


def record_tuples(rows: Iterable[EventRow]) -> list[tuple[Any, ...]]:
    """Return ``EventRow``s as tuples in ``RECORD_FIELDS`` order."""
    return [(r.seq, r.event_id, r.parent_id, r.kind, r.name, r.status, r.at, r.hash, r.data)
            for r in rows]  # fmt: skip


def _merge(
    records: Sequence[Sequence[Any]],
    docs: Sequence[Mapping[str, Any]],
    run_id: Any,
    goal: str | None,
) -> list[list[Any]]:
    """Each event's state (a list in ``MERGED_KEYS`` order, then ``artifact``), in order.

    One pass; the columns are read where they are, not copied into each header first.
    """
    events: dict[str, list[Any]] = {}
    order: list[list[Any]] = []
    slots = _CONTENT_SLOTS
    header_keys = HEADER_KEYS
    for (seq, event_id, parent_id, kind, name, status, at, _, _), doc in zip(
        records, docs, strict=True
    ):
        header = doc.get("header")
        if type(header) is dict:
            content = doc.get("content")
            if type(content) is not dict:
                content = _NO_FIELDS
            erased = doc.get("erased")
        else:  # unreadable: the columns alone
            header, content, erased = _NO_FIELDS, _NO_FIELDS, None
        get = header.get
        key = str(event_id)
        phase = get("phase", "point")
        state = events.get(key)
        if state is None or phase != "end":
            source = get("justification_source")
            # A point record ends at its ``ended_at`` (an event that lasted) or its ``at``.
            ended = at if phase == "end" else (get("ended_at") or at) if phase == "point" else None
            state = [
                run_id,
                event_id,
                seq,
                parent_id,
                kind,
                name,
                goal,
                status,
                at,
                ended,
                None,
                None,
                source,
                bool(get(JUSTIFICATION_MISSING, False)),
                None,
                None,
                [],
                None,
                None,
                None,
                {"justification_source": source} if source else {},
                None,
                None,
                None,
                None,
                False,
                {},
                _UNSET,
            ]
            events[key] = state
            order.append(state)
        else:
            state[_STATUS] = status
            state[_ENDED_AT] = at
        value = get("checkpoint")
        if value is not None:
            state[_CHECKPOINT] = value
        value = get("trace_id")
        if value is not None:
            state[_TRACE_ID] = value
        value = get("span_id")
        if value is not None:
            state[_SPAN_ID] = value
        if erased is not None:
            state[_ERASED] = erased
        for ckey, value in content.items():
            slot = slots.get(ckey)
            if slot is None:
                state[_EXTRA][ckey] = value
            elif slot == _OUTPUTS and isinstance(value, dict) and isinstance(state[_OUTPUTS], dict):
                state[_OUTPUTS] = {**state[_OUTPUTS], **value}
            elif slot == _META and isinstance(value, dict):
                state[_META] = {**state[_META], **value}
            else:
                state[slot] = value
        if not header_keys.issuperset(header):
            for hkey, value in header.items():
                if hkey not in header_keys:
                    state[_EXTRA][hkey] = value
        if kind == "artifact" and phase != "end":
            parent = events.get(str(parent_id))
            if parent is not None and content.get("artifact") is not None:
                parent[_ARTIFACTS].append(content["artifact"])
    return order


def _duration_ms(start: Any, end: Any) -> float | None:
    if not start or not end:
        return None
    try:
        delta = parse_iso(end) - parse_iso(start)
    except (TypeError, ValueError):
        return None
    return round(delta.total_seconds() * 1000.0, 3)


def merge_records(
    rows: Sequence[EventRow],
    docs: Sequence[Mapping[str, Any]],
    *,
    goal: str | None = None,
    live: bool = False,
) -> list[dict[str, Any]]:
    """Merge one run's stored records (in ``seq`` order) into event dicts, first-seen order.

    Args:
        rows: The stored records; their columns are the header fields in ``COLUMN_KEYS``.
        docs: ``rows[i].data`` parsed (``{"header", "content"|"erased"}``); one whose
            header is not an object is read as a point event with no content.
        goal: The run's goal, copied onto every event.
        live: Whether the run may still be running; when ``False`` an event that never
            ended is marked ``interrupted``.

    Returns:
        Dicts with ``MERGED_KEYS`` (and ``artifact`` when an artifact was recorded).
    """
    if not rows:
        return []
    out: list[dict[str, Any]] = []
    for state in _merge(record_tuples(rows), docs, rows[0].run_id, goal):
        ev = dict(zip(MERGED_KEYS, state, strict=False))  # stops before the artifact
        if state[_ARTIFACT] is not _UNSET:
            ev["artifact"] = state[_ARTIFACT]
        if ev["status"] == "running" and not live:
            ev["interrupted"] = True
        ev["duration_ms"] = _duration_ms(ev["started_at"], ev["ended_at"])
        out.append(ev)
    return out


def _parsed(value: Any) -> datetime | None:
    """``value`` as ``parse_iso`` reads it (``None`` when it cannot)."""
    if type(value) is str and value:
        try:
            return parse_iso(value)
        except ValueError:
            return None
    if isinstance(value, str) and value:
        return _parsed(str(value))
    return None


def _aware(parsed: datetime | None, raw: Any) -> datetime | None:
    """``_view.parse_event_time`` of ``raw``, given ``_parsed(raw)``."""
    if parsed is None:
        return raw if isinstance(raw, datetime) else None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _same(value: Any) -> Any:
    return value


_new_event = object.__new__
# A frozen dataclass's __init__ sets each field through object.__setattr__; the slots' own
# descriptors set them at about half the cost. Event has no __post_init__: nothing skipped.
_SETTERS = {name: vars(Event)[name].__set__ for name in Event.__dataclass_fields__}
_SET_RUN_ID = _SETTERS["run_id"]
_SET_EVENT_ID = _SETTERS["event_id"]
_SET_SEQ = _SETTERS["seq"]
_SET_PARENT_ID = _SETTERS["parent_id"]
_SET_KIND = _SETTERS["kind"]
_SET_NAME = _SETTERS["name"]
_SET_STATUS = _SETTERS["status"]
_SET_GOAL = _SETTERS["goal"]
_SET_AGENT = _SETTERS["agent"]
_SET_NAMESPACE = _SETTERS["namespace"]
_SET_STARTED_AT = _SETTERS["started_at"]
_SET_ENDED_AT = _SETTERS["ended_at"]
_SET_DURATION_MS = _SETTERS["duration_ms"]
_SET_JUSTIFICATION = _SETTERS["justification"]
_SET_JUSTIFICATION_SOURCE = _SETTERS["justification_source"]
_SET_JUSTIFICATION_MISSING = _SETTERS[JUSTIFICATION_MISSING]
_SET_INPUTS = _SETTERS["inputs"]
_SET_OUTPUTS = _SETTERS["outputs"]
_SET_ARTIFACTS = _SETTERS["artifacts"]
_SET_APPROVAL = _SETTERS["approval"]
_SET_ERROR = _SETTERS["error"]
_SET_TEXT = _SETTERS["text"]
_SET_META = _SETTERS["meta"]
_SET_CHECKPOINT = _SETTERS["checkpoint"]
_SET_TRACE_ID = _SETTERS["trace_id"]
_SET_SPAN_ID = _SETTERS["span_id"]
_SET_ERASED = _SETTERS["erased"]
_SET_EXTRA = _SETTERS["extra"]
#: Fields ``merge_events`` does not read from the records: each new ``Event`` gets their
#: defaults, so a field added to ``Event`` needs no edit here until records carry it.
_MERGED_FIELDS = frozenset(
    {
        "run_id", "event_id", "seq", "parent_id", "kind", "name", "status", "goal", "agent",
        "namespace", "started_at", "ended_at", "duration_ms", "justification",
        "justification_source", JUSTIFICATION_MISSING, "inputs", "outputs", "artifacts",
        "approval", "error", "text", "meta", "checkpoint", "trace_id", "span_id", "erased",
        "extra",
    }
)  # fmt: skip


def _default_of(f: Field[Any]) -> Callable[[], Any]:
    factory = f.default_factory
    return factory if f.default is MISSING and callable(factory) else partial(_same, f.default)


_DEFAULTS = tuple(
    (_SETTERS[f.name], _default_of(f)) for f in fields(Event) if f.name not in _MERGED_FIELDS
)


def merge_events(
    records: Sequence[Sequence[Any]],
    docs: Sequence[Mapping[str, Any]],
    *,
    run_id: str,
    goal: str | None,
    live: bool,
    agent: str | None,
    namespace: str | None,
    checkpoint_status: Callable[[Mapping[str, Any]], str | None],
) -> list[Event]:
    """Merge one run's records (tuples in ``RECORD_FIELDS`` order) into ``Event`` values.

    The same events as ``merge_records`` (whose dicts ``Event`` fields are read from),
    built without them: ``status`` is ``interrupted`` for an event a dead writer left
    running, times are aware datetimes, and a checkpoint link carries
    ``checkpoint_status(link)`` (the linked checkpoint's status now).
    """
    out: list[Event] = []
    append = out.append
    for state in _merge(records, docs, run_id, goal):
        status = state[_STATUS]
        if status == "running" and not live:
            status = "interrupted"
        start, end = state[_STARTED_AT], state[_ENDED_AT]
        started = _parsed(start)
        ended = started if end is start else _parsed(end)  # a point event: one parse
        duration = None
        if started is not None and ended is not None:
            try:
                duration = round((ended - started).total_seconds() * 1000.0, 3)
            except TypeError:  # one aware, one naive
                duration = None
        link = state[_CHECKPOINT]
        checkpoint = None
        if link is not None and isinstance(link, Mapping):
            checkpoint = {
                "namespace": link.get("namespace"),
                "call_id": link.get("call_id"),
                "revision": link.get("revision"),
                "status": checkpoint_status(link),
            }
        seq = state[_SEQ]
        ev = _new_event(Event)
        _SET_RUN_ID(ev, str(state[_RUN_ID]))
        _SET_EVENT_ID(ev, str(state[_EVENT_ID]))
        _SET_SEQ(ev, seq if type(seq) is int else -1)
        _SET_PARENT_ID(ev, state[_PARENT_ID])
        _SET_KIND(ev, str(state[_KIND]))
        _SET_NAME(ev, state[_NAME])
        _SET_STATUS(ev, status)
        _SET_GOAL(ev, state[_GOAL])
        _SET_AGENT(ev, agent)
        _SET_NAMESPACE(ev, namespace)
        _SET_STARTED_AT(ev, _aware(started, start))
        _SET_ENDED_AT(ev, _aware(ended, end))
        _SET_DURATION_MS(ev, duration)
        _SET_JUSTIFICATION(ev, state[_JUSTIFICATION])
        _SET_JUSTIFICATION_SOURCE(ev, state[_JUSTIFICATION_SOURCE])
        _SET_JUSTIFICATION_MISSING(ev, state[_JUSTIFICATION_MISSING])
        _SET_INPUTS(ev, state[_INPUTS])
        _SET_OUTPUTS(ev, state[_OUTPUTS])
        _SET_ARTIFACTS(ev, tuple(state[_ARTIFACTS]))
        _SET_APPROVAL(ev, state[_APPROVAL])
        _SET_ERROR(ev, state[_ERROR])
        _SET_TEXT(ev, state[_TEXT])
        _SET_META(ev, state[_META] or {})
        _SET_CHECKPOINT(ev, checkpoint)
        _SET_TRACE_ID(ev, state[_TRACE_ID])
        _SET_SPAN_ID(ev, state[_SPAN_ID])
        _SET_ERASED(ev, state[_ERASED])
        _SET_EXTRA(ev, state[_EXTRA])
        for set_default, default in _DEFAULTS:
            set_default(ev, default())
        append(ev)
    return out
