"""docs/checkpoint.md shows the transition table as it is in the code."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import toolledger as tl
from toolledger.checkpoint import Status

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "checkpoint.md"
SCRIPT = ROOT / "scripts" / "mermaid.py"


def _mermaid() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toolledger_docs_mermaid", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_generated_blocks_match_transition_table() -> None:
    """The diagram and tables in the doc are exactly what scripts/mermaid.py renders."""
    text = DOC.read_text(encoding="utf-8")
    mermaid = _mermaid()
    assert mermaid.update(text) == text, "run: python scripts/mermaid.py --write docs/checkpoint.md"
    assert mermaid.render_diagram() in text


def test_docs_diagram_has_every_edge_of_the_table() -> None:
    """Each (source, target, transition) of TRANSITIONS is one arrow in the diagram."""
    diagram = _mermaid().render_diagram()
    arrows = set(re.findall(r"^    (\w+) --> (\w+): (\w+)$", diagram, re.MULTILINE))
    expected = {
        (source.value, rule.target.value, name)
        for name, rule in tl.checkpoint.TRANSITIONS.items()
        for source in rule.sources
    }
    assert arrows == expected


def test_mermaid_check_detects_a_stale_doc(tmp_path: Path) -> None:
    """--check exits 1 on a doc whose diagram lacks an edge, 0 on the real doc."""
    stale = tmp_path / "doc.md"
    stale.write_text(
        DOC.read_text(encoding="utf-8").replace("    executing --> ready: release_execution\n", ""),
        encoding="utf-8",
    )
    cmd = [sys.executable, str(SCRIPT), "--check"]
    assert subprocess.run([*cmd, str(stale)], capture_output=True, check=False).returncode == 1
    assert subprocess.run([*cmd, str(DOC)], capture_output=True, check=False).returncode == 0
    subprocess.run([sys.executable, str(SCRIPT), "--write", str(stale)], check=True)
    assert stale.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")


def test_docs_name_every_transition_and_status() -> None:
    """The prose covers every transition function and status."""
    text = DOC.read_text(encoding="utf-8")
    for name in tl.checkpoint.TRANSITIONS:
        assert f"`{name}(record, *," in text, name
    for status in Status:
        assert f"| `{status.value}` |" in text, status


def test_readme_checkpoint_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's checkpoint example runs as written (in a scratch directory)."""
    monkeypatch.chdir(tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- section:checkpoint -->", 1)[1].split("<!-- /section", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    store = namespace["store"]
    assert isinstance(store, tl.SQLiteStore)
    rec = store.get("default", "toolu_01")
    assert rec is not None
    assert rec.status is Status.DELIVERED
    store.close()
