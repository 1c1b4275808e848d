"""A static site of runs: ``index.html`` (every run, searchable) and one page per run.

Rules this module keeps: every page is self-contained (inline CSS and script, data
embedded with ``embed_json``, ``Content-Security-Policy: default-src 'none'``), so the site
opens from ``file://`` with no network; links between pages are relative. Run pages are
the HTML viewer (``export_html``'s page, with the checkpoint lives and a link back to the
index). Files are written atomically (a temporary sibling renamed into place), the index
last.

Names and places:

- A page is named by its run id only when that id is a plain lower-case name
  (``[a-z0-9][a-z0-9.-]*``, the form of generated ids); any other id is hashed into
  ``run_<sha256>.html``. No plain name holds ``_``, so no run id can take a hashed page's
  name, and no two plain names differ only in case (a case-insensitive file system
  cannot merge two runs' pages). Windows device names (``con``, ``nul``…) are hashed too.
- Nothing is written outside DIR: every file is created and renamed relative to DIR (and
  ``DIR/runs``) opened as directories, never through a path a symlink could redirect. A
  ``runs`` that is a symlink (or not a directory) is refused, as is a page or index name
  held by a directory, FIFO, socket or device (opening a FIFO would block): all checked
  before anything is written. A symlink in a page's place is replaced, never followed.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import InvalidArgumentError
from ..journal import list_runs, load_stored_run, to_time
from ..store import StoreLike, using_store
from ._lives import checkpoint_lives
from .html import embed_json, render_html

__all__ = ["SiteInfo", "export_site", "page_name"]

_PLAIN = re.compile(r"[a-z0-9][a-z0-9.-]{0,99}")
#: Names Windows reserves for devices, with any extension (``con.html`` is the console).
_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{d}{i}" for d in ("com", "lpt") for i in range(10)]
)
#: How much of each run's text the index carries for its search box.
INDEX_TEXT_CHARS = 2000
#: Relative to a directory's descriptor where the OS supports it (a swapped-in symlink
#: cannot redirect a write); by path elsewhere (Windows), after the same checks.
#: (``os.replace`` is ``renameat`` like ``os.rename``, the one ``supports_dir_fd`` lists.)
_AT = {os.open, os.stat, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteInfo:
    """What ``export_site`` wrote."""

    directory: Path
    index: Path
    runs: int
    pages: tuple[Path, ...]


def page_name(run_id: str) -> str:
    """Return the file name of a run's page: the id when plain, else ``run_<hash>.html``."""
    if (
        _PLAIN.fullmatch(run_id)
        and not run_id.endswith(".")
        and run_id.split(".", 1)[0] not in _DEVICES
    ):
        return f"{run_id}.html"
    return (
        "run_" + hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".html"
    )


class _Dir:
    """A directory that files are written into by name, never through a path outside it."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    @contextmanager
    def open(cls, path: Path, parent: _Dir | None = None) -> Iterator[_Dir]:
        """Open ``path`` (``parent``'s entry of that name) as a directory, not via a link."""
        if not _AT:
            yield cls(path, None)
            return
        name = path.name if parent is not None else str(path)
        flags = os.O_RDONLY | _DIRECTORY | (_NOFOLLOW if parent is not None else 0)
        fd = os.open(name, flags, dir_fd=None if parent is None else parent.fd)
        try:
            yield cls(path, fd)
        finally:
            os.close(fd)

    def _name(self, name: str) -> str:
        return name if self.fd is not None else str(self.path / name)

    def kind(self, name: str) -> int | None:
        """The file type of entry ``name`` (``stat.S_IFMT``), not following a link."""
        try:
            mode = os.stat(self._name(name), dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        return stat.S_IFMT(mode)

    def mkdir(self, name: str) -> None:
        os.mkdir(self._name(name), dir_fd=self.fd)

    def write(self, name: str, text: str) -> None:
        """Write ``name`` atomically: a new temporary entry, renamed over ``name``."""
        tmp = self._name(f".{name}.{secrets.token_hex(8)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0)
        fd = os.open(tmp, flags, 0o666, dir_fd=self.fd)
        try:
            # backslashreplace: a lone surrogate read back from a tampered record cannot
            # stop an export.
            with os.fdopen(
                fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n"
            ) as fh:
                fh.write(text)
            os.replace(tmp, self._name(name), src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise


def _refuse(path: Path, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        message=f"export-site writes only regular files inside its directory: {path} {why}",
        details={"path": str(path), "reason": why},
    )


_KINDS = {
    stat.S_IFDIR: "is a directory",
    stat.S_IFIFO: "is a FIFO (named pipe)",
    stat.S_IFSOCK: "is a socket",
    stat.S_IFCHR: "is a device",
    stat.S_IFBLK: "is a device",
}


def _check_file(where: _Dir, name: str) -> None:
    """Refuse a page or index name held by anything but a regular file or a symlink."""
    kind = where.kind(name)
    if kind is not None and kind not in (stat.S_IFREG, stat.S_IFLNK):
        raise _refuse(where.path / name, _KINDS.get(kind, "is not a regular file"))


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
    db: StoreLike | None,
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
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad ``since``, an unwritable
            directory, a ``DIR/runs`` that is a symlink or not a directory, or a page or
            index name held by a directory, FIFO, socket or device (no file is written).
    """
    to_time(since, "since")  # a bad age fails before anything is written
    root = Path(directory)
    with using_store(db, readonly=True) as store:
        views = list_runs(store, since=since, limit=limit)
        names = [page_name(view.run_id) for view in views]
        try:
            root.mkdir(parents=True, exist_ok=True)
            with _Dir.open(root) as top:
                _check_file(top, "index.html")
                runs_kind = top.kind("runs")
                if runs_kind is None:
                    top.mkdir("runs")
                elif runs_kind == stat.S_IFLNK:
                    raise _refuse(root / "runs", "is a symbolic link (remove it)")
                elif runs_kind != stat.S_IFDIR:
                    raise _refuse(root / "runs", _KINDS.get(runs_kind, "is not a directory"))
                with _Dir.open(root / "runs", top) as runs:
                    for name in names:
                        _check_file(runs, name)
                    rows = _write_pages(store, views, names, runs)
                head, tail = _template()
                data = {"runs": rows, "toolledger_version": __version__}
                top.write("index.html", head + embed_json(data) + tail)
        except OSError as exc:
            raise InvalidArgumentError(
                message=f"cannot write the site in {str(root)!r}: {exc.strerror or exc}"
                + (f" ({exc.filename})" if exc.filename else ""),
                details={"path": str(root)},
            ) from exc
    pages = tuple(root / "runs" / name for name in names)
    return SiteInfo(directory=root, index=root / "index.html", runs=len(rows), pages=pages)


def _write_pages(
    store: Any, views: list[Any], names: list[str], runs: _Dir
) -> list[dict[str, Any]]:
    """Write each run's page; return the index's rows."""
    rows: list[dict[str, Any]] = []
    for view, name in zip(views, names, strict=True):
        stored = load_stored_run(store, view.run_id)
        runs.write(
            name, render_html(stored, checkpoint_lives(store, stored.events), back="../index.html")
        )
        rows.append({**view.summary(), **_summary(stored), "href": f"runs/{name}"})
    return rows
