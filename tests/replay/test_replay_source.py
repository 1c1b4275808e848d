"""A replayed or forked run names its source (``replay_of`` / ``forked_from``, from its
hashed header) in the read API (``RunView.source``), ``show``'s header line, the JSON and
Markdown exports; ``verify`` and ``verify_export`` catch an edited source."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main


def _runs(db: Path) -> tuple[str, str, str]:
    """A source run ``r1``, a replay of it and a fork of it at its second note."""
    with toolledger.run("source", db=db, run_id="r1") as run:
        run.note("one")
        run.note("two")
    second = [e for e in toolledger.load_run(db, "r1").events if e.kind == "note"][1].event_id
    with toolledger.run("source", db=db, replay_of="r1") as replayed:
        pass
    with toolledger.run("source", db=db, replay_of="r1", fork_at=second) as forked:
        pass
    return replayed.run_id, forked.run_id, second


def test_run_view_names_the_source_of_a_replay_and_a_fork(tmp_path: Path) -> None:
    """``RunView.source`` (and ``summary()``) carry the header's source; a plain run has none."""
    db = tmp_path / "l.db"
    replayed, forked, at = _runs(db)
    assert toolledger.load_run(db, "r1").source is None
    assert toolledger.load_run(db, replayed).source == {
        "mode": "replay",
        "run_id": "r1",
        "event_id": None,
    }
    view = toolledger.load_run(db, forked)
    assert view.source == {"mode": "fork", "run_id": "r1", "event_id": at}
    assert view.summary()["source"] == {"mode": "fork", "run_id": "r1", "event_id": at}


def test_show_and_exports_name_the_source_in_the_run_header(tmp_path: Path) -> None:
    """``show``'s first line, the Markdown facts table and the JSON export's run name it."""
    db = tmp_path / "l.db"
    replayed, forked, at = _runs(db)
    runner = CliRunner()
    shown = runner.invoke(main, ["--db", str(db), "show", replayed])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0].endswith("replay of r1")
    shown = runner.invoke(main, ["--db", str(db), "show", forked])
    assert shown.output.splitlines()[0].endswith(f"fork of r1 at {at}")
    plain = runner.invoke(main, ["--db", str(db), "show", "r1"])
    assert " of " not in plain.output.splitlines()[0]
    md = Path(toolledger.export_markdown(db, forked, tmp_path / "f.md").path).read_text()
    assert f"| Source | fork of r1 at {at} |" in md
    exported = json.loads(
        Path(toolledger.export_json(db, replayed, tmp_path / "r.json").path).read_text()
    )
    assert exported["run"]["source"] == {"mode": "replay", "run_id": "r1", "event_id": None}


def test_verify_export_fails_when_the_exported_source_is_edited(tmp_path: Path) -> None:
    """The export's ``run.source`` is checked against the hashed header it came from."""
    db = tmp_path / "l.db"
    replayed, _, _ = _runs(db)
    path = Path(toolledger.export_json(db, replayed, tmp_path / "r.json").path)
    assert toolledger.verify_export(path).ok
    doc = json.loads(path.read_text())
    doc["run"]["source"]["run_id"] = "someone-else"
    path.write_text(json.dumps(doc))
    report = toolledger.verify_export(path)
    assert not report.ok
    assert "source" in (report.reason or "")


@pytest.mark.parametrize("key", ["replay_of", "forked_from"])
def test_verify_fails_when_the_stored_source_is_edited(tmp_path: Path, key: str) -> None:
    """The source is in the hashed run header: editing it in the database fails verify."""
    db = tmp_path / "l.db"
    replayed, forked, _ = _runs(db)
    run_id = replayed if key == "replay_of" else forked
    assert toolledger.verify(db, run_id).ok
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        doc = json.loads(data)
        doc["header"][key]["run_id"] = "someone-else"
        conn.execute("UPDATE runs SET data = ? WHERE run_id = ?", (json.dumps(doc), run_id))
    conn.close()
    assert toolledger.load_run(db, run_id).source["run_id"] == "someone-else"  # type: ignore[index]
    assert not toolledger.verify(db, run_id).ok
