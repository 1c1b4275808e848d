"""The seam between the journal/guard (which decide and record) and telemetry (a view).

The journal calls these hooks; ``telemetry/`` implements them with OpenTelemetry. Nothing
here decides anything, and no hook may raise into the caller: implementations guard every
call (a failing exporter or span processor costs only spans).

Event dicts passed to the hooks are the journal's event model (see ``journal/``): at
least ``run_id, event_id, parent_id, kind, name, status, started_at, ended_at`` (ISO-8601
strings), ``justification, meta, inputs, outputs, error``, and for tool calls
``checkpoint`` = ``{"namespace", "call_id", "revision"}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Protocol

__all__ = ["NOOP_TELEMETRY", "NoopSpan", "NoopTelemetry", "SpanHandle", "TelemetryHooks"]


class SpanHandle(Protocol):
    """A live span for one run or event."""

    #: Hex ids of the live span (32 and 16 hex digits), or ``None`` without a valid span
    #: context (API only). An unsampled span has ids too; the journal stores them.
    trace_id: str | None
    span_id: str | None

    def activate(self) -> contextlib.AbstractContextManager[None]:
        """Make this span current for the duration of the ``with`` block."""
        ...

    def transition(
        self,
        *,
        name: str,
        status_from: str | None,
        status_to: str,
        expected_revision: int,
        revision: int,
        won: bool,
        at: str | datetime | None = None,
    ) -> None:
        """Record a checkpoint transition (CAS won or lost): an event on the span.

        ``at`` is the transition's time (the record's ``updated_at``, a datetime or
        ISO-8601 text; ``None``: now).
        """
        ...

    def update(self, attributes: Mapping[str, Any]) -> None:
        """Merge event facts learned mid-flight (checkpoint status, replayed, …).

        Accepted keys (anything else is ignored, so meta can be passed whole):

        - ``checkpoint``: the journal's link ``{"namespace", "call_id", "revision"}``;
        - ``status``/``checkpoint_status``, ``action``/``checkpoint_action``,
          ``revision``/``checkpoint_revision``: the call's checkpoint facts;
        - ``replayed`` (bool: the result came from the checkpoint, the tool did not run),
          ``recovered`` (bool: the outcome was proven by ``recover``);
        - ``description``/``tool_description``: the tool's description;
        - ``call_id``, ``namespace``, ``justification_source``;
        - ``resumed_from`` (or ``link``/``original_span``): ``{"trace_id", "span_id"}`` hex
          of the span of the call this one resumes after a crash (becomes a span link);
        - any full attribute name of ``toolledger.telemetry.attributes`` that the span type
          carries (see ``docs/telemetry.md``).
        """
        ...

    def end(self, event: Mapping[str, Any], error: BaseException | None = None) -> None:
        """End the span with the event's final form; ``error`` sets status ERROR."""
        ...


class TelemetryHooks(Protocol):
    """What the journal calls. ``parent`` is the enclosing span (``None``: the run's)."""

    def run_started(self, run: Mapping[str, Any]) -> SpanHandle:
        """Start the ``invoke_agent`` span of a run (``run`` has run_id, agent, goal, …)."""
        ...

    def event_started(self, event: Mapping[str, Any], parent: SpanHandle | None) -> SpanHandle:
        """Start the span of a journal event (step, tool_call, approval, …)."""
        ...


class NoopSpan:
    """A span that records nothing."""

    trace_id: str | None = None
    span_id: str | None = None

    @contextlib.contextmanager
    def _noop(self) -> Iterator[None]:
        yield

    def activate(self) -> contextlib.AbstractContextManager[None]:
        """Do nothing."""
        return self._noop()

    def transition(self, **_: Any) -> None:
        """Do nothing."""

    def update(self, attributes: Mapping[str, Any]) -> None:
        """Do nothing."""

    def end(self, event: Mapping[str, Any], error: BaseException | None = None) -> None:
        """Do nothing."""


class NoopTelemetry:
    """Hooks that record nothing (used until telemetry is configured, and in tests)."""

    _span = NoopSpan()

    def run_started(self, run: Mapping[str, Any]) -> SpanHandle:
        """Return a no-op span."""
        return self._span

    def event_started(self, event: Mapping[str, Any], parent: SpanHandle | None) -> SpanHandle:
        """Return a no-op span."""
        return self._span


NOOP_TELEMETRY = NoopTelemetry()
