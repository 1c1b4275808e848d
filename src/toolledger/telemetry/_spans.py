"""Live OpenTelemetry spans for runs, journal events and checkpoint transitions.

Rules of this module:

- Uses the OpenTelemetry *API* only; works (and costs almost nothing) without the SDK.
- Every call into OpenTelemetry is guarded: an exception from a span processor, exporter,
  sampler or the redact hook costs spans, never the caller's tool call. Guarded failures
  are logged on ``toolledger.telemetry`` (the first of each kind as a warning).
  ``BaseException``s that are not ``Exception`` (``KeyboardInterrupt``) are not swallowed.
- Names and attributes come from ``_model`` (shared with re-export) and pass through the
  ``Policy`` (content capture, intent switch, bounds, redact) before anything is set.
- Model calls (``chat``) are ``CLIENT`` spans, everything else ``INTERNAL``; work that
  only feeds a span waits for ``span.is_recording()``. A span's final name and attributes
  come from ``_model.finish`` when it ends (a tool call becomes ``execute_tool``,
  ``replay_tool`` or ``recover_tool`` then), then ``_openinference`` adds the keys Phoenix
  and Langfuse display, from the attributes the policy allowed.
- An event's span starts under the innermost of its journal parent and the current span
  (``_inside``): a framework's span opened inside the parent's scope (its tool span) is
  the parent; the span current when the journal parent started is not. Under a span of
  another trace than the run's, the span links to the run's span.
- Checkpoint transitions are events on the tool call's span (``checkpoint {transition}``),
  in revision order, inside the span's bounds, at strictly increasing times: they carry no
  span ids, so a re-export sends exactly the same thing.
- An approval also emits the conventions' ``gen_ai.tool.call.decision`` log record through
  the Logs API, in the approval span's context. Metrics are recorded with each ending.
- A span is *started* on the caller's thread (the SDK runs samplers and processors'
  ``on_start`` there, and the ids the journal stores come from it) and *ended* on
  toolledger's telemetry thread (``_ender``): final attributes, events, status, ``end()``
  and metrics, so a processor's ``on_end`` or a synchronous exporter never runs on the
  thread of a tool call. The caller's thread only notes what the span is told
  (transitions, facts, the final event's top level): building attributes is the ending's.
  Always, even for a ``BatchSpanProcessor`` whose ``on_end`` never blocks: ending inline
  was measured slower for the call (``bench/bench_telemetry.py``), because the telemetry
  thread's work overlaps the call's commits, which release the GIL.
  Ending a run's span waits (bounded by ``RUN_END_WAIT``) for the run's endings, so the
  spans of a run are with the processors when its ``with`` block exits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from contextvars import Token
from datetime import datetime
from types import TracebackType
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .._version import __version__
from . import _model, _openinference
from . import attributes as a
from ._ender import ENDER
from ._framework_span import is_framework_tool_span
from ._hooks import CallFacts, NoopSpan, SpanHandle
from ._metrics import Instruments
from ._policy import Policy
from ._report import report
from .attributes import ERROR_TYPE, SCHEMA_URL, TL_CHECKPOINT_REVISION, TL_CHECKPOINT_STATUS

__all__ = [
    "NO_SIGNALS",
    "RUN_END_WAIT",
    "OTelSpan",
    "OTelTelemetry",
    "Signals",
    "decision_record",
    "flush_spans",
    "get_tracer",
    "report",
]

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


class _Activation:
    """Context manager that makes a span current; attach/detach failures are swallowed."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._token: Token[otel_context.Context] | None = None

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
                otel_context.detach(self._token)
            except Exception as err:
                report("deactivate", err)


#: A transition as the caller reported it: name, status from, status to, expected
#: revision, revision, won, and its time (a datetime or ISO-8601 text, or ns when the span
#: saw it): the event is built on the telemetry thread.
Transition = tuple[str, Any, Any, int, int, bool, Any]
_TOOL_SPANS = frozenset({"execute_tool", "replay_tool", "recover_tool", "guard_tool"})
_GUARDED = ("execute_tool", "guard_tool")


