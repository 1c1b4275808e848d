"""Serialisation shared by every backend: records to and from stored JSON. No I/O here.

Rules this module keeps:

- ``load_record`` runs every check on a stored row's text, unless that exact text (byte
  for byte, for the same key) was already proven: it passed ``load_record``'s checks, or it
  is what ``prepare_ops`` encoded from a record that passed ``validate_checkpoint`` (the
  property test pins ``dump_record`` to ``compact_json(to_dict())``, and the checks are a
  function of the text alone). ``_Proven`` keeps those texts, bounded in count and bytes.
  A text that differs in one byte from what was proven is checked in full again.
- A record handed out never shares a mutable object with the cache or with another read:
  a proven record's payload is parsed again from the row's own text.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from json.encoder import encode_basestring
from typing import Any, TypeVar

from ..checkpoint import check_bounds, check_types, compact_json, copy_json
from ..checkpoint.model import (
    CheckpointRecord,
    Status,
    check_identifier,
    format_time,
    is_identifier,
    is_known_valid,
    parse_time,
    remember_valid,
    with_result,
)
from ..checkpoint.validate import validate_checkpoint, validate_stored
from ..errors import CheckpointError, InvalidArgumentError, InvalidCheckpointError
from .base import (
    OP_TYPES,
    AppendEvents,
    ClaimEffectKey,
    CreateCheckpoint,
    EventRow,
    Op,
    ReleaseEffectKey,
    RemoveOperation,
    SwapCheckpoint,
    WriteOperation,
)

__all__ = [
    "OPERATION_MAX_BYTES",
    "OP_TABLES",
    "PREPARE",
    "check_effect_key_op",
    "dump_operation",
    "dump_record",
    "expand_history",
    "forget_proven",
    "load_record",
    "now_text",
    "op_table",
    "parse_stored_time",
    "prepare_ops",
    "record_json",
    "run_ops",
    "status_values",
    "swap_facts",
    "transition_facts",
    "won",
]

#: Operation-journal entries are correlation data (an order id), not outputs.
OPERATION_MAX_BYTES = 16_384


def dump_record(record: CheckpointRecord) -> str:
    """Return the stored JSON of a validated record: ``compact_json(record.to_dict())``.

    Raises:
        InvalidCheckpointError: as ``record_json``.
    """
    return record_json(record)[0]


def record_json(record: CheckpointRecord) -> tuple[str, str]:
    """Return ``dump_record``'s text and the record's ``updated_at`` as stored (a column).

    Built directly rather than through ``to_dict`` (this runs on every write); a property
    test pins the two byte for byte. Identifiers and fences are validated ASCII of
    ``[A-Za-z0-9._:+/=-]`` and times are ISO-8601, so they need no escaping.

    Raises:
        InvalidCheckpointError: the record no longer encodes (its result payload was
            mutated in place after validation into something that is not JSON).
    """
    try:
        result = record.result
        if result is None:
            result_text = "null"
        else:
            payload = compact_json(result.payload)
            flag = "true" if result.is_error else "false"
            result_text = f'{{"payload":{payload},"is_error":{flag}}}'
        reason = record.uncertain_reason
        b = record.binding
        # The times through their cache first (``None`` included): no Python call on a hit.
        known = _TIME_JSON.get
        created, updated = record.created_at, record.updated_at
        claimed, completed = record.execution_claimed_at, record.completed_at
        delivered = record.delivered_at
        updated_text = known(updated)
        if updated_text is None:  # this transition's own time, new: formatted once, here
            updated_text = f'"{format_time(updated)}"'
            if len(_TIME_JSON) >= _TIME_JSON_MAX:
                _forget_times()
            _TIME_JSON[updated] = updated_text  # a valid record's times are aware
        fence, delivery_fence = record.execution_fence, record.delivery_fence
        fence_text = "null" if fence is None else f'"{fence}"'
        delivery_text = "null" if delivery_fence is None else f'"{delivery_fence}"'
        text = (
            f'{{"schema_version":{record.schema_version:d},'
            f'"binding":{{"namespace":"{b.namespace}","call_id":"{b.call_id}",'
            f'"tool_name":"{b.tool_name}","tool_revision":"{b.tool_revision}",'
            f'"input_fingerprint":"{b.input_fingerprint}"}},'
            f'"status":"{record.status._value_}","revision":{record.revision:d},'
            f'"created_at":{known(created) or _time_json(created)},'
            f'"updated_at":{updated_text},'
            f'"execution_fence":{fence_text},'
            f'"execution_claimed_at":{known(claimed) or _time_json(claimed)},'
            f'"uncertain_reason":{"null" if reason is None else encode_basestring(reason)},'
            f'"result":{result_text},'
            f'"completed_at":{known(completed) or _time_json(completed)},'
            f'"delivery_fence":{delivery_text},'
            f'"delivery_attempts":{record.delivery_attempts:d},'
            f'"delivered_at":{known(delivered) or _time_json(delivered)}'
            + ("}" if record.resolution is None else _resolution_json(record))
        )
    except (ValueError, TypeError, RecursionError) as exc:
        ns, cid = record.key
        raise InvalidCheckpointError(
            message=f"checkpoint {ns}/{cid} does not encode as JSON: {exc}",
            details={"namespace": ns, "call_id": cid, "reason": str(exc)},
        ) from exc
    return text, updated_text[1:-1]


#: The keys a transition's history row leaves out (SQLite): its columns hold status,
#: revision and time; the binding, the creation time and the result are left out when
#: they are those of the revision before (``expand_history`` takes them from there), so
#: a row carries the transition's facts (fences, times, counts, reason) and the result
#: only where the transition set it.
FACTS_OMIT = ("schema_version", "status", "revision", "updated_at")
FACTS_INHERIT = ("binding", "created_at", "result")


def transition_facts(text: str) -> str:
    """The history text of a transition from ``dump_record``'s ``text``, for a revision
    whose binding, creation time and result are those of the revision before it.

    ``dump_record`` writes the keys in ``to_dict`` order and nothing before
    ``execution_fence`` or after ``completed_at`` holds free text, so the first and the
    last matches are the keys themselves (a quote inside a JSON string is escaped).
    """
    start = text.index(',"execution_fence":')
    result = text.index(',"result":', start)
    end = text.rindex(',"completed_at":')
    return "{" + text[start + 1 : result] + text[end:]


def swap_facts(before: str, after: str) -> str | None:
    """The history text of a swap from the stored ``dump_record`` text ``before`` to
    ``after``: what SQLite's ``json_remove`` of ``FACTS_OMIT`` and the equal
    ``FACTS_INHERIT`` keys makes of ``after`` (``_sqlite_ops._facts_sql``), sliced in Python.

    ``None`` when the binding, the creation time or the schema version changed (the
    caller lets SQLite compute the facts then). With the same result text in both, these
    are ``transition_facts(after)``; otherwise the result is kept in place.
    """
    b_status, a_status = before.index(',"status":'), after.index(',"status":')
    if before[:b_status] != after[:a_status]:  # schema version and binding
        return None
    b_created = before.index(',"created_at":', b_status)
    a_created = after.index(',"created_at":', a_status)
    b_updated = before.index(',"updated_at":', b_created)
    a_updated = after.index(',"updated_at":', a_created)
    if before[b_created:b_updated] != after[a_created:a_updated]:
        return None
    b_result = before.index(',"result":', before.index(',"execution_fence":', b_updated))
    a_start = after.index(',"execution_fence":', a_updated)
    a_result = after.index(',"result":', a_start)
    b_end, a_end = before.rindex(',"completed_at":'), after.rindex(',"completed_at":')
    if before[b_result:b_end] == after[a_result:a_end]:
        return transition_facts(after)
    return "{" + after[a_start + 1 :]


def _resolution_json(record: CheckpointRecord) -> str:
    """``,"resolution":{…}}``: the rare tail of a record a person settled."""
    assert record.resolution is not None
    return ',"resolution":' + compact_json(record.resolution.to_dict()) + "}"


def _history_doc(text: Any, namespace: str, call_id: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidCheckpointError(
            message=f"a history row of {namespace}/{call_id} is not valid JSON: {exc}",
            details={"namespace": namespace, "call_id": call_id, "reason": "history row json"},
        ) from exc
    if not isinstance(doc, dict):
        raise InvalidCheckpointError(
            message=f"a history row of {namespace}/{call_id} is not a JSON object",
            details={"namespace": namespace, "call_id": call_id, "reason": "history row json"},
        )
    return doc


def expand_history(
    namespace: str, call_id: str, rows: Iterable[tuple[Any, ...]]
) -> list[tuple[Any, Any, str]]:
    """Return ``(transition, action, record text)`` of SQLite history rows, in order.

    ``rows`` are ``(transition, action, text, revision, status, at)`` in revision order.
    A row holding a whole record (it has ``status``: a creation, or a row written before
    rows held facts) is passed on as stored; a transition's facts are laid over the
    record before it, with the row's status, revision and time. Every text returned is
    validated by the caller (``history_entries``) like any stored record.

    Raises:
        InvalidCheckpointError: ``INVALID_CHECKPOINT`` for a row that is not a JSON object,
            or facts with no record before them.
    """
    out: list[tuple[Any, Any, str]] = []
    prev: dict[str, Any] | None = None
    for transition, action, text, revision, status, at in rows:
        doc = _history_doc(text, namespace, call_id)
        if "status" in doc:
            prev = doc
            out.append((transition, action, text))
            continue
        if prev is None:
            raise InvalidCheckpointError(
                message=f"the history of {namespace}/{call_id} starts with a transition's "
                "facts and no record before them",
                details={"namespace": namespace, "call_id": call_id, "reason": "history gap"},
            )
        # A resolution belongs to the revision that made it: it is never inherited.
        prev.pop("resolution", None)
        merged = {**prev, **doc, "status": status, "revision": revision, "updated_at": at}
        try:
            merged_text = compact_json(merged)
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidCheckpointError(
                message=f"a history row of {namespace}/{call_id} does not encode: {exc}",
                details={"namespace": namespace, "call_id": call_id, "reason": "history row"},
            ) from exc
        prev = merged
        out.append((transition, action, merged_text))
    return out


#: A time's JSON text by time (aware times only, as ``format_time`` caches; ``None`` is
#: ``null``): a record's times are dumped at each of its transitions, most of them unchanged.
_TIME_JSON: dict[datetime | None, str] = {None: "null"}
_TIME_JSON_MAX = 4096


def _forget_times() -> None:
    _TIME_JSON.clear()
    _TIME_JSON[None] = "null"


def _time_json(value: datetime | None) -> str:
    if value is None:
        return "null"
    text = _TIME_JSON.get(value)
    if text is None:
        text = f'"{format_time(value)}"'
        if value.tzinfo is not None:
            if len(_TIME_JSON) >= _TIME_JSON_MAX:
                _forget_times()
            _TIME_JSON[value] = text
    return text


def _stored_size(text: str | bytes) -> int:
    """An upper bound of ``text``'s UTF-8 size (exact for bytes and ASCII)."""
    if isinstance(text, bytes) or text.isascii():
        return len(text)
    return 4 * len(text)


