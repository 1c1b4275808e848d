"""A whole ``apply`` batch as one statement: the ``apply_ops`` server function, both sides.

Rules this module keeps:

- ``FUNCTION`` (created by a migration) runs a batch's ops in order, inside the caller's
  transaction, exactly as ``_pg_ops.execute_op`` would *when every op wins*: a create that
  inserts, a CAS that swaps along a legal edge, a free effect key, an append whose count
  lines up, and every gate (``requires``) won. Anything else raises ``SLOW_SQLSTATE``
  (nothing it wrote survives: the transaction is rolled back) and the caller runs the
  batch op by op, whose statements tell every losing case apart. So the function never
  decides an outcome the op-by-op path would decide differently; it only skips the
  round trips.
- It knows no transition: each swap carries the legal edges into its target
  (``{source: [transition, action]}``, from ``checkpoint.transitions.TRANSITIONS``), so
  the table in Python stays the only one.
- A batch whose outcomes all follow from its landing (``landed_outcomes``) is sent as
  one autocommit statement (its own implicit transaction, all or nothing), so a call
  that got no answer is read back like a one-op statement; others run in ``BEGIN`` …
  ``COMMIT`` (the function's answer then comes before the commit).
- Texts travel as JSON strings inside one ``jsonb`` parameter: records, event data and
  times come out byte for byte (a JSON string decodes to exactly its text).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..checkpoint.transitions import TRANSITIONS
from ._pg_search import event_index_params
from ._rows import op_table
from ._sqlcommon import now_text
from .base import (
    EVENT_FIELDS,
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
    "CALL",
    "FUNCTION",
    "FUNCTION_6",
    "FUNCTION_7",
    "SLOW_SQLSTATE",
    "encode_ops",
    "fits",
    "landed_outcomes",
    "outcomes",
]

#: The SQLSTATE ``apply_ops`` raises when an op did not win (run the batch op by op).
SLOW_SQLSTATE = "TL001"

#: The statement that runs a batch (``{s}``: the schema).
CALL = "SELECT {s}.apply_ops(%s::jsonb)"

#: Migration 6's function, as it was applied (migrations are never edited; 7 replaces it).
FUNCTION_6 = """
CREATE OR REPLACE FUNCTION {s}.apply_ops(ops jsonb) RETURNS int[]
LANGUAGE plpgsql AS $fn$
DECLARE
    op jsonb;
    kind text;
    done int[] := ARRAY[]::int[];
    n bigint;
    req int;
    old text;
    edge jsonb;
