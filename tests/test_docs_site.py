"""The docs site builds with ``mkdocs build --strict`` (mkdocs.yml at the repository root).

Strict: a broken link between pages, a missing nav entry or a docstring mkdocstrings cannot
render fails the build. The API reference is generated from the docstrings: every public name
must have its entry on the built page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import toolledger
import toolledger.checkpoint
import toolledger.telemetry
import toolledger.testing

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("material")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_every_doc_page_is_in_the_site(site: Path) -> None:
    for page in (ROOT / "docs").glob("**/*.md"):
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert built.exists(), f"{page} is not in the built site"


@pytest.mark.parametrize(
    ("module", "page"),
    [
        (toolledger, "reference/api"),
        (toolledger.telemetry, "reference/telemetry"),
        (toolledger.testing, "reference/testing"),
        (toolledger.checkpoint, "reference/checkpoint"),
    ],
    ids=["toolledger", "telemetry", "testing", "checkpoint"],
)
def test_every_public_name_has_an_api_entry(site: Path, module: object, page: str) -> None:
    html = (site / page / "index.html").read_text(encoding="utf-8")
    prefix = module.__name__  # type: ignore[attr-defined]
    names = [n for n in module.__all__ if not n.startswith("__")]  # type: ignore[attr-defined]
    missing = [n for n in names if f'id="{prefix}.{n}"' not in html]
    assert not missing, f"{page}: no entry for {missing}"


def test_every_integration_module_has_an_api_entry(site: Path) -> None:
    html = (site / "reference/integrations/index.html").read_text(encoding="utf-8")
    modules = sorted(
        p.stem
        for p in (ROOT / "src/toolledger/integrations").glob("*.py")
        if not p.stem.startswith("_")
    )
    missing = [m for m in modules if f'id="toolledger.integrations.{m}"' not in html]
    assert not missing, f"integrations reference lacks {missing}"
