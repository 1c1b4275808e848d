"""Fixtures for export tests: a recorded run with hostile text."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolledger

INJECTION = "</script><script>alert(1)</script>"
COMMENT = "<!-- hidden"


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    """A run with nesting, a failure, an approval, an artifact and hostile outputs."""
    db = tmp_path / "runs.db"
    artifact = tmp_path / "report.md"
    artifact.write_text("# report\n")
    with toolledger.run("Answer <b>the</b> question", agent="bot", db=db) as run:
        with run.step("search", justification="The question names a codebase.", q="gate") as s:
            s.record_output(html=INJECTION, comment=COMMENT, pi=3.25)
            with run.step("read_file", path="gate.py") as inner:
                inner.record_output(lines=42)
                inner.add_artifact(artifact, name="report")
        try:
            with run.step("flaky", justification_source="model"):
                raise RuntimeError("timeout\u2028line")
        except RuntimeError:
            pass
        with run.step("flaky", justification="retry") as s2:
            s2.record_output(ok=True)
        run.approval("email_findings", granted=False, by="user", reason="Answer locally.")
        run.note("a note with `backticks` and | pipes")
        run.finish("Answered from code evidence; no email sent.")
    return db, run.run_id
