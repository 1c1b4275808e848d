"""JSON export: versioned, complete and re-importable (``toolledger.import_json``).

Layout (``format: "toolledger-journal"``, ``version: 1``)::

    {"format", "version", "toolledger_version", "exported_at",
     "head_hash", "event_count",                   # what verify_export checks against
     "run": {"run_id", "namespace", "agent", "goal", "status", "started_at", "ended_at",
             "head_hash", "event_count", "source", "document"},  # document: the stored run JSON
                                  # (the other fields are its hashed facts: journal._facts)
     "events": [{"run_id", "event_id", "seq", "parent_id", "kind", "name", "status",
                 "goal", "started_at", "ended_at", "ts_start_ms", "ts_end_ms",
                 "duration_ms", "justification", "justification_source",
                 "justification_missing", "inputs", "outputs", "artifacts", "approval",
                 "error", "text", "meta", "checkpoint", "erased", ...}, ...],
     "records": [{"run_id", "seq", "event_id", "parent_id", "kind", "name", "status",
                  "at", "prev_hash", "hash", "data"}, ...]}   # data: the stored record

``events`` is the merged view readers show (one object per event, ``Event.to_dict()``,
equal to ``toolledger.load_run(db, run_id).to_dict()["events"]``): derived from the
records, never hashed, and ignored by ``verify_export`` and ``import_json``.
``records`` are the stored journal records unchanged (a step has a start and an end
record), so the export verifies on its own (``verify_export``) and re-imports byte-for-byte
equivalent (hashes are over canonical JSON, so whitespace does not matter).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from .._version import __version__
from ..journal import events_of, load_stored_run, parse_many
from ..store import StoreLike, using_store
from ._common import ExportInfo, Progress, atomic_text

__all__ = ["FORMAT", "VERSION", "export_json"]

FORMAT = "toolledger-journal"
VERSION = 1


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def export_json(
    db: StoreLike | None,
    run_id: str,
    path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> ExportInfo:
    """Write the run as a JSON export.

    Args:
        db: A ``Store``, path or URL.
        run_id: The run.
        path: The file to write (atomically).
        progress: ``progress(done, total)`` while records are written.

    Returns:
        An ``ExportInfo`` with the head hash and record count the export carries.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file cannot be written.
    """
    with using_store(db, readonly=True) as store:
        stored = load_stored_run(store, run_id)
        events = events_of(store, stored)
    row, doc, facts = stored.row, stored.doc, stored.facts  # hashed values, never columns
    head: str | None = doc.get("genesis")
    count = 0
    with atomic_text(path) as fh:
        fh.write(f'{{"format":"{FORMAT}","version":{VERSION},')
        fh.write(f'"toolledger_version":{_dumps(__version__)},')
        fh.write(f'"exported_at":{_dumps(datetime.now(timezone.utc).isoformat())},')
        run = {
            "run_id": row.run_id,
            "namespace": facts.namespace,
            "agent": facts.agent,
            "goal": facts.goal,
            "status": facts.status,
            "started_at": facts.started_at,
            "ended_at": facts.ended_at,
            "head_hash": row.head_hash,
            "event_count": row.event_count,
            "source": facts.source,
            "document": doc,
        }
        fh.write(f'"run":{_dumps(run)},\n"events":[\n')
        for i, ev in enumerate(events):
            fh.write(("," if i else "") + _event_json(ev.to_dict()) + "\n")
        fh.write('],\n"records":[\n')
        for r in stored.rows:
            record = {
                "run_id": r.run_id,
                "seq": r.seq,
                "event_id": r.event_id,
                "parent_id": r.parent_id,
                "kind": r.kind,
                "name": r.name,
                "status": r.status,
                "at": r.at,
                "prev_hash": r.prev_hash,
                "hash": r.hash,
            }
            fh.write(("," if count else "") + _dumps(record)[:-1])
            fh.write(',"data":' + _data(r.data) + "}\n")
            head = r.hash
            count += 1
            if progress is not None and count % 1000 == 0:
                progress(count, row.event_count)
        fh.write(f'],\n"head_hash":{_dumps(head)},"event_count":{count}}}\n')
    if progress is not None:
        progress(count, row.event_count)
    return ExportInfo(
        path=_path(path),
        run_id=run_id,
        format="json",
        head_hash=head,
        event_count=count,
        size=os.path.getsize(path),
    )


def _event_json(event: dict[str, Any]) -> str:
    """Return an event as JSON; content JSON cannot carry (NaN, too deep) is left out."""
    try:
        return _dumps(event)
    except (ValueError, TypeError, RecursionError):
        keys = ("inputs", "outputs", "artifacts", "approval", "error", "meta", "extra")
        safe = {**event, **dict.fromkeys(keys)}
        safe["extra"] = {"unrenderable": "this event's content is not exact JSON"}
        return _dumps(safe)


def _data(text: Any) -> str:
    """Embed a stored record as JSON; an unreadable one as a string (verify names it)."""
    if type(text) is not str:  # a BLOB: kept (as text) under a marker verify rejects
        raw = text.decode("utf-8", "backslashreplace") if isinstance(text, bytes) else text
        return _dumps({"$blob": str(raw)})
    if parse_many([text])[0].get("unreadable") is True:
        return _dumps(text)
    return text


def _path(path: str | os.PathLike[str]) -> Any:
    from pathlib import Path

    return Path(path)
