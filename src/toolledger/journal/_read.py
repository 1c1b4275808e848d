"""Read a stored run back: its row, its document, its records and merged events.

Readers only read the store, and display the run's hashed facts (``StoredRun.facts``,
``read_facts``; see ``journal._facts``), never the ``runs`` columns. A run whose status
is still ``running`` is *live* only when its writer process is alive on this host;
otherwise it crashed, and events it left ``running`` are shown as interrupted.
"""

from __future__ import annotations

import gc
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, overload

from ..errors import InvalidArgumentError, NotFoundError
from ..store import Store, StoreLike, using_store
from ..store.base import EventRow, RunRow, event_row_of, record_fields_of
from ._facts import TAIL, RunFacts, find_end, run_facts
from ._merge import merge_records, record_tuples
from ._records import parse_document, parse_many

__all__ = [
    "StoredRun",
    "collector_paused",
    "display_status",
    "get_run_row",
    "is_live",
    "iter_rows",
    "load_stored_run",
    "read_facts",
    "RecordRows",
    "read_records",
    "run_document",
    "run_goal",
    "stored_run_head",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A stored run as read: its row, document, records and merged event dicts.

    ``docs`` are the records' parsed ``data`` (``rows[i].data``), when read.
    """

    row: RunRow
    doc: dict[str, Any]
    rows: list[EventRow]
    events: list[dict[str, Any]]
    live: bool
    facts: RunFacts  # what readers display: hashed values only (journal._facts)
    docs: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @property
    def status(self) -> str:
        """``running``, ``completed``, ``failed`` or ``interrupted`` (crashed)."""
        return display_status(self.facts, self.live)


def display_status(facts: RunFacts, live: bool) -> str:
    """The status readers show: the hashed one, ``interrupted`` for a dead writer's run."""
    if facts.status == "running" and not live:
        return "interrupted"
    return facts.status


def read_facts(store: Store, row: RunRow, doc: dict[str, Any] | None = None) -> RunFacts:
    """Return the run's hashed facts (``journal._facts.run_facts``), reading its tail.

    The closing record is searched among the last ``TAIL`` records, then (rarely: many
    records written after the run ended, or a damaged count) among all of them.
    """
    doc = run_document(row) if doc is None else doc
    count = row.event_count
    end = find_end(store.read_events(row.run_id, after_seq=count - TAIL - 1)) if count else None
    if end is None and (count > TAIL or count < 0) and row.status != "running":
        end = find_end(list(iter_rows(store, row.run_id)))
    return run_facts(row, doc, end)


def stored_run_head(store: Store, row: RunRow) -> StoredRun:
    """A ``StoredRun`` without records or events (a listing): row, document, facts."""
    doc = run_document(row)
    facts = read_facts(store, row, doc)
    return StoredRun(
        row=row, doc=doc, rows=[], events=[], live=is_live(row, doc, facts), facts=facts
    )


def run_document(row: RunRow) -> dict[str, Any]:
    """Return the run's stored JSON document (``{}`` when unreadable)."""
    return parse_document(row.data)


def is_live(row: RunRow, doc: dict[str, Any], facts: RunFacts | None = None) -> bool:
    """Whether a run still runs: its (hashed) status is ``running`` and its writer lives."""
    if (row.status if facts is None else facts.status) != "running":
        return False
    pid = doc.get("pid")
    if doc.get("host") != socket.gethostname() or type(pid) is not int:
        return True  # cannot tell from here; assume it still runs
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def iter_rows(store: Store, run_id: str, *, batch: int = 5000) -> Iterator[EventRow]:
    """Yield the run's records in ``seq`` order, ``batch`` at a time."""
    after = -1
    while True:
        rows = store.read_events(run_id, after_seq=after, limit=batch)
        yield from rows
        if len(rows) < batch:
            return
        after = rows[-1].seq


def get_run_row(store: Store, run_id: str) -> RunRow:
    """Return the run row.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
    """
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgumentError(message=f"run_id must be a non-empty str; got {run_id!r}")
    row = store.get_run(run_id)
    if row is None:
        raise NotFoundError(
            message=f"no run {run_id!r} in this database", details={"run_id": run_id}
        )
    return row


def load_stored_run(
    db: StoreLike | None, run_id: str, *, progress: Callable[[int, int], None] | None = None
) -> StoredRun:
    """Read a run's records and merge them into events (the record-level read;
    ``toolledger.load_run`` gives the ``RunView`` users read).

    Args:
        db: A ``Store``, path or URL (a store passed in stays open).
        run_id: The run.
        progress: ``progress(done, total)`` while records are read.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
    """
    with using_store(db, readonly=True) as store:
        row = get_run_row(store, run_id)
        with collector_paused():
            rows: list[EventRow] = []
            for r in iter_rows(store, run_id):
                rows.append(r)
                if progress is not None and len(rows) % 5000 == 0:
                    progress(len(rows), row.event_count)
            doc = run_document(row)
            facts = run_facts(row, doc, find_end(rows))
            live = is_live(row, doc, facts)
            docs = parse_many([r.data for r in rows])
            events = merge_records(rows, docs, goal=run_goal(doc, facts.goal), live=live)
        return StoredRun(
            row=row, doc=doc, rows=rows, events=events, live=live, facts=facts, docs=docs
        )


def read_records(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    """Return all the run's records, in ``seq`` order, as ``RECORD_FIELDS`` tuples.

    One statement where the store declares ``Capabilities.record_fields`` (SQLite), else
    its rows.
    """
    records = record_fields_of(store, run_id)
    return records if records is not None else record_tuples(iter_rows(store, run_id))


class RecordRows(Sequence[EventRow]):
    """A run's ``RECORD_FIELDS`` tuples seen as ``EventRow``s, each built when read.

    For ``find_end``, which reads a run's last records (its ``prev_hash`` is ``None``).
    """

    __slots__ = ("_records", "_run_id")

    def __init__(self, run_id: str, records: Sequence[Sequence[Any]]) -> None:
        self._run_id = run_id
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> EventRow: ...

    @overload
    def __getitem__(self, index: slice) -> RecordRows: ...

    def __getitem__(self, index: int | slice) -> EventRow | RecordRows:
        if isinstance(index, slice):
            return RecordRows(self._run_id, self._records[index])
        seq, event_id, parent_id, kind, name, status, at, hash_, data = self._records[index]
        return event_row_of(
            self._run_id, seq, event_id, parent_id, kind, name, status, at, None, hash_, data
        )


def run_goal(doc: dict[str, Any], default: str | None) -> str | None:
    """The goal every event shows: the run document's hashed goal; for a damaged document,
    ``default`` (the facts' goal)."""
    content = doc.get("content")
    return content.get("goal", default) if isinstance(content, dict) else default


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a run is read; restore it after.

    A load allocates a few containers per record and frees none of them before it returns,
    so each generational pass of the collector finds nothing to free, and its full passes
    walk the whole growing heap again (a quarter of the CPU time of a 20,000-event load).
    Nothing a load builds is cyclic. The collector is enabled again only if it was enabled
    (a nested pause, or a caller's ``gc.disable()``, is left alone).
    """
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def merged_events(
    rows: list[EventRow], doc: dict[str, Any], live: bool, *, default_goal: str | None = None
) -> list[dict[str, Any]]:
    """Merge stored records (in ``seq`` order) into event dicts; the columns complete headers."""
    docs = parse_many([r.data for r in rows])
    return merge_records(rows, docs, goal=run_goal(doc, default_goal), live=live)
