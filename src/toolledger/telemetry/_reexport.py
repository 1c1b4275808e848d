"""Rebuild a stored run's spans and hand them to a span exporter.

``toolledger.reexport`` (``export/_otlp.py``) reads the run through the journal's reader
and passes what it read in; this module never reads the journal (it sits below it).

Rules of this module:

- The database is the authority: spans are rebuilt from the run row, its journal records
  (merged into events by the journal's own reader, passed in) and the checkpoints' stored
  history, with their original timestamps and parentage. Nothing is read from live
  telemetry.
- Ids: the trace and span ids recorded at live time (``trace_id``/``span_id`` in the
  journal) are reused. A run recorded with no SDK gets deterministic ids, so sending twice
  gives the same ids:

  - trace id: the first 32 hex digits of ``sha256("toolledger:trace:" + run_id)``;
  - the run's span id: the first 16 hex digits of ``sha256("toolledger:run:" + run_id)``;
  - an event's span id: the first 16 hex digits of ``sha256("toolledger:event:" + event_id)``.

  Checkpoint transitions are events on the tool call's span (no ids), as live: a run sent
  live and re-exported gives the very same spans, and backends keep the first copy.

- The same span model (``_model``) and policy (content capture, intent, redact) as live
  spans apply. Spans are SDK ``ReadableSpan`` objects: this module needs the SDK, and
  imports it lazily.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..checkpoint import parse_link
from ..checkpoint.transitions import DECISIONS
from . import _model, _openinference
from ._hooks import CallFacts
from ._policy import Policy
from .attributes import ERROR_TYPE, SCHEMA_URL

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "ReexportReport",
    "build_spans",
    "call_facts",
    "derived_span_id",
    "derived_trace_id",
    "send_spans",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReexportReport:
    """What ``reexport`` sent: the run, its trace id (hex), the span count, the result."""

    run_id: str
    trace_id: str
    span_count: int
    success: bool


def _digest(prefix: str, value: str, digits: int) -> str:
    out = hashlib.sha256(f"toolledger:{prefix}:{value}".encode()).hexdigest()[:digits]
    return out if int(out, 16) else "1".rjust(digits, "0")


def derived_trace_id(run_id: str) -> str:
    """Return the deterministic trace id (32 hex digits) of a run recorded without an SDK."""
    return _digest("trace", run_id, 32)


def derived_span_id(kind: str, value: str) -> str:
    """Return a deterministic span id (16 hex digits): ``kind`` is run, event or transition."""
    return _digest(kind, value, 16)


def _hex(value: Any, digits: int) -> str | None:
    if isinstance(value, str) and len(value) == digits:
        try:
            if int(value, 16):
                return value.lower()
        except ValueError:
            return None
    return None


class _Builder:
    """Builds one run's ``ReadableSpan`` objects (run span first)."""

    def __init__(self, run: Mapping[str, Any], policy: Policy, resource: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import TraceFlags

        self.run = run
        self.policy = policy
        self.resource = resource
        self.scope = InstrumentationScope("toolledger", __version__, SCHEMA_URL)
        self.flags = TraceFlags(TraceFlags.SAMPLED)
        self.spans: list[ReadableSpan] = []
        self.context = {k: v for k, v in _model.context_attributes(run).items() if v is not None}

    def ctx(self, trace: str, span: str) -> Any:
        from opentelemetry.trace import SpanContext

        return SpanContext(int(trace, 16), int(span, 16), is_remote=False, trace_flags=self.flags)

    def make(
        self,
        kind: str,
        name: str,
        context: Any,
        parent: Any,
        raw: Mapping[str, Any],
        times: tuple[int, int],
        description: str | None,
        links: Sequence[Any] = (),
        events: Sequence[tuple[tuple[str, dict[str, Any]], int | None]] = (),
    ) -> None:
        """Add one span, finished exactly as a live one (``_model.finish``, policy, projection)."""
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanKind, Status, StatusCode

        final, attrs_raw = _model.finish(kind, raw)
        if final != kind:
            name = _model.span_name(final, name[len("execute_tool ") :])
        attrs = self.policy.apply(attrs_raw)
        if self.policy.openinference:
            attrs.update(_openinference.project(final, attrs))
        start, end = times
        out_events = []
        if events:
            stamps = _model.transition_times([at for _, at in events], start, end)
            for ((ev_name, ev_attrs), _), at in zip(events, stamps, strict=True):
                out_events.append(Event(ev_name, self.policy.apply(ev_attrs), timestamp=at))
            end = max(end, stamps[-1])
        error = raw.get(ERROR_TYPE)
        status = Status(StatusCode.ERROR, description) if error else Status(StatusCode.UNSET)
        self.spans.append(
            ReadableSpan(
                name=name,
                context=context,
                parent=parent,
                resource=self.resource,
                attributes=attrs,
                events=tuple(out_events),
                links=tuple(links),
                kind=SpanKind.CLIENT if final == "chat" else SpanKind.INTERNAL,
                status=status,
                start_time=start,
                end_time=max(end, start),
                instrumentation_scope=self.scope,
            )
        )


def _run_span(b: _Builder, run_ctx: Any, times: tuple[int, int]) -> None:
    run = b.run
    raw = {**_model.run_start_attributes(run), **_model.run_end_attributes(run)}
    description = None
    if run.get("status") == "failed":
        raw[ERROR_TYPE] = _model.error_type(run, None)
        description = _model.status_description(run, None, b.policy.capture_content)
    b.make(
        "invoke_agent",
        _model.span_name("invoke_agent", run.get("agent")),
        run_ctx,
        None,
        raw,
        times,
        description,
    )


def _event_span(
    b: _Builder, store: Any, ev: Mapping[str, Any], context: Any, parent: Any, run_start: int
) -> None:
    from opentelemetry.trace import Link

    kind = _model.event_type(ev.get("kind"))
    start = _model.time_ns(ev.get("started_at")) or run_start
    end = _model.time_ns(ev.get("ended_at")) or start
    raw = {**_model.event_start_attributes(ev), **_model.event_end_attributes(ev)}
    if kind in ("execute_tool", "chat"):
        raw.update(b.context)
    link = _model.link_ids(ev.get("meta") or {})
    transitions: list[tuple[tuple[str, dict[str, Any]], int | None]] = []
    if kind == "execute_tool" and ev.get("status") != "refused":  # a refusal has no history
        facts, steps = call_facts(store, ev, start, end)
        if facts is not None:
            learned = _model.call_attributes(facts)
            raw.update({k: v for k, v in learned.items() if raw.get(k) is None})
            link = link or facts.link
        transitions = [
            (
                _model.transition_event(
                    name=entry.transition,
                    status_from=status_from,
                    status_to=_value(entry.status),
                    expected_revision=entry.revision - 1,
                    revision=entry.revision,
                    won=True,
                ),
                _model.time_ns(entry.at),
            )
            for entry, status_from in steps
        ]
    description = None
    if _model.is_error(ev, None):
        raw[ERROR_TYPE] = _model.error_type(ev, None)
        description = _model.status_description(ev, None, b.policy.capture_content)
    links = []
    own = (format(context.trace_id, "032x"), format(context.span_id, "016x"))
    if link is not None and _hex(link[0], 32) and _hex(link[1], 16) and link != own:
        links.append(Link(b.ctx(link[0], link[1])))
    name_kind = str(ev.get("kind")) if kind == "other" else kind
    b.make(
        kind,
        _model.span_name(name_kind, ev.get("name")),
        context,
        parent,
        raw,
        (start, end),
        description,
        links,
        transitions,
    )


def build_spans(
    run: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    *,
    store: Any,
    policy: Policy,
    resource: Any = None,
) -> list[ReadableSpan]:
    """Return the spans of a stored run (run span first), rebuilt from what the journal read.

    Args:
        run: The run's facts (``run_id``, ``agent``, ``status``, times, ids, ...), as the
            journal's reader shows them.
        events: The run's merged events, in order (no ``finish`` records: the summary is
            the run's output).
        store: The ``Store`` holding the run's checkpoints (their history gives the tool
            calls' transitions).
        policy: Content capture, intent switch and redaction to apply.
        resource: The SDK ``Resource`` of the spans (``None``: the SDK default).

    Returns:
        SDK ``ReadableSpan`` objects, ready for any ``SpanExporter.export()``.
    """
    run_id = str(run.get("run_id"))
    b = _Builder(run, policy, resource)
    trace_hex = _hex(run.get("trace_id"), 32)
    run_span_hex = _hex(run.get("span_id"), 16)
    if trace_hex is None or run_span_hex is None:
        # The run document may not carry ids; the first event's trace is the run's trace.
        first = next((e for e in events if _hex(e.get("trace_id"), 32)), None)
        trace_hex = trace_hex or (first["trace_id"] if first else derived_trace_id(run_id))
    run_span_hex = run_span_hex or derived_span_id("run", run_id)
    run_ctx = b.ctx(trace_hex, run_span_hex)
    start_run = _model.time_ns(run.get("started_at")) or 0
    end_run = _model.time_ns(run.get("ended_at")) or _last_time(events) or start_run
    _run_span(b, run_ctx, (start_run, end_run))
    by_id: dict[str, Any] = {}
    for ev in events:
        event_id = str(ev.get("event_id"))
        span_hex = _hex(ev.get("span_id"), 16) or derived_span_id("event", event_id)
        by_id[event_id] = b.ctx(_hex(ev.get("trace_id"), 32) or trace_hex, span_hex)
    for ev in events:
        context = by_id[str(ev.get("event_id"))]
        parent = by_id.get(str(ev.get("parent_id")), run_ctx)
        if parent is not None and parent.trace_id != context.trace_id:
            # A resumed run's earlier segment lived in another trace; its run span id was
            # not kept, so these spans become roots of their own trace, never cross-trace.
            parent = None
        _event_span(b, store, ev, context, parent, start_run)
    return b.spans


def _value(value: Any) -> Any:
    return getattr(value, "value", value)


def _fence_link(fence: Any) -> tuple[str, str] | None:
    """The live span ids the guard carries in an attempt id (``<32 hex>.<trace>.<span>``)."""
    link = parse_link(fence)
    return None if link is None else (link["trace_id"], link["span_id"])


def call_facts(
    store: Any, ev: Mapping[str, Any], start: int, end: int
) -> tuple[CallFacts | None, list[tuple[Any, str | None]]]:
    """The ``CallFacts`` the guard told a tool call's span live, from the stored history.

    Derived from the checkpoint's history (the status and revision reached, what
    ``decide_checkpoint`` answered when the call first looked, the claim a resumed call
    found, carried in the attempt id) and the event's meta (replayed, recovered,
    deduplicated_from); ``description`` is not stored (``None``). Also returns the
    transitions that happened during the event, each with its previous status. ``None``
    facts: no checkpoint or no history.
    """
    cp = ev.get("checkpoint")
    if not isinstance(cp, Mapping) or not cp.get("namespace") or not cp.get("call_id"):
        return None, []
    try:
        history = store.history(cp["namespace"], cp["call_id"])
    except Exception:  # a damaged checkpoint row must not stop the export of the run
        return None, []
    before: list[Any] = []
    inside: list[tuple[Any, str | None]] = []
    previous: str | None = None
    for entry in history:
        at = _model.time_ns(entry.at)
        if at is not None and at < start:
            before.append(entry)
        elif at is not None and at <= end:
            inside.append((entry, previous))
        previous = _value(entry.status)
    last = inside[-1][0] if inside else (before[-1] if before else None)
    if last is None:
        return None, inside
    link = None
    if before and _value(before[-1].status) in ("executing", "uncertain"):
        link = _fence_link(getattr(before[-1].record, "execution_fence", None))
    meta = ev.get("meta")
    meta = meta if isinstance(meta, Mapping) else {}
    dedup = meta.get("deduplicated_from")
    facts = CallFacts(
        status=_value(last.status),
        revision=int(last.revision),
        # What ``decide_checkpoint`` answered when the call first looked (as the guard
        # reports live): the decision for the status found, or ``execute`` for a new one.
        action=_value(DECISIONS[before[-1].status]) if before else "execute",
        replayed=bool(meta.get("replayed")),
        recovered=bool(meta.get("recovered")),
        deduplicated_from=dedup if isinstance(dedup, str) else None,
        link=link,
    )
    return facts, inside


def _last_time(events: Sequence[Mapping[str, Any]]) -> int | None:
    times = [_model.time_ns(e.get("ended_at") or e.get("started_at")) for e in events]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def send_spans(
    run_id: str, spans: Sequence[ReadableSpan], exporter: SpanExporter, batch_size: int
) -> ReexportReport:
    """Pass ``spans`` to ``exporter.export()`` in batches; the first failed batch stops it."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    # Batches keep each OTLP request small (receivers commonly cap a request at 4 MiB).
    success = True
    for i in range(0, len(spans), batch_size):
        success = exporter.export(spans[i : i + batch_size]) == SpanExportResult.SUCCESS
        if not success:
            break
    trace_id = format(spans[0].context.trace_id, "032x") if spans and spans[0].context else ""
    return ReexportReport(run_id=run_id, trace_id=trace_id, span_count=len(spans), success=success)
