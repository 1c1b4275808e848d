"""SQLite's CAS on a row known to hold a proven text: two plain statements, the same rows."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

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
    mark_execution_uncertain,
    release_delivery,
)
from toolledger.store import SQLiteStore

from .._internals import dump_record, forget_proven, sqlite_facts_sql, swap_facts
from ..checkpoint._ckpt_records import ids, walks

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _sqlite_facts(before: str, after: str) -> str:
    """What the JSON-checking path stores for a swap from ``before`` to ``after``."""
    conn = sqlite3.connect(":memory:")
    try:
        (text,) = conn.execute(
            f"SELECT {sqlite_facts_sql('?2')} FROM (SELECT ?1 AS record)", (before, after)
        ).fetchone()
        return str(text)
    finally:
        conn.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(walks())
def test_swap_facts_is_what_sqlite_json_remove_makes(revisions: list[CheckpointRecord]) -> None:
    """For every legal move, the facts sliced in Python are SQLite's, byte for byte."""
    for before, after in itertools.pairwise(revisions):
        b, a = dump_record(before), dump_record(after)
        assert swap_facts(b, a) == _sqlite_facts(b, a)


@pytest.mark.parametrize(
    "payload",
    [
        {"completed_at": None, "result": 1, "status": "ready", "binding": {}},
        ['","completed_at":', ',"result":', ',"status":', ',"execution_fence":'],
        'a "quoted" ,"completed_at": text',
    ],
)
def test_swap_facts_is_not_misled_by_key_names_inside_values(payload: object) -> None:
    """Key names inside a result or a reason are never taken for the record's own keys."""
    rec = create_checkpoint(Binding("ns", "c1", "t", "1", fingerprint({})), at=T0)
    claimed = claim_execution(rec, attempt_id="a1", at=T0).next
    done = complete_execution(claimed, attempt_id="a1", at=T0, result=payload).next
    sent = claim_delivery(done, delivery_id="d1", at=T0).next
    reason = 'lost ,"result":{"payload":1},"completed_at":"x"'
    unsure = mark_execution_uncertain(claimed, attempt_id="a1", at=T0, reason=reason).next
    for before, after in [(claimed, done), (done, sent), (claimed, unsure)]:
        b, a = dump_record(before), dump_record(after)
        assert swap_facts(b, a) == _sqlite_facts(b, a)


@given(walks(), ids)
@settings(max_examples=50, deadline=None)
def test_swap_facts_leaves_a_changed_binding_or_creation_to_sqlite(
    revisions: list[CheckpointRecord], other: str
) -> None:
    """A swap that changes the binding or the creation time is not sliced (``None``)."""
    rec = revisions[-1]
    moved = dataclasses.replace(rec, binding=dataclasses.replace(rec.binding, tool_revision=other))
    later = dataclasses.replace(rec, created_at=rec.created_at + timedelta(microseconds=1))
    if moved.binding != rec.binding:
        assert swap_facts(dump_record(rec), dump_record(moved)) is None
    assert swap_facts(dump_record(rec), dump_record(later)) is None


def _lifecycle(store: SQLiteStore, call_id: str, *, forget: bool) -> None:
    rec = create_checkpoint(Binding("ns", call_id, "send", "1", fingerprint({})), at=T0)
    assert store.create_if_absent(rec)[0]
    steps = [
        lambda r: claim_execution(r, attempt_id="a1", at=T0 + timedelta(seconds=1)),
        lambda r: mark_execution_uncertain(
            r, attempt_id="a1", at=T0 + timedelta(seconds=2), reason='timed "out" é'
        ),
    ]
    if call_id.endswith("done"):
        steps[1:] = [
            lambda r: complete_execution(
                r, attempt_id="a1", at=T0 + timedelta(seconds=2), result={"id": "m1", "n": 1.5}
            ),
            lambda r: claim_delivery(r, delivery_id="d1", at=T0 + timedelta(seconds=3)),
            lambda r: release_delivery(r, delivery_id="d1", at=T0 + timedelta(seconds=4)),
            lambda r: claim_delivery(r, delivery_id="d2", at=T0 + timedelta(seconds=5)),
            lambda r: complete_delivery(r, delivery_id="d2", at=T0 + timedelta(seconds=6)),
        ]
    for step in steps:
        if forget:
            forget_proven()
        t = step(rec)
        assert store.compare_and_swap(t.expected_revision, t.next)
        rec = t.next


