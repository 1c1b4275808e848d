"""Print finished OpenTelemetry spans as a compact tree, the way a tracing backend lists a trace.

Used by the examples (``demo_agent.py``) and their tests; not an example itself (the leading
underscore keeps ``tests/test_examples.py`` from running it on its own).

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
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["BACKEND_KIND", "SHOWN", "render", "span_columns"]

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


def _glyphs() -> tuple[str, str, str, str]:
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "├└│─".encode(enc)
    except (LookupError, UnicodeEncodeError):
        return "|-", "`-", "| ", "  "
    return "├─", "└─", "│ ", "  "


def render(spans: Sequence[Any]) -> list[str]:
    """Return the spans as tree lines (one per span, plus one per span event).

    Args:
        spans: SDK ``ReadableSpan`` objects, e.g. ``InMemorySpanExporter().get_finished_spans()``.

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
    tee, last, bar, gap = _glyphs()
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
