"""The guard's examples run offline and show what they promise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


def _run(name: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )


@pytest.mark.slow
def test_example_openai_loop_survives_restart_without_second_refund(tmp_path: Path) -> None:
    """The OpenAI loop: one refund, the same bytes posted twice, the answer arrives."""
    proc = _run("openai_loop.py", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["exit_codes"] == [3, 0]
    assert summary["refunds_made"] == 1
    assert summary["same_bytes_posted_again"] is True
    assert summary["answer"] == "Refunded $19.99 for order A-1001."


@pytest.mark.slow
def test_example_cas_store_two_workers_one_charge(tmp_path: Path) -> None:
    """Two racing workers: one charge; both end with the same payload."""
    proc = _run("cas_store.py", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "charges made: 1" in proc.stdout
    assert len((tmp_path / "charges.log").read_text().splitlines()) == 1