BEGIN
    FOR op IN SELECT value FROM jsonb_array_elements(ops) WITH ORDINALITY ORDER BY ordinality
    LOOP
        req := (op->>'req')::int;
        IF req IS NOT NULL AND done[req + 1] = 0 THEN
            RAISE EXCEPTION 'toolledger: a gate did not win' USING ERRCODE = 'TL001';
        END IF;
        kind := op->>'k';
        IF kind = 'create' THEN
            PERFORM 1 FROM {s}.tombstones
                WHERE namespace = op->>'ns' AND call_id = op->>'cid';
            IF FOUND THEN
                RAISE EXCEPTION 'toolledger: tombstoned' USING ERRCODE = 'TL001';
            END IF;
            INSERT INTO {s}.checkpoints
                (namespace, call_id, status, revision, tool_name, updated_at, record)
                VALUES (op->>'ns', op->>'cid', 'ready', 0, op->>'tool', op->>'at', op->>'rec')
                ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: the key exists' USING ERRCODE = 'TL001';
            END IF;
            INSERT INTO {s}.checkpoint_history
                (namespace, call_id, revision, status, transition, action, at, record)
                VALUES (op->>'ns', op->>'cid', 0, 'ready', 'create_checkpoint', 'execute',
                    op->>'at', op->>'rec');
            done := done || 1;
        ELSIF kind = 'swap' THEN
            SELECT status INTO old FROM {s}.checkpoints
                WHERE namespace = op->>'ns' AND call_id = op->>'cid'
                AND revision = (op->>'exp')::bigint
                FOR UPDATE;
            edge := CASE WHEN FOUND THEN op->'edges'->old END;
            IF edge IS NULL THEN
                RAISE EXCEPTION 'toolledger: CAS lost or no edge' USING ERRCODE = 'TL001';
            END IF;
            UPDATE {s}.checkpoints SET status = op->>'status', revision = (op->>'rev')::bigint,
                    updated_at = op->>'at', record = op->>'rec'
                WHERE namespace = op->>'ns' AND call_id = op->>'cid'
                AND revision = (op->>'exp')::bigint;
            INSERT INTO {s}.checkpoint_history
                (namespace, call_id, revision, status, transition, action, at, record)
                VALUES (op->>'ns', op->>'cid', (op->>'rev')::bigint, op->>'status',
                    edge->>0, edge->>1, op->>'at', op->>'rec');
            done := done || 1;
        ELSIF kind = 'op_write' THEN
            INSERT INTO {s}.operation_journal (namespace, call_id, data, written_at)
                VALUES (op->>'ns', op->>'cid', op->>'data', op->>'at')
                ON CONFLICT (namespace, call_id)
                DO UPDATE SET data = EXCLUDED.data, written_at = EXCLUDED.written_at;
            done := done || 1;
        ELSIF kind = 'op_remove' THEN
            DELETE FROM {s}.operation_journal
                WHERE namespace = op->>'ns' AND call_id = op->>'cid';
            GET DIAGNOSTICS n = ROW_COUNT;
            done := done || n::int;
        ELSIF kind = 'key_claim' THEN
            INSERT INTO {s}.effect_keys (namespace, effect_key, call_id, claimed_at)
                VALUES (op->>'ns', op->>'key', op->>'cid', op->>'at') ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: the key is held' USING ERRCODE = 'TL001';
            END IF;
            done := done || 1;
        ELSIF kind = 'key_release' THEN
            DELETE FROM {s}.effect_keys
                WHERE namespace = op->>'ns' AND effect_key = op->>'key'
                AND call_id = op->>'cid';
            GET DIAGNOSTICS n = ROW_COUNT;
            done := done || n::int;
        ELSIF kind = 'count' THEN
            SELECT event_count INTO n FROM {s}.runs WHERE run_id = op->>'rid';
            IF NOT FOUND THEN
                RAISE EXCEPTION 'toolledger: no such run' USING ERRCODE = 'TL001';
            END IF;
            done := done || (n = (op->>'exp')::bigint)::int;
        ELSIF kind = 'append' THEN
            UPDATE {s}.runs SET event_count = (op->>'new')::bigint, head_hash = op->>'head'
                WHERE run_id = op->>'rid' AND event_count = (op->>'exp')::bigint;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: the count moved' USING ERRCODE = 'TL001';
            END IF;
            INSERT INTO {s}.events (run_id, seq, event_id, parent_id, kind, name, status, at,
                    prev_hash, hash, data)
                SELECT e.run_id, e.seq, e.event_id, e.parent_id, e.kind, e.name, e.status,
                    e.at, e.prev_hash, e.hash, e.data
                FROM jsonb_to_recordset(op->'rows') AS e(run_id text, seq bigint,
                    event_id text, parent_id text, kind text, name text, status text, at text,
                    prev_hash text, hash text, data text);
            INSERT INTO {s}.event_search (run_id, seq, event_id, tsv)
                SELECT t.run_id, t.seq, t.event_id, to_tsvector('simple', t.body)
                FROM jsonb_to_recordset(op->'index') AS t(run_id text, seq bigint,
                    event_id text, body text)
                ON CONFLICT (run_id, seq)
                DO UPDATE SET tsv = EXCLUDED.tsv, event_id = EXCLUDED.event_id;
            done := done || 1;
        ELSE
            RAISE EXCEPTION 'toolledger: unknown op %', kind;
        END IF;
    END LOOP;
    RETURN done;
END
$fn$
"""

#: The migration step (version 7) creating the function (``{s}``: the schema): each op is
#: one statement, and a create with the claim that follows it (``then``) inserts the
#: claimed row at once, with both history rows (the rows op by op writes, without the
#: update).
FUNCTION_7 = """
CREATE OR REPLACE FUNCTION {s}.apply_ops(ops jsonb) RETURNS int[]
LANGUAGE plpgsql AS $fn$
DECLARE
    op jsonb;
    nxt jsonb;
    kind text;
    done int[] := ARRAY[]::int[];
    n bigint;
    req int;
