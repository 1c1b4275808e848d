"""PostgreSQL statements for ``PostgresStore``: one function per write, and commit probes.

Rules:

- Every statement is rendered once per store from a template naming ``{s}``, the schema
  (``Queries``); nothing here opens a connection or a transaction: callers pass a cursor
  inside theirs.
- Every op is ONE statement, so a one-op ``apply`` runs in autocommit (one round trip) and
  never needs a rollback. Creation is ``INSERT … ON CONFLICT DO NOTHING`` (nothing inserted
  when a tombstone holds the key); CAS is ``UPDATE … WHERE … AND revision = %s`` and the
  row count, and updates only along a legal transition: the label comes from a table
  rendered from ``checkpoint.transitions.TRANSITIONS`` (the labels ``transition_between``
  gives) and the history row is inserted by the same statement. An append advances the
  run's count (a CAS), inserts its events and their search index rows in one statement
  (records are never stored unfound).
- ``probe`` / ``probe_one`` / ``probe_batch`` say whether a write whose commit got no
  answer landed, by reading what only that write could have stored (the history row with
  the exact record text, the event with the exact hash, the exact entry). They are asked
  only after the writing backend is gone, so the answer is final.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import Cursor

from ..checkpoint.model import CheckpointRecord, Status
from ..checkpoint.transitions import TRANSITIONS, transition_between
from ..errors import NotFoundError
from ._pg_schema import qualify
from ._pg_search import event_index_params
from ._rows import load_record, op_table, won
from ._sqlcommon import EVENT_COLUMNS, RUN_COLUMNS, event_params, now_text
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
    "EVENT_COLUMNS",
    "HANDLERS",
    "RUN_COLUMNS",
    "Queries",
    "event_params",
    "execute_op",
    "landed_outcome",
    "op_key",
    "probe",
    "probe_batch",
    "probe_one",
]

_EVENT_FIELDS = tuple(c.strip() for c in EVENT_COLUMNS.split(","))


def _edges(decision: bool) -> str:
    """The ``VALUES`` rows of the swap's edge table: machine rules, or decision rules."""
    return ", ".join(
        f"('{source.value}', '{rule.target.value}', '{name}', '{rule.action.value}')"
        for name, rule in sorted(TRANSITIONS.items())
        if rule.decision is decision
        for source in sorted(rule.sources, key=lambda s: s.value)
    )


_EDGES = _edges(False)


def _swap_template(edges: str) -> str:
    return (
        """
        WITH u AS (
            UPDATE {s}.checkpoints c
            SET status = %(status)s, revision = %(rev)s, updated_at = %(at)s, record = %(rec)s
            FROM (
                SELECT v.name, v.action FROM {s}.checkpoints o
                JOIN (VALUES """
        + edges
        + """) AS v (src, dst, name, action)
                ON v.src = o.status AND v.dst = %(status)s
                WHERE o.namespace = %(ns)s AND o.call_id = %(cid)s AND o.revision = %(exp)s
            ) e
            WHERE c.namespace = %(ns)s AND c.call_id = %(cid)s AND c.revision = %(exp)s
            RETURNING e.name, e.action
        )
        INSERT INTO {s}.checkpoint_history
            (namespace, call_id, revision, status, transition, action, at, record)
        SELECT %(ns)s, %(cid)s, %(rev)s, %(status)s, u.name, u.action, %(at)s, %(rec)s
        FROM u
    """
    )


