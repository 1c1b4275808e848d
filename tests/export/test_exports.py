"""JSON/Markdown/HTML exports: complete, re-importable, verified, escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import toolledger
from toolledger.export.html import embed_json
from toolledger.testing import stored_run

from .conftest import COMMENT, INJECTION


class TestJsonExport:
    def test_json_export_round_trips_through_import(self, recorded, tmp_path: Path):
        db, run_id = recorded
        first = toolledger.export_json(db, run_id, tmp_path / "a.json")
        assert toolledger.verify_export(first.path).ok
        other = tmp_path / "other.db"
        assert toolledger.import_json(first.path, other) == run_id
        assert toolledger.verify(other, run_id, expected_head=first.head_hash).ok
        second = toolledger.export_json(other, run_id, tmp_path / "b.json")
        a, b = (json.loads(p.read_text()) for p in (first.path, second.path))
        assert a["records"] == b["records"]
        assert a["run"] == b["run"]
        assert stored_run(other, run_id).events == stored_run(db, run_id).events

    def test_export_is_versioned_and_carries_head_and_count(self, recorded, tmp_path):
        db, run_id = recorded
        info = toolledger.export_json(db, run_id, tmp_path / "a.json")
        doc = json.loads(info.path.read_text())
        assert (doc["format"], doc["version"]) == ("toolledger-journal", 1)
        assert doc["head_hash"] == info.head_hash == doc["records"][-1]["hash"]
        assert doc["event_count"] == len(doc["records"]) == info.event_count

    def test_tampered_export_fails_verification(self, recorded, tmp_path):
        db, run_id = recorded
        info = toolledger.export_json(db, run_id, tmp_path / "a.json")
        doc = json.loads(info.path.read_text())
        doc["records"][4]["data"]["content"]["outputs"]["pi"] = 3.5
        edited = tmp_path / "edited.json"
        edited.write_text(json.dumps(doc))
        report = toolledger.verify_export(edited)
        assert not report.ok
        assert report.first_bad_seq == 4
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.import_json(edited, tmp_path / "x.db")

    def test_cut_export_fails_verification(self, recorded, tmp_path):
        db, run_id = recorded
        info = toolledger.export_json(db, run_id, tmp_path / "a.json")
        doc = json.loads(info.path.read_text())
        doc["records"] = doc["records"][:-2]
        cut = tmp_path / "cut.json"
        cut.write_text(json.dumps(doc))
        assert not toolledger.verify_export(cut).ok

    def test_importing_an_existing_run_is_refused(self, recorded, tmp_path):
        db, run_id = recorded
        info = toolledger.export_json(db, run_id, tmp_path / "a.json")
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.import_json(info.path, db)

    def test_unknown_run_is_not_found(self, recorded, tmp_path):
        db, _ = recorded
        for fn in (toolledger.export_json, toolledger.export_markdown, toolledger.export_html):
            with pytest.raises(toolledger.NotFoundError):
                fn(db, "missing", tmp_path / "x")


class TestMarkdownExport:
    def test_markdown_escapes_run_text(self, recorded, tmp_path):
        db, run_id = recorded
        text = toolledger.export_markdown(db, run_id, tmp_path / "a.md").path.read_text()
        assert "Answer &lt;b&gt;the&lt;/b&gt; question" in text
        assert "<b>" not in text
        body_outside_code = re.sub(r"(`{3,})[^\n]*\n.*?\n\1", "", text, flags=re.S)
        assert "<script" not in body_outside_code
        assert "<!--" not in body_outside_code
        assert "> **Why** (developer): The question names a codebase\\." not in text
        assert "> **Why** (developer): The question names a codebase." in text
        assert "> **Approval REFUSED** by user: Answer locally." in text
        assert "> **Why**: missing (the model gave none)" in text

    def test_markdown_is_deterministic(self, recorded, tmp_path):
        db, run_id = recorded
        a = toolledger.export_markdown(db, run_id, tmp_path / "a.md").path.read_text()
        b = toolledger.export_markdown(db, run_id, tmp_path / "b.md").path.read_text()
        assert a == b


class TestHtmlExport:
    def test_embedded_json_cannot_close_the_script(self, recorded, tmp_path):
        db, run_id = recorded
        page = toolledger.export_html(db, run_id, tmp_path / "a.html").path.read_text()
        data = page.split('id="tl-data">', 1)[1].split("</script>", 1)[0]
        assert "<" not in data
        assert ">" not in data
        assert "\u2028" not in data
        assert json.loads(data)["events"]
        assert "http://" not in page.replace("http://www.w3.org", "")
        assert "https://" not in page

    def test_embed_json_escapes_every_dangerous_character(self):
        text = embed_json({"x": INJECTION + COMMENT + "&\u2028\u2029"})
        assert re.search(r"[<>&\u2028\u2029]", text) is None
        assert json.loads(text) == {"x": INJECTION + COMMENT + "&\u2028\u2029"}


class TestSpecialTargets:
    def test_export_to_a_fifo_writes_through_and_keeps_the_fifo(self, recorded, tmp_path):
        """A device or FIFO target (like -o /dev/null) is written through, never replaced."""
        import os
        import stat
        import threading

        db, run_id = recorded
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
        reader.start()
        toolledger.export_json(db, run_id, fifo)
        reader.join(timeout=60)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert json.loads(received[0])["format"] == "toolledger-journal"


def test_html_carries_the_approval_request_and_drops_it_once_scrubbed(tmp_path: Path):
    """A pending call's page shows the stored request's input, ticket and justification;
    after retention scrubs the request, the page carries none of its content."""
    from toolledger import Pending
    from toolledger.approvals import scrub_approval
    from toolledger.store import SQLiteStore

    @toolledger.tool(
        revision="1", approval="effect-only", approver=lambda r: Pending(ticket="HELP-7")
    )
    def send_email(input, ctx):  # type: ignore[no-untyped-def]
        return {"sent": True}

    db = tmp_path / "gated.db"
    with toolledger.run("email Ana", db=db) as run:
        out = run.call(
            send_email,
            call_id="toolu_1",
            input={"to": "ana-secret@example.org"},
            justification="Ana asked to be told",
        )
        assert out.status == "awaiting_approval"

    def page() -> dict:
        text = toolledger.export_html(db, run.run_id, tmp_path / "run.html").path.read_text()
        raw = re.search(r'id="tl-data">(.*?)</script>', text, re.S).group(1)
        return json.loads(raw)

    request = page()["checkpoints"]["default/toolu_1"]["approval"]
    assert request["status"] == "pending"
    assert request["ticket"] == "HELP-7"
    assert request["input"] == {"to": "ana-secret@example.org"}
    assert request["justification"] == "Ana asked to be told"
    assert request["binding_fingerprint"].startswith("sha256:")
    store = SQLiteStore(db)
    try:
        assert scrub_approval(store, "default", "toolu_1")
    finally:
        store.close()
    data = page()
    request = data["checkpoints"]["default/toolu_1"]["approval"]
    assert (request["input"], request["justification"]) == (None, None)
    assert request["ticket"] == "HELP-7"  # the decision's facts stay
    assert "ana-secret" not in json.dumps(data)