BEGIN
    FOR op IN SELECT value FROM jsonb_array_elements(ops) WITH ORDINALITY ORDER BY ordinality
    LOOP
        req := (op->>'req')::int;
        IF req IS NOT NULL AND done[req + 1] = 0 THEN
            RAISE EXCEPTION 'toolledger: a gate did not win' USING ERRCODE = 'TL001';
        END IF;
        kind := op->>'k';
        IF kind = 'create' THEN
            nxt := coalesce(op->'then', op);
            WITH ins AS (
                INSERT INTO {s}.checkpoints
                    (namespace, call_id, status, revision, tool_name, updated_at, record)
                SELECT op->>'ns', op->>'cid', coalesce(nxt->>'status', 'ready'),
                    coalesce((nxt->>'rev')::bigint, 0), op->>'tool', nxt->>'at', nxt->>'rec'
                WHERE NOT EXISTS (SELECT 1 FROM {s}.tombstones
                    WHERE namespace = op->>'ns' AND call_id = op->>'cid')
                ON CONFLICT DO NOTHING RETURNING 1
            )
            INSERT INTO {s}.checkpoint_history
                (namespace, call_id, revision, status, transition, action, at, record)
            SELECT op->>'ns', op->>'cid', 0, 'ready', 'create_checkpoint', 'execute',
                op->>'at', op->>'rec' FROM ins
            UNION ALL
            SELECT op->>'ns', op->>'cid', (nxt->>'rev')::bigint, nxt->>'status',
                nxt->'edge'->>0, nxt->'edge'->>1, nxt->>'at', nxt->>'rec'
                FROM ins WHERE op ? 'then';
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n = 0 THEN
                RAISE EXCEPTION 'toolledger: the key exists' USING ERRCODE = 'TL001';
            END IF;
            done := done || 1;
            IF op ? 'then' THEN
                done := done || 1;
            END IF;
        ELSIF kind = 'swap' THEN
            WITH o AS (
                SELECT status FROM {s}.checkpoints
                WHERE namespace = op->>'ns' AND call_id = op->>'cid'
                AND revision = (op->>'exp')::bigint
            ), u AS (
                UPDATE {s}.checkpoints c SET status = op->>'status',
                    revision = (op->>'rev')::bigint, updated_at = op->>'at', record = op->>'rec'
                FROM o
                WHERE c.namespace = op->>'ns' AND c.call_id = op->>'cid'
                AND c.revision = (op->>'exp')::bigint AND op->'edges' ? o.status
                RETURNING op->'edges'->o.status AS edge
            )
            INSERT INTO {s}.checkpoint_history
                (namespace, call_id, revision, status, transition, action, at, record)
            SELECT op->>'ns', op->>'cid', (op->>'rev')::bigint, op->>'status',
                u.edge->>0, u.edge->>1, op->>'at', op->>'rec' FROM u;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: CAS lost or no edge' USING ERRCODE = 'TL001';
            END IF;
            done := done || 1;
        ELSIF kind = 'op_write' THEN
            INSERT INTO {s}.operation_journal (namespace, call_id, data, written_at)
                VALUES (op->>'ns', op->>'cid', op->>'data', op->>'at')
                ON CONFLICT (namespace, call_id)
                DO UPDATE SET data = EXCLUDED.data, written_at = EXCLUDED.written_at;
            done := done || 1;
        ELSIF kind = 'op_remove' THEN
            DELETE FROM {s}.operation_journal
                WHERE namespace = op->>'ns' AND call_id = op->>'cid';
            GET DIAGNOSTICS n = ROW_COUNT;
            done := done || n::int;
        ELSIF kind = 'key_claim' THEN
            INSERT INTO {s}.effect_keys (namespace, effect_key, call_id, claimed_at)
                VALUES (op->>'ns', op->>'key', op->>'cid', op->>'at') ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: the key is held' USING ERRCODE = 'TL001';
            END IF;
            done := done || 1;
        ELSIF kind = 'key_release' THEN
            DELETE FROM {s}.effect_keys
                WHERE namespace = op->>'ns' AND effect_key = op->>'key'
                AND call_id = op->>'cid';
            GET DIAGNOSTICS n = ROW_COUNT;
            done := done || n::int;
        ELSIF kind = 'count' THEN
            SELECT event_count INTO n FROM {s}.runs WHERE run_id = op->>'rid';
            IF NOT FOUND THEN
                RAISE EXCEPTION 'toolledger: no such run' USING ERRCODE = 'TL001';
            END IF;
            done := done || (n = (op->>'exp')::bigint)::int;
        ELSIF kind = 'append' THEN
            WITH r AS (
                UPDATE {s}.runs SET event_count = (op->>'new')::bigint, head_hash = op->>'head'
                WHERE run_id = op->>'rid' AND event_count = (op->>'exp')::bigint
                RETURNING 1
            ), ev AS (
                INSERT INTO {s}.events (run_id, seq, event_id, parent_id, kind, name, status,
                    at, prev_hash, hash, data)
                SELECT e.run_id, e.seq, e.event_id, e.parent_id, e.kind, e.name, e.status,
                    e.at, e.prev_hash, e.hash, e.data
                FROM jsonb_to_recordset(op->'rows') AS e(run_id text, seq bigint,
                    event_id text, parent_id text, kind text, name text, status text,
                    at text, prev_hash text, hash text, data text)
                WHERE EXISTS (SELECT 1 FROM r)
            ), ix AS (
                INSERT INTO {s}.event_search (run_id, seq, event_id, tsv)
                SELECT t.run_id, t.seq, t.event_id, to_tsvector('simple', t.body)
                FROM jsonb_to_recordset(op->'index') AS t(run_id text, seq bigint,
                    event_id text, body text)
                WHERE EXISTS (SELECT 1 FROM r)
                ON CONFLICT (run_id, seq)
                DO UPDATE SET tsv = EXCLUDED.tsv, event_id = EXCLUDED.event_id
            )
            SELECT count(*) INTO n FROM r;
            IF n <> 1 THEN
                RAISE EXCEPTION 'toolledger: the count moved' USING ERRCODE = 'TL001';
            END IF;
            done := done || 1;
        ELSE
            RAISE EXCEPTION 'toolledger: unknown op %', kind;
        END IF;
    END LOOP;
    RETURN done;