_TEMPLATES: dict[str, str] = {
    # A swap is labelled by the table's machine rules; a record carrying a person's
    # resolution by its decision rules (``transition_between(..., decision=True)``).
    "swap": _swap_template(_EDGES),
    "swap_decision": _swap_template(_edges(True)),
    "create": """
        WITH t AS (SELECT data FROM {s}.tombstones WHERE namespace = %(ns)s AND call_id = %(cid)s),
        ins AS (
            INSERT INTO {s}.checkpoints
                (namespace, call_id, status, revision, tool_name, updated_at, record)
            SELECT %(ns)s, %(cid)s, 'ready', 0, %(tool)s, %(at)s, %(rec)s
            WHERE NOT EXISTS (SELECT 1 FROM t)
            ON CONFLICT DO NOTHING RETURNING 1
        ),
        h AS (
            INSERT INTO {s}.checkpoint_history
                (namespace, call_id, revision, status, transition, action, at, record)
            SELECT %(ns)s, %(cid)s, 0, 'ready', 'create_checkpoint', 'execute', %(at)s, %(rec)s
            FROM ins
        )
        SELECT (SELECT count(*) FROM ins), (SELECT data FROM t),
            (SELECT revision FROM {s}.checkpoints WHERE namespace = %(ns)s AND call_id = %(cid)s),
            (SELECT record FROM {s}.checkpoints WHERE namespace = %(ns)s AND call_id = %(cid)s)
    """,
    "select_record": "SELECT revision, record FROM {s}.checkpoints "
    "WHERE namespace = %s AND call_id = %s",
    "select_tombstone": "SELECT data FROM {s}.tombstones WHERE namespace = %s AND call_id = %s",
    "select_state": "SELECT status, revision FROM {s}.checkpoints "
    "WHERE namespace = %s AND call_id = %s",
    "op_write": """
        INSERT INTO {s}.operation_journal (namespace, call_id, data, written_at)
        VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, call_id)
        DO UPDATE SET data = EXCLUDED.data, written_at = EXCLUDED.written_at
    """,
    "op_remove": "DELETE FROM {s}.operation_journal WHERE namespace = %s AND call_id = %s",
    "append": """
        WITH r AS (
            UPDATE {s}.runs SET event_count = %(new)s, head_hash = %(head)s
            WHERE run_id = %(rid)s AND event_count = %(exp)s RETURNING 1
        ), ix AS (
            INSERT INTO {s}.event_search (run_id, seq, event_id, tsv)
            SELECT u.r, u.s, u.e, u.t::tsvector FROM unnest(%(run_id)s::text[],
                %(seq)s::bigint[], %(event_id)s::text[], %(tsv)s::text[]) AS u(r, s, e, t)
            WHERE EXISTS (SELECT 1 FROM r)
            ON CONFLICT (run_id, seq)
            DO UPDATE SET tsv = EXCLUDED.tsv, event_id = EXCLUDED.event_id
        )
        INSERT INTO {s}.events ("""
    + EVENT_COLUMNS
    + """)
        SELECT * FROM unnest(%(run_id)s::text[], %(seq)s::bigint[], %(event_id)s::text[],
            %(parent_id)s::text[], %(kind)s::text[], %(name)s::text[], %(status)s::text[],
            %(at)s::text[], %(prev_hash)s::text[], %(hash)s::text[], %(data)s::text[])
        WHERE EXISTS (SELECT 1 FROM r)
    """,
    "run_count": "SELECT event_count FROM {s}.runs WHERE run_id = %s",
    "probe_history": "SELECT record FROM {s}.checkpoint_history "
    "WHERE namespace = %s AND call_id = %s AND revision = %s",
    "probe_event": "SELECT hash FROM {s}.events WHERE run_id = %s AND seq = %s",
    "probe_operation": "SELECT data FROM {s}.operation_journal "
    "WHERE namespace = %s AND call_id = %s",
    # ON CONFLICT DO NOTHING waits for a concurrent claim of the key to commit or roll
    # back, so of concurrent claims of a free key exactly one inserts.
    "effect_claim": "INSERT INTO {s}.effect_keys (namespace, effect_key, call_id, claimed_at) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "effect_holder": "SELECT call_id FROM {s}.effect_keys WHERE namespace = %s AND effect_key = %s",
    "effect_replace": "UPDATE {s}.effect_keys SET call_id = %s, claimed_at = %s "
    "WHERE namespace = %s AND effect_key = %s AND call_id = %s",
    "effect_release": "DELETE FROM {s}.effect_keys "
    "WHERE namespace = %s AND effect_key = %s AND call_id = %s",
}


class Queries:
    """Every statement, rendered for one schema (attribute access by template name)."""

    def __init__(self, schema: str, templates: dict[str, str] | None = None) -> None:
        self._text: dict[str, str] = {
            name: qualify(t, schema).as_string(None)
            for name, t in {**_TEMPLATES, **(templates or {})}.items()
        }

    def __getitem__(self, name: str) -> str:
        return self._text[name]