def _table(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


class TestKnownRowSwap:
    @pytest.mark.parametrize("call_id", ["c-done", "c-uncertain"])
    def test_known_row_swaps_store_what_the_json_checking_path_stores(
        self, tmp_path: Path, call_id: str
    ) -> None:
        """Rows and history are byte for byte those of swaps made with nothing proven."""
        tables = []
        for forget in (False, True):
            path = tmp_path / f"{forget}.db"
            s = SQLiteStore(path)
            _lifecycle(s, call_id, forget=forget)
            s.close()
            tables.append(
                (
                    _table(path, "SELECT * FROM checkpoints"),
                    _table(path, "SELECT * FROM checkpoint_history ORDER BY id"),
                )
            )
        assert tables[0] == tables[1]
        assert len(tables[0][1]) > 2

    def test_a_known_row_swap_is_two_plain_statements(self, store: SQLiteStore) -> None:
        """The CAS matches the row's whole text; no JSON function runs on the stored row."""
        rec = create_checkpoint(Binding("ns", "c1", "send", "1", fingerprint({})), at=T0)
        store.create_if_absent(rec)
        claimed = claim_execution(rec, attempt_id="a1", at=T0).next
        seen: list[str] = []
        store._conn().set_trace_callback(seen.append)
        assert store.compare_and_swap(0, claimed)
        store._conn().set_trace_callback(None)
        body = seen[seen.index("BEGIN IMMEDIATE") + 1 : seen.index("COMMIT")]
        assert [s.split(" (")[0].split(" SET")[0] for s in body] == [
            "UPDATE checkpoints",
            "INSERT INTO checkpoint_history",
        ]
        assert all("json" not in s for s in body)
        assert store.history("ns", "c1")[-1].record == claimed == store.get("ns", "c1")

    def test_a_row_whose_status_column_was_edited_is_quarantined_not_swapped(
        self, store: SQLiteStore
    ) -> None:
        """Its text is still the proven one, but it disagrees with its column: left alone."""
        rec = create_checkpoint(Binding("ns", "c1", "send", "1", fingerprint({})), at=T0)
        store.create_if_absent(rec)
        claimed = claim_execution(rec, attempt_id="a1", at=T0).next
        conn = sqlite3.connect(store.path)
        conn.execute("UPDATE checkpoints SET status = 'completed'")
        conn.commit()
        conn.close()
        before = _table(store.path, "SELECT * FROM checkpoints")
        with pytest.raises(tl.InvalidCheckpointError) as info:
            store.compare_and_swap(0, claimed)
        assert info.value.code == "INVALID_CHECKPOINT"
        assert _table(store.path, "SELECT * FROM checkpoints") == before
        assert len(_table(store.path, "SELECT * FROM checkpoint_history")) == 1

    def test_a_stale_prior_loses_the_cas_like_any_other(self, store: SQLiteStore) -> None:
        """Another writer moved the row: the known text no longer matches and the CAS is lost."""
        rec = create_checkpoint(Binding("ns", "c1", "send", "1", fingerprint({})), at=T0)
        store.create_if_absent(rec)
        mine = claim_execution(rec, attempt_id="a1", at=T0).next
        theirs = claim_execution(rec, attempt_id="a2", at=T0).next
        conn = sqlite3.connect(store.path)  # another process's write, unseen by this one
        conn.execute(
            "UPDATE checkpoints SET status = 'executing', revision = 1, record = ?",
            (dump_record(theirs),),
        )
        conn.commit()
        conn.close()
        assert not store.compare_and_swap(0, mine)
        assert store.get("ns", "c1") == theirs
