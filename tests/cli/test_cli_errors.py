"""Every CLI error is one line on stderr with a documented exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import toolledger
from toolledger.cli import main


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with toolledger.run("a goal", db=path):
        pass
    return path


class TestDbPath:
    @pytest.mark.parametrize("command", [["migrate"], ["gc", "--older-than", "1d"]])
    def test_db_under_a_regular_file_is_one_line_exit_2(self, tmp_path, command) -> None:
        (tmp_path / "file").write_text("not a directory")
        line = assert_one_line_error(invoke("--db", str(tmp_path / "file" / "x.db"), *command))
        assert "file" in line


class TestLimits:
    @pytest.mark.parametrize("command", ["runs", "checkpoints", "approvals"])
    def test_limit_past_any_table_size_means_no_limit(self, db, command) -> None:
        result = invoke("--db", str(db), command, "--limit", str(10**30))
        assert result.exit_code == 0, result.output
        assert "Error" not in result.output

    @pytest.mark.parametrize("command", ["runs", "checkpoints", "approvals"])
    def test_negative_limit_is_a_usage_error(self, db, command) -> None:
        result = invoke("--db", str(db), command, "--limit", "-1")
        assert result.exit_code == 2
        assert "negative" in result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit)

    def test_runs_limit_huge_still_lists_the_run(self, db) -> None:
        result = invoke("--db", str(db), "runs", "--limit", str(10**30))
        assert "a goal" in result.stdout


class TestAges:
    @pytest.mark.parametrize("age", ["99999999999d", "9" * 40 + "w"])
    def test_gc_age_past_timedelta_is_one_line_exit_2(self, db, age) -> None:
        line = assert_one_line_error(invoke("--db", str(db), "gc", "--older-than", age))
        assert "at most" in line

    def test_gc_age_reaching_before_year_1_erases_nothing(self, db) -> None:
        result = invoke("--db", str(db), "gc", "--older-than", "999999999d", "--json")
        assert result.exit_code == 0, result.output
        assert '"runs_erased": 0' in result.stdout
