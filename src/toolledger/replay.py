"""Replay: read a recorded run back, hand its events to handlers, serve recorded outputs.

Rules this module keeps:

- ``Replayer`` only reads the store; nothing is re-executed unless a handler does it.
- ``replay(run_id, from_event=None)`` yields every event (steps, tool calls, approvals,
  notes …) in recorded order (first record of each event), each with its handler's result;
  an event whose name has no handler is yielded ``skipped`` with a reason, never faked.
- ``recorded(run_id)`` serves recorded outputs by name and input fingerprint, so agent code
  can be re-run offline against a recorded run. Repeated calls with the same inputs get the
  recorded outputs in recorded order, then the last one again.
- ``diff(a, b)`` names the first divergence between two runs (kind, name, status, inputs,
  outputs or error of the n-th event; ids and times are ignored).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .checkpoint import fingerprint, to_json
from .errors import InvalidArgumentError, NotFoundError
from .journal import load_stored_run
from .store import StoreLike, store_for

__all__ = ["Divergence", "RecordedOutputs", "ReplayItem", "Replayer"]

Handler = Callable[[dict[str, Any]], Any]

_COMPARED = ("kind", "name", "status", "inputs", "outputs", "error")
_SERVED_KINDS = ("step", "tool_call")
_SERVED_STATUS = ("completed", "replayed")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayItem:
    """One replayed event: the merged event, its handler's result, or why it was skipped."""

    event: dict[str, Any]
    result: Any = None
    skipped: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """The first difference between two runs."""

    index: int
    field: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    reason: str


def _input_key(name: str, inputs: Any) -> tuple[str, str]:
    value, _ = to_json(inputs if inputs is not None else {})
    return name, fingerprint(value)


class RecordedOutputs:
    """Recorded outputs of a run, looked up by name and input fingerprint."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._served: dict[tuple[str, str], deque[Any]] = {}
        self._last: dict[tuple[str, str], Any] = {}
        for ev in events:
            if ev.get("kind") not in _SERVED_KINDS or ev.get("status") not in _SERVED_STATUS:
                continue
            key = (str(ev.get("name")), fingerprint(ev.get("inputs") or {}))
            self._served.setdefault(key, deque()).append(ev.get("outputs"))

    def __len__(self) -> int:
        return sum(len(q) for q in self._served.values())

    def lookup(self, name: str, inputs: Mapping[str, Any] | None = None) -> Any:
        """Return the recorded outputs of ``name`` called with ``inputs``.

        Raises:
            NotFoundError: ``NOT_FOUND`` when the run never recorded that call.
        """
        key = _input_key(name, dict(inputs) if inputs is not None else {})
        queue = self._served.get(key)
        if queue:
            self._last[key] = queue.popleft()
            return self._last[key]
        if key in self._last:
            return self._last[key]
        raise NotFoundError(
            message=f"the recorded run has no completed {name!r} with these inputs",
            details={"name": name, "fingerprint": key[1]},
        )

    def tool(self, name: str) -> Callable[..., Any]:
        """Return ``fn(**inputs) -> recorded outputs`` standing in for a tool or step."""

        def serve(**inputs: Any) -> Any:
            return self.lookup(name, inputs)

        serve.__name__ = f"recorded_{name}"
        return serve


class Replayer:
    """Replay recorded runs from ``db`` (a ``Store``, path or URL)."""

    def __init__(self, db: StoreLike | None = None) -> None:
        self._store, self._owned = store_for(db, readonly=True)
        self._handlers: dict[str, Handler] = {}

    def close(self) -> None:
        """Close the store if the replayer opened it."""
        if self._owned:
            self._store.close()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, name: str, handler: Handler) -> None:
        """Register ``handler(event) -> result`` for events named ``name``.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad name or a non-callable.
        """
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(message="handler name must be a non-empty str")
        if not callable(handler):
            raise InvalidArgumentError(message=f"handler for {name!r} is not callable")
        self._handlers[name] = handler

    def replay(self, run_id: str, from_event: str | None = None) -> Iterator[ReplayItem]:
        """Yield each event of the run in recorded order with its handler's result.

        Raises:
            NotFoundError: ``NOT_FOUND`` for an unknown run or ``from_event``.
        """
        events = load_stored_run(self._store, run_id).events
        start = 0
        if from_event is not None:
            ids = [ev.get("event_id") for ev in events]
            if from_event not in ids:
                raise NotFoundError(
                    message=f"run {run_id} has no event {from_event!r}",
                    details={"run_id": run_id, "event_id": from_event},
                )
            start = ids.index(from_event)
        return self._iterate(events[start:])

    def _iterate(self, events: list[dict[str, Any]]) -> Iterator[ReplayItem]:
        for ev in events:
            handler = self._handlers.get(str(ev.get("name")))
            if handler is None:
                yield ReplayItem(
                    event=ev,
                    skipped=True,
                    reason=f"no handler registered for {ev.get('kind')} {ev.get('name')!r}",
                )
                continue
            yield ReplayItem(event=ev, result=handler(ev))

    def recorded(self, run_id: str) -> RecordedOutputs:
        """Return the run's recorded outputs for offline re-runs.

        Raises:
            NotFoundError: ``NOT_FOUND`` for an unknown run.
        """
        return RecordedOutputs(load_stored_run(self._store, run_id).events)

    def diff(self, a: str, b: str) -> Divergence | None:
        """Return the first divergence between runs ``a`` and ``b`` (``None``: same).

        Raises:
            NotFoundError: ``NOT_FOUND`` for an unknown run.
        """
        ea = load_stored_run(self._store, a).events
        eb = load_stored_run(self._store, b).events
        for i in range(max(len(ea), len(eb))):
            x = ea[i] if i < len(ea) else None
            y = eb[i] if i < len(eb) else None
            if x is None or y is None:
                which = b if x is None else a
                return Divergence(
                    index=i,
                    field="event",
                    a=x,
                    b=y,
                    reason=f"run {which} has more events (event {i} has no counterpart)",
                )
            for field in _COMPARED:
                if x.get(field) != y.get(field):
                    return Divergence(
                        index=i,
                        field=field,
                        a=x,
                        b=y,
                        reason=f"event {i} ({x.get('kind')} {x.get('name')!r}): {field} differs",
                    )
        return None
