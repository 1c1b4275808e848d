"""The runs table's columns are not trusted: readers show hashed values, verify compares.

Every test edits a real SQLite file with a second connection, as a user with write access
would, then reads it back through the public readers and the CLI.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main
from toolledger.testing import stored_run

DATA = Path(__file__).parent / "data"

#: column -> a forged value
FORGED = {
    "goal": "Wire the money to account 666",
    "agent": "mallory",
    "namespace": "other-ns",
    "started_at": "2020-01-01T00:00:00.000000+00:00",
    "status": "abandoned",
    "ended_at": "2030-01-01T00:00:00.000000+00:00",
}


def _record(db: Path) -> str:
    with toolledger.run("Refund order A-1001", agent="support-bot", db=db) as run:
        with run.step("lookup", justification="the user named the order", order="A-1001") as st:
            st.record_output(found=True)
        run.finish("refunded")
    return run.run_id


def _sql(db: Path, statement: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(statement, params)
    conn.close()


def _cli(db: Path, *args: str):
    return CliRunner().invoke(main, ["--db", str(db), *args])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "facts.db"


class TestEditedColumns:
    @pytest.mark.parametrize("column", sorted(FORGED))
    def test_edited_column_fails_verify_naming_it(self, db: Path, column: str):
        run_id = _record(db)
        assert toolledger.verify(db, run_id).ok
        _sql(db, f"UPDATE runs SET {column} = ? WHERE run_id = ?", FORGED[column], run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert f"runs table's {column}" in report.reason
        assert repr(FORGED[column]) in report.reason
        result = _cli(db, "verify", run_id)
        assert result.exit_code == 1
        assert column in result.output

    @pytest.mark.parametrize("column", sorted(FORGED))
    def test_readers_show_the_hashed_value_not_the_edited_column(
        self, db: Path, column: str, tmp_path: Path
    ):
        run_id = _record(db)
        before = stored_run(db, run_id).facts
        _sql(db, f"UPDATE runs SET {column} = ? WHERE run_id = ?", FORGED[column], run_id)
        view = stored_run(db, run_id)
        assert getattr(view.facts, column) == getattr(before, column)
        assert [d[0] for d in view.facts.differs] == [column]
        forged = FORGED[column]
        outputs = {
            "show": _cli(db, "show", run_id).output,
            "runs": _cli(db, "runs", "--json").output,
        }
        for fmt in ("json", "md", "html"):
            path = tmp_path / f"out.{fmt}"
            assert _cli(db, "export", run_id, "--format", fmt, "-o", str(path)).exit_code == 0
            outputs[fmt] = path.read_text(encoding="utf-8")
        for name, text in outputs.items():
            assert forged not in text, name
        public = toolledger.load_run(db, run_id)  # the public read API
        listed = toolledger.list_runs(db)
        assert len(listed) == 1
        for view in (public, listed[0]):
            assert view.goal == "Refund order A-1001"
            assert view.agent == "support-bot"
            assert view.namespace == "default"
            assert view.status == "completed"
            assert view.started_at is not None
            assert view.started_at.isoformat() == before.started_at
        runs = json.loads(_cli(db, "runs", "--json").output)
        assert runs["goal"] == "Refund order A-1001"
        assert runs["agent"] == "support-bot"
        assert runs["status"] == "completed"
        assert runs["started_at"] == before.started_at
        assert runs["ended_at"] == before.ended_at

    def test_edited_export_field_fails_verify_export(self, db: Path, tmp_path: Path):
        run_id = _record(db)
        path = tmp_path / "e.json"
        toolledger.export_json(db, run_id, path)
        assert toolledger.verify_export(path).ok
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["run"]["agent"] = "mallory"
        path.write_text(json.dumps(doc), encoding="utf-8")
        report = toolledger.verify_export(path)
        assert not report.ok
        assert "agent" in report.reason
        assert _cli(db, "verify", "--export", str(path)).exit_code == 1

    def test_store_edited_after_export_fails_verify_with_export(self, db: Path, tmp_path: Path):
        run_id = _record(db)
        path = tmp_path / "e.json"
        toolledger.export_json(db, run_id, path)
        _sql(db, "UPDATE runs SET goal = ? WHERE run_id = ?", FORGED["goal"], run_id)
        result = _cli(db, "verify", run_id, "--export", str(path))
        assert result.exit_code == 1
        assert "goal" in result.output

    def test_a_run_made_to_look_unfinished_fails_verify(self, db: Path):
        run_id = _record(db)
        _sql(db, "UPDATE runs SET status = 'running', ended_at = NULL WHERE run_id = ?", run_id)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert "status" in report.reason
        assert stored_run(db, run_id).facts.status == "completed"


class TestEndInTheChain:
    def test_end_status_time_error_and_summary_are_hashed(self, db: Path):
        run = toolledger.run("Refund", db=db)

        def finish_then_fail() -> None:
            with run:
                run.finish("done, then a crash")
                raise KeyError("late")

        with pytest.raises(KeyError):
            finish_then_fail()
        facts = stored_run(db, run.run_id).facts
        row = toolledger.open_store(db).get_run(run.run_id)
        assert facts.end_hashed
        assert facts.status == "failed" == row.status
        assert facts.ended_at == row.ended_at
        assert facts.error["type"] == "KeyError"
        assert facts.summary == "done, then a crash"
        events = [e for e in stored_run(db, run.run_id).events if e["kind"] == "finish"]
        assert len(events) == 1
        assert events[0]["status"] == "failed"
        assert events[0]["text"] == "done, then a crash"
        assert toolledger.verify(db, run.run_id).ok

    def test_a_resumed_run_is_running_again_and_verifies(self, db: Path):
        run_id = _record(db)
        run = toolledger.run("Refund order A-1001", agent="support-bot", db=db, run_id=run_id)
        run.start()
        try:
            assert stored_run(db, run_id).facts.status == "running"
            assert toolledger.verify(db, run_id).ok
        finally:
            run.close()
        assert stored_run(db, run_id).facts.status == "completed"
        assert toolledger.verify(db, run_id).ok


class TestLegacyRuns:
    """Runs recorded before run ends were chained (exports made by the older format)."""

    @pytest.mark.parametrize("run_id", ["legacy-finished", "legacy-failed"])
    def test_legacy_run_verifies_and_says_its_end_is_not_covered(
        self, db: Path, tmp_path: Path, run_id: str
    ):
        path = tmp_path / "legacy.json"
        shutil.copy(DATA / f"{run_id}.json", path)
        assert toolledger.import_json(path, db) == run_id
        report = toolledger.verify(db, run_id)
        assert report.ok
        assert not report.end_hashed
        result = _cli(db, "verify", run_id)
        assert result.exit_code == 0
        assert "status and end time are not covered" in result.output
        assert stored_run(db, run_id).facts.status == (
            "failed" if "failed" in run_id else "completed"
        )

    def test_legacy_run_still_catches_an_edited_goal(self, db: Path):
        toolledger.import_json(DATA / "legacy-finished.json", db)
        _sql(db, "UPDATE runs SET goal = 'forged' WHERE run_id = 'legacy-finished'")
        report = toolledger.verify(db, "legacy-finished")
        assert not report.ok
        assert "goal" in report.reason
        assert stored_run(db, "legacy-finished").facts.goal == "Legacy goal: answer from code"


class TestConcurrentClosers:
    def test_two_writers_closing_one_run_leave_the_columns_on_the_chain_end(self, db: Path):
        """A closer whose column update lands after another's still leaves the last end."""
        from toolledger.store import SQLiteStore

        closing: list[toolledger.Run] = []

        class LateUpdate(SQLiteStore):
            def update_run(self, run_id, **kw):
                if closing and kw.get("ended_at") is not None:
                    other = closing.pop()
                    other.close()  # its end is chained and stored first
                super().update_run(run_id, **kw)

        run_id = _record(db)
        a = toolledger.run("Refund order A-1001", db=LateUpdate(db), run_id=run_id)
        b = toolledger.run("Refund order A-1001", db=db, run_id=run_id)
        a.start()
        b.start()
        closing.append(b)
        a.close()  # appends its end, then b ends completely, then a's update lands
        report = toolledger.verify(db, run_id)
        assert report.ok, report.reason
        facts = stored_run(db, run_id).facts
        assert facts.differs == ()
        assert facts.status == "completed"
