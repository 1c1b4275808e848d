"""docs/cli.md lists every command, and its shell-completion recipe works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolledger.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _toolledger(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolledger"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env},
        check=False,
        timeout=120,
    )


def test_cli_docs_table_names_every_command_once() -> None:
    """The commands table in docs/cli.md is exactly the group's commands."""
    documented = re.findall(r"^\| `([a-z][a-z-]*)[ `]", DOC.read_text(), flags=re.MULTILINE)
    assert sorted(documented) == sorted(main.commands)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_cli_completion_source_prints_a_script_for_each_documented_shell(shell: str) -> None:
    """``_TOOLLEDGER_COMPLETE=<shell>_source toolledger`` (as documented) prints the script."""
    assert f"_TOOLLEDGER_COMPLETE={shell}_source toolledger" in DOC.read_text()
    out = _toolledger({"_TOOLLEDGER_COMPLETE": f"{shell}_source"})
    assert out.returncode == 0, out.stderr
    assert "_toolledger_completion" in out.stdout


def test_cli_completion_completes_format_choices() -> None:
    """The bash completion protocol offers ``export --format``'s choices."""
    out = _toolledger(
        {
            "_TOOLLEDGER_COMPLETE": "bash_complete",
            "COMP_WORDS": "toolledger export RUN --format ",
            "COMP_CWORD": "4",
        }
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["plain,json", "plain,md", "plain,html"]
