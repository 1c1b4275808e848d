"""Hostile journal rows never crash a reader: verify names them, the others go on.

Rows are edited in a real SQLite file by a second connection (a NaN literal, a lone
surrogate escape, 10,000-level nesting, a BLOB, content that is not an object), then read
back through the CLI.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main

#: name -> how the stored data of record 0 is damaged (``None``: stored as a BLOB)
DAMAGE = {
    "nan": lambda d: d.replace('"q":1', '"q":NaN'),
    "lone_surrogate": lambda d: d.replace('"q":1', '"q":"\\ud800"'),
    "deep_nesting": lambda d: d.replace('"q":1', '"q":' + "[" * 10_000 + "]" * 10_000),
    "blob": None,
    "content_not_an_object": lambda d: d[: d.index('"content":')] + '"content":[1,2]}',
}

READERS = [
    ["show", "{run}"],
    ["show", "{run}", "--json"],
    ["export", "{run}", "--format", "json", "-o", "{out}.json"],
    ["export", "{run}", "--format", "md", "-o", "{out}.md"],
    ["export", "{run}", "--format", "html", "-o", "{out}.html"],
    ["replay", "{run}"],
    ["runs"],
]


def _damaged(tmp_path: Path, damage: str) -> tuple[Path, str]:
    db = tmp_path / "hostile.db"
    with toolledger.run("hostile", db=db) as run, run.step("s", q=1) as st:
        st.record_output(x=1)
    conn = sqlite3.connect(db)
    with conn:
        (data,) = conn.execute(
            "SELECT data FROM events WHERE run_id = ? AND seq = 0", (run.run_id,)
        ).fetchone()
        fn = DAMAGE[damage]
        value = data.encode() if fn is None else fn(data)
        conn.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = 0", (value, run.run_id))
    conn.close()
    return db, run.run_id


def _cli(db: Path, *args: str):
    return CliRunner().invoke(main, ["--db", str(db), *args])


@pytest.mark.parametrize("damage", sorted(DAMAGE))
class TestHostileRows:
    def test_verify_names_the_bad_record(self, tmp_path: Path, damage: str):
        db, run_id = _damaged(tmp_path, damage)
        report = toolledger.verify(db, run_id)
        assert not report.ok
        assert report.first_bad_seq == 0
        result = _cli(db, "verify", run_id)
        assert result.exit_code == 1
        assert "record 0" in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)

    @pytest.mark.parametrize("command", READERS, ids=lambda c: "-".join(c[:1] + c[2:3]))
    def test_readers_go_on(self, tmp_path: Path, damage: str, command: list[str]):
        db, run_id = _damaged(tmp_path, damage)
        args = [a.format(run=run_id, out=tmp_path / "out") for a in command]
        result = _cli(db, *args)
        assert result.exit_code == 0, result.output
        if command[0] == "runs":
            assert run_id in result.output

    def test_the_json_export_verifies_as_bad_not_unreadable(self, tmp_path: Path, damage: str):
        db, run_id = _damaged(tmp_path, damage)
        out = tmp_path / "e.json"
        toolledger.export_json(db, run_id, out)
        json.loads(out.read_text(encoding="utf-8"))  # still a JSON file
        report = toolledger.verify_export(out)
        assert not report.ok
        assert report.first_bad_seq == 0


def test_a_text_event_count_does_not_break_the_listing(tmp_path: Path):
    db = tmp_path / "count.db"
    with toolledger.run("good", db=db) as good:
        pass
    with toolledger.run("damaged", db=db) as bad:
        pass
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET event_count = 'many' WHERE run_id = ?", (bad.run_id,))
    conn.close()
    result = _cli(db, "runs")
    assert result.exit_code == 0
    assert good.run_id in result.output
    assert bad.run_id in result.output
    report = toolledger.verify(db, bad.run_id)
    assert not report.ok
    assert "event_count" in report.reason
    assert toolledger.verify(db, good.run_id).ok


def test_add_artifact_with_a_lone_surrogate_name_is_invalid_argument(tmp_path: Path):
    db = tmp_path / "art.db"
    with toolledger.run("artifacts", db=db) as run:
        with pytest.raises(toolledger.InvalidArgumentError) as err:
            run.add_artifact(b"data", name="\ud800")
        assert err.value.code == "INVALID_ARGUMENT"
        with pytest.raises(toolledger.InvalidArgumentError):
            run.add_artifact(b"data", name="report", media_type="text/\udc80")
        run.add_artifact(b"data", name="report")
    assert not run.errors
    report = toolledger.verify(db, run.run_id)
    assert report.ok
    kinds = [r.kind for r in toolledger.open_store(db).read_events(run.run_id)]
    assert kinds == ["artifact", "finish"]