class _Proven:
    """Stored texts already proven valid, by key: the latest text of each, bounded.

    An entry is ``(text, record, payload)``: ``payload`` is the cache's own copy of the
    record's payload, taken when the text was proven and never handed out (a hit hands out
    a copy of it), so nobody can change what the cache holds.
    """

    MAX_ENTRIES = 4096
    MAX_TEXT = 16_384  # longer texts are always checked in full (and never copied here)
    MAX_BYTES = 8 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[str, CheckpointRecord, Any]] = {}
        self._bytes = 0

    def remember(
        self, key: tuple[str, str], text: str, record: CheckpointRecord
    ) -> tuple[str, CheckpointRecord] | None:
        """Keep ``text`` as ``key``'s latest proven text; return the one it replaces and
        its record (read-only: never handed out), ``None`` if none was kept."""
        old = self._entries.get(key)
        prior = None if old is None else (old[0], old[1])
        if type(text) is not str or len(text) > self.MAX_TEXT:
            return prior
        payload = None if record.result is None else copy_json(record.result.payload)
        with self._lock:
            entries = self._entries
            old = entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            while entries and (len(entries) >= self.MAX_ENTRIES or self._bytes > self.MAX_BYTES):
                first = next(iter(entries))
                self._bytes -= len(entries.pop(first)[0])
            entries[key] = (text, record, payload)
            self._bytes += len(text)
        return prior

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def get(self, key: tuple[str, str], text: str | bytes) -> CheckpointRecord | None:
        """The record of ``text`` if exactly this text was proven for ``key``, else ``None``."""
        hit = self._entries.get(key)
        if hit is None or hit[0] != text:
            return None
        rec = hit[1]
        if rec.result is None:
            return rec  # every field of a payload-free record is immutable
        return remember_valid(with_result(rec, copy_json(hit[2]), rec.result.is_error))


