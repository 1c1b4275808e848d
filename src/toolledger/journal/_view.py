"""The typed read model of the journal: ``Event`` and ``RunView``. Pure; no I/O.

Rules this module keeps:

- An ``Event`` is one merged event (a step's start and end records are one event), built
  by ``_merge.merge_events``; a ``RunView`` is a run with its events in ``seq`` order
  (the order of each event's first record), so children keep the order they were recorded.
- Both are frozen; the payloads they carry (``inputs``, ``outputs``, …) were parsed from
  the stored text for this view alone, so no caller object can reach stored state.
- ``to_dict`` is the JSON shape every export and ``--json`` output uses: ISO-8601 times
  *and* millisecond fields. ``Event.from_dict(e.to_dict()) == e``.
- An event a crashed run left running has status ``interrupted``; erased content (gc) is
  ``erased={"at", "reason"}`` with the content fields ``None``, never silently missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from operator import attrgetter
from typing import Any

from ..checkpoint.model import parse_iso

__all__ = [
    "Event",
    "RunView",
    "epoch_ms",
    "from_json_table",
    "parse_event_time",
    "to_json_table",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_event_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parse_iso(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def epoch_ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    delta = value - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).isoformat()


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One journal event as readers see it (a step's start and end records merged).

    ``status`` is the last recorded status, or ``interrupted`` for an event a crashed run
    left running. ``checkpoint`` links a tool call to its checkpoint: ``namespace``,
    ``call_id``, ``revision`` (at the end of the call) and ``status`` (now, in the store;
    ``erased`` after retention, ``missing`` or ``invalid`` when it cannot be read).
    ``erased`` is ``{"at", "reason"}`` once retention removed the content.
    """

    run_id: str
    event_id: str
    seq: int
    parent_id: str | None = None
    kind: str
    name: str | None = None
    status: str | None = None
    goal: str | None = None
    agent: str | None = None
    namespace: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_ms: float | None = None
    justification: str | None = None
    justification_source: str | None = None
    justification_missing: bool = False
    inputs: Any = None
    outputs: Any = None
    artifacts: tuple[Any, ...] = ()
    approval: Any = None
    error: Any = None
    text: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: Mapping[str, Any] | None = None
    trace_id: str | None = None
    span_id: str | None = None
    erased: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ts_start_ms(self) -> int | None:
        """The start time in milliseconds since the Unix epoch."""
        return epoch_ms(self.started_at)

    @property
    def ts_end_ms(self) -> int | None:
        """The end time in milliseconds since the Unix epoch (``None`` while running)."""
        return epoch_ms(self.ended_at)

    @property
    def interrupted(self) -> bool:
        """Whether the run crashed while this event was running."""
        return self.status == "interrupted"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (the ``events`` entries of a JSON export): every field
        in declaration order, ``ts_start_ms``/``ts_end_ms`` after ``ended_at``."""
        return {key: value(self) for key, value in _TO_JSON}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        """Build an event from ``to_dict``'s form (derived fields are recomputed)."""
        get = data.get
        return cls(**{name: convert(get(name)) for name, convert in _FROM_JSON})


# ``to_dict`` and ``from_dict`` follow ``Event``'s fields: a field's JSON form is chosen by
# its declared type, so adding a field is one edit of the dataclass (and, for spans, of its
# telemetry mapping). A type not listed here is JSON as it is.
_TO_JSON_OF_TYPE: dict[str, Callable[[Any], Any]] = {
    "datetime | None": _iso,
    "tuple[Any, ...]": list,
    "Mapping[str, Any]": dict,
    "Mapping[str, Any] | None": lambda value: None if value is None else dict(value),
}
_FROM_JSON_OF_TYPE: dict[str, Callable[[Any], Any]] = {
    "str": str,
    "int": lambda value: int(value or 0),
    "bool": bool,
    "datetime | None": parse_event_time,
    "tuple[Any, ...]": lambda value: tuple(value or ()),
    "Mapping[str, Any]": lambda value: dict(value or {}),
}
#: Keys ``to_dict`` adds after a field: derived, never read back.
_DERIVED_AFTER: dict[str, tuple[tuple[str, Callable[[Any], Any]], ...]] = {
    "ended_at": (
        ("ts_start_ms", lambda ev: epoch_ms(ev.started_at)),
        ("ts_end_ms", lambda ev: epoch_ms(ev.ended_at)),
    ),
}


