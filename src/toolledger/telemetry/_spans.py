"""Live OpenTelemetry spans for runs, journal events and checkpoint transitions.

Rules of this module:

- Uses the OpenTelemetry *API* only; works (and costs almost nothing) without the SDK.
- Every call into OpenTelemetry is guarded: an exception from a span processor, exporter,
  sampler or the redact hook costs spans, never the caller's tool call. Guarded failures
  are logged on ``toolledger.telemetry`` (the first of each kind as a warning).
  ``BaseException``s that are not ``Exception`` (``KeyboardInterrupt``) are not swallowed.
- Names and attributes come from ``_model`` (shared with re-export) and pass through the
  ``Policy`` (content capture, intent switch, bounds, redact) before anything is set.
- Spans are ``INTERNAL``; sampling-relevant attributes go in at start; work that only
  feeds a span waits for ``span.is_recording()``.
- A span is *started* on the caller's thread (the SDK runs samplers and processors'
  ``on_start`` there, and the ids the journal stores come from it) and *ended* on
  toolledger's telemetry thread (``_ender``): final attributes, status and ``end()``, so a
  processor's ``on_end`` or a synchronous exporter never runs on the thread of a tool call.
  Ending a run's span waits (bounded by ``RUN_END_WAIT``) for the run's endings, so the
  spans of a run are with the processors when its ``with`` block exits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .._version import __version__
from . import _model
from ._ender import ENDER
from ._hooks import NoopSpan, SpanHandle
from ._policy import Policy
from ._report import report
from .attributes import ERROR_TYPE, SCHEMA_URL, TL_CHECKPOINT_REVISION, TL_CHECKPOINT_STATUS

__all__ = ["RUN_END_WAIT", "OTelSpan", "OTelTelemetry", "flush_spans", "get_tracer", "report"]

_NOOP = NoopSpan()
_TL_STATUS = TL_CHECKPOINT_STATUS
_TL_REVISION = TL_CHECKPOINT_REVISION
#: Seconds a run's end waits for its span endings (none once a processor is stuck).
RUN_END_WAIT = 2.0
_FLUSH_GRACE = 0.25


def flush_spans(timeout: float = RUN_END_WAIT) -> bool:
    """Wait until every span toolledger has ended so far reached the span processors.

    Bounded by ``timeout`` seconds; while a processor or exporter is stuck it waits at most
    a quarter second for progress, then returns ``False``. Never raises.
    """
    try:
        return ENDER.drain(timeout, grace=_FLUSH_GRACE)
    except Exception as exc:
        report("flush", exc)
        return False


def get_tracer(provider: Any) -> trace.Tracer:
    """Return toolledger's tracer (with version and schema URL) from ``provider``."""
    if provider is None:
        return trace.get_tracer("toolledger", __version__, schema_url=SCHEMA_URL)
    tracer: trace.Tracer = provider.get_tracer("toolledger", __version__, schema_url=SCHEMA_URL)
    return tracer


def _hex_ids(span: trace.Span) -> tuple[str | None, str | None]:
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None, None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


class _Activation:
    """Context manager that makes a span current; attach/detach failures are swallowed."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> None:
        try:
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        except Exception as exc:
            report("activate", exc)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            try:
                otel_context.detach(self._token)  # type: ignore[arg-type]
            except Exception as err:
                report("deactivate", err)


class _Ending:
    """One span's ending, run on the telemetry thread: policy, attributes, status, end."""

    __slots__ = ("_end", "_policy", "_raw", "_span", "_status")

    def __init__(
        self,
        span: trace.Span,
        policy: Policy,
        raw: Mapping[str, Any],
        status: Status | None,
        end: int | None,
    ) -> None:
        self._span = span
        self._policy = policy
        self._raw = raw
        self._status = status
        self._end = end

    def __call__(self) -> None:
        try:
            span = self._span
            if self._status is not None:
                span.set_status(self._status)
            if self._raw:
                attrs = self._policy.apply(self._raw)
                if attrs:
                    span.set_attributes(attrs)
            span.end(end_time=self._end)
        except Exception as exc:
            report("end", exc)


