"""Resume without re-planning: a restarted run gets its recorded turn, the tool runs once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import toolledger

pytest.importorskip("anthropic")

ROOT = Path(__file__).resolve().parents[2]


def _life(tmp_path: Path, life: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.replay._resume_child",
            str(tmp_path / "resume.db"),
            "run-resume-1",
            str(life),
            str(tmp_path / "effects.txt"),
            str(tmp_path / "lives.txt"),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_killed_run_resumed_gets_recorded_turn_and_tool_runs_once(tmp_path: Path) -> None:
    """SIGKILL after the tool's effect; the same run id restarted: the recorded model turn
    is served (same tool-call id, no request), the checkpoint answers the call, and only
    the turn the record does not hold reaches the model."""
    first = _life(tmp_path, 1)
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = _life(tmp_path, 2)
    assert second.returncode == 0, second.stderr
    effects = (tmp_path / "effects.txt").read_text().splitlines()
    assert [json.loads(x) for x in effects] == [{"to": "a@b.c"}]
    (life,) = [json.loads(x) for x in (tmp_path / "lives.txt").read_text().splitlines()]
    assert life == {
        "life": "2",
        "requests": 1,
        "call_id": "toolu_life1",
        "replayed": True,
        "served": 1,
    }
    view = toolledger.load_run(tmp_path / "resume.db", "run-resume-1")
    calls = [e for e in view.events if e.kind == "llm_call"]
    assert len(calls) == 3  # life 1's turn, its served copy, life 2's live turn
    assert calls[1].meta["resumed_from"] == calls[0].event_id
    assert "resumed_from" not in calls[2].meta
