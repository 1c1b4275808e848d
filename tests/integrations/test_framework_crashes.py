"""Every framework adapter, in real processes: SIGKILL after the effect, restart, one effect.

For each adapter and kill point the killed first process runs once (module-scoped); each
restart works on a copy of what it left (the ledger, the framework's saved state, the
outbox), so the two restarts start from the same crash.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("_framework_child.py")
ADAPTERS = ["anthropic", "langgraph", "openai_agents", "pydantic_ai"]
#: Inside the tool right after its effect (the result not stored), or right after the
#: result was stored (before the framework saved or sent anything).
POINTS = ["after-effect", "after-completion"]


def _child(adapter: str, folder: Path, mode: str, point: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(CHILD), adapter, str(folder / "ledger.db"), str(folder), mode, point],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """``crashed(adapter, point)``: the folder the killed first process left (made once)."""
    made: dict[tuple[str, str], Path] = {}

    def get(adapter: str, point: str) -> Path:
        if (adapter, point) not in made:
            folder = tmp_path_factory.mktemp(f"{adapter}-{point}")
            first = _child(adapter, folder, "first", point)
            assert first.returncode == -signal.SIGKILL, first.stderr
            assert (folder / "effects.log").read_text().splitlines() == ["ana@example.com"]
            made[adapter, point] = folder
        return made[adapter, point]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("restart", ["again", "replan"])
def test_sigkill_after_the_effect_then_restart_runs_the_tool_once(
    crashed: Callable[[str, str], Path], tmp_path: Path, adapter: str, point: str, restart: str
) -> None:
    """The killed process did the effect; the restarted framework gets its result, once.

    ``again``: the framework's resume path (the same call id): the stored result, or the
    outcome ``recover`` proves. ``replan``: the model is asked again and issues the same
    action under a new id, caught by the tool's effect key.
    """
    folder = tmp_path / "copy"
    shutil.copytree(crashed(adapter, point), folder)
    again = _child(adapter, folder, restart, point)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["result"] == "sent to ana@example.com"
    assert (folder / "effects.log").read_text().splitlines() == ["ana@example.com"]
