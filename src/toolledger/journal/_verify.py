"""Tamper evidence: re-compute a run's hash chain and name the first bad record.

``verify`` detects an edited record (content, header or an indexed column), an inserted,
deleted or reordered record (``seq`` and ``prev_hash`` stop linking), an altered run
header or goal (the genesis hash), and, when given the head hash and count from an export
(or from ``expected_head``/``expected_count``), a cut-off tail. Records whose content was
erased by retention still verify: the chain covers content *hashes*; they are counted in
``content_erased`` (their content cannot be checked, because it is gone).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ..store._open import using_store
from ..store.base import EventRow
from ._events import RecordParser, canonical, chain_hash, content_hash, run_genesis
from ._read import get_run_row, iter_rows, run_document

__all__ = ["VerifyReport", "check_chain", "verify", "verify_export"]

_COLUMNS = ("run_id", "seq", "event_id", "parent_id", "kind", "name", "status", "at")


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """The outcome of ``verify``/``verify_export``.

    Attributes:
        ok: Every check passed.
        run_id: The run.
        event_count: Records checked.
        head_hash: The hash of the last record checked (the genesis hash for none).
        reason: Why it failed (``None`` when ok).
        first_bad_seq, first_bad_event_id: The first bad record, when one is to blame.
        content_erased: Records whose content was erased (hash-checked, content gone).
        source: ``"store"`` or ``"export"``.
    """

    ok: bool
    run_id: str
    event_count: int
    head_hash: str | None
    reason: str | None = None
    first_bad_seq: int | None = None
    first_bad_event_id: str | None = None
    content_erased: int = 0
    source: str = "store"

    def __bool__(self) -> bool:
        return self.ok

    def as_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__slots__}


class _Bad(Exception):
    def __init__(self, reason: str, seq: int | None = None, event_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq
        self.event_id = event_id


def _check_genesis(doc: Mapping[str, Any]) -> str:
    header = doc.get("header")
    genesis = doc.get("genesis")
    if not isinstance(header, dict) or not isinstance(genesis, str):
        raise _Bad("the run document has no header or genesis hash")
    if run_genesis(header) != genesis:
        raise _Bad("the run header (id, namespace, agent or start time) was altered")
    content = doc.get("content")
    if isinstance(content, dict):
        if content_hash(content) != header.get("content_sha256"):
            raise _Bad("the run's goal was altered")
    elif "erased" not in doc:
        raise _Bad("the run's goal is missing without an erasure marker")
    return genesis


def check_chain(
    run_id: str,
    run_doc: Mapping[str, Any],
    rows: Iterable[EventRow],
    *,
    stored_head: str | None = None,
    stored_count: int | None = None,
    expected_head: str | None = None,
    expected_count: int | None = None,
    source: str = "store",
) -> VerifyReport:
    """Check a run's records (in stored order) against its genesis and each other."""
    count = 0
    erased = 0
    prev: str | None = None
    try:
        prev = _check_genesis(run_doc)
        if run_doc.get("header", {}).get("run_id") != run_id:
            raise _Bad("the run document belongs to another run id")
        opened: set[str] = set()
        ended: set[str] = set()
        parser = RecordParser()
        for row in rows:
            erased += _check_row(row, count, prev, run_id, opened, ended, parser)
            prev = row.hash
            count += 1
        if stored_count is not None and stored_count != count:
            raise _Bad(
                f"the run records {stored_count} events but {count} are stored "
                "(records were deleted or added)",
                count if stored_count > count else None,
            )
        if stored_head is not None and count and stored_head != prev:
            raise _Bad("the run's head hash does not match its last record", count - 1)
        if expected_count is not None and expected_count != count:
            raise _Bad(
                f"expected {expected_count} records, found {count}"
                + (" (the tail was cut off)" if count < expected_count else ""),
                min(count, expected_count),
            )
        if expected_head is not None and expected_head != prev:
            raise _Bad("the head hash differs from the expected head (the tail was changed)")
    except _Bad as bad:
        return VerifyReport(
            ok=False,
            run_id=run_id,
            event_count=count,
            head_hash=prev,
            reason=bad.reason,
            first_bad_seq=bad.seq,
            first_bad_event_id=bad.event_id,
            content_erased=erased,
            source=source,
        )
    return VerifyReport(
        ok=True,
        run_id=run_id,
        event_count=count,
        head_hash=prev,
        content_erased=erased,
        source=source,
    )


