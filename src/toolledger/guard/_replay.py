"""Replay, fork and resume: answer a run's model calls from a recorded run.

A run started with ``replay_of=`` (or ``fork_at=``), or resumed under its own run id,
holds one ``ReplayController``. The journaled model clients ask it, before anything is
sent, whether a request is answered from the record (``model_call``); the run asks it
before a guarded tool call (``tool_call``). It reads the source run once, at the start.

Rules this module keeps:

- No SDK and no I/O but the one read of the source run: requests are compared as the
  journal stores them (``inputs`` of an ``llm_call``: ``messages``, ``system``, ``tools``,
  ``parameters``; the model is the event's ``meta.model``), after the journal's own JSON
  conversion, so what was stored and what is asked compare alike.
- Parameters that never change the answer and that frameworks make up per run
  (``VOLATILE_PARAMETERS``: the Agents SDK's ``prompt_cache_key``) are not compared.
- Replay and fork: the n-th model call is matched with the n-th recorded one (concurrent
  calls: with any unanswered one that equals it); the first that differs raises
  ``ReplayDivergedError`` (``on_divergence="raise"``) or makes the run live from there
  (``"live"``). ``fork_at`` makes the run live at that event. Once live, nothing is
  answered from the record again; tool calls go through the guard, whose checkpoints
  answer every call id the record holds (it is never executed again).
- Resume: a request equal to the next unanswered recorded one is answered (no error
  otherwise: the run goes live at the first request the record does not hold). Answers a
  resumed run served (``meta.resumed_from``) are not answers the record holds.
- A source event without its content (``journal_content=False``) cannot be served:
  ``REPLAY_UNAVAILABLE`` names it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from ..checkpoint import canonical_json, to_json
from ..errors import (
    InvalidArgumentError,
    NotFoundError,
    ReplayDivergedError,
    ReplayDivergence,
    ReplayUnavailableError,
)
from ..journal import Event, load_run
from ..store import Store

__all__ = ["ON_DIVERGENCE", "VOLATILE_PARAMETERS", "ReplayController", "ReplayReport", "Served"]

#: What a replayed run does at its first divergence.
ON_DIVERGENCE = ("raise", "live")
_REQUEST_FIELDS = ("system", "messages", "tools", "parameters")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """What a replayed, forked or resumed run took from its record.

    ``source_run_id``: the recorded run; ``mode``: ``replay``, ``fork`` or ``resume``;
    ``served_model_calls``/``served_tool_calls``: answered from the record (tool calls:
    by their checkpoints, the tool not run); ``divergence``: the first request that
    differed (``None``: none); ``live_from``: the source event id where the run went live
    (``None``: it never did, or went live past the record's end).
    """

    source_run_id: str
    mode: str
    served_model_calls: int
    served_tool_calls: int
    divergence: ReplayDivergence | None
    live_from: str | None

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the CLI's ``--json``)."""
        d = self.divergence
        return {
            "source_run_id": self.source_run_id,
            "mode": self.mode,
            "served_model_calls": self.served_model_calls,
            "served_tool_calls": self.served_tool_calls,
            "divergence": None
            if d is None
            else {
                "index": d.index,
                "kind": d.kind,
                "name": d.name,
                "field": d.field,
                "recorded": d.recorded,
                "now": d.now,
            },
            "live_from": self.live_from,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    """A recorded model call that answers a request: its event and its ``outputs``."""

    event_id: str
    outputs: dict[str, Any]
    meta: dict[str, Any]
    marker: dict[str, Any]


#: Request parameters that never change the answer and that frameworks make up per run
#: (the OpenAI Agents SDK's generated ``prompt_cache_key``): not compared.
VOLATILE_PARAMETERS = frozenset({"prompt_cache_key"})


def _plain(value: Any) -> Any:
    converted, _ = to_json(value)
    return converted


def _compared(request: dict[str, Any]) -> dict[str, Any]:
    """The request as compared: without its volatile parameters."""
    params = request.get("parameters")
    if isinstance(params, dict) and VOLATILE_PARAMETERS & set(params):
        kept = {k: v for k, v in params.items() if k not in VOLATILE_PARAMETERS}
        return {**request, "parameters": kept}
    return request


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return bool(canonical_json(a) == canonical_json(b))
    except Exception:  # not exact JSON: equality above was the answer
        return False


def _first_difference(recorded: dict[str, Any], now: dict[str, Any]) -> tuple[str, Any, Any]:
    """The first field (``messages[i]``, ``parameters.x``) where two requests differ."""
    if recorded.get("model") != now.get("model"):
        return "model", recorded.get("model"), now.get("model")
    for key in _REQUEST_FIELDS:
        a, b = recorded.get(key), now.get(key)
        if _same(a, b):
            continue
        if key == "messages" and isinstance(a, list) and isinstance(b, list):
            for i in range(max(len(a), len(b))):
                x = a[i] if i < len(a) else None
                y = b[i] if i < len(b) else None
                if not _same(x, y):
                    return f"messages[{i}]", x, y
        if key == "parameters" and isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if not _same(a.get(name), b.get(name)):
                    return f"parameters.{name}", a.get(name), b.get(name)
        return key, a, b
    return "request", None, None


def _span_of(store: Store, run_id: str) -> dict[str, str] | None:
    row = store.get_run(run_id)
    try:
        doc = json.loads(row.data) if row is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    trace_id, span_id = doc.get("trace_id"), doc.get("span_id")
    if isinstance(trace_id, str) and isinstance(span_id, str):
        return {"trace_id": trace_id, "span_id": span_id}
    return None


class ReplayController:
    """Answers a run's requests from a recorded run (see the module's rules).

    Args:
        store: Where the source run is.
        source_run_id: The recorded run.
        mode: ``replay``, ``fork`` or ``resume``.
        on_divergence: ``raise`` or ``live``.
        fork_at: The source event where the run goes live (``fork``).

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run or ``fork_at`` event.
        ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` for a source whose model calls were
            recorded without content (not raised for ``resume``: it then serves nothing).
    """

    def __init__(
        self,
        store: Store,
        source_run_id: str,
        *,
        mode: str,
        on_divergence: str = "raise",
        fork_at: str | None = None,
    ) -> None:
        if on_divergence not in ON_DIVERGENCE:
            raise InvalidArgumentError(
                message=f"on_divergence must be 'raise' or 'live'; got {on_divergence!r}"
            )
        self.source_run_id = source_run_id
        self.mode = mode
        self.on_divergence = on_divergence
        self.fork_at = fork_at
        view = load_run(store, source_run_id)
        events = view.events
        #: The source run's span ids (``trace_id``, ``span_id``) when it had telemetry.
        self.source_span: dict[str, str] | None = _span_of(store, source_run_id)
        if fork_at is not None and not any(e.event_id == fork_at for e in events):
            raise NotFoundError(
                message=f"run {source_run_id} has no event {fork_at!r}",
                details={"run_id": source_run_id, "event_id": fork_at},
            )
        self._lock = threading.Lock()
        self._calls: list[Event] = []
        self._order: dict[str, int] = {}  # event id -> position among all events
        for i, ev in enumerate(events):
            self._order[ev.event_id] = i
            if ev.kind != "llm_call" or ev.status != "completed":
                continue
            if "resumed_from" in ev.meta:
                continue  # a resumed run's served answer: the record holds its original
            self._calls.append(ev)
        #: Guarded call ids the record holds -> their event's position.
        self._tool_ids: dict[str, int] = {}
        #: Call ids the record answered without a checkpoint (a denial, a pending gate).
        self._gated: set[str] = set()
        answered: set[str] = set()
        for i, ev in enumerate(events):
            if ev.kind in ("tool_call", "approval"):
                call_id = (ev.checkpoint or {}).get("call_id")
                if isinstance(call_id, str):
                    self._tool_ids.setdefault(call_id, i)
                    if ev.kind == "approval":
                        self._gated.add(call_id)
                    else:
                        answered.add(call_id)
        self._gated -= answered  # an approved call ran: its checkpoint answers it
        self._answered: set[int] = set()
        self._next = 0
        self._asked = 0
        self._fork_pos = self._order.get(fork_at) if fork_at is not None else None
        self.live = False
        self.live_from: str | None = None
        self.divergence: ReplayDivergence | None = None
        self.served_model_calls = 0
        self.served_tool_calls = 0
        if mode != "resume":
            for ev in self._calls:
                self._check_content(ev)

    def _check_content(self, ev: Event) -> None:
        outputs = ev.outputs
        if (
            not isinstance(ev.inputs, dict)
            or not isinstance(outputs, dict)
            or not ({"response", "stream", "content"} & set(outputs))
        ):
            raise ReplayUnavailableError(
                message=f"run {self.source_run_id} cannot be replayed: its model call "
                f"{ev.event_id} was recorded without content (journal_content=False)",
                details={"run_id": self.source_run_id, "event_id": ev.event_id},
            )

    # -- the report ----------------------------------------------------------------------

    def report(self) -> ReplayReport:
        """The report so far."""
        return ReplayReport(
            source_run_id=self.source_run_id,
            mode=self.mode,
            served_model_calls=self.served_model_calls,
            served_tool_calls=self.served_tool_calls,
            divergence=self.divergence,
            live_from=self.live_from,
        )

    # -- model calls ---------------------------------------------------------------------

    def model_call(self, model: str, request: dict[str, Any]) -> Served | None:
        """Answer a model request from the record, or ``None``: send it (live).

        ``request``: the journal's ``inputs`` form of the request (``request_doc``).

        Raises:
            ReplayDivergedError: ``REPLAY_DIVERGED`` (replay and fork with
                ``on_divergence="raise"``), before anything is sent.
            ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` for a recorded call without content.
        """
        with self._lock:
            if self.live:
                return None
            index = self._asked
            self._asked += 1
            now = _compared({"model": model, **_plain(request)})
            pending = [i for i in range(self._next, len(self._calls)) if i not in self._answered]
            if not pending:
                self._diverged(index, "llm_call", model, "event", None, now, None)
                return None
            first = self._calls[pending[0]]
            if self._at_fork(first):
                self._go_live(first.event_id)
                return None
            match = None
            for i in pending:
                if self._equal(self._calls[i], now):
                    match = i
                    break
                if self.mode == "resume":
                    break  # resume answers only the next recorded request
            if match is None:
                field, a, b = _first_difference(self._request_of(first), now)
                self._diverged(index, "llm_call", model, field, a, b, first.event_id)
                return None
            ev = self._calls[match]
            if self.mode == "resume":
                outputs = ev.outputs
                if not isinstance(outputs, dict) or not (
                    {"response", "stream", "content"} & set(outputs)
                ):
                    self._go_live(ev.event_id)
                    return None
            else:
                self._check_content(ev)
            self._answered.add(match)
            while self._next in self._answered:
                self._next += 1
            self.served_model_calls += 1
            event_id = ev.event_id
            marker = (
                {"resumed_from": event_id}
                if self.mode == "resume"
                else {"replayed_from": {"run_id": self.source_run_id, "event_id": event_id}}
            )
            return Served(
                event_id=event_id, outputs=dict(ev.outputs), meta=dict(ev.meta), marker=marker
            )

    def _request_of(self, ev: Event) -> dict[str, Any]:
        inputs = ev.inputs
        model = ev.meta.get("model", ev.name)
        return _compared({"model": model, **(inputs if isinstance(inputs, dict) else {})})

    def _equal(self, ev: Event, now: dict[str, Any]) -> bool:
        recorded = self._request_of(ev)
        return all(_same(recorded.get(k), now.get(k)) for k in ("model", *_REQUEST_FIELDS))

    def _at_fork(self, ev: Event) -> bool:
        if self._fork_pos is None:
            return False
        return self._order.get(ev.event_id, -1) >= self._fork_pos

    def _go_live(self, event_id: str | None) -> None:
        self.live = True
        self.live_from = event_id

    def _diverged(
        self,
        index: int,
        kind: str,
        name: str | None,
        field: str,
        recorded: Any,
        now: Any,
        event_id: str | None,
    ) -> None:
        if self.mode == "resume":
            self._go_live(event_id)
            return
        divergence = ReplayDivergence(
            index=index, kind=kind, name=name, field=field, recorded=recorded, now=now
        )
        if self.divergence is None:
            self.divergence = divergence
        if self.on_divergence == "live":
            self._go_live(event_id)
            return
        raise ReplayDivergedError(
            message=f"replay of run {self.source_run_id} diverged at {kind} {index} "
            f"({name}): {field} differs from the record; nothing was sent",
            details={
                "index": index,
                "kind": kind,
                "name": name,
                "field": field,
                "recorded": recorded,
                "now": now,
                "source_run_id": self.source_run_id,
                "event_id": event_id,
            },
        )

    # -- tool calls ----------------------------------------------------------------------

    def holds_call(self, call_id: str) -> bool:
        """Whether the record holds a guarded call of this id (its checkpoint answers it)."""
        return call_id in self._tool_ids

    def gated_call(self, call_id: str) -> bool:
        """Whether the record's answer to this call was its approval gate's (no checkpoint)."""
        return call_id in self._gated

    def tool_call(self, call_id: str, tool_name: str) -> None:
        """Check a guarded tool call against the record before the guard runs it.

        Raises:
            ReplayDivergedError: ``REPLAY_DIVERGED`` (replay, before going live) for a call
                id the record does not hold.
        """
        with self._lock:
            if self.live or self.mode == "resume":
                return
            at = self._tool_ids.get(call_id)
            if at is not None:
                if self._fork_pos is not None and at >= self._fork_pos:
                    self._go_live(self.fork_at)
                return
            self._diverged(
                len(self._tool_ids), "tool_call", tool_name, "call_id", None, call_id, None
            )

    def served_tool(self) -> None:
        """Count a guarded call its checkpoint answered (the tool did not run)."""
        with self._lock:
            self.served_tool_calls += 1
