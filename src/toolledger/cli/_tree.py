"""``toolledger show``'s text: the run as a tree of events, one line each plus details.

Rules this module keeps:

- Every piece of stored text passes through ``clean`` (via ``fit``/``_one``): no control
  character from the database reaches the terminal.
- Box-drawing characters (``├─``, ``└─``, ``│``) when stdout can encode them, else an
  ASCII tree (``|-``, ``` `- ```, ``|``).
- Times are relative to the run's start (``+1.250s``); the start itself is printed once,
  ISO-8601 with its offset.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..export import tree_order
from ..journal import Event, RunView, describe_source
from ._common import clean
from ._table import fit, iso, status_color, style, unicode_ok

__all__ = ["relative", "tree_lines"]

#: Deeper events are drawn at this depth, their true depth printed as ``[depth]``.
MAX_DEPTH = 30
#: Preview lines are cut to this many columns (or the terminal's width, if narrower).
PREVIEW = 120


def relative(at: datetime | None, start: datetime | None) -> str:
    """``+1.250s``, ``+2m03.5s`` or ``+1h02m03s`` after ``start`` (``+?`` when unknown)."""
    if at is None or start is None:
        return "+?"
    seconds = (at - start).total_seconds()
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    if seconds < 60:
        return f"{sign}{seconds:.3f}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{sign}{int(minutes)}m{secs:04.1f}s"
    hours, minutes = divmod(int(minutes), 60)
    return f"{sign}{hours}h{minutes:02d}m{int(secs):02d}s"


def _one(text: Any) -> str:
    return clean(" ".join(str(text).split()))


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _output(ev: Event) -> Any:
    """A tool call's result without its ``is_error: false`` envelope."""
    out = ev.outputs
    if (
        isinstance(out, Mapping)
        and set(out) == {"is_error", "result"}
        and out.get("is_error") is False
    ):
        return out["result"]
    return out


def _undelivered(ev: Event) -> bool:
    """A tool call whose result is stored (``completed``) but was never delivered."""
    link = ev.checkpoint
    return (
        ev.kind == "tool_call" and isinstance(link, Mapping) and link.get("status") == "completed"
    )


def _asked_for(ev: Event) -> str:
    """A model call's requested tool calls, ``send_email(toolu_01), …`` (names and ids only)."""
    calls = ev.meta.get("tool_calls") if ev.kind == "llm_call" and ev.meta else None
    if not isinstance(calls, list):
        return ""
    return ", ".join(f"{c.get('name')}({c.get('id')})" for c in calls if isinstance(c, Mapping))


def _details(ev: Event) -> list[str]:
    out: list[str] = []
    if ev.erased:
        return ["(content erased)"]
    approval = ev.approval
    if isinstance(approval, Mapping):
        if approval.get("granted") is None:  # requested, not decided yet
            ticket = approval.get("ticket")
            out.append("pending" + (f" (ticket {ticket})" if ticket else ""))
        else:
            verdict = "granted" if approval.get("granted") else "refused"
            out.append(f"{verdict} by {approval.get('by')}: {approval.get('reason') or ''}".strip())
    if isinstance(ev.error, Mapping):
        out.append(f"error {ev.error.get('type')}: {ev.error.get('message')}")
    asked = _asked_for(ev)
    if asked:
        out.append(f"asked for {asked}")
    if ev.justification:
        out.append(f"why: {ev.justification}")
    elif ev.justification_missing:
        out.append("why: (missing)")
    if ev.text:
        out.append(str(ev.text))
    if ev.inputs not in (None, {}, []):
        out.append(f"in  {_compact(ev.inputs)}")
    result = _output(ev)
    if result not in (None, {}, []):
        out.append(f"out {_compact(result)}")
    return out


def _last_siblings(depths: list[int]) -> list[bool]:
    """For each node in pre-order, whether it is the last child of its parent."""
    last = [True] * len(depths)
    later: list[bool] = []  # later[d]: a later sibling at depth d was seen (reverse scan)
    for i in range(len(depths) - 1, -1, -1):
        d = depths[i]
        del later[d + 1 :]
        while len(later) <= d:
            later.append(False)
        last[i] = not later[d]
        later[d] = True
    return last


def tree_lines(view: RunView) -> list[str]:
    """The run as lines: a header (id, status, agent, goal, start) and the event tree."""
    fancy = unicode_ok()
    tee, elbow, pipe = ("├─ ", "└─ ", "│  ") if fancy else ("|- ", "`- ", "|  ")
    status = _one(view.status)
    source = describe_source(view.source)  # from the hashed header: replay of / fork of
    lines = [
        f"run {_one(view.run_id)}  {style(status, status_color(status))}  "
        f"agent={_one(view.agent or '-')}" + (f"  {_one(source)}" if source else ""),
        f"goal: {_one(view.goal) if view.goal is not None else '(erased)'}",
        f"started {iso_exact(view.started_at)} (times below are since this start)",
    ]
    room = PREVIEW
    if sys.stdout.isatty():
        room = min(PREVIEW, max(shutil.get_terminal_size().columns, 40))
    events = view.events
    order = tree_order([{"event_id": e.event_id, "parent_id": e.parent_id} for e in events])
    depths = [min(d, MAX_DEPTH) for _, d in order]
    last = _last_siblings(depths)
    stack: list[str] = []
    for (index, depth), shown, is_last in zip(order, depths, last, strict=True):
        ev = events[index]
        del stack[shown:]
        lead = "".join(stack) + (elbow if is_last else tee)
        lead += f"[{depth}] " if depth > MAX_DEPTH else ""
        stack.append("   " if is_last else pipe)
        kind = _one(ev.kind)
        name = _one(ev.name or "")
        label = kind if not name or name == kind else f"{kind} {name}"
        st = _one(ev.status or "-")
        marks = f" {style('undelivered', 'yellow')}" if _undelivered(ev) else ""
        when = relative(ev.started_at, view.started_at)
        dur = ev.duration_ms
        timing = f" {dur:.1f}ms" if isinstance(dur, (int, float)) and dur else ""
        lines.append(f"{lead}{label} [{style(st, status_color(st))}]{marks} {when}{timing}")
        indent = "".join(stack) + "  "
        for detail in _details(ev):
            lines.append(indent + fit(_one(detail), max(room - len(indent), 20)))
    return lines


def iso_exact(value: datetime | None) -> str:
    """The run's start to the millisecond, with its offset."""
    if value is None:
        return iso(None)
    return value.isoformat(timespec="milliseconds")
