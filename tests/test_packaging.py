"""What ships beside the code: the version written once, the license text, the changelog."""

from __future__ import annotations

import hashlib
import re
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