def execute_op(cur: Cursor[Any], q: Queries, op: Op, extra: Any) -> Any:
    """Run one prepared ``apply`` op inside the caller's transaction; return its outcome.

    Raises:
        TombstonedError: ``TOMBSTONED`` creating under an erased key (the caller rolls back).
        InvalidTransitionError: ``INVALID_TRANSITION`` when no transition joins the stored
            status and the target (the caller rolls back).
        NotFoundError: ``NOT_FOUND`` appending to an unknown run.
    """
    return HANDLERS[type(op)](cur, q, op, extra)


def _swap(cur: Cursor[Any], q: Queries, op: SwapCheckpoint, prepared: tuple[str, str, Any]) -> bool:
    extra, at, _prior = prepared
    nxt = op.next
    ns, cid = nxt.key
    decision = nxt.resolution is not None
    cur.execute(
        q["swap_decision" if decision else "swap"],
        {
            "ns": ns,
            "cid": cid,
            "exp": op.expected_revision,
            "rev": nxt.revision,
            "status": nxt.status.value,
            "at": at,
            "rec": extra,
        },
    )
    if cur.rowcount == 1:
        return True
    # Nothing written: either the revision moved (CAS lost) or no transition leads
    # from the stored status to the target (refused, as SQLite refuses it).
    cur.execute(q["select_state"], (ns, cid))
    row = cur.fetchone()
    if row is not None and row[1] == op.expected_revision:
        transition_between(Status(row[0]), nxt.status, decision=decision)  # raises
        raise AssertionError("unreachable: the edge table and transition_between disagree")
    return False


def _write_operation(cur: Cursor[Any], q: Queries, op: WriteOperation, extra: str) -> None:
    cur.execute(q["op_write"], (op.namespace, op.call_id, extra, now_text()))


def _remove_operation(cur: Cursor[Any], q: Queries, op: RemoveOperation, _extra: None) -> bool:
    cur.execute(q["op_remove"], (op.namespace, op.call_id))
    return cur.rowcount == 1


def _release_effect_key(cur: Cursor[Any], q: Queries, op: ReleaseEffectKey, _extra: None) -> bool:
    cur.execute(q["effect_release"], (op.namespace, op.key, op.call_id))
    return cur.rowcount == 1


def _claim_effect_key(cur: Cursor[Any], q: Queries, op: ClaimEffectKey, stamp: str) -> bool:
    if op.replaces is not None:  # take the key over from the call named, if it holds it
        cur.execute(q["effect_replace"], (op.call_id, stamp, op.namespace, op.key, op.replaces))
        if cur.rowcount == 1:
            return True
    cur.execute(q["effect_claim"], (op.namespace, op.key, op.call_id, stamp))
    if cur.rowcount == 1:
        return True
    # A new statement, a fresh snapshot: it sees the claim that made ours conflict.
    cur.execute(q["effect_holder"], (op.namespace, op.key))
    row = cur.fetchone()
    return row is not None and row[0] == op.call_id


def _create(
    cur: Cursor[Any], q: Queries, op: CreateCheckpoint, prepared: tuple[str, str]
) -> tuple[bool, CheckpointRecord]:
    rec = op.record
    extra, at = prepared
    ns, cid = rec.key
    params = {"ns": ns, "cid": cid, "tool": rec.binding.tool_name, "at": at, "rec": extra}
    cur.execute(q["create"], params)
    row = cur.fetchone()
    assert row is not None
    inserted, tomb, revision, stored = row
    if inserted == 1:
        return (True, rec)
    if tomb is None and revision is None:
        # The conflicting row committed after this statement's snapshot (or an erase did
        # while we waited for its lock): read it with a fresh snapshot.
        cur.execute(q["select_record"], (ns, cid))
        again = cur.fetchone()
        if again is None:
            raise NotFoundError(
                message=f"checkpoint {ns}/{cid} vanished while being created; retry",
                details={"namespace": ns, "call_id": cid},
            )
        revision, stored = again
    if tomb is not None or revision < 0:  # the key was erased: its marker row conflicted
        if tomb is None:
            cur.execute(q["select_tombstone"], (ns, cid))
            found = cur.fetchone()
            if found is None:
                raise NotFoundError(
                    message=f"checkpoint {ns}/{cid} was erased but has no tombstone",
                    details={"namespace": ns, "call_id": cid},
                )
            tomb = found[0]
        raise tombstoned_error(load_tombstone(tomb, ns, cid))
    return (False, load_record(stored, ns, cid))


