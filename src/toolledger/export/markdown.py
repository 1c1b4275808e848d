"""Markdown export: readable, diff-able (no export timestamp), everything escaped.

Free text outside code blocks is escaped (Markdown punctuation and ``< > &`` become
backslash escapes or entities, so run text can never become markup or raw HTML); values
go in fenced code blocks whose fence is longer than any backtick run inside them. Deep
nesting is shown as indentation up to ``MAX_INDENT`` levels, then as a depth label.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from ..journal import JUSTIFICATION_MISSING, describe_source
from ..store import StoreLike
from ._common import ExportInfo, Progress, export_rendered
from ._tree import tree_order

__all__ = ["MAX_INDENT", "escape_md", "export_markdown", "render_markdown"]

MAX_INDENT = 12
_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")


def escape_md(text: object) -> str:
    """Escape ``text`` for Markdown inline context (one line; newlines become spaces)."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _SPECIAL.sub(r"\\\1", s)
    return " ".join(s.split("\n")).replace("\r", " ")


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _event_title(ev: Mapping[str, Any]) -> str:
    status = ev.get("status") or "?"
    if ev.get("interrupted"):
        status = "interrupted"
    return (
        f"{escape_md(ev.get('kind'))} **{escape_md(ev.get('name') or '')}** · {escape_md(status)}"
    )


def render_markdown(view: Any) -> str:
    """Return the Markdown document of a loaded run (``journal._read.StoredRun``)."""
    row = view.row
    run = view.facts  # hashed values only, never the runs columns
    out: list[str] = [f"# Run {escape_md(row.run_id)}", ""]
    goal = run.goal
    facts = [
        ("Goal", goal if goal is not None else "(erased)"),
        ("Agent", run.agent or ""),
        ("Namespace", run.namespace or ""),
        ("Status", view.status),
        ("Started", run.started_at or ""),
        ("Ended", run.ended_at or ""),
        ("Records", row.event_count),
        ("Head hash", row.head_hash or ""),
    ]
    source = describe_source(run.source)  # from the hashed header
    if source:
        facts.insert(1, ("Source", source))
    out += ["| | |", "| --- | --- |"]
    out += [f"| {name} | {escape_md(value)} |" for name, value in facts]
    out += ["", "## Timeline", ""]
    order = tree_order(view.events)
    for index, depth in order:
        ev = view.events[index]
        indent = "  " * min(depth, MAX_INDENT)
        label = f"(depth {depth}) " if depth > MAX_INDENT else ""
        dur = ev.get("duration_ms")
        spans = ev.get("kind") not in ("approval", "note", "artifact", "finish")
        timing = f" ({dur:.1f} ms)" if spans and isinstance(dur, (int, float)) else ""
        out.append(f"{indent}- {label}{_event_title(ev)}{timing} [#{index + 1}](#e{index + 1})")
    out += ["", "## Events", ""]
    for index, _depth in order:
        out += _event_section(view.events[index], index + 1)
    return "\n".join(out) + "\n"


def _event_section(ev: Mapping[str, Any], number: int) -> list[str]:
    out = [f'<a id="e{number}"></a>', f"### {number}. {_event_title(ev)}", ""]
    facts = [
        ("event", ev.get("event_id")),
        ("parent", ev.get("parent_id")),
        ("started", ev.get("started_at")),
        ("ended", ev.get("ended_at")),
        ("duration ms", ev.get("duration_ms")),
        ("checkpoint", _inline(ev.get("checkpoint"))),
        ("trace", ev.get("trace_id")),
        ("span", ev.get("span_id")),
    ]
    out += [f"- {name}: `{_code(value)}`" for name, value in facts if value is not None]
    if ev.get("interrupted"):
        out.append("- **interrupted**: the run ended (or crashed) before this event ended")
    if ev.get("erased"):
        erased = ev["erased"]
        out.append(
            f"- **content erased** at {escape_md(erased.get('at'))}: "
            f"{escape_md(erased.get('reason'))}"
        )
    out.append("")
    source = ev.get("justification_source")
    if ev.get("justification") is not None:
        out += [f"> **Why** ({escape_md(source)}): {escape_md(ev['justification'])}", ""]
    elif ev.get(JUSTIFICATION_MISSING):
        out += [f"> **Why**: missing (the {escape_md(source)} gave none)", ""]
    approval = ev.get("approval")
    if isinstance(approval, Mapping):
        if approval.get("granted") is None and approval.get("outcome") == "require_approval":
            line = "> **Approval REQUESTED** (waiting for a decision)"
        else:
            verdict = "GRANTED" if approval.get("granted") else "REFUSED"
            line = f"> **Approval {verdict}** by {escape_md(approval.get('by'))}"
        if approval.get("reason"):
            line += f": {escape_md(approval['reason'])}"
        if approval.get("input_fingerprint"):
            line += f" (bound to input {escape_md(approval['input_fingerprint'])})"
        out += [line, ""]
    if ev.get("text") is not None:
        out += [_fence(str(ev["text"]), "text"), ""]
    for key in ("inputs", "outputs", "error", "artifacts", "meta", "extra"):
        value = ev.get(key)
        if value in (None, {}, []):
            continue
        if key == "meta" and set(value) <= {"justification_source"}:
            continue
        out += [f"**{key.capitalize()}**", "", _fence(_json(value), "json"), ""]
    return out


def _code(value: Any) -> str:
    return " ".join(str(value).replace("`", "'").split())


def _inline(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True).replace("`", "'")


def export_markdown(
    db: StoreLike | None,
    run_id: str,
    path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> ExportInfo:
    """Write the run as Markdown.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file cannot be written.
    """
    return export_rendered(
        db,
        run_id,
        path,
        render=lambda view, _store: render_markdown(view),
        format="md",
        progress=progress,
    )
