"""Exports show who approved what, bound to which input; a waiting call reads as requested."""

from __future__ import annotations

from pathlib import Path

import toolledger
from toolledger import Pending
from toolledger.checkpoint import fingerprint
from toolledger.store import SQLiteStore

from .conftest import Approver, Effects, approval_events

INPUT = {"to": "ana@example.com"}


def _story(db: Path, effects: Effects) -> str:
    gated = effects.tool("effect-only", Approver(Pending("HELP-1")))
    with toolledger.run("g", db=db) as run:
        run.call(gated, call_id="c1", input=INPUT)
        toolledger.decide_approval(db, "default", "c1", True, "alice", "verified")
        run.call(gated, call_id="c1", input=INPUT)
    return run.run_id


def test_markdown_export_shows_request_approver_and_input(tmp_path: Path, effects: Effects) -> None:
    """Markdown: the request (waiting), then GRANTED by alice, both bound to the input."""
    run_id = _story(tmp_path / "l.db", effects)
    toolledger.export_markdown(tmp_path / "l.db", run_id, tmp_path / "run.md")
    text = (tmp_path / "run.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("> **Approval")]
    fp = fingerprint(INPUT)
    assert lines == [
        f"> **Approval REQUESTED** (waiting for a decision) (bound to input {fp})",
        f"> **Approval GRANTED** by alice: verified (bound to input {fp})",
    ]


def test_journal_and_html_export_carry_the_binding(tmp_path: Path, effects: Effects) -> None:
    """HTML embeds the approval events with by, for_call and both fingerprints."""
    run_id = _story(tmp_path / "l.db", effects)
    approvals = [e["approval"] for e in approval_events(SQLiteStore(tmp_path / "l.db"), run_id)]
    assert [(a["outcome"], a["by"]) for a in approvals] == [
        ("require_approval", None),
        ("allow", "alice"),
    ]
    assert {a["input_fingerprint"] for a in approvals} == {fingerprint(INPUT)}
    assert all(a["for_call"] == "c1" and a["binding_fingerprint"] for a in approvals)
    toolledger.export_html(tmp_path / "l.db", run_id, tmp_path / "run.html")
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert approvals[1]["binding_fingerprint"] in page
    assert fingerprint(INPUT) in page
    assert "bound to input" in page  # the viewer renders the input binding


def test_gc_scrubs_the_approvals_copy_of_the_input(tmp_path: Path, effects: Effects) -> None:
    """Retention erases the input kept with the request; the decision and binding stay."""
    db = tmp_path / "l.db"
    _story(db, effects)
    store = SQLiteStore(db)
    with toolledger.run("deliver", db=store) as run:
        run.deliver("c1", lambda payload: None)
    report = toolledger.gc(store, older_than="0s")
    assert report.checkpoints_erased == 1
    stored = store.approval_get("default", "c1")
    assert (stored.input, stored.justification, stored.description) == (None, None, None)
    assert (stored.status.value, stored.by, stored.reason) == ("approved", "alice", "verified")
    assert stored.binding.input_fingerprint == fingerprint(INPUT)
