"""Re-import a JSON export into a store, verified before anything is written.

The imported run keeps its id, its records and their hashes unchanged, so ``verify``
passes on it exactly as it did on the original.
"""

from __future__ import annotations

import json
import os

from ..errors import InvalidArgumentError
from ..store import StoreLike, using_store
from ..store.base import RunRow
from ._verify import check_chain, export_rows, load_export

__all__ = ["import_json"]

_BATCH = 5000


def import_json(
    path: str | os.PathLike[str], db: StoreLike | None = None, *, key: str | bytes | None = None
) -> str:
    """Import a JSON export (``export_json``) into ``db``; return the run id.

    Args:
        path: The export file.
        db: A ``Store``, path or URL (default ``$TOOLLEDGER_DB`` or ``.toolledger.db``).
        key: The run's journal key when it is keyed (default ``$TOOLLEDGER_JOURNAL_KEY``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file is not an export, fails
            verification, or its run id exists in ``db`` already.
        StoreError: storage failure (the run may be partly imported; verify names it).
    """
    doc = load_export(path)
    run = doc.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
        raise InvalidArgumentError(message=f"{os.fspath(path)!r} has no run")
    run_id: str = run["run_id"]
    rows = export_rows(doc)
    report = check_chain(
        run_id,
        run.get("document") or {},
        rows,
        stored_head=run.get("head_hash"),
        stored_count=run.get("event_count"),
        expected_head=doc.get("head_hash"),
        expected_count=doc.get("event_count"),
        source="export",
        key=key,
    )
    if not report.ok:
        raise InvalidArgumentError(
            message=f"{os.fspath(path)!r} fails verification: {report.reason}",
            details={"run_id": run_id, "first_bad_seq": report.first_bad_seq},
        )
    with using_store(db, readonly=False) as store:
        store.create_run(
            RunRow(
                run_id=run_id,
                namespace=str(run.get("namespace") or "default"),
                agent=run.get("agent"),
                goal=run.get("goal"),
                status=str(run.get("status") or "completed"),
                started_at=str(run.get("started_at")),
                ended_at=run.get("ended_at"),
                data=json.dumps(
                    run.get("document") or {}, ensure_ascii=False, separators=(",", ":")
                ),
            )
        )
        for start in range(0, len(rows), _BATCH):
            store.append_events(run_id, rows[start : start + _BATCH], expected_count=start)
    return run_id
