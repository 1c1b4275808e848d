"""Real processes: a decision from another process (the CLI), and a SIGKILL after approval."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolledger.checkpoint import Status
from toolledger.store import SQLiteStore

CHILD = Path(__file__).with_name("_child.py")


def _child(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(CHILD),
            str(tmp / "l.db"),
            "c1",
            str(tmp / "effects"),
            str(tmp / "asks"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolledger.cli import main; main()",
            "--db",
            str(tmp / "l.db"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pending_decided_by_cli_in_another_process_then_proceeds_exactly_once(
    tmp_path: Path,
) -> None:
    """Waiting call → `toolledger approve` in a second process → racing callers run it once."""
    first = _child(tmp_path, "pend")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["awaiting_approval", "False"]
    listed = _cli(tmp_path, "approvals", "--pending")
    assert listed.returncode == 0
    assert "default/c1" in listed.stdout
    approved = _cli(tmp_path, "approve", "c1", "--by", "alice", "--reason", "checked")
    assert approved.returncode == 0, approved.stderr
    assert "approved by alice: checked" in approved.stdout
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                str(tmp_path / "l.db"),
                "c1",
                str(tmp_path / "effects"),
                str(tmp_path / "asks"),
                "approve",
                "-",
                str(barrier),
                "3",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=60) for p in racers]
    assert all(p.returncode == 0 for p in racers), results
    assert len(_lines(tmp_path / "effects")) == 1  # executed exactly once
    assert len(_lines(tmp_path / "asks")) == 1  # only the first call asked
    outs = sorted(out.split()[0] for out, _ in results)
    # one executed; the others replayed it or found it executing (never executed again)
    assert outs.count("completed") >= 1
    assert set(outs) <= {"completed", "OUTCOME_UNKNOWN"}
    rec = SQLiteStore(tmp_path / "l.db").get("default", "c1")
    assert rec is not None
    assert rec.status in (Status.COMPLETED, Status.UNCERTAIN)
    again = _child(tmp_path, "approve")
    assert len(_lines(tmp_path / "effects")) == 1
    assert len(_lines(tmp_path / "asks")) == 1
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("point", ["after-approval", "before-claim"])
def test_crash_after_approval_before_execution_does_not_ask_twice(
    tmp_path: Path, point: str
) -> None:
    """SIGKILL between the stored approval and the claim: the restart runs it, unasked."""
    crashed = _child(tmp_path, "approve", point)
    assert crashed.returncode == -signal.SIGKILL
    store = SQLiteStore(tmp_path / "l.db")
    stored = store.approval_get("default", "c1")
    assert stored is not None
    assert stored.status.value == "approved"
    assert stored.by == "policy"
    assert store.get("default", "c1") is None  # nothing claimed before the crash
    assert _lines(tmp_path / "effects") == []
    assert len(_lines(tmp_path / "asks")) == 1
    fresh = _child(tmp_path, "approve")
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.split() == ["completed", "False"]
    assert len(_lines(tmp_path / "asks")) == 1  # the stored decision counted
    assert len(_lines(tmp_path / "effects")) == 1
