"""HTML export: one self-contained file (no network request) with a tree and details.

Safety rules this module keeps: the run is embedded as JSON inside
``<script type="application/json">`` with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
as ``\\u003c`` … (so ``</script>`` or ``<!--`` in run text can never end or comment out
the element), and the viewer renders every value with ``textContent``. A
Content-Security-Policy of ``default-src 'none'`` forbids any network request.
The viewer walks the tree iteratively (no recursion) and stays usable at 20,000 events
and a nesting depth of 1,000. Times show relative to the run's start (absolute, with
their zone, on hover); ``#<event id>`` opens that event and follows the selection.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from ..journal import epoch_ms, parse_event_time
from ..store import StoreLike
from ._common import ExportInfo, Progress, export_rendered
from ._lives import checkpoint_lives

__all__ = ["embed_json", "export_html", "render_html"]


_ESCAPES = {c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}
_UNSAFE = re.compile("[<>&\u2028\u2029]")


def embed_json(value: object) -> str:
    """Return JSON safe to place inside ``<script type="application/json">``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _UNSAFE.sub(lambda m: _ESCAPES[m.group()], text)


@lru_cache(maxsize=1)
def _template() -> tuple[str, str]:
    root = resources.files("toolledger.export")
    page = (root / "viewer.html").read_text(encoding="utf-8")
    css = (root / "viewer.css").read_text(encoding="utf-8")
    js = (root / "viewer.js").read_text(encoding="utf-8")
    page = page.replace("/*CSS*/", css, 1).replace("/*JS*/", js, 1)
    head, tail = page.split("/*DATA*/", 1)
    return head, tail


def _compact(ev: dict[str, Any]) -> dict[str, Any]:
    """Drop empty fields (``None``, ``False``, ``{}``, ``[]``) and run-level ones."""
    out: dict[str, Any] = {}
    for key, value in ev.items():
        if value is None or value is False or (not value and type(value) in _EMPTY_TYPES):
            continue
        out[key] = value
    out.pop("run_id", None)
    out.pop("goal", None)
    meta = out.get("meta")
    if type(meta) is dict and len(meta) == 1 and "justification_source" in meta:
        del out["meta"]
    return out


_EMPTY_TYPES = (dict, list)


def _with_times(ev: dict[str, Any]) -> dict[str, Any]:
    """Add ``ts_start_ms`` / ``ts_end_ms`` (epoch milliseconds) for the timeline."""
    ev["ts_start_ms"] = epoch_ms(parse_event_time(ev.get("started_at")))
    ev["ts_end_ms"] = epoch_ms(parse_event_time(ev.get("ended_at")))
    return ev


def render_html(view: Any, lives: dict[str, Any] | None = None, *, back: str | None = None) -> str:
    """Return the self-contained HTML page of a loaded run (``journal._read.StoredRun``).

    Args:
        view: The loaded run.
        lives: ``{"namespace/call_id": checkpoint life}`` (``_lives.checkpoint_lives``):
            each tool call then shows its checkpoint's transitions and delivery.
        back: A relative link shown as "all runs" (the static site's index).
    """
    row = view.row
    facts = view.facts  # hashed values only, never the runs columns
    data = {
        "run": {
            "run_id": row.run_id,
            "goal": facts.goal,
            "agent": facts.agent,
            "namespace": facts.namespace,
            "status": view.status,
            "started_at": facts.started_at,
            "ended_at": facts.ended_at,
            "ts_start_ms": epoch_ms(parse_event_time(facts.started_at)),
            "head_hash": view.rows[-1].hash if view.rows else view.doc.get("genesis"),
            "event_count": len(view.rows),
            "source": facts.source,
        },
        "events": [_compact(_with_times(dict(ev))) for ev in view.events],
        "checkpoints": lives or {},
        "back": back,
    }
    head, tail = _template()
    return head + embed_json(data) + tail


def export_html(
    db: StoreLike | None,
    run_id: str,
    path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> ExportInfo:
    """Write the run as one self-contained HTML file.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file cannot be written.
    """
    return export_rendered(
        db,
        run_id,
        path,
        render=lambda view, store: render_html(view, checkpoint_lives(store, view.events)),
        format="html",
        progress=progress,
    )
