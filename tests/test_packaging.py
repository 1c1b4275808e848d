"""What ships beside the code: the version written once, the license text, the changelog."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import toolledger

ROOT = Path(__file__).resolve().parents[1]

#: SHA-256 of the Apache License 2.0 text as published (apache.org/licenses/LICENSE-2.0.txt).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_is_the_published_apache_2_text() -> None:
    """LICENSE is the Apache-2.0 text byte for byte (pyproject declares Apache-2.0)."""
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256


def test_pyproject_reads_the_version_from_version_module() -> None:
    """The version is written once: pyproject takes it from toolledger._version."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "toolledger._version.__version__"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert "setuptools>=77" in project["build-system"]["requires"]


def test_changelog_has_a_section_for_this_version() -> None:
    """CHANGELOG.md (Keep a Changelog) has a section for the version being built."""
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert versions[0] == toolledger.__version__


_NOT_SHIPPED = shutil.ignore_patterns(
    ".git", ".venv*", "__pycache__", "*.egg-info", "demo-out", ".*_cache", "build", "dist"
)


def _build(tmp_path: Path, kind: str) -> Path:
    """Build the ``sdist`` or ``wheel`` from a copy of the tree (no egg-info left in ours)."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=_NOT_SHIPPED)
    out = tmp_path / "dist"
    script = (
        f"import sys; from setuptools import build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return out / done.stdout.strip().splitlines()[-1]


def test_sdist_ships_the_whole_test_suite(tmp_path: Path) -> None:
    """The sdist holds every test module and conftest, so a packager can run the suite."""
    sdist = _build(tmp_path, "sdist")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    expected = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert "tests/conftest.py" in expected
    assert expected <= names, sorted(expected - names)[:10]
    assert {"Makefile", "pyproject.toml", "src/toolledger/py.typed"} <= names


def test_dev_tools_are_a_dependency_group_not_a_published_extra() -> None:
    """``dev`` is a PEP 735 group; the published extras are what users install."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert "dev" not in extras
    assert "pytest>=8" in project["dependency-groups"]["dev"]
    assert not any("grpc" in req for req in extras["otlp"])
    assert any("proto-grpc" in req for req in extras["otlp-grpc"])


@pytest.mark.slow
def test_wheel_in_a_clean_venv_runs_the_readme_quick_start(tmp_path: Path) -> None:
    """The built wheel, installed alone in a new venv, runs the README quick start twice."""
    wheel = _build(tmp_path, "wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        timeout=600,
        capture_output=True,
        env=env,
    )
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start") : text.index("<!-- section:")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    script = tmp_path / "quick.py"
    script.write_text(code + "\nprint('replayed' if outcome.replayed else 'executed')\n")
    work = tmp_path / "work"
    work.mkdir()
    runs = [
        subprocess.run(
            [str(python), str(script)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=env,
        ).stdout.splitlines()[-1]
        for _ in range(2)
    ]
    assert runs == ["executed", "replayed"]
    # The package in the venv is the wheel's, not the source tree's.
    where = subprocess.run(
        [str(python), "-c", "import toolledger; print(toolledger.__file__)"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert str(venv) in where


def test_readme_links_are_absolute_for_the_package_page() -> None:
    """The README is the package page: every link and image is absolute (or an in-page anchor)."""
    tomllib = pytest.importorskip("tomllib")
    home = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    relative = [t for t in targets if not t.startswith(("https://", "#"))]
    assert relative == []
    owner_repo = home.removeprefix("https://github.com/")
    for target in targets:
        if target.startswith("https://"):
            assert owner_repo in target, target
        if "/blob/main/" in target or "/main/docs/" in target:
            local = target.split("/main/", 1)[1].split("#", 1)[0]
            assert (ROOT / local).exists(), local
