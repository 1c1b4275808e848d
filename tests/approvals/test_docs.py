"""The README's approvals section runs as written; docs/approvals.md names every CLI command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolledger.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _section(name: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"<!-- section:{name} -->", 1)[1].split(f"<!-- /section:{name} -->", 1)[0]


def test_readme_approvals_section_comes_right_after_guard() -> None:
    """The section sits right after the guard section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after_guard = text.split("<!-- /section:guard -->", 1)[1].lstrip()
    assert after_guard.startswith("<!-- section:approvals -->")


def test_readme_approvals_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snippet runs in an empty directory: the call waits, then is sent once."""
    (code,) = re.findall(r"```python\n(.*?)```", _section("approvals"), re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md#approvals", "exec"), namespace)
    out = namespace["out"]
    assert out.payload == {"sent_to": "ana@example.com"}  # type: ignore[attr-defined]
    assert (tmp_path / "ledger.db").exists()


def test_docs_cover_every_approval_command() -> None:
    """docs/approvals.md documents each command and every option it has."""
    doc = (ROOT / "docs" / "approvals.md").read_text(encoding="utf-8")
    for name in ("approve", "deny", "approvals"):
        command = main.commands[name]
        assert f"toolledger {name}" in doc
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in doc, (name, opt)
    assert CliRunner().invoke(main, ["approvals", "-h"]).exit_code == 0
