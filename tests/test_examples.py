"""Every example runs standalone: ``python examples/<name>.py`` in a scratch directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_and_exits_zero(example: Path, tmp_path: Path) -> None:
    """The example exits 0 when run with the venv's python from an empty directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLLEDGER_DB")}
    proc = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def test_quickstart_tool_runs_once_and_result_is_redelivered(tmp_path: Path) -> None:
    """The quickstart's story: one execution, a failed post, deliver after reconnecting."""
    example = next(p for p in EXAMPLES if p.name == "quickstart.py")
    for attempt in range(2):  # a second run starts the story afresh
        proc = subprocess.run(
            [sys.executable, str(example)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "decide -> execute" in out
        assert "posting the result failed" in out
        assert "decide -> deliver" in out
        assert "send_email ran 1 time(s)" in out
        assert "the tool ran exactly once" in out
        assert (tmp_path / "demo-out" / "quickstart.db").exists(), attempt
        assert len((tmp_path / "demo-out" / "outbox.log").read_text().splitlines()) == 1
