"""Every framework adapter, in real processes: SIGKILL after the effect, restart, one effect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("_framework_child.py")
ADAPTERS = ["anthropic", "langgraph", "openai_agents", "pydantic_ai"]


def _child(
    adapter: str, db: Path, folder: Path, mode: str, point: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    return subprocess.run(
        [sys.executable, str(CHILD), adapter, str(db), str(folder), mode, point],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(
    ("point", "expected"),
    [
        # The result was stored before the kill: the restart replays it.
        ("after-completion", "sent to ana@example.com"),
        # Killed inside the tool: the restart finds the call executing and recovers it
        # from the outbox (without recover it would be OUTCOME_UNKNOWN, never re-run).
        ("after-effect", "sent to ana@example.com"),
    ],
)
@pytest.mark.parametrize("restart", ["again", "replan"])
def test_sigkill_after_the_effect_then_restart_runs_the_tool_once(
    tmp_path: Path, adapter: str, point: str, expected: str, restart: str
) -> None:
    """The killed process did the effect; the restarted framework gets its result, once.

    ``again``: the framework's resume path (the same call id); ``replan``: the model is asked
    again and issues the same action under a new id, caught by the tool's effect key.
    """
    db = tmp_path / "ledger.db"
    first = _child(adapter, db, tmp_path, "first", point)
    assert first.returncode == -signal.SIGKILL, first.stderr
    effects = tmp_path / "effects.log"
    assert effects.read_text().splitlines() == ["ana@example.com"]
    again = _child(adapter, db, tmp_path, restart, point)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["result"] == expected
    assert effects.read_text().splitlines() == ["ana@example.com"]