def _append(cur: Cursor[Any], q: Queries, op: AppendEvents, _extra: None) -> bool:
    if not op.rows:
        cur.execute(q["run_count"], (op.run_id,))
        row = cur.fetchone()
        if row is None:
            raise NotFoundError(message=f"no run {op.run_id}", details={"run_id": op.run_id})
        return bool(row[0] == op.expected_count)
    columns = list(zip(*(event_params(r) for r in op.rows), strict=True))
    params: dict[str, Any] = {
        name: list(values) for name, values in zip(_EVENT_FIELDS, columns, strict=True)
    }
    *_, texts = event_index_params((r.run_id, r.seq, r.event_id, r.name, r.data) for r in op.rows)
    params.update(
        new=op.expected_count + len(op.rows),
        head=op.rows[-1].hash,
        rid=op.run_id,
        exp=op.expected_count,
        tsv=texts,
    )
    cur.execute(q["append"], params)
    if cur.rowcount == len(op.rows):
        return True
    cur.execute(q["run_count"], (op.run_id,))
    if cur.fetchone() is None:
        raise NotFoundError(message=f"no run {op.run_id}", details={"run_id": op.run_id})
    return False


#: The PostgreSQL op table: ``run_ops`` (and ``execute_op``) run
#: ``HANDLERS[type(op)](cur, q, op, prepared)``.
HANDLERS: dict[type[Any], Callable[[Cursor[Any], Queries, Any, Any], Any]] = op_table(
    "PostgreSQL",
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


def op_key(op: Op) -> dict[str, Any]:
    """Return the key and revision an op writes, for error details."""
    return _KEYS[type(op)](op)


def _record_key(rec: CheckpointRecord) -> dict[str, Any]:
    ns, cid = rec.key
    return {"namespace": ns, "call_id": cid, "revision": rec.revision}


def _operation_key(op: WriteOperation | RemoveOperation) -> dict[str, Any]:
    return {"namespace": op.namespace, "call_id": op.call_id, "operation_journal": True}


def _effect_key(op: ClaimEffectKey | ReleaseEffectKey) -> dict[str, Any]:
    return {"namespace": op.namespace, "call_id": op.call_id, "effect_key": op.key}


#: What each op type writes, for error details (``op_key``).
_KEYS: dict[type[Any], Callable[[Any], dict[str, Any]]] = op_table(
    "PostgreSQL keys",
    {
        CreateCheckpoint: lambda op: _record_key(op.record),
        SwapCheckpoint: lambda op: _record_key(op.next),
        WriteOperation: _operation_key,
        RemoveOperation: _operation_key,
        ClaimEffectKey: _effect_key,
        ReleaseEffectKey: _effect_key,
        AppendEvents: lambda op: {"run_id": op.run_id, "expected_count": op.expected_count},
    },
)


def probe(
    cur: Cursor[Any], q: Queries, prepared: Sequence[tuple[Op, Any]], results: Sequence[Any]
) -> bool | None:
    """Say whether the batch committed: ``True``/``False``, or ``None`` if it wrote nothing.

    The first op that wrote something distinctive decides (the batch was one transaction).
    An effect-key claim is weak evidence (the key may have been ours before): the
    checkpoint ops it gates decide when there are any.
    """
    weak: bool | None = None
    for (op, extra), outcome in zip(prepared, results, strict=True):
        if isinstance(op, CreateCheckpoint) and won(outcome):
            return _history_is(cur, q, op.record, 0, extra[0])
        if isinstance(op, SwapCheckpoint) and outcome:
            return _history_is(cur, q, op.next, op.next.revision, extra[0])
        if isinstance(op, AppendEvents) and outcome and op.rows:
            last = op.rows[-1]
            cur.execute(q["probe_event"], (last.run_id, last.seq))
            row = cur.fetchone()
            return row is not None and row[0] == last.hash
        if isinstance(op, WriteOperation) and weak is None:
            cur.execute(q["probe_operation"], (op.namespace, op.call_id))
            row = cur.fetchone()
            weak = row is not None and row[0] == extra
        if isinstance(op, RemoveOperation) and outcome and weak is None:
            cur.execute(q["probe_operation"], (op.namespace, op.call_id))
            weak = cur.fetchone() is None
        if isinstance(op, ClaimEffectKey) and outcome and weak is None:
            weak = probe_one(cur, q, op, extra)
    return weak


def probe_batch(cur: Cursor[Any], q: Queries, prepared: Sequence[tuple[Op, Any]]) -> bool:
    """Say whether a batch sent as one ``apply_ops`` statement that got no answer landed.

    Had it landed, every op won (else the function raises and nothing lands) in one
    transaction: the first create, swap or append with rows decides. A batch of idempotent
    ops only (effect keys, operation-journal entries) landed when the store is as the batch
    leaves it, as one such op alone is judged.
    """
    for op, extra in prepared:
        if isinstance(op, (CreateCheckpoint, SwapCheckpoint)) or (
            isinstance(op, AppendEvents) and op.rows
        ):
            return probe_one(cur, q, op, extra)
    return all(probe_one(cur, q, op, extra) for op, extra in prepared)


def landed_outcome(op: Op) -> Any:
    """Return the outcome a single-op ``apply`` had if its statement landed."""
    if isinstance(op, CreateCheckpoint):
        return (True, op.record)
    if isinstance(op, WriteOperation):
        return None
    return True


def probe_one(cur: Cursor[Any], q: Queries, op: Op, extra: Any) -> bool:
    """Say whether a single-op statement that got no answer landed (``False``: it did not)."""
    return _PROBES[type(op)](cur, q, op, extra)


def _probe_create(
    cur: Cursor[Any], q: Queries, op: CreateCheckpoint, prepared: tuple[str, str]
) -> bool:
    return _history_is(cur, q, op.record, 0, prepared[0])


def _probe_swap(
    cur: Cursor[Any], q: Queries, op: SwapCheckpoint, prepared: tuple[str, str, Any]
) -> bool:
    return _history_is(cur, q, op.next, op.next.revision, prepared[0])


def _probe_append(cur: Cursor[Any], q: Queries, op: AppendEvents, _extra: None) -> bool:
    if not op.rows:
        return False  # it wrote nothing either way: run it again
    last = op.rows[-1]
    cur.execute(q["probe_event"], (last.run_id, last.seq))
    row = cur.fetchone()
    return row is not None and row[0] == last.hash


# Effect-key ops are idempotent: "landed" when the key is in the state the op leaves it in.
def _probe_claim(cur: Cursor[Any], q: Queries, op: ClaimEffectKey, _stamp: str) -> bool:
    cur.execute(q["effect_holder"], (op.namespace, op.key))
    row = cur.fetchone()
    return row is not None and row[0] == op.call_id


def _probe_release(cur: Cursor[Any], q: Queries, op: ReleaseEffectKey, _extra: None) -> bool:
    cur.execute(q["effect_holder"], (op.namespace, op.key))
    row = cur.fetchone()
    return row is None or row[0] != op.call_id


def _probe_write(cur: Cursor[Any], q: Queries, op: WriteOperation, extra: str) -> bool:
    cur.execute(q["probe_operation"], (op.namespace, op.call_id))
    row = cur.fetchone()
    return row is not None and row[0] == extra


def _probe_remove(cur: Cursor[Any], q: Queries, op: RemoveOperation, _extra: None) -> bool:
    cur.execute(q["probe_operation"], (op.namespace, op.call_id))
    return cur.fetchone() is None  # the entry is gone (ours or an equal one's doing)


#: How to tell whether each op type's unanswered statement landed (``probe_one``).
_PROBES: dict[type[Any], Callable[[Cursor[Any], Queries, Any, Any], bool]] = op_table(
    "PostgreSQL probes",
    {
        CreateCheckpoint: _probe_create,
        SwapCheckpoint: _probe_swap,
        WriteOperation: _probe_write,
        RemoveOperation: _probe_remove,
        ClaimEffectKey: _probe_claim,
        ReleaseEffectKey: _probe_release,
        AppendEvents: _probe_append,
    },
)


def _history_is(
    cur: Cursor[Any], q: Queries, rec: CheckpointRecord, revision: int, text: str
) -> bool:
    ns, cid = rec.key
    cur.execute(q["probe_history"], (ns, cid, revision))
    row = cur.fetchone()
    return row is not None and row[0] == text