class OTelSpan:
    """A live span for one run or event (implements ``SpanHandle``)."""

    __slots__ = (
        "_ctx",
        "_ended",
        "_kind",
        "_pending",
        "_policy",
        "_span",
        "_start",
        "_tracer",
        "span_id",
        "trace_id",
    )

    def __init__(
        self,
        span: trace.Span,
        kind: str,
        tracer: trace.Tracer,
        policy: Policy,
        start: Mapping[str, Any] | None = None,
    ) -> None:
        self._span = span
        self._kind = kind
        self._tracer = tracer
        self._policy = policy
        self._ended = False
        self._ctx: Any = None  # this span as a parent context, made on first transition
        # Raw attributes learned after the start; policy + redact run once, at the end
        # (each attribute the SDK sets is validated, so setting once is cheaper).
        self._pending: dict[str, Any] = {}
        self._start: Mapping[str, Any] = start if start is not None else {}
        self.trace_id, self.span_id = _hex_ids(span)

    @property
    def span(self) -> trace.Span:
        """The OpenTelemetry span (for tests and advanced users)."""
        return self._span

    def activate(self) -> contextlib.AbstractContextManager[None]:
        """Make this span current for the duration of the ``with`` block."""
        return _Activation(self._span)

    def transition(
        self,
        *,
        name: str,
        status_from: str | None,
        status_to: str,
        expected_revision: int,
        revision: int,
        won: bool,
        at: str | None = None,
    ) -> None:
        """Record a checkpoint transition as a child ``checkpoint {name}`` span."""
        try:
            if not self._span.is_recording():
                return
            attrs = self._policy.apply(
                _model.transition_attributes(
                    name=name,
                    status_from=status_from,
                    status_to=status_to,
                    expected_revision=expected_revision,
                    revision=revision,
                    won=won,
                )
            )
            now = time.time_ns()
            start = _model.time_ns(at) if at is not None else None
            if start is None or start > now:
                start = now
            if self._ctx is None:
                self._ctx = trace.set_span_in_context(self._span)
            child = self._tracer.start_span(
                _model.span_name("checkpoint", name),
                context=self._ctx,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=start,
            )
            ENDER.submit(_Ending(child, self._policy, {}, None, now))
            if won and self._kind == "execute_tool":
                self._pending[_TL_STATUS] = status_to
                self._pending[_TL_REVISION] = revision
        except Exception as exc:
            report("transition", exc)

    def update(self, attributes: Mapping[str, Any]) -> None:
        """Merge facts learned mid-flight (see ``_hooks.SpanHandle.update`` for the keys)."""
        try:
            if not self._span.is_recording():
                return
            link = _model.link_ids(attributes)
            if link is not None:
                self._span.add_link(
                    SpanContext(
                        trace_id=int(link[0], 16),
                        span_id=int(link[1], 16),
                        is_remote=True,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    )
                )
            self._pending.update(_model.update_attributes(attributes, self._kind))
        except Exception as exc:
            report("update", exc)

    def end(self, event: Mapping[str, Any], error: BaseException | None = None) -> None:
        """End the span with the event's final form; an error sets status ERROR.

        What the event says is read here; the policy, the attributes and ``end()`` run on
        the telemetry thread. A run's span waits (bounded) for its endings.
        """
        if self._ended:
            return
        self._ended = True
        try:
            span = self._span
            raw = self._pending
            status: Status | None = None
            if span.is_recording():
                if self._kind == "invoke_agent":
                    end = _model.run_end_attributes(event)
                else:
                    end = _model.event_end_attributes(event)
                start = self._start
                for key, value in end.items():  # the final event fills gaps, never overrides
                    if value is not None and raw.get(key) is None and start.get(key) != value:
                        raw[key] = value
                if _model.is_error(event, error):
                    raw[ERROR_TYPE] = _model.error_type(event, error)
                    status = Status(StatusCode.ERROR, self._describe(event, error))
            end_time = _model.time_ns(event.get("ended_at"))
            ENDER.submit(_Ending(span, self._policy, raw, status, end_time))
            if self._kind == "invoke_agent":
                ENDER.drain(RUN_END_WAIT)  # no grace: a stuck processor costs the run nothing
        except Exception as exc:
            report("end", exc)

    def _describe(self, event: Mapping[str, Any], error: BaseException | None) -> str | None:
        """Status description: the message only with content capture on (it may hold data)."""
        if not self._policy.capture_content:
            return _model.error_type(event, error)
        if error is not None:
            return str(error) or type(error).__qualname__
        err = event.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        return _model.error_type(event, error)


class OTelTelemetry:
    """``TelemetryHooks`` emitting OpenTelemetry spans through one tracer and policy."""

    __slots__ = ("_policy", "_run", "_tracer")

    def __init__(self, tracer: trace.Tracer, policy: Policy) -> None:
        self._tracer = tracer
        self._policy = policy
        self._run: OTelSpan | None = None

    @property
    def policy(self) -> Policy:
        """The content/intent/redact policy in force."""
        return self._policy

    def run_started(self, run: Mapping[str, Any]) -> SpanHandle:
        """Start the run's ``invoke_agent {agent}`` span (child of the current context)."""
        try:
            handle = self._start(
                "invoke_agent",
                _model.span_name("invoke_agent", run.get("agent")),
                _model.run_start_attributes(run),
                None,
                run.get("started_at"),
            )
            self._run = handle
            return handle
        except Exception as exc:
            report("run_started", exc)
            return _NOOP

    def event_started(self, event: Mapping[str, Any], parent: SpanHandle | None) -> SpanHandle:
        """Start the span of a journal event under ``parent`` (``None``: the run's span)."""
        try:
            kind = _model.event_type(event.get("kind"))
            name_kind = str(event.get("kind")) if kind == "other" else kind
            return self._start(
                kind,
                _model.span_name(name_kind, event.get("name")),
                _model.event_start_attributes(event),
                parent if parent is not None else self._run,
                event.get("started_at"),
            )
        except Exception as exc:
            report("event_started", exc)
            return _NOOP

    def _start(
        self,
        kind: str,
        name: str,
        raw: Mapping[str, Any],
        parent: SpanHandle | None,
        started_at: Any,
    ) -> OTelSpan:
        if isinstance(parent, OTelSpan):
            ctx = trace.set_span_in_context(parent.span)
        elif parent is not None and parent.span_id is not None and parent.trace_id is not None:
            ctx = trace.set_span_in_context(
                trace.NonRecordingSpan(
                    SpanContext(
                        trace_id=int(parent.trace_id, 16),
                        span_id=int(parent.span_id, 16),
                        is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    )
                )
            )
        else:
            ctx = None  # the current context
        span = self._tracer.start_span(
            name,
            context=ctx,
            kind=SpanKind.INTERNAL,
            attributes=self._policy.apply(raw),
            links=(),
            start_time=_model.time_ns(started_at),
        )
        return OTelSpan(span, kind, self._tracer, self._policy, raw)
