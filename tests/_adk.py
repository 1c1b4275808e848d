"""Where the Google ADK tests find the ADK: ``from .._adk import adk_python_or_skip``.

google-adk pins OpenTelemetry below the dev environment's (every 2.x release: <= 1.44), so
it lives in a virtualenv of its own, ``$TOOLLEDGER_ADK`` (default ``.venv-adk`` at the
repository root; ``.ci/run`` makes it from ``.ci/adk-requirements.txt``). Tests run the
ADK parts with that interpreter and toolledger's ``src`` on ``PYTHONPATH``. An interpreter
that already has the ADK (``sys.executable``) is used as it is.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

__all__ = ["ROOT", "adk_env", "adk_python_or_skip"]

ROOT = Path(__file__).resolve().parents[1]


def adk_python_or_skip() -> str:
    """The python that has google-adk; skip without one, unless CI demands it
    (``TOOLLEDGER_REQUIRE_ADK=1``: then the test fails)."""
    venv = Path(os.environ.get("TOOLLEDGER_ADK") or ROOT / ".venv-adk")
    python = venv / "bin" / "python"
    if python.is_file():
        return str(python)
    if importlib.util.find_spec("google.adk") is not None:
        return sys.executable
    reason = f"no Google ADK virtualenv at {venv} (set TOOLLEDGER_ADK or run .ci/run)"
    if os.environ.get("TOOLLEDGER_REQUIRE_ADK") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def adk_env(*paths: Path) -> dict[str, str]:
    """The environment for an ADK subprocess: toolledger's ``src`` (and ``paths``) first."""
    parts = [str(ROOT / "src"), *map(str, paths), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in parts if p)}
