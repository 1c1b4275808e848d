"""SQLite's search index is written in batches off the callers' commits, never missing a record."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import toolledger
from toolledger.store import SQLiteStore
from toolledger.store import sqlite as sqlite_module

from .._internals import sqlite_search


def _pending(store: SQLiteStore) -> list[str]:
    return [r[0] for r in store._read("SELECT run_id FROM search_pending")]


def _indexed_rows(store: SQLiteStore) -> int:
    return int(store._read("SELECT count(*) FROM events_fts")[0][0])


def _guarded_bodies(store: SQLiteStore) -> list[tuple[int, str]]:
    """Every record's text as the guarded body (json_valid first) builds it, by rowid."""
    body = sqlite_search._BODY.format(name="e.name", data="e.data")
    return [
        (int(rowid), str(text))
        for rowid, text in store._read(
            f"SELECT (k.rid << 32) | e.seq, {body} FROM events e "
            "JOIN search_runs k ON k.run_id = e.run_id ORDER BY 1"
        )
    ]


#: name -> how a pending record's stored JSON is damaged (``None``: stored as a BLOB)
DAMAGE = {
    "nan": lambda d: d.replace('"hidden words"', "NaN"),
    "deep_nesting": lambda d: d.replace('"hidden words"', "[" * 10_000 + "]" * 10_000),
    "truncated": lambda d: d[: d.index('"hidden words"')],
    "blob": None,
}