END
$fn$
"""

#: The migration step (version 8) creating the current function: ``FUNCTION_7`` with each
#: record's index given as a ``tsvector`` literal (``_search.tsvector_text``), never parsed.
FUNCTION = FUNCTION_7.replace("to_tsvector('simple', t.body)", "t.body::tsvector")
assert FUNCTION != FUNCTION_7

# The legal edges into each target: {target: {source: [transition, action]}}.
# A record carrying a person's resolution takes the decision rules' edges (_DECISION_EDGES).
_EDGES: dict[str, dict[str, list[str]]] = {}
_DECISION_EDGES: dict[str, dict[str, list[str]]] = {}
for _name, _rule in TRANSITIONS.items():
    for _source in _rule.sources:
        _edges = _DECISION_EDGES if _rule.decision else _EDGES
        _into = _edges.setdefault(_rule.target.value, {})
        assert _source.value not in _into, "one transition per (source, target) of a kind"
        _into[_source.value] = [_name, _rule.action.value]


def fits(prepared: Sequence[tuple[Op, Any]]) -> bool:
    """Whether ``apply_ops`` can run the batch (else it runs op by op).

    A gate on an operation-journal write is never won (its outcome is ``None``), which the
    function does not know: such a batch goes op by op.
    """
    for op, _ in prepared:
        requires = getattr(op, "requires", None)
        if requires is not None and isinstance(prepared[requires][0], WriteOperation):
            return False
    return True


def landed_outcomes(prepared: Sequence[tuple[Op, Any]]) -> list[Any] | None:
    """The outcomes of a batch that ``fits``, had its ``apply_ops`` call landed, or ``None``.

    Landed means every op won, which gives every outcome (a removal or a release: the
    entry is gone, as for one such op alone) except a row-less append's (a count
    comparison, written nowhere): such a batch has ``None`` and runs in ``BEGIN`` …
    ``COMMIT``, where the function's answer comes before the commit.
    """
    out: list[Any] = []
    for op, _ in prepared:
        if isinstance(op, CreateCheckpoint):
            out.append((True, op.record))
        elif isinstance(op, WriteOperation):
            out.append(None)
        elif isinstance(op, AppendEvents) and not op.rows:
            return None
        else:
            out.append(True)
    return out


def encode_ops(prepared: Sequence[tuple[Op, Any]]) -> str:
    """Return the ``apply_ops`` argument (JSON text) of a prepared batch (one that ``fits``)."""
    out: list[dict[str, Any]] = []
    fused = False
    for i, (op, extra) in enumerate(prepared):
        if fused:  # the claim went with its create
            fused = False
            continue
        item = _ENCODERS[type(op)](op, extra)
        if type(op) is CreateCheckpoint:
            then = _fused_claim(prepared, i)
            if then is not None:
                item["then"] = then
                fused = True
        requires = getattr(op, "requires", None)
        if requires is not None:
            item["req"] = requires
        out.append(item)
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _create(op: CreateCheckpoint, prepared: tuple[str, str]) -> dict[str, Any]:
    rec = op.record
    extra, at = prepared
    return {
        "k": "create",
        "ns": rec.binding.namespace,
        "cid": rec.binding.call_id,
        "tool": rec.binding.tool_name,
        "at": at,
        "rec": extra,
    }


def _swap(op: SwapCheckpoint, prepared: tuple[str, str, Any]) -> dict[str, Any]:
    extra, at, _prior = prepared
    nxt = op.next
    return {
        "k": "swap",
        "ns": nxt.binding.namespace,
        "cid": nxt.binding.call_id,
        "exp": op.expected_revision,
        "rev": nxt.revision,
        "status": nxt.status.value,
        "at": at,
        "rec": extra,
        "edges": (_EDGES if nxt.resolution is None else _DECISION_EDGES).get(nxt.status.value, {}),
    }


def _write_operation(op: WriteOperation, extra: str) -> dict[str, Any]:
    return {"k": "op_write", "ns": op.namespace, "cid": op.call_id, "data": extra, "at": now_text()}


def _remove_operation(op: RemoveOperation, _extra: None) -> dict[str, Any]:
    return {"k": "op_remove", "ns": op.namespace, "cid": op.call_id}


def _effect_key(
    kind: str, op: ClaimEffectKey | ReleaseEffectKey, stamp: str | None
) -> dict[str, Any]:
    """A claim's item carries the batch's stamp (``claimed_at``); a release has none."""
    return {"k": kind, "ns": op.namespace, "key": op.key, "cid": op.call_id, "at": stamp}


def _fused_claim(prepared: Sequence[tuple[Op, Any]], i: int) -> dict[str, Any] | None:
    """The ``then`` of the create at ``i`` when the op after it claims what it creates.

    That swap (from revision 0, of the same key, along a legal edge from ``ready``, gated
    on nothing but the create or the create's own gate) wins exactly when the create does,
    so one insert of the claimed row stands for both (the function's answer stays one
    flag per op).
    """
    if i + 1 >= len(prepared):
        return None
    create, (swap, swapped) = prepared[i][0], prepared[i + 1]
    assert isinstance(create, CreateCheckpoint)
    if not isinstance(swap, SwapCheckpoint) or swap.expected_revision != 0:
        return None
    text, at, _prior = swapped
    nxt = swap.next
    edge = _EDGES.get(nxt.status.value, {}).get("ready")
    if (
        edge is None
        or nxt.key != create.record.key
        or swap.requires not in (None, i, create.requires)
    ):
        return None
    return {
        "rev": nxt.revision,
        "status": nxt.status.value,
        "at": at,
        "rec": text,
        "edge": edge,
    }


def _append(op: AppendEvents, _extra: None) -> dict[str, Any]:
    if not op.rows:
        return {"k": "count", "rid": op.run_id, "exp": op.expected_count}
    runs, seqs, ids, bodies = event_index_params(
        (r.run_id, r.seq, r.event_id, r.name, r.data) for r in op.rows
    )
    return {
        "k": "append",
        "rid": op.run_id,
        "exp": op.expected_count,
        "new": op.expected_count + len(op.rows),
        "head": op.rows[-1].hash,
        "rows": [{k: getattr(r, k) for k in EVENT_FIELDS} for r in op.rows],
        "index": [
            {"run_id": a, "seq": b, "event_id": c, "body": d}
            for a, b, c, d in zip(runs, seqs, ids, bodies, strict=True)
        ],
    }


#: The ``apply_ops`` item of each op type (``encode_ops``).
_ENCODERS: dict[type[Any], Callable[[Any, Any], dict[str, Any]]] = op_table(
    "PostgreSQL batch",
    {
        CreateCheckpoint: _create,
        SwapCheckpoint: _swap,
        WriteOperation: _write_operation,
        RemoveOperation: _remove_operation,
        ClaimEffectKey: partial(_effect_key, "key_claim"),
        ReleaseEffectKey: partial(_effect_key, "key_release"),
        AppendEvents: _append,
    },
)


def outcomes(prepared: Sequence[tuple[Op, Any]], done: Sequence[int]) -> list[Any]:
    """Return the batch's ``apply`` outcomes from what ``apply_ops`` returned."""
    out: list[Any] = []
    for (op, _), flag in zip(prepared, done, strict=True):
        if isinstance(op, CreateCheckpoint):
            out.append((True, op.record))
        elif isinstance(op, WriteOperation):
            out.append(None)
        else:
            out.append(bool(flag))
    return out