_PROVEN = _Proven()


def forget_proven() -> None:
    """Forget every proven text (the next read or write of each key checks in full)."""
    _PROVEN.clear()


def load_record(text: str | bytes, namespace: str, call_id: str) -> CheckpointRecord:
    """Parse and validate a stored row; raise ``INVALID_CHECKPOINT`` naming its key.

    A text proven before for this key (see the module docstring) is not checked again.
    """
    key = (namespace, call_id)
    proven = _PROVEN.get(key, text)
    if proven is not None:
        return proven
    try:
        data = json.loads(text)
    except RecursionError as exc:  # nested past the parser's depth: quarantined like the rest
        raise InvalidCheckpointError(
            message=f"checkpoint {namespace}/{call_id} is nested too deeply to parse",
            details={"namespace": namespace, "call_id": call_id, "reason": "nested too deeply"},
        ) from exc
    except (ValueError, TypeError) as exc:
        raise InvalidCheckpointError(
            message=f"checkpoint {namespace}/{call_id} is not valid JSON: {exc}",
            details={"namespace": namespace, "call_id": call_id, "reason": str(exc)},
        ) from exc
    try:
        rec = validate_stored(data, _stored_size(text))  # every check runs
    except InvalidCheckpointError as exc:
        raise InvalidCheckpointError(
            message=f"stored checkpoint {namespace}/{call_id} is invalid: "
            f"{exc.details.get('reason', exc.message)} (left untouched)",
            details={**exc.details, "namespace": namespace, "call_id": call_id},
        ) from exc
    if rec.key != (namespace, call_id):
        raise InvalidCheckpointError(
            message=f"stored checkpoint {namespace}/{call_id} holds the record of "
            f"{rec.binding.namespace}/{rec.binding.call_id} (left untouched)",
            details={"namespace": namespace, "call_id": call_id, "reason": "key mismatch"},
        )
    if type(text) is str:
        _PROVEN.remember(key, text, rec)
    return remember_valid(rec)  # its payload is ours: parsed from the row just now


