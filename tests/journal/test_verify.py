"""Tamper evidence: every kind of tampering is named; erased content still verifies."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolledger
from toolledger.checkpoint import canonical_json
from toolledger.journal import erase_content
from toolledger.testing import MemoryStore

from .._internals import canonical


def _make_run(db) -> str:
    with toolledger.run("Find the bug", agent="bot", db=db) as run:
        for i in range(3):
            with run.step(f"s{i}", justification=f"why {i}", n=i) as st_:
                run.flush()  # each step a start and an end record (the seqs below)
                st_.record_output(score=i / 3, ok=True)
        run.approval("deploy", granted=False, by="user", reason="not yet")
    return run.run_id


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "t.db"


def _sql(db: Path, statement: str, *params) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(statement, params)
    conn.close()


def _data(db: Path, run_id: str, seq: int) -> dict:
    conn = sqlite3.connect(db)
    (text,) = conn.execute(
        "SELECT data FROM events WHERE run_id = ? AND seq = ?", (run_id, seq)
    ).fetchone()
    conn.close()
    return json.loads(text)


class TestVerify:
    def test_untouched_run_verifies(self, db):
        run_id = _make_run(db)
        report = toolledger.verify(db, run_id)
        assert report.ok
        assert report.event_count == 8
        assert report.head_hash == toolledger.open_store(db).get_run(run_id).head_hash

    def test_edited_content_is_named(self, db):
        run_id = _make_run(db)
        doc = _data(db, run_id, 3)
        doc["content"]["outputs"]["ok"] = False
        _sql(db, "UPDATE events SET data = ? WHERE run_id = ? AND seq = 3", json.dumps(doc), run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 3
        assert "content" in report.reason

    @pytest.mark.parametrize(
        ("where", "key", "value"),
        [
            ("header", "ended_at", "2099-01-01T00:00:00.000000+00:00"),
            ("header", "phase", "start"),
            ("content", "outputs", {"hits": 99}),
            ("content", "inputs", {"query": "other"}),
        ],
    )
    def test_an_edited_one_record_step_is_named(self, db, where, key, value):
        # A step that ended while its start was buffered is one record holding both.
        with toolledger.run("g", db=db) as run, run.step("search", query="q") as st:
            st.record_output(hits=1)
        assert toolledger.verify(db, run.run_id).ok
        doc = _data(db, run.run_id, 0)
        assert doc["header"]["phase"] == "point"
        assert "ended_at" in doc["header"]
        doc[where][key] = value
        _sql(
            db,
            "UPDATE events SET data = ? WHERE run_id = ? AND seq = 0",
            json.dumps(doc),
            run.run_id,
        )
        report = toolledger.verify(db, run.run_id)
        assert (report.ok, report.first_bad_seq) == (False, 0)

    def test_edited_header_is_named(self, db):
        run_id = _make_run(db)
        doc = _data(db, run_id, 1)
        doc["header"]["name"] = "other"
        _sql(
            db,
            "UPDATE events SET data = ?, name = 'other' WHERE run_id = ? AND seq = 1",
            json.dumps(doc),
            run_id,
        )
        report = toolledger.verify(db, run_id)
        assert (report.ok, report.first_bad_seq) == (False, 1)
        assert "hash" in report.reason

    def test_edited_indexed_column_is_named(self, db):
        run_id = _make_run(db)
        _sql(db, "UPDATE events SET status = 'completed' WHERE run_id = ? AND seq = 0", run_id)
        report = toolledger.verify(db, run_id)
        assert (report.ok, report.first_bad_seq) == (False, 0)
        assert "the record was edited" in report.reason

    def test_deleted_record_is_named(self, db):
        run_id = _make_run(db)
        _sql(db, "DELETE FROM events WHERE run_id = ? AND seq = 3", run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 3

    def test_inserted_record_is_named(self, db):
        run_id = _make_run(db)
        _sql(db, "UPDATE events SET seq = seq + 1000 WHERE run_id = ? AND seq >= 4", run_id)
        _sql(db, "UPDATE events SET seq = seq - 999 WHERE run_id = ? AND seq >= 1000", run_id)
        conn = sqlite3.connect(db)
        row = conn.execute(
            "SELECT * FROM events WHERE run_id = ? AND seq = 3", (run_id,)
        ).fetchone()
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (row[0], 4, "f" * 32, *row[3:]),
        )
        conn.commit()
        conn.close()
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 4

    def test_reordered_records_are_named(self, db):
        run_id = _make_run(db)
        _sql(db, "UPDATE events SET seq = -1 WHERE run_id = ? AND seq = 2", run_id)
        _sql(db, "UPDATE events SET seq = 2 WHERE run_id = ? AND seq = 3", run_id)
        _sql(db, "UPDATE events SET seq = 3 WHERE run_id = ? AND seq = -1", run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 2

    def test_cut_off_tail_is_detected_only_against_an_expected_head(self, db, tmp_path):
        run_id = _make_run(db)
        info = toolledger.export_json(db, run_id, tmp_path / "e.json")
        # A careful attacker also rewinds the run row: the store alone cannot tell.
        conn = sqlite3.connect(db)
        prev = conn.execute(
            "SELECT hash FROM events WHERE run_id = ? AND seq = 5", (run_id,)
        ).fetchone()[0]
        conn.execute("DELETE FROM events WHERE run_id = ? AND seq > 5", (run_id,))
        conn.execute(
            "UPDATE runs SET event_count = 6, head_hash = ? WHERE run_id = ?", (prev, run_id)
        )
        conn.commit()
        # The run's end was cut off with the tail: the store alone sees that much.
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "status" in report.reason
        # ... unless the attacker also makes the run look as if it never ended.
        conn.execute(
            "UPDATE runs SET status = 'running', ended_at = NULL WHERE run_id = ?", (run_id,)
        )
        conn.commit()
        conn.close()
        assert toolledger.verify(db, run_id).ok
        report = toolledger.verify(
            db, run_id, expected_head=info.head_hash, expected_count=info.event_count
        )
        assert not report.ok
        assert "cut off" in report.reason

    @pytest.mark.parametrize(
        "written", [str.upper, lambda h: f"  {h}\n", lambda h: f"\t{h.upper()} "]
    )
    def test_expected_head_matches_whatever_its_case_and_surrounding_whitespace(self, db, written):
        run_id = _make_run(db)
        head = toolledger.verify(db, run_id).head_hash
        assert toolledger.verify(db, run_id, expected_head=written(head)).ok

    @pytest.mark.parametrize(
        "given", ["", "abc", "g" * 64, "a" * 63, "a" * 65, "a" * 32 + " " * 2 + "a" * 32, 7]
    )
    def test_a_malformed_expected_head_is_invalid_argument(self, db, given):
        run_id = _make_run(db)
        with pytest.raises(toolledger.InvalidArgumentError) as err:
            toolledger.verify(db, run_id, expected_head=given)
        assert err.value.code == "INVALID_ARGUMENT"
        assert "64 hex digits" in err.value.message

    @pytest.mark.parametrize("key", ["note", "HEADER", "", "contents"])
    def test_a_top_level_key_beside_header_and_content_is_named(self, db, key):
        run_id = _make_run(db)
        doc = _data(db, run_id, 3)
        doc[key] = {"outputs": {"ok": False}}
        _sql(db, "UPDATE events SET data = ? WHERE run_id = ? AND seq = 3", json.dumps(doc), run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 3
        assert repr(key) in report.reason
        assert "outside its header and content" in report.reason

    def test_an_erasure_marker_beside_live_content_is_named(self, db):
        run_id = _make_run(db)
        doc = _data(db, run_id, 3)
        doc["erased"] = {"at": "2020-01-01T00:00:00+00:00", "reason": "gc"}
        _sql(db, "UPDATE events SET data = ? WHERE run_id = ? AND seq = 3", json.dumps(doc), run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 3
        assert "both content and an erasure marker" in report.reason

    def test_an_export_with_an_added_top_level_key_fails(self, db, tmp_path):
        run_id = _make_run(db)
        out = tmp_path / "e.json"
        toolledger.export_json(db, run_id, out)
        doc = json.loads(out.read_text())
        rec = doc["records"][2]
        data = json.loads(rec["data"]) if isinstance(rec["data"], str) else rec["data"]
        data["shown"] = "approved by the CFO"
        rec["data"] = json.dumps(data) if isinstance(rec["data"], str) else data
        out.write_text(json.dumps(doc))
        report = toolledger.verify_export(out)
        assert not report.ok
        assert "'shown'" in report.reason

    def test_altered_goal_is_detected(self, db):
        run_id = _make_run(db)
        conn = sqlite3.connect(db)
        (text,) = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        doc = json.loads(text)
        doc["content"]["goal"] = "Something else"
        conn.execute("UPDATE runs SET data = ? WHERE run_id = ?", (json.dumps(doc), run_id))
        conn.commit()
        conn.close()
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "goal" in report.reason

    def test_unknown_run_is_not_found(self, db):
        _make_run(db)
        with pytest.raises(toolledger.NotFoundError) as err:
            toolledger.verify(db, "nope")
        assert err.value.code == "NOT_FOUND"


class TestErasure:
    def test_erased_content_still_verifies_and_readers_show_erased(self):
        store = MemoryStore()
        run_id = _make_run(store)
        rows = store._events[run_id]
        erased_at = datetime.now(timezone.utc).isoformat()  # after the run ended
        store._events[run_id] = [
            dataclasses.replace(
                r,
                data=erase_content(r.data, at=erased_at, reason="retention 30d"),
            )
            for r in rows
        ]
        report = toolledger.verify(store, run_id)
        assert report.ok
        assert report.content_erased == len(rows)
        from toolledger.testing import stored_run

        ev = stored_run(store, run_id).events[0]
        assert ev["erased"] == {"at": erased_at, "reason": "retention 30d"}
        assert ev["inputs"] is None
        assert ev["justification"] is None

    def test_erase_content_keeps_the_header(self):
        store = MemoryStore()
        run_id = _make_run(store)
        text = store.read_events(run_id)[0].data
        erased = json.loads(erase_content(text, at="t", reason="r"))
        assert erased["header"] == json.loads(text)["header"]
        assert "content" not in erased

    def test_erase_content_rejects_non_records(self):
        with pytest.raises(toolledger.InvalidArgumentError):
            erase_content("[1, 2]", at="t", reason="r")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


class TestCanonical:
    @settings(max_examples=200, deadline=None)
    @given(json_values)
    def test_fast_path_equals_rfc8785_without_floats(self, value):
        assert canonical(value, maybe_float=False) == canonical_json(value)

    @settings(max_examples=100, deadline=None)
    @given(st.floats(allow_nan=False, allow_infinity=False))
    def test_floats_take_the_rfc8785_path(self, x):
        assert canonical({"x": x}) == canonical_json({"x": x})


header_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.text(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.fixed_dictionaries(
        {"namespace": st.text(max_size=5), "call_id": st.text(max_size=5)},
        optional={"revision": st.integers(0, 10)},
    ),
)


class TestHeaderJson:
    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.text(max_size=12), header_values, max_size=14))
    def test_one_pass_header_json_equals_canonical(self, header):
        from .._internals import header_json, stored_header

        header = {
            k: ({"$int": str(v)} if type(v) is int and abs(v) > 2**53 - 1 else v)
            for k, v in header.items()
        }
        full, stored = header_json(header)
        assert full == canonical_json(header)
        assert stored == canonical_json(stored_header(header))

    def test_real_headers_take_the_one_pass_path(self):
        from .._internals import header_json

        header = {
            "v": 1,
            "run_id": "r" * 32,
            "event_id": "e" * 32,
            "seq": 3,
            "parent_id": None,
            "kind": "step",
            "name": 'naïve \U0001f600 "quoted" </script>',
            "status": "completed",
            "phase": "end",
            "at": "2026-01-01T00:00:00.000000+00:00",
            "justification_missing": False,
            "content_sha256": "0" * 64,
        }
        full, stored = header_json(header)
        assert full == canonical_json(header)
        assert '"run_id"' not in stored
        assert '"phase":"end"' in stored
