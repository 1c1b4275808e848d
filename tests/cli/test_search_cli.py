"""``toolledger search``, ``show --json`` and ``runs --json``: the read API on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import toolledger
from toolledger.cli import main

from .._internals import sqlite_search


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    with toolledger.run("Refund order A-1001", agent="support", db=path, run_id="run-a") as run:
        with run.step("lookup", justification="The customer asked twice", order="A-1001") as st:
            st.record_output(refund_id="RF-77")
        run.approval("refund", granted=False, by="bob", reason="Over the limit\x1b]52;c;aGk=\x07")
    with toolledger.run("Weekly report", agent="reports", db=path, run_id="run-b") as run:
        run.note("all fine")
    return path


def invoke(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args])


class TestSearchCommand:
    def test_table_shows_time_run_kind_name_status_and_snippet(self, db: Path) -> None:
        """One row per event; the snippet holds the match."""
        result = invoke(db, "search", "asked")
        assert result.exit_code == 0, result.output
        header, *rows = result.output.splitlines()
        assert header.split() == ["time", "run", "kind", "name", "status", "snippet"]
        assert len(rows) == 1
        assert rows[0].split()[1:5] == ["run-a", "step", "lookup", "completed"]
        assert "The customer asked twice" in rows[0]

    def test_a_hit_on_the_run_goal_shows_the_goal(self, db: Path) -> None:
        """An event matched only by its run's goal: the snippet is the goal, whole when short."""
        result = invoke(db, "search", "weekly", "--kind", "note")
        assert result.exit_code == 0, result.output
        _header, row = result.output.splitlines()
        assert row.split()[1:3] == ["run-b", "note"]
        assert row.endswith("goal: Weekly report")

    def test_filters_and_json_lines(self, db: Path) -> None:
        """--kind, --status, --agent and --since filter; --json prints merged events."""
        result = invoke(
            db, "search", "limit", "--kind", "approval", "--status", "refused", "--since", "1d",
            "--agent", "support", "--json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        (line,) = result.output.splitlines()
        event = json.loads(line)
        assert (event["name"], event["status"], event["run_id"]) == ("refund", "refused", "run-a")
        assert event["approval"]["by"] == "bob"
        assert invoke(db, "search", "limit", "--agent", "reports").output.count("\n") == 1

    def test_control_characters_never_reach_the_terminal(self, db: Path) -> None:
        """An OSC 52 sequence stored in a reason is printed as plain text."""
        result = invoke(db, "search", "limit")
        assert "\x1b" not in result.output
        assert "\x07" not in result.output
        assert "\\x1b]52" in result.output  # shown, inert

    @pytest.mark.parametrize("args", [["--since", "7x"], ["--until", "yesterday"], ["!!!"]])
    def test_bad_arguments_exit_2_with_one_line(self, db: Path, args: list[str]) -> None:
        """A malformed age or text is a usage error: exit 2, one line, no traceback."""
        result = invoke(db, "search", *args)
        assert result.exit_code == 2
        assert "Traceback" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1

    def test_fts_syntax_is_searched_as_words(self, db: Path) -> None:
        """Unbalanced quotes and NEAR( are words to look for, not errors."""
        for text in ['"unbalanced', "NEAR(", "a OR"]:
            assert invoke(db, "search", text).exit_code == 0
        assert invoke(db, "search", "--limit", str(10**30)).exit_code == 0

    def test_without_fts5_a_one_line_warning_goes_to_stderr(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The scan fallback says so on stderr; the results are the same."""
        monkeypatch.setattr(sqlite_search, "fts5_available", lambda conn: False)
        plain = tmp_path / "plain.db"
        with toolledger.run("Refund", db=plain) as run:
            run.note("customer asked")
        result = invoke(plain, "search", "asked")
        assert result.exit_code == 0
        assert result.stderr.startswith("warning: ")
        assert len(result.stdout.splitlines()) == 2


class TestJsonViews:
    def test_show_json_is_the_merged_view(self, db: Path) -> None:
        """show --json prints load_run(...).to_dict()."""
        result = invoke(db, "show", "run-a", "--json")
        assert result.exit_code == 0
        doc = json.loads(result.stdout)
        assert doc == json.loads(
            json.dumps(toolledger.load_run(db, "run-a").to_dict(), sort_keys=True)
        )
        assert [e["name"] for e in doc["events"]] == ["lookup", "refund", "finish"]

    def test_runs_json_carries_the_run_view(self, db: Path) -> None:
        """runs --json: one run per line with goal, agent, status, times and counts."""
        result = invoke(db, "runs", "--json")
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert [r["run_id"] for r in rows] == ["run-b", "run-a"]
        assert rows[1]["goal"] == "Refund order A-1001"
        assert rows[1]["agent"] == "support"
        assert rows[1]["counts"]["refused"] == 1
        assert rows[1]["duration_ms"] >= 0

    def test_search_has_help_with_an_example(self, db: Path) -> None:
        """Like every command, search documents itself."""
        result = invoke(db, "search", "-h")
        assert result.exit_code == 0
        assert "Example:" in result.output
