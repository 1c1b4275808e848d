"""Finished OpenTelemetry spans as a compact tree, the way a tracing backend lists a trace.

``render_spans(spans)`` returns the lines; ``ConsoleTreeExporter`` is an SDK span exporter
that prints each finished trace that way (``toolledger.configure(console=True)``, or
``OTEL_TRACES_EXPORTER=console``): a backend-free look at a run.

Rules this module keeps:

- It prints what the spans carry, never a fixed text: names, kinds, durations and status
  come from the SDK ``ReadableSpan`` objects it is given (an ``InMemorySpanExporter``'s
  finished spans, or the spans ``toolledger.reexport`` rebuilds from a database).
- The kind is the span's OpenTelemetry kind, with the kind a backend classifies it by when an
  attribute names one (``openinference.span.kind``: ``internal/TOOL``); an event's line
  says ``event`` and its time from the span's start.
- Of the attributes it shows only the few a person reads first, picked by the last part of
  their key (``...tool.name``, ``...call.id``, ``...outcome``, ``...replayed`` ...), so a
  renamed namespace still shows; the span's events (e.g. checkpoint transitions) are listed
  under it, with the same few attributes.
- Children are ordered by start time, as backends list them; a span whose parent is not
  among the spans given is a root.
- The exporter holds a trace's spans until its root span ends (children end first), then
  prints the tree in one write; it holds at most ``MAX_HELD`` spans (the oldest trace is
  printed early past that), and never raises into the SDK: printing is telemetry, and
  telemetry never breaks a call.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ._report import report

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter as _Exporter
else:  # the SDK is an extra: without it the class is a plain object nobody can use
    try:
        from opentelemetry.sdk.trace.export import SpanExporter as _Exporter
    except ImportError:
        _Exporter = object

__all__ = [
    "BACKEND_KIND",
    "MAX_HELD",
    "SHOWN",
    "ConsoleTreeExporter",
    "render_spans",
    "span_columns",
]

#: Spans the console exporter holds while waiting for their trace's root to end.
MAX_HELD = 10_000

# (label, key suffixes) in display order: the attributes a person reads first.
SHOWN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool", ("tool.name",)),
    ("call", ("call.id", "call_id")),
    ("outcome", (".outcome",)),
    ("by", ("approval.by",)),
    ("action", ("checkpoint.action",)),
    ("to", ("checkpoint.status_to",)),
    ("error", ("error.type",)),
)
# The kind a backend classifies the span by (OpenInference: AGENT, TOOL, CHAIN, GUARDRAIL...).
BACKEND_KIND = "span.kind"
_FLAGS = ("replayed", "recovered", "deduplicated_from")


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _pick(attrs: dict[str, Any], suffixes: tuple[str, ...]) -> Any:
    for key, value in attrs.items():
        if key.endswith(suffixes):
            return value
    return None


def _flags(attrs: dict[str, Any]) -> list[str]:
    """Return ``replayed``/``recovered``/``executed`` words from the boolean attributes."""
    words: list[str] = []
    seen = False
    for key, value in attrs.items():
        last = key.rsplit(".", 1)[-1]
        if last not in _FLAGS:
            continue
        seen = True
        if value is True:
            words.append(last)
        elif isinstance(value, str) and value:
            words.append(f"{last}={value}")
    if seen and not words:
        words.append("executed")
    return words


def _duration(span: Any) -> str:
    if span.start_time is None or span.end_time is None:
        return "open"
    ms = (span.end_time - span.start_time) / 1e6
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _status(span: Any) -> str:
    code = span.status.status_code.name
    if code == "UNSET":
        return ""
    desc = span.status.description
    return f"{code}: {desc}" if desc else code


def _shown(attrs: dict[str, Any], name: str, status: str) -> list[str]:
    parts: list[str] = []
    for label, suffixes in SHOWN:
        value = _pick(attrs, suffixes)
        if value is None or value == "" or name.endswith(f" {value}"):
            continue  # nothing to show, or the name already says it
        if status and str(value) in status:
            continue
        parts.append(f"{label}={value}")
    parts.extend(_flags(attrs))
    return parts


def span_columns(span: Any) -> list[str]:
    """Return one span's columns after its name: kind, duration, status, what a person reads."""
    attrs = _attrs(span)
    kind = span.kind.name.lower()
    backend = _pick(attrs, (BACKEND_KIND,))
    parts = [f"{kind}/{backend}" if backend else kind, _duration(span)]
    status = _status(span)
    if status:
        parts.append(status)
    parts.extend(_shown(attrs, str(span.name), status))
    return parts


