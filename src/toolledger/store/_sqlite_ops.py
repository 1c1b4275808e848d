"""SQLite statements for ``SQLiteStore.apply``: one function per op type. No transactions here.

Rules:

- Callers pass a connection inside their ``BEGIN IMMEDIATE`` transaction; nothing here
  opens, commits or rolls back: raising rolls the whole batch back.
- Creation is ``INSERT OR IGNORE`` (refused, and rolled back, when a tombstone holds the
  key); CAS is ``UPDATE … WHERE … AND revision = ?`` plus a row-count check, only along a
  legal transition (``transition_between``), with its history row inserted in the same
  transaction: a creation's row holds the record, a transition's its facts
  (``_facts_sql``: the result, binding and creation time only where they changed). An
  append advances the run's count only when it matches (a CAS).
- An effect-key claim is ``INSERT OR IGNORE`` then a read of the holder (won when it is
  the claiming call); a release deletes only the holder's own row.
- A stored row whose JSON is damaged or disagrees with its columns is quarantined
  (``INVALID_CHECKPOINT``), never overwritten.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..checkpoint.model import CheckpointRecord, Status
from ..checkpoint.transitions import TRANSITIONS, edges_to, transition_between
from ..errors import InvalidCheckpointError, NotFoundError
from ._rows import (
    FACTS_INHERIT,
    FACTS_OMIT,
    load_record,
    op_table,
    swap_facts,
    transition_facts,
)
from ._sqlcommon import EVENT_COLUMNS, event_params, now_text
from ._tombstone import load_tombstone, tombstoned_error
from .base import (
    AppendEvents,
    ClaimEffectKey,
    CreateCheckpoint,
    Op,
    ReleaseEffectKey,
    RemoveOperation,
    SwapCheckpoint,
    WriteOperation,
)

__all__ = [
    "HANDLERS",
    "PREV_MARKER",
    "SELECT_EVENT_COLUMNS",
    "create_and_swap",
]

_STATUSES: dict[Any, Status] = {s.value: s for s in Status}
#: ``transition_between`` as a table, ``(source, target, decision) -> (name, action)``:
#: the known-row swap labels its history row without a call.
_BETWEEN: dict[tuple[Status, Status, bool], tuple[str, str]] = {
    (source, target, decision): (name, action.value)
    for target in Status
    for decision in (False, True)
    for source, (name, action) in edges_to(target, decision=decision).items()
}
#: The transitions a record just created may take in the same transaction.
_FROM_READY: dict[Status, tuple[str, str]] = {
    rule.target: (name, rule.action.value)
    for name, rule in TRANSITIONS.items()
    if Status.READY in rule.sources and not rule.decision
}


_INSERT_CHECKPOINT = (
    "INSERT OR IGNORE INTO checkpoints "
    "(namespace, call_id, status, revision, tool_name, updated_at, record) "
)
# The fast path: the tombstone check rides in the INSERT (one statement); a refusal (row
# count 0) is told apart afterwards: a stored checkpoint, or a tombstone on the key.
_CREATE = (
    f"{_INSERT_CHECKPOINT}SELECT ?1, ?2, ?3, 0, ?4, ?5, ?6 WHERE NOT EXISTS "
    "(SELECT 1 FROM tombstones WHERE namespace = ?1 AND call_id = ?2)"
)


_CREATE_SWAPPED = (
    f"{_INSERT_CHECKPOINT}SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS "
    "(SELECT 1 FROM tombstones WHERE namespace = ?1 AND call_id = ?2)"
)
_HISTORY_COLUMNS = "(namespace, call_id, revision, status, transition, action, at, record)"
_TWO_HISTORY_ROWS = (
    f"INSERT INTO checkpoint_history {_HISTORY_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?), "
    "(?, ?, ?, ?, ?, ?, ?, ?)"
)


def create_and_swap(
    conn: sqlite3.Connection,
    create: CreateCheckpoint,
    created: tuple[str, str],
    swap: Op,
    swapped: Any,
    index: int,
    outcomes: Sequence[Any],
) -> tuple[tuple[bool, CheckpointRecord], bool] | None:
    """Create a record and swap it at once: one row write, both history rows in one insert.

    ``run_ops``' pair for the create at ``index`` and the op after it. The same outcomes
    as running the two ops in turn, for a swap at revision 0 of the created key along a
    transition from ``ready`` that runs iff the create wins (it is gated on nothing, on
    the create, or on an earlier op that won); ``None`` (nothing written) when the op after
    is not such a swap, or the create is refused: the caller runs the ops one by one then.
    """
    if type(swap) is not SwapCheckpoint:
        return None
    req = swap.requires
    if req is not None and req != index:
        gate = outcomes[req] if req < index else False
        if not (gate[0] if type(gate) is tuple else gate):  # ``won``, inline
            return None
    rec, nxt = create.record, swap.next
    moved = _FROM_READY.get(nxt.status)
    binding, next_binding = rec.binding, nxt.binding
    ns, cid = binding.namespace, binding.call_id
    if (
        moved is None
        or swap.expected_revision != 0
        or next_binding.namespace != ns
        or next_binding.call_id != cid
    ):
        return None
    create_text, created_at = created
    swap_text, at, _prior = swapped
    # ``_value_``: the stored string, read without ``Enum.value``'s property (Python frames).
    cur = conn.execute(
        _CREATE_SWAPPED,
        (ns, cid, nxt.status._value_, nxt.revision, next_binding.tool_name, at, swap_text),
    )
    if cur.rowcount != 1:
        return None
    name, action = moved
    same = (next_binding is binding or next_binding == binding) and nxt.created_at == rec.created_at
    facts = transition_facts(swap_text) if same and nxt.result is rec.result is None else swap_text
    conn.execute(
        _TWO_HISTORY_ROWS,
        (
            *(ns, cid, rec.revision, rec.status._value_, "create_checkpoint", "execute"),
            *(created_at, create_text),
            *(ns, cid, nxt.revision, nxt.status._value_, name, action, at, facts),
        ),
    )
    return ((True, rec), True)


def _create(
    conn: sqlite3.Connection, op: CreateCheckpoint, prepared: tuple[str, str]
) -> tuple[bool, CheckpointRecord]:
    rec = op.record
    text, at = prepared
    binding = rec.binding
    ns, cid = binding.namespace, binding.call_id
    cur = conn.execute(_CREATE, (ns, cid, rec.status._value_, binding.tool_name, at, text))
    if cur.rowcount == 1:
        conn.execute(
            _HISTORY,
            (ns, cid, rec.revision, rec.status._value_, "create_checkpoint", "execute", at, text),
        )
        return (True, rec)
    row = conn.execute(
        "SELECT record FROM checkpoints WHERE namespace = ? AND call_id = ?", (ns, cid)
    ).fetchone()
    if row is not None:
        return (False, load_record(row[0], ns, cid))
    tomb = conn.execute(
        "SELECT data FROM tombstones WHERE namespace = ? AND call_id = ?", (ns, cid)
    ).fetchone()
    if tomb is None:  # neither: the INSERT cannot have been refused (we hold the write lock)
        raise InvalidCheckpointError(
            message=f"creating {ns}/{cid} was refused with no checkpoint or tombstone there",
            details={"namespace": ns, "call_id": cid, "reason": "create refused"},
        )
    raise tombstoned_error(load_tombstone(tomb[0], ns, cid))


_AGREES = (
    "json_valid(record) AND json_extract(record, '$.revision') IS revision AND "
    "json_extract(record, '$.status') IS status AND "
    "json_extract(record, '$.binding.namespace') IS namespace AND "
    "json_extract(record, '$.binding.call_id') IS call_id"
)


def _facts_sql(new: str) -> str:
    """SQL for the history text of a swap to the record text ``new`` from ``record``.

    ``new`` without the keys the columns hold, and without each of ``FACTS_INHERIT``
    whose value is the stored record's (removing ``schema_version`` again is the no-op
    alternative). Only for a ``record`` that is valid JSON.
    """
    omit = ", ".join(f"'$.{key}'" for key in FACTS_OMIT)
    inherit = ", ".join(
        f"CASE WHEN json_extract(record, '$.{key}') IS json_extract({new}, '$.{key}') "
        f"THEN '$.{key}' ELSE '$.schema_version' END"
        for key in FACTS_INHERIT
    )
    return f"json_remove({new}, {omit}, {inherit})"


def _swap_history_sql(target: Status) -> str:
    """The fast CAS's first statement for ``target``: the history row, from the stored row.

    It inserts only when the stored row is at the expected revision, in a status some
    transition leads from to ``target``, and its JSON agrees with its columns; the
    transition's name and action are read off the stored status in SQL.
    """
    edges = [(source, name, action.value) for source, (name, action) in edges_to(target).items()]
    names = " ".join(f"WHEN '{s.value}' THEN '{n}'" for s, n, _ in edges)
    actions = " ".join(f"WHEN '{s.value}' THEN '{a}'" for s, _, a in edges)
    sources = ", ".join(f"'{s.value}'" for s, _, _ in edges)
    return (
        "INSERT INTO checkpoint_history "
        "(namespace, call_id, revision, status, transition, action, at, record) "
        f"SELECT namespace, call_id, ?3, ?4, CASE status {names} END, "
        f"CASE status {actions} END, ?5, {_facts_sql('?6')} FROM checkpoints "
        f"WHERE namespace = ?1 AND call_id = ?2 AND revision = ?7 AND status IN ({sources}) "
        f"AND {_AGREES}"
    )


_SWAP_HISTORY = {
    target: _swap_history_sql(target)
    for target in {rule.target for rule in TRANSITIONS.values() if not rule.decision}
}
_UPDATE = (
    "UPDATE checkpoints SET status = ?, revision = ?, updated_at = ?, record = ? "
    "WHERE namespace = ? AND call_id = ? AND revision = ?"
)


_UPDATE_KNOWN = f"{_UPDATE} AND status = ? AND record = ?"


def _swap(
    conn: sqlite3.Connection,
    op: SwapCheckpoint,
    prepared: tuple[str, str, tuple[str, CheckpointRecord] | None],
) -> bool:
    text, at, prior = prepared
    nxt = op.next
    binding = nxt.binding
    ns, cid = binding.namespace, binding.call_id
    expected = op.expected_revision
    decision = nxt.resolution is not None
    if prior is not None and prior[1].revision == expected:
        # The row is believed to hold ``prior``'s text: two plain statements. The UPDATE
        # matches only a row holding exactly that text (proven valid for this key, so its
        # JSON agrees with the revision and status also matched), so the transition and
        # the history facts are worked out here from the two texts, not by SQLite's JSON
        # functions. Nothing written sends the swap on to the paths below, which tell a
        # lost CAS, a damaged row or an illegal move apart.
        before, stored = prior
        move = _BETWEEN.get((stored.status, nxt.status, decision))
        facts = None if move is None else swap_facts(before, text)
        if move is not None and facts is not None:
            cur = conn.execute(
                _UPDATE_KNOWN,
                (
                    *(nxt.status._value_, nxt.revision, at, text, ns, cid, expected),
                    *(stored.status._value_, before),
                ),
            )
            if cur.rowcount == 1:
                name, action = move
                conn.execute(
                    _HISTORY, (ns, cid, nxt.revision, nxt.status._value_, name, action, at, facts)
                )
                return True
    # A person's decision (rare) takes the slow path, which labels it in Python.
    sql = None if decision else _SWAP_HISTORY.get(nxt.status)
    if sql is not None:
        # Fast path, two statements: the history row (inserted only if every check holds),
        # then the CAS itself. Anything else (lost CAS, damaged row, illegal move) takes the
        # slow path below, which tells them apart; the insert left nothing behind then.
        params = (ns, cid, nxt.revision, nxt.status._value_, at, text, expected)
        if conn.execute(sql, params).rowcount == 1:
            cur = conn.execute(
                _UPDATE, (nxt.status._value_, nxt.revision, at, text, ns, cid, expected)
            )
            if cur.rowcount != 1:  # cannot happen under the write lock; never half-apply
                raise InvalidCheckpointError(
                    message=f"stored checkpoint {ns}/{cid} changed inside a transaction",
                    details={"namespace": ns, "call_id": cid, "reason": "cas race"},
                )
            return True
    return _swap_slow(conn, op, text, at)


def _swap_slow(conn: sqlite3.Connection, op: SwapCheckpoint, extra: str, at: str) -> bool:
    nxt = op.next
    ns, cid = nxt.key
    # The JSON checks run inside SQLite (C): a row whose document is damaged or disagrees
    # with its columns is quarantined here instead of being overwritten by a CAS.
    row = conn.execute(
        "SELECT status, revision, CASE WHEN json_valid(record) THEN "
        "json_extract(record, '$.revision') IS revision AND "
        "json_extract(record, '$.status') IS status AND "
        "json_extract(record, '$.binding.namespace') IS namespace AND "
        "json_extract(record, '$.binding.call_id') IS call_id ELSE 0 END, "
        f"CASE WHEN json_valid(record) THEN {_facts_sql('?3')} END "
        "FROM checkpoints WHERE namespace = ?1 AND call_id = ?2",
        (ns, cid, extra),
    ).fetchone()
    if row is None or row[1] != op.expected_revision:
        return False
    if not row[2]:
        raise InvalidCheckpointError(
            message=f"stored checkpoint {ns}/{cid} is damaged: its JSON is invalid or "
            "disagrees with its columns (left untouched)",
            details={"namespace": ns, "call_id": cid, "reason": "damaged record document"},
        )
    try:
        stored_status = _STATUSES.get(row[0]) or Status(row[0])
    except ValueError as exc:  # a damaged row is quarantined, never overwritten
        raise InvalidCheckpointError(
            message=f"stored checkpoint {ns}/{cid} has an unknown status {row[0]!r:.40} "
            "(left untouched)",
            details={"namespace": ns, "call_id": cid, "reason": "unknown status column"},
        ) from exc
    name, action = transition_between(
        stored_status, nxt.status, decision=nxt.resolution is not None
    )
    cur = conn.execute(
        _UPDATE, (nxt.status._value_, nxt.revision, at, extra, ns, cid, op.expected_revision)
    )
    if cur.rowcount != 1:
        return False
    conn.execute(
        _HISTORY, (ns, cid, nxt.revision, nxt.status._value_, name, action._value_, at, row[3])
    )
    return True


def _write_operation(conn: sqlite3.Connection, op: WriteOperation, extra: str) -> None:
    conn.execute(
        "INSERT INTO operation_journal (namespace, call_id, data, written_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (namespace, call_id) DO UPDATE SET "
        "data = excluded.data, written_at = excluded.written_at",
        (op.namespace, op.call_id, extra, now_text()),
    )


def _remove_operation(conn: sqlite3.Connection, op: RemoveOperation, _extra: None) -> bool:
    cur = conn.execute(
        "DELETE FROM operation_journal WHERE namespace = ? AND call_id = ?",
        (op.namespace, op.call_id),
    )
    return cur.rowcount == 1


def _claim_effect_key(conn: sqlite3.Connection, op: ClaimEffectKey, stamp: str) -> bool:
    if op.replaces is not None:  # take the key over from the call named, if it holds it
        cur = conn.execute(
            "UPDATE effect_keys SET call_id = ?, claimed_at = ? "
            "WHERE namespace = ? AND effect_key = ? AND call_id = ?",
            (op.call_id, stamp, op.namespace, op.key, op.replaces),
        )
        if cur.rowcount == 1:
            return True
    cur = conn.execute(
        "INSERT OR IGNORE INTO effect_keys (namespace, effect_key, call_id, claimed_at) "
        "VALUES (?, ?, ?, ?)",
        (op.namespace, op.key, op.call_id, stamp),
    )
    if cur.rowcount == 1:
        return True
    row = conn.execute(
        "SELECT call_id FROM effect_keys WHERE namespace = ? AND effect_key = ?",
        (op.namespace, op.key),
    ).fetchone()
    return row is not None and row[0] == op.call_id


def _release_effect_key(conn: sqlite3.Connection, op: ReleaseEffectKey, _extra: None) -> bool:
    cur = conn.execute(
        "DELETE FROM effect_keys WHERE namespace = ? AND effect_key = ? AND call_id = ?",
        (op.namespace, op.key, op.call_id),
    )
    return cur.rowcount == 1


def _append(conn: sqlite3.Connection, op: AppendEvents, _extra: None) -> bool:
    # The count CAS first (one statement); a row count of 0 is told apart afterwards (an
    # unknown run, or another count); raising or returning False leaves nothing applied.
    if op.rows:
        cur = conn.execute(
            "UPDATE runs SET event_count = ?, head_hash = ? WHERE run_id = ? AND event_count = ?",
            (op.expected_count + len(op.rows), op.rows[-1].hash, op.run_id, op.expected_count),
        )
        applied = cur.rowcount == 1
    else:
        applied = False
    if not applied:
        row = conn.execute("SELECT event_count FROM runs WHERE run_id = ?", (op.run_id,)).fetchone()
        if row is None:
            raise NotFoundError(message=f"no run {op.run_id}", details={"run_id": op.run_id})
        return not op.rows and row[0] == op.expected_count
    # The full-text index follows in batches (``_sqlite_search``: a trigger marks the run).
    # Each record's ``prev_hash`` after the first is stored as ``PREV_MARKER`` where it is
    # the hash of the record before it, as the chain has it: 64 bytes less per record.
    params = []
    before: str | None = None
    for r in op.rows:
        row_params = event_params(r)
        if before is not None and r.prev_hash == before:
            row_params = (*row_params[:8], PREV_MARKER, *row_params[9:])
        params.append(row_params)
        before = r.hash
    conn.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", params)
    return True


#: What SQLite stores as ``prev_hash`` for "the ``hash`` of the record before" (``seq - 1``):
#: an empty BLOB, never a stored text (``SELECT_EVENT_COLUMNS`` reads it back).
PREV_MARKER = b""


#: ``EVENT_COLUMNS`` as a ``SELECT`` from ``events`` reads them: a ``PREV_MARKER`` is the
#: hash of the run's record at ``seq - 1`` (one primary-key lookup, only for a marker).
SELECT_EVENT_COLUMNS = EVENT_COLUMNS.replace(
    "prev_hash",
    "CASE WHEN typeof(prev_hash) = 'blob' THEN (SELECT p.hash FROM events p "
    "WHERE p.run_id = events.run_id AND p.seq = events.seq - 1) ELSE prev_hash END",
)


_HISTORY = (
    "INSERT INTO checkpoint_history "
    "(namespace, call_id, revision, status, transition, action, at, record) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


#: The SQLite op table: ``run_ops`` runs ``HANDLERS[type(op)](conn, op, prepared)``.
HANDLERS: dict[type[Any], Callable[[sqlite3.Connection, Any, Any], Any]] = op_table(
    "SQLite",
    {
        CreateCheckpoint: _create,
        SwapCheckpoint: _swap,
        WriteOperation: _write_operation,
        RemoveOperation: _remove_operation,
        ClaimEffectKey: _claim_effect_key,
        ReleaseEffectKey: _release_effect_key,
        AppendEvents: _append,
    },
)
