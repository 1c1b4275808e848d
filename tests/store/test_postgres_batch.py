"""PostgresStore's one-statement batches (``apply_ops``): same rows as op by op, migrations."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg import sql

from toolledger.checkpoint import (
    Binding,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import postgres
from toolledger.store.base import (
    AppendEvents,
    ClaimEffectKey,
    CreateCheckpoint,
    EventRow,
    RemoveOperation,
    RunRow,
    SwapCheckpoint,
    WriteOperation,
)
from toolledger.store.postgres import PostgresStore

from .._pg_dsn import pg_dsn_or_skip

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def schemas() -> Iterator[Callable[[], str]]:
    dsn = pg_dsn_or_skip()
    made: list[str] = []

    def make() -> str:
        made.append(f"tl_pgbatch_{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _binding(call_id: str) -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"to": call_id}))


def _event(seq: int, data: str) -> EventRow:
    return EventRow(
        run_id="r1",
        seq=seq,
        event_id=f"e{seq}",
        parent_id=None if seq == 0 else "e0",
        kind="tool_call",
        name="send_email",
        status="completed",
        at="2026-01-01T00:00:00.000000+00:00",
        prev_hash=None if seq == 0 else f"h{seq - 1}",
        hash=f"h{seq}",
        data=data,
    )


def _run(store: PostgresStore) -> None:
    store.create_run(
        RunRow(
            run_id="r1",
            namespace="ns",
            agent=None,
            goal="g",
            status="running",
            started_at="2026-01-01T00:00:00.000000Z",
        )
    )


# Texts JSON would escape: quotes, backslashes, escapes, non-ASCII, a lone "\u" sequence.
_DATA = json.dumps({"q": 'a "quoted" \\ back\\slash', "u": "é 中 \U0001f600", "e": "\\u0041"})


def _lifecycle_batches() -> list[list[Any]]:
    rec = create_checkpoint(_binding("c1"), at=T0)
    claim = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1))
    done = complete_execution(
        claim.next, attempt_id="a1", at=T0 + timedelta(seconds=2), result={"t": _DATA}
    )
    key = fingerprint({"tool": "send_email", "key": "k"})
    return [
        [
            ClaimEffectKey("ns", key, "c1"),
            CreateCheckpoint(rec, requires=0),
            SwapCheckpoint(0, claim.next, requires=0),
            WriteOperation("ns", "c1", {"order": _DATA}),
            AppendEvents("r1", [_event(0, _DATA)], expected_count=0, requires=2),
        ],
        [
            SwapCheckpoint(1, done.next),
            RemoveOperation("ns", "c1"),
            AppendEvents("r1", [_event(1, "{}"), _event(2, _DATA)], expected_count=1),
            AppendEvents("r1", [], expected_count=3),
        ],
    ]


_TABLES = {
    "checkpoints": "namespace, call_id, status, revision, tool_name, updated_at, record",
    "checkpoint_history": "namespace, call_id, revision, status, transition, action, at, record",
    "operation_journal": "namespace, call_id, data",
    "effect_keys": "namespace, effect_key, call_id",
    "runs": "run_id, event_count, head_hash",
    "events": "run_id, seq, event_id, parent_id, kind, name, status, at, prev_hash, hash, data",
    "event_search": "run_id, seq, event_id, tsv::text",
}


def _rows(schema: str) -> dict[str, list[Any]]:
    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        return {
            table: conn.execute(
                sql.SQL("SELECT {} FROM {}.{} ORDER BY 1, 2, 3").format(
                    sql.SQL(columns), sql.Identifier(schema), sql.Identifier(table)
                )
            ).fetchall()
            for table, columns in _TABLES.items()
        }


def test_batch_statement_writes_the_rows_op_by_op_writes(schemas: Callable[[], str]) -> None:
    """A winning batch in one statement stores byte for byte what its ops store one by one."""
    dsn = pg_dsn_or_skip()
    whole, single = schemas(), schemas()
    with PostgresStore(dsn, schema=whole) as a, PostgresStore(dsn, schema=single) as b:
        _run(a)
        _run(b)
        for batch in _lifecycle_batches():
            together = a.apply(batch)
            # One op per apply runs the op-by-op statements (each its own transaction).
            alone = [b.apply([op.__class__(**_ungated(op))])[0] for op in batch]
            assert together == alone
        assert a.history("ns", "c1") == b.history("ns", "c1")
        assert a.read_events("r1") == b.read_events("r1")
    assert _rows(whole) == _rows(single)
    assert len(_rows(whole)["events"]) == 3


def _ungated(op: Any) -> dict[str, Any]:
    fields = {name: getattr(op, name) for name in op.__dataclass_fields__}
    if "requires" in fields:
        fields["requires"] = None  # alone, there is no earlier op to gate on
    return fields


def test_batch_that_loses_midway_keeps_nothing_of_the_fast_attempt(
    schemas: Callable[[], str],
) -> None:
    """A lost CAS after a winning create: the op-by-op answers, the create stored once."""
    with PostgresStore(pg_dsn_or_skip(), schema=schemas()) as store:
        _run(store)
        first = create_checkpoint(_binding("c1"), at=T0)
        won = claim_execution(first, attempt_id="a1", at=T0 + timedelta(seconds=1))
        assert store.apply([CreateCheckpoint(first), SwapCheckpoint(0, won.next)])[1] is True
        other = create_checkpoint(_binding("c2"), at=T0)
        stale = claim_execution(first, attempt_id="a2", at=T0 + timedelta(seconds=2))
        out = store.apply(
            [
                CreateCheckpoint(other),
                SwapCheckpoint(0, stale.next),  # c1 is at revision 1 now: lost
                AppendEvents("r1", [_event(0, "{}")], expected_count=0, requires=1),
                AppendEvents("r1", [_event(0, "{}")], expected_count=0),
            ]
        )
        assert out == [(True, other), False, False, True]
        assert [h.transition for h in store.history("ns", "c2")] == ["create_checkpoint"]
        assert store.get("ns", "c1") == won.next
        assert [e.seq for e in store.read_events("r1")] == [0]


@pytest.mark.parametrize("missing", ["apply_ops_function", "apply_ops_fused_claim"])
def test_schema_of_the_previous_version_migrates_and_batches(
    schemas: Callable[[], str], monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """A database made before the batch function (or its current version) gains it on
    open; its rows stay readable, and a create with its claim lands as op by op."""
    dsn = pg_dsn_or_skip()
    name = schemas()
    (version,) = [v for v, n, _ in postgres.MIGRATIONS if n == missing]
    before = [m for m in postgres.MIGRATIONS if m[0] < version]
    rec = create_checkpoint(_binding("c1"), at=T0)
    with monkeypatch.context() as patch:
        patch.setattr(postgres, "MIGRATIONS", before)
        patch.setattr(postgres, "LATEST_VERSION", before[-1][0])
        with PostgresStore(dsn, schema=name) as old:
            assert old.create_if_absent(rec) == (True, rec)
            assert [v for v, _ in old.applied_migrations()] == [v for v, _, _ in before]
    with PostgresStore(dsn, schema=name) as store:
        assert store.applied_migrations() == [(v, n) for v, n, _ in postgres.MIGRATIONS]
        assert store.get("ns", "c1") == rec
        claim = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1))
        assert store.apply([SwapCheckpoint(0, claim.next), RemoveOperation("ns", "c1")]) == [
            True,
            False,
        ]
        assert store.get("ns", "c1") == claim.next
        fresh = create_checkpoint(_binding("c2"), at=T0)
        claimed = claim_execution(fresh, attempt_id="a2", at=T0 + timedelta(seconds=1))
        out = store.apply([CreateCheckpoint(fresh), SwapCheckpoint(0, claimed.next)])
        assert out == [(True, fresh), True]
        assert [h.record for h in store.history("ns", "c2")] == [fresh, claimed.next]


def test_batch_gated_on_an_operation_write_is_never_run(schemas: Callable[[], str]) -> None:
    """An operation-journal write never wins a gate (its outcome is None): nothing appended."""
    with PostgresStore(pg_dsn_or_skip(), schema=schemas()) as store:
        _run(store)
        out = store.apply(
            [
                WriteOperation("ns", "c1", {"order": 1}),
                AppendEvents("r1", [_event(0, "{}")], expected_count=0, requires=0),
            ]
        )
        assert out == [None, False]
        assert store.read_events("r1") == []
        assert store.operation_read("ns", "c1") == {"order": 1}


def test_create_with_its_claim_writes_the_claimed_row_once(schemas: Callable[[], str]) -> None:
    """A create and the claim after it are one insert of the claimed row (no update: the
    row is the table's first tuple), with both history rows, as op by op stores them."""
    dsn = pg_dsn_or_skip()
    name = schemas()
    rec = create_checkpoint(_binding("c1"), at=T0)
    claim = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1))
    with PostgresStore(dsn, schema=name) as store:
        assert store.apply([CreateCheckpoint(rec), SwapCheckpoint(0, claim.next)]) == [
            (True, rec),
            True,
        ]
        assert store.get("ns", "c1") == claim.next
        assert [(h.revision, h.transition) for h in store.history("ns", "c1")] == [
            (0, "create_checkpoint"),
            (1, "claim_execution"),
        ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT ctid::text FROM {}.checkpoints").format(sql.Identifier(name))
        assert conn.execute(query).fetchall() == [("(0,1)",)]
