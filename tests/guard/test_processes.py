"""Live workers in real processes: a racing fleet executes once; a slow owner loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import toolledger
from toolledger.checkpoint import Status

CHILD = Path(__file__).with_name("_worker_child.py")


def _spawn(db: Path, folder: Path, name: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(folder), name, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def _wait_for(path: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


@pytest.mark.slow
def test_call_racing_processes_execute_once(tmp_path: Path) -> None:
    """Four processes start the same call at once: one effect; the rest replay or report."""
    db = tmp_path / "race.db"
    toolledger.SQLiteStore(db).close()  # create the schema once
    procs = [_spawn(db, tmp_path, f"w{i}") for i in range(4)]
    (tmp_path / "go").touch()
    results = [_result(p) for p in procs]
    effects = (tmp_path / "effects.log").read_text().split()
    assert len(effects) == 1
    outcomes = sorted(str(r["outcome"]) for r in results)
    assert outcomes.count("new") == 1
    assert set(outcomes) <= {"new", "replayed", "OUTCOME_UNKNOWN"}
    store = toolledger.SQLiteStore(db)
    rec = store.get("default", "shared")
    store.close()
    assert rec.status is Status.COMPLETED
    assert rec.result.payload == {"by": effects[0]}


@pytest.mark.slow
def test_call_slow_live_owner_is_reported_live_and_completes(tmp_path: Path) -> None:
    """A second caller finds the slow owner alive: told so, the claim left; it completes."""
    db = tmp_path / "slow.db"
    toolledger.SQLiteStore(db).close()
    owner = _spawn(db, tmp_path, "owner", "--hold")
    (tmp_path / "go").touch()
    _wait_for(tmp_path / "started")
    tool = toolledger.tool("send", revision="1", execute=lambda i, c: pytest.fail("ran twice"))
    with toolledger.run("second", db=str(db)) as run:
        with pytest.raises(toolledger.OutcomeUnknownError) as info:
            run.call(tool, call_id="shared", input={"to": "x"})
        assert info.value.details["live_attempt"] is True
        assert "held by a live attempt since" in info.value.message
        rec = run.store.get("default", "shared")
        assert rec.status is Status.EXECUTING  # never marked uncertain while it lives
        (tmp_path / "release").touch()
        assert _result(owner) == {"outcome": "new", "payload": {"by": "owner"}}
        again = run.call(tool, call_id="shared", input={"to": "x"})
        assert (again.payload, again.replayed) == ({"by": "owner"}, True)
    assert (tmp_path / "effects.log").read_text().split() == ["owner"]