def _seconds(start: int | None, end: int | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return (end - start) / 1e9


class Signals:
    """Where a run's metrics and log records go (either may be ``None``: not recorded)."""

    __slots__ = ("instruments", "logger")

    def __init__(self, instruments: Instruments | None, logger: Any) -> None:
        self.instruments = instruments
        self.logger = logger


NO_SIGNALS = Signals(None, None)


def decision_record(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.tool.call.decision`` log record's attributes of an approval span."""
    out = {
        a.GEN_AI_TOOL_CALL_DECISION_OUTCOME: attrs.get(a.TL_APPROVAL_OUTCOME),
        a.GEN_AI_TOOL_CALL_ID: attrs.get(a.TL_APPROVAL_CALL_ID),
        a.GEN_AI_TOOL_NAME: attrs.get(a.TL_TOOL_NAME),
        a.TL_APPROVAL_BY: attrs.get(a.TL_APPROVAL_BY),
        a.TL_APPROVAL_REASON: attrs.get(a.TL_APPROVAL_REASON),
        a.TL_EVENT_ID: attrs.get(a.TL_EVENT_ID),
    }
    return {k: v for k, v in out.items() if v is not None}


class OTelSpan:
    """A live span for one run or event (implements ``SpanHandle``).

    The caller's thread only starts the span and notes what it is told (transitions and
    facts, in order, as given); everything else, from the final attributes to ``end()``
    and the metrics, is the ending's (``_end``), run on the telemetry thread.
    """

    __slots__ = (
        "_context",
        "_ended",
        "_error",
        "_event",
        "_facts",
        "_kind",
        "_log",
        "_policy",
        "_recording",
        "_signals",
        "_span",
        "_start",
        "_start_ns",
        "_started",
        "host",
        "own_id",
        "span_id",
        "trace_id",
        "under",
    )

    def __init__(
        self,
        span: trace.Span,
        kind: str,
        policy: Policy,
        start: Mapping[str, Any] | None = None,
        start_ns: int | None = None,
        signals: Signals = NO_SIGNALS,
        under: int = 0,
        started: Mapping[str, Any] | None = None,
    ) -> None:
        self._span = span
        self._context: otel_context.Context | None = None
        ctx = span.get_span_context()
        #: The span id of this span (``0``: no valid context) and of the span that was
        #: current when it started (``0``: none), which ``_inside`` compares.
        self.own_id = ctx.span_id
        self.under = under
        if ctx.is_valid:
            self.trace_id: str | None = format(ctx.trace_id, "032x")
            self.span_id: str | None = format(ctx.span_id, "016x")
        else:
            self.trace_id = self.span_id = None
        # Nothing the ending needs can change before it: the span is ended there only.
        self._recording = span.is_recording()
        # What the span was given at its start (set again at the end only if it changed).
        self._started: Mapping[str, Any] = started if started is not None else {}
        self._kind = kind
        self._policy = policy
        self._signals = signals
        self._ended = False
        # Transitions (tuples) and facts (dicts) as reported, in order: the policy and
        # the attributes they make are the ending's.
        self._log: list[Transition | dict[str, Any]] = []
        self._start: Mapping[str, Any] = start if start is not None else {}
        self._start_ns = start_ns
        self._event: Mapping[str, Any] = {}
        self._error: BaseException | None = None
        self._facts: CallFacts | None = None
        #: The framework's tool span this ``guard_tool`` span guards (``None``: none).
        self.host: trace.Span | None = None

    @property
    def span(self) -> trace.Span:
        """The OpenTelemetry span (for tests and advanced users)."""
        return self._span

    @property
    def context(self) -> otel_context.Context:
        """A context with this span current (the parent context of its children)."""
        if self._context is None:
            self._context = trace.set_span_in_context(self._span)
        return self._context

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
        at: str | datetime | None = None,
    ) -> None:
        """Record a checkpoint transition: a ``checkpoint {name}`` event at the span's end."""
        if self._recording and not self._ended:
            self._log.append(
                (
                    name,
                    status_from,
                    status_to,
                    expected_revision,
                    revision,
                    won,
                    at if at is not None else time.time_ns(),
                )
            )

    def update(self, attributes: Mapping[str, Any]) -> None:
        """Merge facts learned mid-flight (``_model.FACT_KEYS``, ``checkpoint``, ``link``)."""
        if (self._recording or self._signals.instruments is not None) and not self._ended:
            try:
                self._log.append(dict(attributes))
            except Exception as exc:
                report("update", exc)

    def end(
        self,
        event: Mapping[str, Any],
        error: BaseException | None = None,
        facts: CallFacts | None = None,
    ) -> None:
        """End the span with the event's final form; an error sets status ERROR.

        The event's top level is copied here; its attributes, the policy and ``end()`` are
        the telemetry thread's. A run's span waits (bounded) for its endings. ``facts``: a
        tool call's ``CallFacts`` (they win over what the event says).
        """
        if self._ended:
            return
        self._ended = True
        try:
            if self.host is not None and event.get("status") == "replayed":
                _mark_replay(self.host, event.get("name"))
            self._event = dict(event)
            self._error = error
            self._facts = facts
            ENDER.submit(self._end)
            if self._kind == "invoke_agent":
                ENDER.drain(RUN_END_WAIT)  # no grace: a stuck processor costs the run nothing
        except Exception as exc:
            report("end", exc)

    # -- the ending, on the telemetry thread -----------------------------------------------

    def _end(self) -> None:
        try:
            span = self._span
            event, error = self._event, self._error
            ended = end = _model.time_ns(event.get("ended_at"))
            if self._recording or self._signals.instruments is not None:
                final, raw, status, transitions = self._final(span, event, error)
                if self._recording:  # the events may move the end a little (transition_times)
                    end = self._apply(span, final, raw, status, transitions, ended)
                span.end(end_time=end)
                self._record(final, raw, ended)
            else:
                span.end(end_time=end)
        except Exception as exc:
            report("end", exc)
        finally:  # the handle may outlive its span: keep nothing of the ending alive
            self._log = []
            self._event = self._start = self._started = {}
            self._error = self._facts = None

    def _final(
        self, span: trace.Span, event: Mapping[str, Any], error: BaseException | None
    ) -> tuple[str, dict[str, Any], Status | None, list[Transition]]:
        """The span's final type, raw attributes, status and transitions."""
        kind = self._kind
        pending: dict[str, Any] = {}
        transitions: list[Transition] = []
        for entry in self._log:
            if type(entry) is tuple:
                transitions.append(entry)
                if entry[5] and kind in _GUARDED:  # won: the call's status so far
                    pending[_TL_STATUS] = entry[2]
                    pending[_TL_REVISION] = entry[4]
                continue
            assert isinstance(entry, dict)
            link = _model.link_ids(entry)
            if link is not None and self._recording:
                _add_link(span, link)
            pending.update(_model.update_attributes(entry))
        facts = self._facts
        if facts is not None:  # the guard's facts, told once at the call's end
            pending.update(_model.call_attributes(facts))
            if facts.link is not None and self._recording:
                _add_link(span, facts.link)
        raw: dict[str, Any] = dict(self._start)
        if kind == "invoke_agent":
            learned = _model.run_end_attributes(event)
        else:
            learned = _model.event_end_attributes(event)
        for key, value in learned.items():  # the final event fills gaps, never overrides
            if value is not None and pending.get(key) is None:
                raw[key] = value
        raw.update(pending)
        status: Status | None = None
        if _model.is_error(event, error):
            raw[ERROR_TYPE] = _model.error_type(event, error)
            status = Status(
                StatusCode.ERROR,
                _model.status_description(event, error, self._policy.capture_content),
            )
        final, raw = _model.finish(kind, raw)
        return final, raw, status, transitions

    def _apply(
        self,
        span: trace.Span,
        final: str,
        raw: dict[str, Any],
        status: Status | None,
        transitions: list[Transition],
        ended: int | None,
    ) -> int | None:
        """Set the final name, attributes, events and status; return the end time."""
        policy = self._policy
        if final != self._kind:
            name = getattr(span, "name", None)
            if isinstance(name, str) and name.startswith("execute_tool"):
                span.update_name(_model.span_name(final, name[len("execute_tool ") :]))
        attrs = policy.apply(raw)
        if policy.openinference:
            attrs.update(_openinference.project(final, attrs))
        changed = dict(attrs)
        for key, value in self._started.items():
            # what the span got at its start is not set (and checked by the SDK) again
            if key in changed and type(changed[key]) is type(value) and changed[key] == value:
                del changed[key]
        if changed:
            span.set_attributes(changed)
        end = ended
        if transitions and self._start_ns is not None:
            end = self._events(span, transitions, self._start_ns, ended)
        if status is not None:
            span.set_status(status)
        if final == "approval":
            self._decision(span, attrs, ended)
        return end

    def _events(
        self, span: trace.Span, transitions: list[Transition], start: int, end: int | None
    ) -> int:
        stop = end if end is not None else time.time_ns()
        found = [at if type(at) is int else _model.time_ns(at) for *_, at in transitions]
        times = _model.transition_times(found, start, stop)
        policy = self._policy
        for (name, src, dst, expected, revision, won, _), at in zip(
            transitions, times, strict=True
        ):
            label, attrs = _model.transition_event(
                name=name,
                status_from=src,
                status_to=dst,
                expected_revision=expected,
                revision=revision,
                won=won,
            )
            if policy.redact is not None or type(dst) is not str or type(revision) is not int:
                attrs = policy.apply(attrs)  # else: what apply would return, as it is
            span.add_event(label, attrs, timestamp=at)
        return max(stop, times[-1]) if times else stop

    def _decision(self, span: trace.Span, attrs: Mapping[str, Any], end: int | None) -> None:
        logger = self._signals.logger
        if logger is None:
            return
        try:
            logger.emit(
                event_name=a.EVENT_TOOL_CALL_DECISION,
                body=f"tool call {attrs.get(a.TL_APPROVAL_OUTCOME)}",
                attributes=decision_record(attrs),
                context=trace.set_span_in_context(span),
                timestamp=end,
                severity_number=_logs.SeverityNumber.INFO,
            )
        except Exception as exc:
            report("decision log record", exc)

    def _record(self, final: str, raw: Mapping[str, Any], end: int | None) -> None:
        ins = self._signals.instruments
        if ins is None:
            return
        seconds = _seconds(self._start_ns, end)
        if final in _TOOL_SPANS:
            tool = raw.get(a.GEN_AI_TOOL_NAME, raw.get(a.TL_TOOL_NAME))
            ins.tool(tool, raw.get(a.TL_TOOL_OUTCOME), raw.get(ERROR_TYPE), seconds)
        elif final == "chat":
            ins.record_chat(raw, seconds)
        elif final == "approval" and raw.get(a.TL_APPROVAL_OUTCOME) == a.APPROVAL_DENY:
            ins.record_denied(raw.get(a.TL_TOOL_NAME))


class OTelTelemetry:
    """``TelemetryHooks`` emitting OpenTelemetry spans through one tracer and policy."""

    __slots__ = ("_context", "_policy", "_run", "_signals", "_tracer")

    def __init__(self, tracer: trace.Tracer, policy: Policy, signals: Signals = NO_SIGNALS) -> None:
        self._tracer = tracer
        self._policy = policy
        self._signals = signals
        self._run: OTelSpan | None = None
        self._context: dict[str, Any] = {}

    @property
    def policy(self) -> Policy:
        """The content/intent/redact policy in force."""
        return self._policy

    def run_started(self, run: Mapping[str, Any]) -> SpanHandle:
        """Start the run's ``invoke_agent {agent}`` span (child of the current context)."""
        try:
            self._context = {
                k: v for k, v in _model.context_attributes(run).items() if v is not None
            }
            handle = self._start(
                "invoke_agent",
                _model.span_name("invoke_agent", run.get("agent")),
                _model.run_start_attributes(run),
                None,
                run.get("started_at"),
                _links(run.get("links")),
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
            raw = _model.event_start_attributes(event, kind)
            if kind in ("execute_tool", "chat") and self._context:
                raw.update(self._context)
            cp = event.get("checkpoint")
            return self._start(
                kind,
                _model.span_name(name_kind, event.get("name")),
                raw,
                parent if parent is not None else self._run,
                event.get("started_at"),
                call_id=cp.get("call_id") if isinstance(cp, Mapping) else None,
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
        links: tuple[trace.Link, ...] = (),
        *,
        call_id: Any = None,
    ) -> OTelSpan:
        current = trace.get_current_span().get_span_context()
        under = current.span_id if current.is_valid else 0
        if isinstance(parent, OTelSpan):
            ctx = parent.context if not _inside(under, parent) else None
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
        host = None
        if kind == "execute_tool" and ctx is None and under:
            host = _framework_tool(trace.get_current_span())
            if host is not None:  # the call's tool span is the framework's: ours guards it
                kind = "guard_tool"
                name = _model.span_name(kind, name[len("execute_tool ") :])
                _join(host, call_id)
        if ctx is None and under and self._run is not None and kind != "invoke_agent":
            run_ctx = self._run.span.get_span_context()
            if run_ctx.is_valid and run_ctx.trace_id != current.trace_id:
                links = (trace.Link(run_ctx),)  # under a framework's span in another trace
        start_ns = _model.time_ns(started_at) or time.time_ns()
        applied = self._policy.apply(raw)
        span = self._tracer.start_span(
            name,
            context=ctx,
            kind=SpanKind.CLIENT if kind == "chat" else SpanKind.INTERNAL,
            attributes=applied,
            links=links,
            start_time=start_ns,
        )
        out = OTelSpan(span, kind, self._policy, raw, start_ns, self._signals, under, applied)
        out.host = host
        return out


def _add_link(span: trace.Span, ids: tuple[str, str]) -> None:
    """Link ``span`` to the span ``(trace id, span id)`` hex (a resumed call's claim)."""
    span.add_link(
        SpanContext(
            trace_id=int(ids[0], 16),
            span_id=int(ids[1], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )


def _links(spans: Any) -> tuple[trace.Link, ...]:
    """Links to other runs' spans (``[{"trace_id", "span_id"}]``, hex): a replayed or forked
    run's span links to its source run's."""
    out = []
    for ids in spans or ():
        try:
            ctx = SpanContext(
                trace_id=int(ids["trace_id"], 16),
                span_id=int(ids["span_id"], 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        except (KeyError, TypeError, ValueError):
            continue  # ids not stored (a run without telemetry): no link
        if ctx.is_valid:
            out.append(trace.Link(ctx))
    return tuple(out)


def _join(host: trace.Span, call_id: Any) -> None:
    """Put the call id on the framework's tool span when it lacks one (OpenInference's
    carry none): both spans of a call name it."""
    try:
        attrs = getattr(host, "attributes", None) or {}
        if isinstance(call_id, str) and a.GEN_AI_TOOL_CALL_ID not in attrs:
            host.set_attribute(a.TL_TOOL_CALL_ID, call_id)
    except Exception as exc:
        report("framework span", exc)


def _mark_replay(host: trace.Span, tool: Any) -> None:
    """A replay is never an ``execute_tool``: rename the framework's span of a replayed call
    ``replay_tool {tool}`` (it is still live: the guarded call ends inside it)."""
    try:
        if host.is_recording():
            host.update_name(_model.span_name("replay_tool", tool))
            host.set_attribute(a.TL_TOOL_OUTCOME, a.OUTCOME_REPLAYED)
    except Exception as exc:
        report("framework span", exc)


def _framework_tool(span: trace.Span) -> trace.Span | None:
    """``span`` when it is another library's tool span for a call (else ``None``).

    A framework's (or its instrumentation's) span for one tool execution: named
    ``execute_tool …`` or with ``gen_ai.operation.name`` = ``execute_tool`` (the GenAI
    conventions: Pydantic AI, the Anthropic SDK), or OpenInference kind ``TOOL`` (OpenAI
    Agents), or handed over by an adapter (``framework_tool_span``: OpenInference's
    LangChain span, whose kind is set when it ends). Only a recording SDK span tells its
    name and attributes.
    """
    try:
        if not span.is_recording():
            return None
        scope = getattr(span, "instrumentation_scope", None)
        if scope is not None and getattr(scope, "name", None) == "toolledger":
            return None
        if is_framework_tool_span(span):  # an adapter found it (it tells its kind at its end)
            return span
        name = getattr(span, "name", None)
        if isinstance(name, str) and name.startswith("execute_tool"):
            return span
        attrs = getattr(span, "attributes", None) or {}
        if (
            attrs.get(a.GEN_AI_OPERATION_NAME) == a.OPERATION_EXECUTE_TOOL
            or attrs.get(a.OI_SPAN_KIND) == a.OI_TOOL
        ):
            return span
    except Exception as exc:
        report("framework span", exc)
    return None


def _inside(under: int, parent: OTelSpan) -> bool:
    """Whether the current span (id ``under``) lies inside ``parent``: it parents the new span.

    The current span is inside ``parent`` when it is another span than ``parent`` and than
    the one that was current when ``parent`` started (its own parent, or the context a run
    was started in): a framework's span opened after ``parent`` started, in its scope.
    Toolledger's own spans nest as the journal says: a step made current is the journal
    parent of what runs inside it, and a span started inside it has it as ``under``.
    """
    return bool(under) and under != parent.own_id and under != parent.under
