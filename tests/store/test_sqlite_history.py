"""SQLite's transition history: facts per transition, rebuilt into whole records on read."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    CheckpointRecord,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore
from toolledger.store import sqlite as sqlite_module
from toolledger.testing import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RESULT = {"message_id": "msg-0001", "note": "a result stored once"}


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _binding(call_id: str) -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"id": call_id}))


def _lifecycle(store: tl.Store, call_id: str) -> list[CheckpointRecord]:
    """Create, claim, complete, claim and complete delivery; return every revision."""
    rec = create_checkpoint(_binding(call_id), at=_at(0))
    out = [rec]
    assert store.create_if_absent(rec)[0]
    steps = [
        lambda r: claim_execution(r, attempt_id="a1", at=_at(1)),
        lambda r: complete_execution(r, attempt_id="a1", at=_at(2), result=RESULT),
        lambda r: claim_delivery(r, delivery_id="d1", at=_at(3)),
        lambda r: complete_delivery(r, delivery_id="d1", at=_at(4)),
    ]
    for step in steps:
        t = step(out[-1])
        assert store.compare_and_swap(t.expected_revision, t.next)
        out.append(t.next)
    return out


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db)
    yield s
    s.close()


def _rows(db: Path, call_id: str) -> list[tuple[int, str]]:
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute(
            "SELECT revision, record FROM checkpoint_history WHERE call_id = ? ORDER BY revision",
            (call_id,),
        ).fetchall()
    finally:
        conn.close()


def _set_row(db: Path, call_id: str, revision: int, text: str) -> None:
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:
        conn.execute(
            "UPDATE checkpoint_history SET record = ? WHERE call_id = ? AND revision = ?",
            (text, call_id, revision),
        )
    finally:
        conn.close()


class TestHistoryFacts:
    def test_history_rebuilds_every_revision_exactly(self, store: SQLiteStore) -> None:
        """Each entry's record is the record written at that revision, equal to MemoryStore's."""
        written = _lifecycle(store, "c1")
        memory = MemoryStore()
        _lifecycle(memory, "c1")
        hist = store.history("ns", "c1")
        assert [h.record for h in hist] == written
        assert hist == memory.history("ns", "c1")
        assert hist[-1].record == store.get("ns", "c1")

    def test_result_is_stored_only_where_the_transition_set_it(
        self, store: SQLiteStore, db: Path
    ) -> None:
        """The result and the binding are in one row each: completion and creation."""
        _lifecycle(store, "c1")
        rows = _rows(db, "c1")
        assert [rev for rev, text in rows if "a result stored once" in text] == [2]
        assert [rev for rev, text in rows if '"binding"' in text] == [0]
        assert all('"status"' not in text for rev, text in rows if rev > 0)

    def test_a_new_guarded_call_stores_its_claim_as_facts(
        self, store: SQLiteStore, db: Path
    ) -> None:
        """The fused create+claim writes the claim's facts, and history reads it back whole."""
        tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
        with tl.run("facts", db=store) as run:
            run.call(tool, call_id="c2", input={"id": "c2"})
        rows = _rows(db, "c2")
        assert [rev for rev, text in rows if '"binding"' in text] == [0]
        hist = store.history("default", "c2")
        assert [h.transition for h in hist] == [
            "create_checkpoint",
            "claim_execution",
            "complete_execution",
        ]
        assert hist[-1].record == store.get("default", "c2")

    def test_a_swap_to_another_binding_keeps_it_in_the_facts(self, store: SQLiteStore) -> None:
        """A CAS that changes the binding (the guard's restore) is rebuilt with that binding."""
        rec = create_checkpoint(_binding("c3"), at=_at(0))
        store.create_if_absent(rec)
        claimed = claim_execution(rec, attempt_id="a1", at=_at(1)).next
        assert store.compare_and_swap(0, claimed)
        other = Binding("ns", "c3", "send_email", "2", fingerprint({"other": True}))
        theirs = create_checkpoint(other, at=_at(0.5))
        back = dataclasses.replace(theirs, revision=2, updated_at=_at(2))
        assert store.compare_and_swap(1, back)
        assert [h.record for h in store.history("ns", "c3")] == [rec, claimed, back]

    @pytest.mark.parametrize(
        ("revision", "text"),
        [
            (2, "{not json"),
            (2, "[1, 2]"),
            (2, '{"execution_fence": 7}'),
            (2, '{"unexpected_key": 1}'),
            (0, '{"execution_fence": null}'),
        ],
    )
    def test_damaged_history_row_is_invalid_checkpoint(
        self, store: SQLiteStore, db: Path, revision: int, text: str
    ) -> None:
        """A facts row that is not JSON, not valid, or has no record before it is refused."""
        _lifecycle(store, "c4")
        _set_row(db, "c4", revision, text)
        with pytest.raises(tl.InvalidCheckpointError) as info:
            store.history("ns", "c4")
        assert info.value.code == "INVALID_CHECKPOINT"


class TestHistoryMigration:
    def test_rows_of_version_6_read_the_same_after_migration(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Whole-record rows written before migration 7 are kept, read and extended."""
        version = next(
            v for v, name, _ in sqlite_module.MIGRATIONS if name == "append_only_history"
        )
        before = sqlite_module.MIGRATIONS[: version - 1]
        monkeypatch.setattr(sqlite_module, "MIGRATIONS", before)
        monkeypatch.setattr(sqlite_module, "LATEST_VERSION", before[-1][0])
        with SQLiteStore(db) as old:
            written = _lifecycle(old, "c1")
            old_history = old.history("ns", "c1")
        monkeypatch.undo()
        for rec in written:  # as toolledger before facts wrote them: whole records
            text = json.dumps(rec.to_dict(), separators=(",", ":"), ensure_ascii=False)
            _set_row(db, "c1", rec.revision, text)
        with SQLiteStore(db) as store:
            assert (version, "append_only_history") in store.applied_migrations()
            assert store.history("ns", "c1") == old_history
            assert [h.record for h in old_history] == written
            _lifecycle(store, "c2")  # new rows: facts, in the rebuilt table
            assert [h.record for h in store.history("ns", "c2")][-1] == store.get("ns", "c2")
        conn = sqlite3.connect(str(db))
        try:
            indexes = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            }
            ids = [r[0] for r in conn.execute("SELECT id FROM checkpoint_history ORDER BY id")]
        finally:
            conn.close()
        assert "checkpoints_ns_updated" not in indexes
        assert "checkpoint_history_key" in indexes
        assert ids == list(range(1, 11))  # a rowid table: 5 rows of c1, then 5 of c2
