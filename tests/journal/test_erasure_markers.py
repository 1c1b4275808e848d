"""Erasure markers are evidence only when they look like what gc leaves behind.

gc erases whole runs that ended before its cutoff, in one transaction, and never a goal;
anything else carrying an ``erased`` marker is tampering. Real SQLite files, edited with a
second connection.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main
from toolledger.journal import erase_content


def _record(db: Path, run_id: str | None = None) -> str:
    with toolledger.run("Close ticket T-9", agent="bot", db=db, run_id=run_id) as run:
        for i in range(3):
            with run.step(f"s{i}", justification="needed", n=i) as st:
                run.flush()  # each step a start and an end record
                st.record_output(i=i)
        run.note("done")
    return run.run_id


def _erase(db: Path, run_id: str, seqs: list[int] | None, at: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        rows = conn.execute(
            "SELECT seq, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        for seq, data in rows:
            if seqs is None or seq in seqs:
                conn.execute(
                    "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?",
                    (erase_content(data, at=at, reason="retention 30d"), run_id, seq),
                )
    conn.close()


def _verify_cli(db: Path, run_id: str):
    return CliRunner().invoke(main, ["--db", str(db), "verify", run_id])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "erase.db"


class TestGenuineErasure:
    def test_gc_erasure_of_a_whole_ended_run_verifies(self, db: Path):
        run_id = _record(db)
        report = toolledger.gc(db, older_than="0s")
        assert report.events_erased == 8  # three steps (start, end), a note, the end
        verified = toolledger.verify(db, run_id)
        assert verified.ok, verified.reason
        assert verified.content_erased == 8
        result = _verify_cli(db, run_id)
        assert result.exit_code == 0
        assert "8 erased" in result.output

    def test_gc_then_resume_then_gc_again_verifies(self, db: Path):
        run_id = _record(db)
        toolledger.gc(db, older_than="0s")
        _record(db, run_id=run_id)  # resumed after its content was erased
        assert toolledger.verify(db, run_id).ok  # an erased prefix ending at the first end
        toolledger.gc(db, older_than="0s")
        report = toolledger.verify(db, run_id)
        assert report.ok, report.reason
        assert report.content_erased == report.event_count


class TestTamperingWithMarkers:
    def test_selective_future_dated_erasure_is_tampering(self, db: Path):
        run_id = _record(db)
        _erase(db, run_id, [3], "2030-01-01T00:00:00+00:00")
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 3
        assert "selective" in report.reason
        result = _verify_cli(db, run_id)
        assert result.exit_code == 1
        assert "record 3" in result.output

    def test_selective_erasure_of_the_first_records_is_tampering(self, db: Path):
        run_id = _record(db)
        _erase(db, run_id, [0, 1], "2026-01-01T00:00:00+00:00")
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 1
        assert "had not ended" in report.reason

    def test_future_dated_whole_run_erasure_is_tampering(self, db: Path):
        run_id = _record(db)
        _erase(db, run_id, None, "2030-01-01T00:00:00+00:00")
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "in the future" in report.reason
        assert _verify_cli(db, run_id).exit_code == 1

    def test_erasure_dated_before_the_run_ended_is_tampering(self, db: Path):
        run_id = _record(db)
        _erase(db, run_id, None, "2001-01-01T00:00:00+00:00")
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "predates the end" in report.reason

    def test_erased_goal_is_tampering(self, db: Path):
        run_id = _record(db)
        conn = sqlite3.connect(db)
        with conn:
            (text,) = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            doc = json.loads(text)
            del doc["content"]
            doc["erased"] = {"at": "2026-01-01T00:00:00+00:00", "reason": "retention"}
            conn.execute("UPDATE runs SET data = ? WHERE run_id = ?", (json.dumps(doc), run_id))
        conn.close()
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "goal was erased" in report.reason
        assert _verify_cli(db, run_id).exit_code == 1
