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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "NOOP_TELEMETRY",
    "CallFacts",
    "NoopSpan",
    "NoopTelemetry",
    "SpanHandle",
    "TelemetryHooks",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFacts:
    """What the guard knows about a tool call when it is decided: told once, at its end.

    Re-export derives the same value from the checkpoint's stored history
    (``telemetry._reexport.call_facts``), ``description`` aside (not stored).

    Attributes:
        status: The last checkpoint status the call reached (``none``: no record).
        revision: The last revision it reached (``-1``: no record).
        action: What ``decide_checkpoint`` answered when the call first looked
            (``execute``, ``deliver``, ``reconcile-execution``, ``reconcile-delivery``,
            ``none``).
        replayed: The result came from the checkpoint; the tool did not run.
        recovered: ``recover`` proved the outcome of an earlier attempt.
        deduplicated_from: The call id whose stored result this call returned.
        description: The tool's description (live only).
        link: ``(trace id, span id)`` hex of the span that claimed the call, when this
            call found another attempt's claim (resumed after a crash, or raced a worker).
    """

    status: str
    revision: int
    action: str
    replayed: bool = False
    recovered: bool = False
    deduplicated_from: str | None = None
    description: str | None = None
    link: tuple[str, str] | None = None


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
        """Merge what the journal learns about an event mid-flight.

        ``handle.update(meta=, checkpoint=)`` passes the event's meta and its checkpoint
        link; the keys of ``_model.FACT_KEYS``, ``checkpoint`` (``{"namespace", "call_id",
        "revision"}``) and ``link`` (``{"trace_id", "span_id"}``: a span link) are read,
        anything else is ignored, so meta can be passed whole. A tool call's guard facts
        are not sent here: they come once, with ``end`` (``CallFacts``).
        """
        ...

    def end(
        self,
        event: Mapping[str, Any],
        error: BaseException | None = None,
        facts: CallFacts | None = None,
    ) -> None:
        """End the span with the event's final form; ``error`` sets status ERROR.

        ``facts``: a tool call's ``CallFacts``, the one time the guard tells its span
        what it decided (only a tool call's end has them).
        """
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

    def end(
        self,
        event: Mapping[str, Any],
        error: BaseException | None = None,
        facts: CallFacts | None = None,
    ) -> None:
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
