"""``python -m toolledger`` runs the same command as the ``toolledger`` script."""

from __future__ import annotations

import os
import subprocess
import sys

import toolledger


def test_python_m_toolledger_version_prints_the_version() -> None:
    """``python -m toolledger --version`` prints the one version string and exits 0."""
    out = subprocess.run(
        [sys.executable, "-m", "toolledger", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"toolledger, version {toolledger.__version__}"
