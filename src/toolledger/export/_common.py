"""Shared pieces of the exporters: the result record, progress, atomic file writes.

The rendered exporters (Markdown, HTML) differ only in how a loaded run becomes text;
``export_rendered`` is their one load-write-report flow.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import InvalidArgumentError
from ..journal import load_stored_run
from ..store import Store, StoreLike, using_store

__all__ = ["ExportInfo", "Progress", "atomic_text", "export_rendered"]

#: ``progress(done, total)``: called while an export reads and writes records.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportInfo:
    """What an export wrote."""

    path: Path
    run_id: str
    format: str
    head_hash: str | None
    event_count: int
    size: int


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """Write a text file atomically: a temporary sibling renamed into place on success.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file cannot be written.
    """
    target = Path(path)
    if target.exists() and not target.is_file():
        # A device, FIFO or socket (e.g. -o /dev/null, -o /dev/stdout): write through it.
        # Renaming a temporary file over it would replace the device node itself.
        try:
            with open(target, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as fh:
                yield fh
        except OSError as exc:
            raise InvalidArgumentError(
                message=f"cannot write {str(target)!r}: {exc.strerror or exc}",
                details={"path": str(target)},
            ) from exc
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise InvalidArgumentError(
            message=f"cannot write {str(target)!r}: {exc.strerror or exc}",
            details={"path": str(target)},
        ) from exc
    try:
        # backslashreplace: a lone surrogate read back from a tampered record cannot stop
        # an export (inside JSON it even stays the same escape).
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def export_rendered(
    db: StoreLike | None,
    run_id: str,
    path: str | os.PathLike[str],
    *,
    render: Callable[[Any, Store], str],
    format: str,
    progress: Progress | None,
) -> ExportInfo:
    """Load the run, write ``render(view, store)`` to ``path`` atomically, describe the file.

    ``render`` may read more from the open store (the HTML viewer reads checkpoint history).

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file cannot be written.
    """
    with using_store(db, readonly=True) as store:
        view = load_stored_run(store, run_id, progress=progress)
        text = render(view, store)
    with atomic_text(path) as fh:
        fh.write(text)
    if progress is not None:
        progress(len(view.rows), len(view.rows))
    return ExportInfo(
        path=Path(path),
        run_id=run_id,
        format=format,
        head_hash=view.rows[-1].hash if view.rows else view.doc.get("genesis"),
        event_count=len(view.rows),
        size=os.path.getsize(path),
    )
