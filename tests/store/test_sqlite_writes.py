"""SQLite's fused write of a new call's claim: the outcomes, rows and history of each op alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    CheckpointRecord,
    claim_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore
from toolledger.store.base import ClaimEffectKey, CreateCheckpoint, Op, SwapCheckpoint

from .._internals import build_tombstone

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
KEY = "sha256:" + "ab" * 32


def _ops(call_id: str, **swap: Any) -> tuple[CheckpointRecord, list[Any]]:
    rec = create_checkpoint(Binding("ns", call_id, "send", "1", fingerprint({})), at=T0)
    claimed = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1)).next
    return rec, [CreateCheckpoint(rec), SwapCheckpoint(0, claimed, **swap)]


def _one_by_one(store: SQLiteStore, ops: list[Op]) -> list[Any]:
    """The outcomes of running each op in its own apply (the unfused statements)."""
    return [store.apply([op])[0] for op in ops]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteStore]]:
    fused, plain = SQLiteStore(tmp_path / "fused.db"), SQLiteStore(tmp_path / "plain.db")
    yield fused, plain
    fused.close()
    plain.close()


class TestCreateAndClaim:
    def test_create_and_claim_stores_what_the_ops_one_by_one_store(
        self, stores: tuple[SQLiteStore, SQLiteStore]
    ) -> None:
        """One apply of create + claim: same outcomes, record and history as two applies."""
        fused, plain = stores
        rec, ops = _ops("c1")
        assert fused.apply(ops) == _one_by_one(plain, ops) == [(True, rec), True]
        assert fused.get("ns", "c1") == plain.get("ns", "c1")
        assert fused.history("ns", "c1") == plain.history("ns", "c1")
        assert [h.transition for h in fused.history("ns", "c1")] == [
            "create_checkpoint",
            "claim_execution",
        ]

    def test_create_and_claim_is_two_statements(self, tmp_path: Path) -> None:
        """The claim writes the row once and both history rows in one insert."""
        store = SQLiteStore(tmp_path / "s.db")
        try:
            _, ops = _ops("c1")
            store.apply(ops)  # warm the connection
            _, ops = _ops("c2")
            seen: list[str] = []
            store._conn().set_trace_callback(seen.append)
            store.apply(ops)
            store._conn().set_trace_callback(None)
            assert [s.split(" (")[0] for s in seen[1:-1]] == [
                "INSERT OR IGNORE INTO checkpoints",
                "INSERT INTO checkpoint_history",
            ]
        finally:
            store.close()

    def test_existing_key_is_not_created_and_the_swap_runs_as_alone(
        self, stores: tuple[SQLiteStore, SQLiteStore]
    ) -> None:
        """A stored key refuses the create; the swap then behaves as it does alone."""
        fused, plain = stores
        for store in stores:
            store.apply(_ops("c1")[1][:1])
        rec, ops = _ops("c1")
        got = fused.apply(ops)
        assert got == _one_by_one(plain, ops)
        assert got[0] == (False, rec)
        assert fused.history("ns", "c1") == plain.history("ns", "c1")

    def test_a_gated_swap_is_not_fused_past_a_lost_claim(
        self, stores: tuple[SQLiteStore, SQLiteStore]
    ) -> None:
        """Create + claim gated on an effect key another call holds write nothing."""
        fused, _ = stores
        fused.apply([ClaimEffectKey("ns", KEY, "other")])
        _, (create, swap) = _ops("c1")
        ops: list[Op] = [
            ClaimEffectKey("ns", KEY, "c1"),
            CreateCheckpoint(create.record, requires=0),
            SwapCheckpoint(0, swap.next, requires=0),
        ]
        assert fused.apply(ops) == [False, False, False]
        assert fused.get("ns", "c1") is None
        assert fused.history("ns", "c1") == []

    def test_a_swap_gated_on_the_create_is_fused(
        self, stores: tuple[SQLiteStore, SQLiteStore]
    ) -> None:
        """A swap requiring the create's win takes the fused write, same outcome."""
        fused, plain = stores
        rec, (create, swap) = _ops("c1")
        ops: list[Op] = [create, SwapCheckpoint(0, swap.next, requires=0)]
        assert fused.apply(ops) == _one_by_one(plain, [create, swap]) == [(True, rec), True]
        assert fused.history("ns", "c1") == plain.history("ns", "c1")

    def test_tombstoned_key_refuses_the_fused_claim(
        self, stores: tuple[SQLiteStore, SQLiteStore]
    ) -> None:
        """A tombstone on the key is TOMBSTONED, and the whole batch writes nothing."""
        fused, _ = stores
        rec, ops = _ops("c1")
        tomb = build_tombstone(
            rec,
            stored_json="{}",
            transitions=["create_checkpoint"],
            operation_json=None,
            erased_at=T0,
            reason="test",
        )
        assert fused.add_tombstone(tomb)
        with pytest.raises(tl.CheckpointError) as info:
            fused.apply(ops)
        assert info.value.code == "TOMBSTONED"
        assert fused.get("ns", "c1") is None
        assert fused.history("ns", "c1") == []


def test_new_call_reads_checkpoint_and_approval_in_one_statement(tmp_path: Path) -> None:
    """On SQLite an ungated new call's first read is one statement for both rows."""
    store = SQLiteStore(tmp_path / "ledger.db", durability="normal")
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: {"ok": True})
    try:
        with tl.run("refund", db=store) as run:
            run.call(tool, call_id="warm", input={"to": "ana@example.com"})
            statements: list[str] = []
            conn = store._conn()
            conn.set_trace_callback(statements.append)
            run.call(tool, call_id="c1", input={"to": "bo@example.com"})  # another action
            conn.set_trace_callback(None)
    finally:
        store.close()
    reads = [s for s in statements if s.startswith("SELECT")]
    assert len(reads) == 1
    assert "FROM checkpoints" in reads[0]
    assert "FROM approvals" in reads[0]