def _damage_pending_record(path: Path, run_id: str, damage: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        seq, data = conn.execute(
            "SELECT seq, data FROM events WHERE run_id = ? AND data LIKE '%hidden words%'",
            (run_id,),
        ).fetchone()
        fn = DAMAGE[damage]
        value = data.encode() if fn is None else fn(data)
        conn.execute(
            "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (value, run_id, seq)
        )
    conn.close()


class TestSearchQueue:
    def test_append_marks_the_run_and_writes_no_index_row(self, tmp_path: Path) -> None:
        """A commit of records marks its run pending; the index is not written in it."""
        store = SQLiteStore(tmp_path / "q.db")
        try:
            before = _indexed_rows(store)
            with toolledger.run("Refund A-1001", db=store) as run:
                run.note("the parcel was lost")
                run.flush()
                assert _pending(store) == [run.run_id]
                assert _indexed_rows(store) == before
        finally:
            store.close()

    def test_writable_search_indexes_pending_records_first(self, tmp_path: Path) -> None:
        """A search through a writable store indexes the pending records, then finds them."""
        store = SQLiteStore(tmp_path / "q.db")
        try:
            with toolledger.run("Refund A-1001", db=store) as run:
                run.note("the parcel was lost")
                run.flush()
                assert [e.name for e in toolledger.search(store, "parcel")] == ["note"]
                assert _pending(store) == []
                run.note("a second parcel")
                run.flush()
                found = toolledger.search(store, "parcel")
                assert sorted(e.name for e in found) == ["note", "note"]
        finally:
            store.close()

    def test_reader_finds_records_a_live_writer_has_not_indexed(self, tmp_path: Path) -> None:
        """A read-only search sees committed records still pending, and writes nothing."""
        path = tmp_path / "q.db"
        writer = SQLiteStore(path)
        try:
            with toolledger.run("Weekly report", db=writer) as run:
                run.note("totals for the gateway")
                run.flush()
                assert _pending(writer) == [run.run_id]
                found = toolledger.search(path, "gateway")  # opens the file read-only
                assert [(e.run_id, e.name) for e in found] == [(run.run_id, "note")]
                assert [e.name for e in toolledger.search(path, "weekly")] != []
                assert _pending(writer) == [run.run_id]  # the reader indexed nothing
        finally:
            writer.close()

    def test_close_indexes_what_is_pending(self, tmp_path: Path) -> None:
        """Closing the store leaves no record waiting for the index."""
        path = tmp_path / "q.db"
        store = SQLiteStore(path)
        with toolledger.run("Refund A-1001", db=store) as run:
            run.note("the parcel was lost")
        store.close()
        again = SQLiteStore(path)
        try:
            assert _pending(again) == []
            hits = again._read("SELECT rowid FROM events_fts WHERE events_fts MATCH 'parcel'")
            assert len(hits) == 1
        finally:
            again.close()

    def test_each_record_is_indexed_once(self, tmp_path: Path) -> None:
        """Interleaved appends and searches index every record exactly once."""
        store = SQLiteStore(tmp_path / "q.db")
        try:
            with toolledger.run("Refund A-1001", db=store) as run:
                for i in range(5):
                    run.note(f"parcel {i}")
                    run.flush()
                    toolledger.search(store, "parcel")
            rows = store.read_events(run.run_id)
            toolledger.search(store, "parcel")
            assert _indexed_rows(store) == len(rows)
        finally:
            store.close()

    def test_gc_erases_pending_content_from_the_index(self, tmp_path: Path) -> None:
        """Retention's rewrite indexes pending records first, then replaces them."""
        store = SQLiteStore(tmp_path / "q.db")
        try:
            with toolledger.run("Refund A-1001", db=store) as run:
                run.note("secret parcel")
                run.flush()
            rows = store.read_events(run.run_id)
            note = next(r for r in rows if r.name == "note")
            assert _pending(store) == [run.run_id]  # the run's records wait
            store.rewrite_event_data(run.run_id, {note.seq: '{"content": {}}'})
            assert _pending(store) == []
            assert toolledger.search(store, "secret") == []
            assert _indexed_rows(store) == len(rows)
        finally:
            store.close()

    def test_database_of_the_previous_version_keeps_its_index(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file indexed per transaction is migrated: nothing indexed twice, new writes found."""
        db = tmp_path / "old.db"
        queue = next(v for v, name, _ in sqlite_module.MIGRATIONS if name == "search_queue")
        before = sqlite_module.MIGRATIONS[: queue - 1]  # every migration before the queue's
        for count in (len(before) - 1, len(before)):  # records stored, then indexed by v5
            monkeypatch.setattr(sqlite_module, "MIGRATIONS", before[:count])
            monkeypatch.setattr(sqlite_module, "LATEST_VERSION", before[count - 1][0])
            if count < len(before):
                with toolledger.run("Refund A-1001", db=db) as run:
                    run.note("the parcel was lost")
            else:
                SQLiteStore(db).close()
        monkeypatch.undo()
        store = SQLiteStore(db)
        try:
            assert (len(before) + 1, "search_queue") in store.applied_migrations()
            old_rows = len(store.read_events(run.run_id))
            assert _indexed_rows(store) == old_rows
            with toolledger.run("Weekly report", db=store) as second:
                second.note("another parcel")
            found = toolledger.search(store, "parcel")
            assert sorted(e.run_id for e in found) == sorted([run.run_id, second.run_id])
            assert _indexed_rows(store) == old_rows + len(store.read_events(second.run_id))
        finally:
            store.close()

    def test_database_marked_per_record_is_migrated_to_a_mark_per_append(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Records waiting under the per-record trigger are indexed after the migration, and
        later appends mark their run through its count."""
        db = tmp_path / "before.db"
        names = [name for _, name, _ in sqlite_module.MIGRATIONS]
        before = sqlite_module.MIGRATIONS[: names.index("search_mark_per_append")]
        monkeypatch.setattr(sqlite_module, "MIGRATIONS", before)
        monkeypatch.setattr(sqlite_module, "LATEST_VERSION", before[-1][0])
        old = SQLiteStore(db)  # left open: closing it would index what is pending
        try:
            with toolledger.run("Refund A-1001", db=old) as run:
                run.note("the parcel was lost")
            assert _pending(old) == [run.run_id]
            monkeypatch.undo()
            store = SQLiteStore(db)
            try:
                triggers = store._read("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                assert [t[0] for t in triggers] == ["runs_search_pending"]
                with toolledger.run("Weekly report", db=store) as second:
                    second.note("another parcel")
                    second.flush()
                    # The first run's wait ended in a later migration (search_own_tokens),
                    # which indexes every record again.
                    assert _pending(store) == [second.run_id]
                found = toolledger.search(store, "parcel")
                assert sorted(e.run_id for e in found) == sorted([run.run_id, second.run_id])
                rows = len(store.read_events(run.run_id)) + len(store.read_events(second.run_id))
                assert _indexed_rows(store) == rows
            finally:
                store.close()
        finally:
            old.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
class TestDamagedPendingRecord:
    def test_batch_indexes_a_damaged_record_by_its_name(self, tmp_path: Path, damage: str) -> None:
        """A batch holding a damaged record indexes it by its name and the others in full,
        the same text as the guarded body writes."""
        path = tmp_path / "q.db"
        store = SQLiteStore(path)
        try:
            with toolledger.run("Refund A-1001", db=store) as run:
                run.note("the parcel was lost")
                with run.step("lookup", q="hidden words") as step:
                    run.flush()  # the start record (damaged below) apart from the end
                    step.record_output(found="another parcel")
                run.note("a third parcel")
                run.flush()
                _damage_pending_record(path, run.run_id, damage)
                statements: list[str] = []
                store._conn().set_trace_callback(statements.append)
                found = toolledger.search(store, "parcel")
                store._conn().set_trace_callback(None)
                assert sorted(e.name for e in found) == ["lookup", "note", "note"]
                assert [e.name for e in toolledger.search(store, "lookup")] == ["lookup"]
                if damage != "blob":  # a BLOB holding JSON is JSON to SQLite
                    assert toolledger.search(store, "hidden") == []
                assert _pending(store) == []
                assert store._read("SELECT rowid, body FROM events_fts ORDER BY 1") == (
                    _guarded_bodies(store)
                )
                batches = [s for s in statements if s.startswith("INSERT INTO events_fts")]
                if damage != "blob" and sqlite_search._json_tree_is_strict():
                    assert ["json_valid" in s for s in batches] == [False, True]  # again
        finally:
            store.close()

    def test_reader_stages_a_damaged_record_by_its_name(self, tmp_path: Path, damage: str) -> None:
        """A read-only search over pending records, one damaged, finds the others."""
        path = tmp_path / "q.db"
        writer = SQLiteStore(path)
        try:
            with toolledger.run("Refund A-1001", db=writer) as run:
                with run.step("lookup", q="hidden words") as step:
                    run.flush()  # the start record (damaged below) apart from the end
                    step.record_output(found="the parcel")
                run.flush()
                _damage_pending_record(path, run.run_id, damage)
                assert [e.name for e in toolledger.search(path, "parcel")] == ["lookup"]
                if damage != "blob":
                    assert toolledger.search(path, "hidden") == []
                assert _pending(writer) == [run.run_id]
        finally:
            writer.close()


#: Stored documents whose text the unguarded body must build exactly as the guarded one.
DOCUMENTS = [
    {"content": {"inputs": {"i": 0, "deep": {"a": [1, {"b": "x"}, [2.5, "y"]]}}}},
    {"content": {"text": "Zoë's café — 東京 🚀", "esc": 'tab\there "quoted" \\'}},
    {"content": {"n": -7, "f": 12.5, "e": 1e21, "tiny": 5e-324, "big": 2**70, "z": 0.0}},
    {"content": {"t": True, "f": False, "none": None, "empty": "", "list": []}},
    {"content": {}},
    {"content": [1, "two", {"three": 3}]},
    {"content": "a bare string"},
    {"content": 42},
    {"header": {"phase": "point"}},  # erased: no content
    {"header": {"content": "not this"}, "other": {"content": {"nor": "this"}}},
    [1, 2, 3],
    "just text",
]


def test_unguarded_body_builds_the_guarded_text_of_every_valid_record() -> None:
    """Nested objects, arrays, unicode, escapes, numbers, empty and erased content: the body
    without the json_valid guard is the same text, and the guard alone reads no JSON5."""
    conn = sqlite3.connect(":memory:")
    texts = [json.dumps(d, ensure_ascii=a) for d in DOCUMENTS for a in (True, False)]
    texts += [json.dumps(DOCUMENTS[0], indent=2), " " + json.dumps(DOCUMENTS[1]) + "\n"]
    for name in ("tool", None, "ünïcode"):
        for text in texts:
            guarded, unguarded = (
                conn.execute(
                    f"SELECT {body.format(name='?1', data='?2')}", (name, text)
                ).fetchone()[0]
                for body in (sqlite_search._BODY, sqlite_search._BODY_UNGUARDED)
            )
            assert unguarded == guarded, text
    if sqlite_search._json_tree_is_strict():
        with pytest.raises(sqlite3.OperationalError):
            conn.execute(
                f"SELECT {sqlite_search._BODY_UNGUARDED.format(name='?1', data='?2')}",
                ("tool", '{"content": {"q": NaN}}'),
            )
    conn.close()
