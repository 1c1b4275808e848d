"""A static site of runs: ``index.html`` (every run, searchable) and one page per run.

Rules this module keeps: every page is self-contained (inline CSS and script, data
embedded with ``embed_json``, ``Content-Security-Policy: default-src 'none'``), so the site
opens from ``file://`` with no network; links between pages are relative. Run pages are
the HTML viewer (``export_html``'s page, with the checkpoint lives and a link back to the
index). A run id that is not a plain file name is hashed into one. Files are written
atomically, the index last.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .._version import __version__
from ..journal._read import load_stored_run
from ..journal._reader import list_runs, to_time
from ..store._open import using_store
from ._common import atomic_text
from ._lives import checkpoint_lives
from .html import embed_json, render_html

__all__ = ["SiteInfo", "export_site", "page_name"]

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: How much of each run's text the index carries for its search box.
INDEX_TEXT_CHARS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteInfo:
    """What ``export_site`` wrote."""

    directory: Path
    index: Path
    runs: int
    pages: tuple[Path, ...]


def page_name(run_id: str) -> str:
    """Return the file name of a run's page (the id itself when it is a plain name)."""
    if _SAFE.fullmatch(run_id) and not run_id.endswith("."):
        return f"{run_id}.html"
    return (
        "run-" + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".html"
    )


@lru_cache(maxsize=1)
def _template() -> tuple[str, str]:
    root = resources.files("toolledger.export")
    page = (root / "site.html").read_text(encoding="utf-8")
    head, tail = page.split("/*DATA*/", 1)
    return head, tail


def _summary(stored: Any) -> dict[str, Any]:
    statuses: dict[str, str] = {}
    texts: list[str] = []
    size = 0
    for ev in stored.events:
        status = "interrupted" if ev.get("interrupted") else str(ev.get("status"))
        statuses[str(ev.get("event_id"))] = status
        if size < INDEX_TEXT_CHARS:
            for part in (ev.get("name"), ev.get("justification"), ev.get("text")):
                if isinstance(part, str) and part:
                    texts.append(part)
                    size += len(part) + 1
    values = list(statuses.values())
    return {
        "events": len(values),
        "failed": values.count("failed"),
        "refused": values.count("refused"),
        "text": " ".join(texts)[:INDEX_TEXT_CHARS],
    }


def export_site(
    db: Any,
    directory: str | os.PathLike[str],
    *,
    since: datetime | timedelta | str | None = None,
    limit: int = 100_000,
) -> SiteInfo:
    """Write a static site of the runs: ``DIR/index.html`` and ``DIR/runs/<run>.html``.

    Args:
        db: A ``Store``, path or DSN.
        directory: Where to write (created if missing).
        since: Only runs started at or after this (an aware datetime or an age, ``"7d"``).
        limit: At most this many runs, newest first.

    Returns:
        A ``SiteInfo`` naming the index and the pages.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad ``since`` or an unwritable
            directory.
    """
    to_time(since, "since")  # a bad age fails before anything is written
    root = Path(directory)
    pages: list[Path] = []
    rows: list[dict[str, Any]] = []
    with using_store(db, readonly=True) as store:
        for view in list_runs(store, since=since, limit=limit):
            stored = load_stored_run(store, view.run_id)
            name = page_name(view.run_id)
            html = render_html(stored, checkpoint_lives(store, stored.events), back="../index.html")
            target = root / "runs" / name
            with atomic_text(target) as fh:
                fh.write(html)
            pages.append(target)
            rows.append(
                {
                    **view.summary(),
                    **_summary(stored),
                    "href": f"runs/{name}",
                }
            )
    head, tail = _template()
    data = {"runs": rows, "toolledger_version": __version__}
    index = root / "index.html"
    with atomic_text(index) as fh:
        fh.write(head + embed_json(data) + tail)
    return SiteInfo(directory=root, index=index, runs=len(rows), pages=tuple(pages))
