"""A path that names no file yet makes a new ledger, and says so once, with its place."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import toolledger


@toolledger.tool(revision="1")
def _noop(input: dict[str, int], ctx: toolledger.ExecuteContext) -> dict[str, int]:
    return input


class TestNewLedgerWarning:
    def test_a_mistyped_path_warns_once_naming_the_new_file(self, tmp_path: Path) -> None:
        """The first open of a missing path warns with its absolute path; reopening does not."""
        path = tmp_path / "ledgr.db"
        with (
            pytest.warns(toolledger.NewLedgerWarning, match="created a new ledger at") as got,
            toolledger.run(goal="g", db=path) as run,
        ):
            run.call(_noop, call_id="c1", input={"n": 1})
        assert [str(w.message) for w in got].count(str(got[0].message)) == 1
        assert str(path.resolve()) in str(got[0].message)
        with warnings.catch_warnings():
            warnings.simplefilter("error", toolledger.NewLedgerWarning)
            with toolledger.run(goal="g", db=path) as run:  # the file exists: no warning
                assert run.call(_noop, call_id="c1", input={"n": 1}).replayed

    def test_readonly_and_memory_opens_never_warn(self, tmp_path: Path) -> None:
        """Reading (which never creates) and ``:memory:`` say nothing."""
        with warnings.catch_warnings():
            warnings.simplefilter("error", toolledger.NewLedgerWarning)
            toolledger.open_store(":memory:").close()
            with pytest.raises(toolledger.NotFoundError):
                toolledger.open_store(tmp_path / "none.db", readonly=True)

    def test_the_warning_is_a_filterable_user_warning(self) -> None:
        """Users silence it by class once a new file is what they expect."""
        assert issubclass(toolledger.NewLedgerWarning, UserWarning)


class TestMissingPostgresExtra:
    def test_postgres_dsn_without_psycopg_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No psycopg: INVALID_ARGUMENT with the pip command, not a bare ModuleNotFoundError."""
        import sys

        monkeypatch.setitem(sys.modules, "psycopg", None)
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            toolledger.open_store("postgresql://postgres@127.0.0.1:5432/test")
        assert "pip install 'toolledger[postgres]'" in info.value.message
        assert info.value.details["extra"] == "postgres"

    def test_cli_exits_2_with_the_install_command(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The CLI prints one line naming the extra and exits 2 (usage), not 3 (internal)."""
        import os
        import subprocess
        import sys

        shim = tmp_path / "sitecustomize.py"
        shim.write_text(
            "import sys\nsys.modules['psycopg'] = None\n"  # as if the extra were not installed
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
        done = subprocess.run(
            [sys.executable, "-m", "toolledger", "--db", "postgresql://x@127.0.0.1/db", "runs"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "pip install 'toolledger[postgres]'" in done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
