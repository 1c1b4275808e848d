"""Tamper evidence: re-compute a run's hash chain and name the first bad record.

``verify`` detects an edited record (content, header or an indexed column), an inserted,
deleted or reordered record (``seq`` and ``prev_hash`` stop linking), an altered run
header or goal (the genesis hash), an edited ``runs`` column (``namespace, agent, goal,
started_at, status, ended_at``: compared with the hashed run, ``journal._facts``) and, when
given the head hash and count from an export (or from ``expected_head``/``expected_count``),
a cut-off tail.

Records whose content was erased by retention still verify: the chain covers content
*hashes*; they are counted in ``content_erased`` (their content cannot be checked, because
it is gone). Erasure markers are not trusted blindly: ``gc`` erases whole runs that ended
before a cutoff, in one transaction, and never a goal. So erased records must be a prefix
of the chain that ends at a ``finish`` record (or at the last record, past a ``finish``);
each marker must be dated at or after the end of what it erased and not in the future;
and the goal must be present. Anything else is reported as tampering.

Unreadable records (not JSON, a ``NaN`` literal, a lone surrogate, nesting too deep to
read, a non-text value) are named like any other bad record; nothing here raises for them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..checkpoint.model import parse_iso
from ..errors import InvalidArgumentError
from ..store import StoreLike, using_store
from ..store.base import EventRow, RunRow
from ._facts import EndRecord, end_record, run_facts, run_source
from ._read import get_run_row, iter_rows, run_document
from ._records import (
    KEY_ENV,
    MAC_HMAC_SHA256,
    RecordParser,
    canonical,
    chain_hash,
    content_hash,
    journal_key,
    key_id,
    run_genesis,
)

__all__ = ["VerifyReport", "check_chain", "verify", "verify_export"]

_COLUMNS = ("run_id", "seq", "event_id", "parent_id", "kind", "name", "status", "at")

#: The top-level keys a stored record may hold (``_records``): anything else is outside the
#: hash, so a reader or an export could show what the chain never vouched for.
_RECORD_KEYS = frozenset({"header", "content", "erased"})

#: A head digest as ``--head`` prints it: SHA-256 or HMAC-SHA256, 64 lower-case hex digits.
_DIGEST = re.compile(r"[0-9a-f]{64}")


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
        end_hashed: Whether the run's end (status, end time) is in the chain; ``False``
            for a run recorded before run ends were chained (its end is not vouched for).
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
    end_hashed: bool = True

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
    try:
        if run_genesis(header) != genesis:
            raise _Bad("the run header (id, namespace, agent or start time) was altered")
        content = doc.get("content")
        if isinstance(content, dict):
            if content_hash(content) != header.get("content_sha256"):
                raise _Bad("the run's goal was altered")
        elif "erased" in doc:
            raise _Bad("the run's goal was erased, which retention never does")
        else:
            raise _Bad("the run's goal is missing")
    except _UNREADABLE as exc:
        raise _Bad(f"the run document is not exact JSON ({_why(exc)})") from exc
    return genesis


#: What reading a hostile record can raise: not JSON / NaN (ValueError), a lone surrogate
#: (UnicodeError), nesting too deep (RecursionError), a BLOB or number (TypeError), and
#: values that are not exact JSON (InvalidArgumentError).
_UNREADABLE = (ValueError, UnicodeError, RecursionError, TypeError, InvalidArgumentError)


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, UnicodeError):
        return "a lone surrogate"
    if isinstance(exc, InvalidArgumentError):
        return exc.message
    return str(exc)[:200] or type(exc).__name__


class _Walk:
    """What ``check_chain`` remembers across records: events, the end, erasures."""

    __slots__ = ("end", "ended", "erased", "erased_at", "finish_text", "opened")

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.ended: set[str] = set()
        self.end: EndRecord | None = None
        self.finish_text: dict[str, str] = {}
        self.erased: list[tuple[int, str, dict[str, Any]]] = []  # (seq, event id, marker)
        self.erased_at: list[tuple[int, str | None, str]] = []  # (seq, kind, at)


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
    columns: RunRow | None = None,
    now: datetime | None = None,
    key: str | bytes | None = None,
    against: Sequence[EventRow] | None = None,
) -> VerifyReport:
    """Check a run's records (in stored order) against its genesis and each other.

    ``columns``: the ``runs`` row (or an export's run fields) to compare with the hashed
    run; ``now``: the clock erasure markers must not be ahead of (default: now, UTC);
    ``key``: the journal key of a keyed run (default ``$TOOLLEDGER_JOURNAL_KEY``);
    ``against``: the records of an export of the run: the first record that differs from
    it is named.
    """
    count = 0
    prev: str | None = None
    walk = _Walk()
    end_hashed = True
    try:
        prev = _check_genesis(run_doc)
        if run_doc.get("header", {}).get("run_id") != run_id:
            raise _Bad("the run document belongs to another run id")
        mac_key = _run_key(run_doc["header"], journal_key(key))
        parser = RecordParser()
        for row in rows:
            _check_row(row, count, prev, run_id, walk, parser, mac_key)
            if against is not None:
                _compare(row, against, count)
            prev = row.hash
            count += 1
        if against is not None and len(against) > count:
            raise _Bad(
                f"record {count} of the export is missing from the store (the tail was cut off)",
                count,
                against[count].event_id,
            )
        if stored_count is not None and (type(stored_count) is not int or stored_count < 0):
            raise _Bad(f"the run's event_count column is not a count ({stored_count!r})")
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
        _check_erasures(walk, count, now or datetime.now(timezone.utc))
        if columns is not None:
            end_hashed = _check_columns(columns, run_doc, walk)
    except _Bad as bad:
        return VerifyReport(
            ok=False,
            run_id=run_id,
            event_count=count,
            head_hash=prev,
            reason=bad.reason,
            first_bad_seq=bad.seq,
            first_bad_event_id=bad.event_id,
            content_erased=len(walk.erased),
            source=source,
        )
    return VerifyReport(
        ok=True,
        run_id=run_id,
        event_count=count,
        head_hash=prev,
        content_erased=len(walk.erased),
        source=source,
        end_hashed=end_hashed,
    )


def _run_key(header: Mapping[str, Any], key: bytes | None) -> bytes | None:
    """The key the run's chain is verified with; a keyed/unkeyed mismatch is tampering."""
    mac = header.get("mac")
    if mac is None:
        if key is not None:
            raise _Bad(
                "the run's chain is not keyed, but a journal key was given: a keyed run "
                "re-chained without its key looks like this (verify unkeyed runs without "
                f"a key: unset {KEY_ENV})"
            )
        return None
    if mac != MAC_HMAC_SHA256:
        raise _Bad(f"the run's chain uses an unknown MAC {mac!r}")
    if key is None:
        raise _Bad(
            f"the run's chain is keyed (HMAC-SHA256, key id {header.get('key_id')}): verify "
            f"it with its key (key= or {KEY_ENV})"
        )
    if key_id(key) != header.get("key_id"):
        raise _Bad(
            f"the journal key given is not the run's key (key id {key_id(key)}, the run's "
            f"{header.get('key_id')})"
        )
    return key


def _compare(row: EventRow, against: Sequence[EventRow], index: int) -> None:
    """Name the first stored record that differs from the export's."""
    if index >= len(against):
        raise _Bad(
            f"record {row.seq} is not in the export (records were added after it)",
            row.seq,
            row.event_id,
        )
    other = against[index]
    if other.hash != row.hash or other.seq != row.seq:
        what = [
            name
            for name in ("event_id", "kind", "name", "status", "at", "data")
            if getattr(other, name) != getattr(row, name)
        ]
        detail = f" ({', '.join(what)} changed)" if what else " (re-chained)"
        raise _Bad(f"record {row.seq} differs from the export{detail}", row.seq, row.event_id)


def _check_columns(columns: RunRow, run_doc: Mapping[str, Any], walk: _Walk) -> bool:
    """Compare the ``runs`` columns with the hashed run; return whether its end is hashed."""
    end = walk.end
    if end is not None and end.summary is None and end.event_id in walk.finish_text:
        end = dataclasses.replace(end, summary=walk.finish_text[end.event_id])
    facts = run_facts(columns, run_doc, end)
    if facts.differs:
        names = ", ".join(name for name, _, _ in facts.differs)
        at_end = end is not None and facts.differs[0][0] in ("status", "ended_at")
        raise _Bad(
            f"the runs table's {names} differ{'s' if len(facts.differs) == 1 else ''} from "
            f"the hashed run: {facts.describe_differences()}",
            end.seq if at_end and end is not None else None,
            end.event_id if at_end and end is not None else None,
        )
    return facts.end_hashed


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        value = parse_iso(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


#: How far ahead of the verifier's clock an erasure marker may be (clock skew).
_SKEW = timedelta(minutes=5)


def _check_erasures(walk: _Walk, count: int, now: datetime) -> None:
    """Erased records must be what ``gc`` leaves: a whole ended run, dated after its end."""
    if not walk.erased:
        return
    for i, (seq, event_id, _marker) in enumerate(walk.erased):
        if seq != i:
            raise _Bad(
                f"record {seq}: its content was erased but record {i} was not "
                "(retention erases whole runs: a selective erasure)",
                seq,
                event_id,
            )
    kinds = [kind for _, kind, _ in walk.erased_at]
    finishes = [at for _, kind, at in walk.erased_at if kind == "finish"]
    if not (kinds[-1] == "finish" or (len(kinds) == count and finishes)):
        seq, event_id, _ = walk.erased[-1]
        raise _Bad(
            f"record {seq}: content erased up to here, but the run had not ended there "
            "(retention erases only ended runs, whole)",
            seq,
            event_id,
        )
    # Each record was erased after the end that closed it (the next finish record on).
    segment_end: list[str | None] = []
    closing: str | None = finishes[-1]
    for _seq, kind, at_text in reversed(walk.erased_at):
        if kind == "finish":
            closing = at_text
        segment_end.append(closing)
    segment_end.reverse()
    for (seq, event_id, marker), end_text in zip(walk.erased, segment_end, strict=True):
        ended = _time(end_text)
        at = _time(marker.get("at"))
        if at is None:
            raise _Bad(f"record {seq}: its erasure marker has no valid time", seq, event_id)
        if at > now + _SKEW:
            raise _Bad(
                f"record {seq}: its erasure is dated {marker.get('at')}, in the future",
                seq,
                event_id,
            )
        if ended is not None and at < ended:
            raise _Bad(
                f"record {seq}: its erasure ({marker.get('at')}) predates the end of the run "
                "it erased (retention erases only ended runs)",
                seq,
                event_id,
            )


def _check_row(
    row: EventRow,
    index: int,
    prev: str | None,
    run_id: str,
    walk: _Walk,
    parser: RecordParser,
    key: bytes | None = None,
) -> None:
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
    if type(row.data) is not str:
        raise bad(f"its data is not text (a {type(row.data).__name__})")
    try:
        doc, floats = parser.parse(row.data)
    except _UNREADABLE as exc:
        raise bad(f"its data is not a JSON object ({_why(exc)})") from exc
    unknown = sorted(set(doc) - _RECORD_KEYS)
    if unknown:
        names = ", ".join(repr(name[:60]) for name in unknown[:5])
        raise bad(f"it holds {names} outside its header and content (the record was edited)")
    header = doc.get("header")
    if not isinstance(header, dict):
        raise bad("it has no header")
    if "content" in doc and "erased" in doc:
        raise bad("it has both content and an erasure marker (the record was edited)")
    for column in _COLUMNS:
        # The columns complete the stored header; a copy kept in data must agree.
        value = getattr(row, column)
        if header.setdefault(column, value) != value:
            raise bad(f"column {column!r} differs from the hashed header")
    if header.get("run_id") != run_id:
        raise bad("it belongs to another run")
    content = doc.get("content")
    erased = doc.get("erased")
    try:
        if isinstance(content, dict):
            if content_hash(content, maybe_float=floats) != header.get("content_sha256"):
                raise bad("its content was altered (content hash mismatch)")
        elif not isinstance(erased, dict):
            raise bad("its content is missing without an erasure marker")
        header_json = canonical(header, maybe_float=floats)
    except _UNREADABLE as exc:
        raise bad(f"it is not exact JSON ({_why(exc)})") from exc
    if chain_hash(prev, header_json, key) != row.hash:
        raise bad("its hash does not match its header (the record was edited)")
    kind = header.get("kind")
    if isinstance(erased, dict) and not isinstance(content, dict):
        walk.erased.append((row.seq, row.event_id, erased))
        walk.erased_at.append((row.seq, kind if isinstance(kind, str) else None, row.at))
    if kind == "finish":
        closing = end_record(row.seq, header, content if isinstance(content, dict) else None)
        if closing is not None:
            walk.end = closing
        elif isinstance(content, dict) and isinstance(content.get("text"), str):
            walk.finish_text[row.event_id] = content["text"]
    event_id = row.event_id
    phase = header.get("phase")
    if phase == "end":
        if event_id not in walk.opened or event_id in walk.ended:
            raise bad("an end record without a matching start")
        walk.ended.add(event_id)
    elif event_id in walk.opened:
        raise bad("a second start record for the same event")
    else:
        walk.opened.add(event_id)


def verify(
    db: StoreLike | None,
    run_id: str,
    *,
    expected_head: str | None = None,
    expected_count: int | None = None,
    key: str | bytes | None = None,
    export: str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """Verify a stored run's hash chain.

    Args:
        db: A ``Store``, path or URL.
        run_id: The run.
        expected_head, expected_count: From an export (or a receipt): detects a cut-off or
            rewritten tail, which the store alone cannot prove. The head is compared
            without surrounding whitespace and case (as ``--head`` printed it, or copied
            upper-cased).
        key: The run's journal key, for a keyed run (default ``$TOOLLEDGER_JOURNAL_KEY``).
        export: A JSON export of the run: the store is checked against it record by
            record (a full re-chain of the store is then named at its first changed
            record), and against its head and count.

    Returns:
        A ``VerifyReport``; ``report.ok`` is ``False`` with the first bad record and why.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``expected_head`` is not a digest
            (64 hex digits) or ``expected_count`` is not a count.
    """
    if expected_head is not None:
        expected_head = expected_digest(expected_head)
    if expected_count is not None and (type(expected_count) is not int or expected_count < 0):
        raise InvalidArgumentError(
            message=f"expected_count must be a count (an int >= 0), not {expected_count!r}"
        )
    with using_store(db, readonly=True) as store:
        row = get_run_row(store, run_id)
        against = None
        if export is not None:
            doc = load_export(export)
            against = export_rows(doc)
            if expected_head is None and expected_count is None:
                expected_head, expected_count = doc.get("head_hash"), doc.get("event_count")
        return check_chain(
            run_id,
            run_document(row),
            iter_rows(store, run_id),
            stored_head=row.head_hash,
            stored_count=row.event_count,
            expected_head=expected_head,
            expected_count=expected_count,
            columns=row,
            key=key,
            against=against,
        )


def expected_digest(value: object) -> str:
    """Return a head digest given by a person, normalised (stripped, lower-case).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when it is not 64 hex digits.
    """
    text = value.strip().lower() if isinstance(value, str) else None
    if text is None or not _DIGEST.fullmatch(text):
        shown = repr(value)[:80]
        raise InvalidArgumentError(
            message=f"the expected head must be a digest of 64 hex digits (as --head prints "
            f"it), not {shown}"
        )
    return text


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


def verify_export(path: str | os.PathLike[str], *, key: str | bytes | None = None) -> VerifyReport:
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
    report = check_chain(
        run_id,
        run.get("document") or {},
        rows,
        stored_head=run.get("head_hash"),
        stored_count=run.get("event_count"),
        expected_head=doc.get("head_hash"),
        expected_count=doc.get("event_count"),
        source="export",
        columns=export_columns(run),
        key=key,
    )
    if report.ok and "source" in run:  # exports made before the field carry none
        document = run.get("document")
        header = document.get("header") if isinstance(document, dict) else None
        hashed = run_source(header if isinstance(header, dict) else None)
        if run["source"] != hashed:
            return dataclasses.replace(
                report,
                ok=False,
                reason=f"the export's run source {run['source']!r} is not the one its hashed "
                f"header names ({hashed!r})",
            )
    return report


def export_columns(run: Mapping[str, Any]) -> RunRow:
    """The run fields an export carries (what its readers display), as a ``RunRow``.

    The values are compared with the hashed run, never trusted, whatever their type.
    """
    fields: Any = {k: run.get(k) for k in ("namespace", "agent", "goal", "status")}
    return RunRow(
        run_id=str(run.get("run_id")),
        started_at=run.get("started_at"),  # type: ignore[arg-type]
        ended_at=run.get("ended_at"),
        **fields,
    )