def dump_operation(data: Mapping[str, Any]) -> str:
    """Check an operation-journal entry (a small JSON object) and return its JSON."""
    if not isinstance(data, dict):
        raise InvalidArgumentError(message="an operation-journal entry must be a dict")
    shape = check_types(data, what="operation-journal entry")
    try:
        return check_bounds(
            data, shape, max_bytes=OPERATION_MAX_BYTES, what="operation-journal entry"
        )
    except CheckpointError:
        raise


def status_values(status: Status | str | Iterable[Status | str] | None) -> list[str] | None:
    """Normalise a ``list(status=…)`` filter to stored strings."""
    if status is None:
        return None
    items: Iterable[Status | str] = [status] if isinstance(status, (str, Status)) else status
    out = []
    for s in items:
        try:
            out.append(Status(s).value)
        except ValueError as exc:
            raise InvalidArgumentError(message=f"unknown status {s!r}") from exc
    return out


def parse_stored_time(value: str) -> Any:
    """Parse a time column."""
    return parse_time(value, "at")


def now_text() -> str:
    """Return now in the stored time form: the clock for what a store stamps itself
    (an effect key's ``claimed_at``, an operation-journal entry's ``written_at``, a
    migration's ``applied_at``).

    ``format_time``'s text of a UTC time (its ``astimezone`` is a no-op there: a test pins
    the two), without its cache, which a new time never hits.
    """
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def prepare_ops(ops: Iterable[Op]) -> list[tuple[Op, Any]]:
    """Check each op and compute what it writes (outside the transaction): ``(op, prepared)``.

    Each op type's prepare step (``PREPARE``) checks the op and returns what its handlers
    write: a create ``(text, at)``, a swap ``(text, at, prior)`` (``at`` the record's
    ``updated_at`` as stored; ``prior`` the text last proven for its key and that text's
    record, ``None`` if none is known, taken before the swap's own text is remembered: a
    store may write with it only where its row still holds exactly that text), an
    operation-journal entry its JSON. An effect-key claim is stamped with the batch's one
    reading of the clock (``now_text``), taken here once.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad op or a ``requires`` that
            does not name an earlier op of the batch.
    """
    out: list[tuple[Op, Any]] = []
    stamp: str | None = None
    for i, op in enumerate(ops):
        kind = type(op)
        req = getattr(op, "requires", None)  # every op type but ``WriteOperation`` has one
        if req is not None and (type(req) is not int or not 0 <= req < i):
            raise InvalidArgumentError(
                message=f"{kind.__name__}.requires must be the index of an earlier op",
                details={"requires": repr(req)[:40], "index": i},
            )
        try:
            prepare = PREPARE[kind]
        except KeyError:
            raise InvalidArgumentError(message=f"unknown store op {kind.__name__}") from None
        if prepare is None:
            out.append((op, None))
        elif kind is ClaimEffectKey:
            prepare(op)
            stamp = stamp or now_text()
            out.append((op, stamp))
        else:
            out.append((op, prepare(op)))
    return out