def _glyphs(out: TextIO | None = None) -> tuple[str, str, str, str]:
    enc = getattr(out or sys.stdout, "encoding", None) or "ascii"
    try:
        "├└│─".encode(enc)
    except (LookupError, UnicodeEncodeError):
        return "|-", "`-", "| ", "  "
    return "├─", "└─", "│ ", "  "


def render_spans(spans: Sequence[Any], *, out: TextIO | None = None) -> list[str]:
    """Return the spans as tree lines (one per span, plus one per span event).

    Args:
        spans: SDK ``ReadableSpan`` objects, e.g. ``InMemorySpanExporter().get_finished_spans()``.
        out: The stream the lines are for (its encoding picks Unicode or ASCII branches;
            default ``sys.stdout``).

    Returns:
        Lines without newlines; empty for no spans.
    """
    ids = {s.context.span_id for s in spans}
    kids: dict[int | None, list[Any]] = {}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None else None
        kids.setdefault(parent if parent in ids else None, []).append(s)
    for group in kids.values():
        group.sort(key=lambda s: (s.start_time or 0, s.end_time or 0))
    tee, last, bar, gap = _glyphs(out)
    rows: list[list[str]] = []

    def walk(span: Any, prefix: str, is_last: bool, top: bool) -> None:
        head = "" if top else prefix + (last if is_last else tee) + " "
        rows.append([head + str(span.name), *span_columns(span)])
        inner = "" if top else prefix + (gap if is_last else bar) + " "
        children = kids.get(span.context.span_id, [])
        events = list(span.events or ())
        for ev in events:
            mark = last if not children and ev is events[-1] else tee
            shown = _shown(dict(ev.attributes or {}), str(ev.name), "")
            at = f"+{(ev.timestamp - span.start_time) / 1e6:.1f} ms" if span.start_time else ""
            rows.append([inner + mark + " " + ev.name, "event", at, *shown])
        for i, child in enumerate(children):
            walk(child, inner, i == len(children) - 1, False)

    for root in kids.get(None, []):
        walk(root, "", True, True)
    # Names, kinds and durations line up in columns; the rest follows as it comes.
    widths = [max((len(row[i]) for row in rows if len(row) > i), default=0) for i in range(3)]
    widths[0] = min(widths[0], 48)
    lines = []
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:3], widths, strict=False)] + row[3:]
        lines.append("  ".join(cells).rstrip())
    return lines


class ConsoleTreeExporter(_Exporter):
    """An SDK ``SpanExporter`` that prints each finished trace as a tree (see module doc).

    Args:
        out: Where to print (default ``sys.stdout`` at export time).
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._held: dict[int, list[Any]] = {}
        self._count = 0

    def export(self, spans: Sequence[Any]) -> Any:
        """Hold the spans; print every trace whose root span is among them."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        ready: list[list[Any]] = []
        with self._lock:
            for span in spans:
                trace_id = span.context.trace_id
                self._held.setdefault(trace_id, []).append(span)
                self._count += 1
                if span.parent is None or span.parent.is_remote:
                    ready.append(self._held.pop(trace_id))
            while self._count - sum(len(g) for g in ready) > MAX_HELD and self._held:
                oldest = next(iter(self._held))
                ready.append(self._held.pop(oldest))
            self._count -= sum(len(g) for g in ready)
        for group in ready:
            self._print(group)
        return SpanExportResult.SUCCESS

    def _print(self, spans: list[Any]) -> None:
        out = self._out or sys.stdout
        try:
            text = "\n".join(render_spans(spans, out=out))
            out.write(text + "\n")
            out.flush()
        except Exception as exc:  # a closed or broken stream must not break the app
            report("console exporter", exc)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Print the traces still held (their roots have not ended yet)."""
        with self._lock:
            groups = list(self._held.values())
            self._held.clear()
            self._count = 0
        for group in groups:
            self._print(group)
        return True

    def shutdown(self) -> None:
        """Print what is held; the exporter keeps working (it holds no resources)."""
        self.force_flush()
