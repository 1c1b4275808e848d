"""SQLite stores a record's ``prev_hash`` as a marker when it is the hash of the record
before it in the same batch (64 bytes less per record), and reads it back exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import toolledger
from toolledger.store import SQLiteStore
from toolledger.store.base import EventRow, event_row_of
from toolledger.store.sqlite import LATEST_VERSION, MIGRATIONS


def _row(seq: int, prev: str | None) -> EventRow:
    return event_row_of(
        "r", seq, f"e{seq}", None, "step", "s", "completed", "t", prev, f"h{seq}", "{}"
    )


def _stored_prev(db: Path) -> list[tuple[int, str, object]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT seq, typeof(prev_hash), prev_hash FROM events WHERE run_id = 'r' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "m.db"


def test_links_inside_a_batch_are_markers_and_read_back_exactly(db: Path) -> None:
    store = SQLiteStore(db)
    try:
        toolledger.run("g", db=store, run_id="r").start()  # the run's row, no record yet
        first = [_row(0, "genesis"), _row(1, "h0"), _row(2, "h1"), _row(3, None), _row(4, "")]
        second = [_row(5, "h4"), _row(6, "not-h5"), _row(7, "h6")]
        assert store.append_events("r", first, expected_count=0)
        assert store.append_events("r", second, expected_count=5)
        rows = [*first, *second]
        assert store.read_events("r") == rows
        assert store.read_events("r", after_seq=1, limit=2) == rows[2:4]
        assert store.read_events("r", after_seq=6) == rows[7:]
        # Stored: a marker where the link is the record before's hash in the same batch;
        # the first of each batch and anything else exactly as given.
        assert [(seq, kind) for seq, kind, _ in _stored_prev(db)] == [
            (0, "text"),
            (1, "blob"),
            (2, "blob"),
            (3, "null"),
            (4, "text"),
            (5, "text"),
            (6, "text"),
            (7, "blob"),
        ]
    finally:
        store.close()


def test_a_journal_run_stores_markers_verifies_and_copies(db: Path, tmp_path: Path) -> None:
    with toolledger.run("g", db=db) as run:
        for i in range(20):
            with run.step("s", i=i) as st:
                st.record_output(i=i)
    kinds = [kind for _, kind, _ in _stored_prev_of(db, run.run_id)]
    assert kinds.count("blob") >= 19
    assert toolledger.verify(db, run.run_id).ok
    rows = _read(db, run.run_id)
    assert all(rows[i].prev_hash == rows[i - 1].hash for i in range(1, len(rows)))
    copy = tmp_path / "copy.db"
    toolledger.copy_ledger(db, copy)
    assert _read(copy, run.run_id) == rows
    assert toolledger.verify(copy, run.run_id).ok


def _read(db: Path, run_id: str) -> list[EventRow]:
    store = SQLiteStore(db, readonly=True)
    try:
        return store.read_events(run_id)
    finally:
        store.close()


def _stored_prev_of(db: Path, run_id: str) -> list[tuple[int, str, object]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT seq, typeof(prev_hash), prev_hash FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    finally:
        conn.close()


def test_a_marker_edited_into_a_wrong_link_is_named(db: Path) -> None:
    with toolledger.run("g", db=db) as run:
        for i in range(5):
            with run.step("s", i=i):
                pass
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "UPDATE events SET prev_hash = ? WHERE run_id = ? AND seq = 3", ("0" * 64, run.run_id)
        )
    conn.close()
    report = toolledger.verify(db, run.run_id)
    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert "prev_hash" in report.reason


def test_the_marker_moves_the_schema_version(db: Path) -> None:
    marker = [m for m in MIGRATIONS if m[1] == "prev_hash_of_the_record_before"]
    assert [m[0] for m in marker] == [9]  # older toolledgers (schema <= 8) refuse the file
    assert LATEST_VERSION >= 9
    SQLiteStore(db).close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST_VERSION,)
    finally:
        conn.close()