_H = TypeVar("_H")

#: Every op table made (by its ``op_table`` name), for the check that each is complete.
OP_TABLES: dict[str, Mapping[type[Any], Any]] = {}


def op_table(backend: str, handlers: Mapping[type[Any], _H]) -> dict[type[Any], _H]:
    """Return ``handlers`` as ``backend``'s op table: one handler per op type, by type.

    Each backend keeps one table per thing it does with an op (run it, encode it, probe
    it), and the one ``apply`` loop (``run_ops``) looks the handler up by the op's type.

    Raises:
        TypeError: naming the backend and each op type it has no handler for (or one
            that is not an op type): a backend missing an op fails at import.
    """
    missing = [t.__name__ for t in OP_TYPES if t not in handlers]
    extra = [t.__name__ for t in handlers if t not in OP_TYPES]
    if missing or extra:
        raise TypeError(
            f"the {backend} store's op table has no handler for {missing}"
            + (f" and handlers for non-ops {extra}" if extra else "")
        )
    table = dict(handlers)
    OP_TABLES[backend] = table
    return table


#: A write of a create and the op after it as one: ``pair(ctx, create, prepared, after,
#: after_prepared, index, outcomes)`` returns both outcomes, or ``None`` to run them apart.
Pair = Callable[..., "Sequence[Any] | None"]


def run_ops(
    prepared: Sequence[tuple[Op, Any]],
    handlers: Mapping[type[Any], Callable[..., Any]],
    *ctx: Any,
    pair: Pair | None = None,
) -> list[Any]:
    """The one ``apply`` loop: run each prepared op in order; return the outcomes.

    Each op runs as ``handlers[type(op)](*ctx, op, prepared)`` (``ctx``: the backend's
    connection or cursor, and what else its handlers take). An op whose ``requires`` lost
    is not run (its outcome is ``False``; a create's outcome counts by its created flag).
    ``pair``: a store may write a create and the op after it together (SQLite's one-row
    claim).
    """
    out: list[Any] = []
    i, count = 0, len(prepared)
    while i < count:
        op, extra = prepared[i]
        kind = type(op)
        req = getattr(op, "requires", None)
        gate = True if req is None else out[req]
        if not (gate[0] if type(gate) is tuple else gate):  # ``won``, inline: it lost
            out.append(False)
        else:
            if pair is not None and kind is CreateCheckpoint and i + 1 < count:
                both = pair(*ctx, op, extra, *prepared[i + 1], i, out)
                if both is not None:
                    out.extend(both)
                    i += 2
                    continue
            out.append(handlers[kind](*ctx, op, extra))
        i += 1
    return out


def won(outcome: Any) -> bool:
    """Whether an op's outcome counts as won for ``requires`` (a create: it created)."""
    if isinstance(outcome, tuple):
        return bool(outcome[0])
    return bool(outcome)


#: Effect keys are fingerprints (``sha256:<hex>``): no content is ever stored.
_EFFECT_KEY_FORM = re.compile(r"sha256:[0-9a-f]{64}")


