"""The README's journal example runs as written; the docs name every public journal call."""

from __future__ import annotations

import re
from pathlib import Path

import toolledger

ROOT = Path(__file__).resolve().parents[2]


def test_readme_journal_example_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLLEDGER_DB", raising=False)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- section:journal -->", 1)[1].split("<!-- /section:journal -->")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2  # recording, then reading back and searching
    namespace: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), namespace)
    run_id = namespace["run"].run_id
    assert (tmp_path / "run.html").exists()
    assert toolledger.verify(tmp_path / ".toolledger.db", run_id).ok


def test_docs_name_every_public_journal_call() -> None:
    docs = (ROOT / "docs" / "journal.md").read_text(encoding="utf-8")
    for name in (
        "toolledger.run(",
        "run.step(",
        "run.approval(",
        "toolledger.traced",
        "toolledger.verify(",
        "toolledger.verify_export(",
        "export_json",
        "export_markdown",
        "export_html",
        "toolledger.import_json(",
        "toolledger.Replayer(",
        "erase_content(",
        "run.begin_event(",
        "toolledger.load_run(",
        "toolledger.list_runs(",
        "toolledger.search(",
    ):
        assert name in docs, name