def to_json_table(cls: type[Any]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """Return ``to_dict``'s keys and how each is read from a ``cls`` (an ``Event``)."""
    table: list[tuple[str, Callable[[Any], Any]]] = []
    for f in fields(cls):
        get = attrgetter(f.name)
        convert = _TO_JSON_OF_TYPE.get(str(f.type))
        table.append((f.name, get if convert is None else _composed(convert, get)))
        table.extend(_DERIVED_AFTER.get(f.name, ()))
    return tuple(table)


def from_json_table(cls: type[Any]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """Return ``from_dict``'s fields and how each is read from ``to_dict``'s value."""
    return tuple((f.name, _FROM_JSON_OF_TYPE.get(str(f.type), _identity)) for f in fields(cls))


def _composed(convert: Callable[[Any], Any], get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda ev: convert(get(ev))


def _identity(value: Any) -> Any:
    return value


_TO_JSON = to_json_table(Event)
_FROM_JSON = from_json_table(Event)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """A stored run as readers see it: what the hash chain covers, and its events.

    ``status`` is ``running``, ``completed``, ``failed`` or ``interrupted`` (its writer
    crashed). ``head_hash`` and ``event_count`` are the chain's head and record count (a
    step is two records, so ``event_count`` counts records, ``len(events)`` events).
    ``source``: the run a replayed or forked run came from, as its hashed header names it
    (``{"mode": "replay" | "fork", "run_id", "event_id"}``; ``event_id`` is the fork
    point, ``None`` for a replay), else ``None``.
    """

    run_id: str
    namespace: str
    agent: str | None = None
    goal: str | None = None
    status: str
    started_at: datetime | None = None
    ended_at: datetime | None = None
    head_hash: str | None = None
    event_count: int = 0
    error: Any = None
    source: Mapping[str, str | None] | None = None
    events: tuple[Event, ...] = ()
    _children: Mapping[str | None, tuple[int, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        index = {ev.event_id: i for i, ev in enumerate(self.events)}
        kids: dict[str | None, list[int]] = {}
        for i, ev in enumerate(self.events):
            parent = ev.parent_id if ev.parent_id in index and ev.parent_id != ev.event_id else None
            kids.setdefault(parent, []).append(i)
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in kids.items()})

    @property
    def duration_ms(self) -> float | None:
        """Milliseconds from start to end (``None`` while running)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return round((self.ended_at - self.started_at).total_seconds() * 1000.0, 3)

    def roots(self) -> list[Event]:
        """Return the top-level events (no parent, or a parent not in this run), in order."""
        return [self.events[i] for i in self._children.get(None, ())]

    def children(self, event_id: str) -> list[Event]:
        """Return the events whose parent is ``event_id``, in recorded order."""
        return [self.events[i] for i in self._children.get(event_id, ())]

    def event(self, event_id: str) -> Event | None:
        """Return the event with this id, or ``None``."""
        for ev in self.events:
            if ev.event_id == event_id:
                return ev
        return None

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def summary(self) -> dict[str, Any]:
        """Return the run's fields without its events (JSON-ready)."""
        return {
            "run_id": self.run_id,
            "namespace": self.namespace,
            "agent": self.agent,
            "goal": self.goal,
            "status": self.status,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "duration_ms": self.duration_ms,
            "head_hash": self.head_hash,
            "event_count": self.event_count,
            "error": self.error,
            "source": None if self.source is None else dict(self.source),
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form: the run's fields and ``events`` (each ``to_dict``)."""
        return {**self.summary(), "events": [ev.to_dict() for ev in self.events]}