def check_effect_key_op(op: ClaimEffectKey | ReleaseEffectKey) -> None:
    """Refuse an effect-key op whose key is not a fingerprint or whose ids are malformed."""
    ns, cid, key = op.namespace, op.call_id, op.key
    replaces = op.replaces if type(op) is ClaimEffectKey else None
    if (  # every field passes: its checks as matches, no Python call
        type(ns) is str
        and type(cid) is str
        and type(key) is str
        and is_identifier(ns) is not None
        and is_identifier(cid) is not None
        and _EFFECT_KEY_FORM.fullmatch(key) is not None
        and (replaces is None or (type(replaces) is str and is_identifier(replaces) is not None))
    ):
        return
    check_identifier(ns, "namespace")
    check_identifier(cid, "call_id")
    if replaces is not None:
        check_identifier(replaces, "replaces")
    raise InvalidArgumentError(
        message=f"an effect key is stored as its fingerprint, sha256:<64 hex>; got {key!r:.100}",
        details={"argument": "key"},
    )


def _not_a_record(value: object, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        message=f"{what} takes a CheckpointRecord, not {type(value).__name__} "
        "(use CheckpointRecord.from_dict for stored dicts)",
        details={"argument": "record"},
    )


def _prepare_create(op: CreateCheckpoint) -> tuple[str, str]:
    rec = op.record
    if not isinstance(rec, CheckpointRecord):
        raise _not_a_record(rec, "create_if_absent")
    if not is_known_valid(rec):  # a transition's record was validated when it was made
        validate_checkpoint(rec)
    if rec.revision != 0 or rec.status is not Status.READY:
        raise InvalidArgumentError(
            message="create_if_absent takes a ready record at revision 0 "
            "(create_checkpoint's result)",
            details={"status": rec.status.value, "revision": rec.revision},
        )
    text, at = record_json(rec)
    binding = rec.binding
    _PROVEN.remember((binding.namespace, binding.call_id), text, rec)
    return text, at


def _prepare_swap(
    op: SwapCheckpoint,
) -> tuple[str, str, tuple[str, CheckpointRecord] | None]:
    """Check a swap (a valid record, the next revision); return its text, its time and
    the prior proven text of its key (see ``prepare_ops``), remembering its own text
    after reading the prior one."""
    nxt, expected = op.next, op.expected_revision
    if not isinstance(nxt, CheckpointRecord):
        raise _not_a_record(nxt, "compare_and_swap")
    if not is_known_valid(nxt):  # a transition's record was validated when it was made
        validate_checkpoint(nxt)
    if type(expected) is not int or nxt.revision != expected + 1:
        raise InvalidArgumentError(
            message=f"next.revision ({nxt.revision}) must be expected_revision + 1 "
            f"({expected!r} + 1)",
            details={"expected_revision": expected, "revision": nxt.revision},
        )
    binding = nxt.binding
    text, at = record_json(nxt)
    prior = _PROVEN.remember((binding.namespace, binding.call_id), text, nxt)
    return text, at, prior


def _prepare_append(op: AppendEvents) -> None:
    if type(op.expected_count) is not int or op.expected_count < 0:
        raise InvalidArgumentError(message="expected_count must be a non-negative int")
    for i, row in enumerate(op.rows):
        if not isinstance(row, EventRow):
            raise InvalidArgumentError(
                message=f"event rows must be EventRow values, not {type(row).__name__}",
                details={"run_id": op.run_id, "index": i},
            )
        if row.run_id != op.run_id or row.seq != op.expected_count + i:
            raise InvalidArgumentError(
                message="event rows must belong to the run and continue its sequence",
                details={"run_id": op.run_id, "expected_seq": op.expected_count + i},
            )


def _prepare_write_operation(op: WriteOperation) -> str:
    return dump_operation(op.data)


#: Each op type's prepare step: it checks the op and computes what the handlers write,
#: before the transaction (``None``: nothing to check or compute).
PREPARE: dict[type[Any], Callable[[Any], Any] | None] = op_table(
    "prepare",
    {
        CreateCheckpoint: _prepare_create,
        SwapCheckpoint: _prepare_swap,
        WriteOperation: _prepare_write_operation,
        RemoveOperation: None,
        ClaimEffectKey: check_effect_key_op,
        ReleaseEffectKey: check_effect_key_op,
        AppendEvents: _prepare_append,
    },
)