def _check_row(
    row: EventRow,
    index: int,
    prev: str | None,
    run_id: str,
    opened: set[str],
    ended: set[str],
    parser: RecordParser,
) -> int:
    def bad(why: str) -> _Bad:
        return _Bad(f"record {row.seq}: {why}", row.seq, row.event_id)

    if row.seq != index:
        raise _Bad(
            f"expected record {index}, found {row.seq} (a record was deleted, inserted or moved)",
            index,
            row.event_id,
        )
    if row.prev_hash != prev:
        raise bad("its prev_hash does not link to the previous record")
    try:
        doc, floats = parser.parse(row.data)
    except ValueError as exc:
        raise bad(f"its data is not a JSON object ({exc})") from exc
    header = doc.get("header")
    if not isinstance(header, dict):
        raise bad("it has no header")
    for column in _COLUMNS:
        # The columns complete the stored header; a copy kept in data must agree.
        value = getattr(row, column)
        if header.setdefault(column, value) != value:
            raise bad(f"column {column!r} differs from the hashed header")
    if header.get("run_id") != run_id:
        raise bad("it belongs to another run")
    erased = 0
    content = doc.get("content")
    if isinstance(content, dict):
        if content_hash(content, maybe_float=floats) != header.get("content_sha256"):
            raise bad("its content was altered (content hash mismatch)")
    elif isinstance(doc.get("erased"), dict):
        erased = 1
    else:
        raise bad("its content is missing without an erasure marker")
    try:
        header_json = canonical(header, maybe_float=floats)
    except InvalidArgumentError as exc:
        raise bad(f"its header is not exact JSON ({exc.message})") from exc
    if chain_hash(prev, header_json) != row.hash:
        raise bad("its hash does not match its header (the record was edited)")
    event_id = row.event_id
    phase = header.get("phase")
    if phase == "end":
        if event_id not in opened or event_id in ended:
            raise bad("an end record without a matching start")
        ended.add(event_id)
    elif event_id in opened:
        raise bad("a second start record for the same event")
    else:
        opened.add(event_id)
    return erased


def verify(
    db: Any,
    run_id: str,
    *,
    expected_head: str | None = None,
    expected_count: int | None = None,
) -> VerifyReport:
    """Verify a stored run's hash chain.

    Args:
        db: A ``Store``, path or URL.
        run_id: The run.
        expected_head, expected_count: From an export (or a receipt): detects a cut-off or
            rewritten tail, which the store alone cannot prove.

    Returns:
        A ``VerifyReport``; ``report.ok`` is ``False`` with the first bad record and why.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
    """
    with using_store(db, readonly=True) as store:
        row = get_run_row(store, run_id)
        return check_chain(
            run_id,
            run_document(row),
            iter_rows(store, run_id),
            stored_head=row.head_hash,
            stored_count=row.event_count,
            expected_head=expected_head,
            expected_count=expected_count,
        )


def load_export(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON export.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file is unreadable or not an
            export of a known version.
    """
    try:
        with Path(path).open(encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            message=f"cannot read export {os.fspath(path)!r}: {exc}", details={"path": str(path)}
        ) from exc
    if not isinstance(doc, dict) or doc.get("format") != "toolledger-journal":
        raise InvalidArgumentError(message=f"{os.fspath(path)!r} is not a toolledger export")
    if doc.get("version") != 1:
        raise InvalidArgumentError(
            message=f"export version {doc.get('version')!r} is not supported; upgrade toolledger"
        )
    return doc


def export_rows(doc: Mapping[str, Any]) -> list[EventRow]:
    """Return the records of a loaded export as ``EventRow``s.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a malformed record.
    """
    rows = []
    for i, rec in enumerate(doc.get("records") or []):
        try:
            rows.append(
                EventRow(
                    run_id=rec["run_id"],
                    seq=rec["seq"],
                    event_id=rec["event_id"],
                    parent_id=rec.get("parent_id"),
                    kind=rec["kind"],
                    name=rec.get("name"),
                    status=rec.get("status"),
                    at=rec["at"],
                    prev_hash=rec.get("prev_hash"),
                    hash=rec["hash"],
                    data=rec["data"]
                    if isinstance(rec["data"], str)
                    else json.dumps(
                        rec["data"], ensure_ascii=False, separators=(",", ":"), allow_nan=False
                    ),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(message=f"export record {i} is malformed: {exc}") from exc
    return rows


def verify_export(path: str | os.PathLike[str]) -> VerifyReport:
    """Verify a JSON export on its own, against the head hash and count it carries.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the file is not a readable export.
    """
    doc = load_export(path)
    run = doc.get("run") or {}
    run_id = str(run.get("run_id"))
    try:
        rows = export_rows(doc)
    except InvalidArgumentError as exc:
        return VerifyReport(
            ok=False,
            run_id=run_id,
            event_count=0,
            head_hash=None,
            reason=exc.message,
            source="export",
        )
    return check_chain(
        run_id,
        run.get("document") or {},
        rows,
        stored_head=run.get("head_hash"),
        stored_count=run.get("event_count"),
        expected_head=doc.get("head_hash"),
        expected_count=doc.get("event_count"),
        source="export",
    )
