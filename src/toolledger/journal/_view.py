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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["Event", "RunView", "epoch_ms", "parse_event_time"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_event_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
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
        """Return the JSON-ready form (the ``events`` entries of a JSON export)."""
        return {
            "run_id": self.run_id,
            "event_id": self.event_id,
            "seq": self.seq,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "goal": self.goal,
            "agent": self.agent,
            "namespace": self.namespace,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "ts_start_ms": self.ts_start_ms,
            "ts_end_ms": self.ts_end_ms,
            "duration_ms": self.duration_ms,
            "justification": self.justification,
            "justification_source": self.justification_source,
            "justification_missing": self.justification_missing,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "artifacts": list(self.artifacts),
            "approval": self.approval,
            "error": self.error,
            "text": self.text,
            "meta": dict(self.meta),
            "checkpoint": None if self.checkpoint is None else dict(self.checkpoint),
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "erased": None if self.erased is None else dict(self.erased),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        """Build an event from ``to_dict``'s form (derived fields are recomputed)."""
        return cls(
            run_id=str(data.get("run_id")),
            event_id=str(data.get("event_id")),
            seq=int(data.get("seq") or 0),
            parent_id=data.get("parent_id"),
            kind=str(data.get("kind")),
            name=data.get("name"),
            status=data.get("status"),
            goal=data.get("goal"),
            agent=data.get("agent"),
            namespace=data.get("namespace"),
            started_at=parse_event_time(data.get("started_at")),
            ended_at=parse_event_time(data.get("ended_at")),
            duration_ms=data.get("duration_ms"),
            justification=data.get("justification"),
            justification_source=data.get("justification_source"),
            justification_missing=bool(data.get("justification_missing")),
            inputs=data.get("inputs"),
            outputs=data.get("outputs"),
            artifacts=tuple(data.get("artifacts") or ()),
            approval=data.get("approval"),
            error=data.get("error"),
            text=data.get("text"),
            meta=dict(data.get("meta") or {}),
            checkpoint=data.get("checkpoint"),
            trace_id=data.get("trace_id"),
            span_id=data.get("span_id"),
            erased=data.get("erased"),
            extra=dict(data.get("extra") or {}),
        )


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
