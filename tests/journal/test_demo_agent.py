"""examples/demo_agent.py tells its story: a failed step and its retry, a refusal, exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import toolledger
from toolledger.testing import stored_run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo_agent.py"


def test_demo_agent_writes_journal_and_three_verified_exports(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verify: OK" in proc.stdout
    out = tmp_path / "demo-out"
    for suffix in ("json", "md", "html"):
        assert (out / f"demo_agent.{suffix}").stat().st_size > 0
    assert toolledger.verify_export(out / "demo_agent.json").ok
    run_id = json.loads((out / "demo_agent.json").read_text())["run"]["run_id"]
    events = stored_run(out / "demo_agent.db", run_id).events
    searches = [e for e in events if e["name"] == "repo_search"]
    assert [e["status"] for e in searches] == ["failed", "completed"]
    assert searches[0]["error"]["type"] == "TimeoutError"
    (approval,) = [e for e in events if e["kind"] == "approval"]
    assert approval["status"] == "refused"
    (artifact,) = [e for e in events if e["kind"] == "artifact"]
    assert artifact["parent_id"] == next(e for e in events if e["name"] == "read_files")["event_id"]
