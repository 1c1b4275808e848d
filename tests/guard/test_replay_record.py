"""A replayed call is journaled as one record that every reader shows as the replay."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import canonical_json, fingerprint
from toolledger.store import SQLiteStore
from toolledger.telemetry import CallFacts

from .conftest import CountingStore, RecordingTelemetry


def _tool(calls: list[Any]) -> toolledger.Tool:
    def execute(input: Any, ctx: Any) -> Any:
        calls.append(input)
        return {"sent": input["to"]}

    return toolledger.tool("send_email", revision="2", execute=execute)


class TestReplayRecord:
    def test_replay_is_one_buffered_record_and_commits_nothing(self, tmp_path: Path) -> None:
        """The replay writes one point record, buffered: no commit on the caller's path."""
        store = CountingStore(tmp_path / "g.db", durability="full")
        calls: list[Any] = []
        tool = _tool(calls)
        with toolledger.run("g", db=store) as run:
            run.call(tool, call_id="c1", input={"to": "ana"})
            before = run.event_count
            store.reset()
            again = run.call(tool, call_id="c1", input={"to": "ana"}, justification="again")
            assert again.replayed is True
            assert again.payload == {"sent": "ana"}
            assert store.commits == []
            assert run.event_count == before + 1
        assert calls == [{"to": "ana"}]
        rows = [r for r in store.read_events(run.run_id) if r.kind == "tool_call"]
        assert [(r.status, json.loads(r.data)["header"]["phase"]) for r in rows] == [
            ("running", "start"),
            ("completed", "end"),
            ("replayed", "point"),
        ]
        assert toolledger.verify(store, run.run_id).ok

    def test_replay_event_shows_inputs_result_and_link_in_readers(self, tmp_path: Path) -> None:
        """load_run, the JSON export and search show the replay with what it returned."""
        db = tmp_path / "g.db"
        tool = _tool([])
        with toolledger.run("g", db=db) as run:
            run.call(tool, call_id="c1", input={"to": "ana"})
            run.call(
                tool,
                call_id="c1",
                input={"to": "ana"},
                justification="the user asked twice",
                justification_source="model",
            )
        events = [e for e in toolledger.load_run(db, run.run_id).events if e.kind == "tool_call"]
        assert [e.status for e in events] == ["completed", "replayed"]
        replay = events[1]
        assert replay.name == "send_email"
        assert replay.inputs == {"to": "ana"}
        assert replay.outputs == {"result": {"sent": "ana"}, "is_error": False}
        assert replay.justification == "the user asked twice"
        assert dict(replay.checkpoint or {}) == {
            "namespace": "default",
            "call_id": "c1",
            "revision": 2,
            "status": "completed",
        }
        assert dict(replay.meta) == {
            "justification_source": "model",
            "tool_revision": "2",
            "input_fingerprint": fingerprint({"to": "ana"}),
            "replayed": True,
            "recovered": False,
        }
        assert replay.started_at == replay.ended_at
        out = toolledger.export_json(db, run.run_id, tmp_path / "run.json")
        assert out.size > 0
        doc = json.loads((tmp_path / "run.json").read_text())
        assert [e["status"] for e in doc["events"] if e["kind"] == "tool_call"] == [
            "completed",
            "replayed",
        ]
        found = toolledger.search(db, "twice", kind="tool_call")
        assert [e.status for e in found] == ["replayed"]

    def test_replay_parent_is_the_enclosing_step(self, tmp_path: Path) -> None:
        """A replay inside a step is that step's child, like any tool call."""
        store = SQLiteStore(tmp_path / "g.db")
        tool = _tool([])
        with toolledger.run("g", db=store) as run:
            run.call(tool, call_id="c1", input={"to": "ana"})
            with run.step("retry") as step:
                run.call(tool, call_id="c1", input={"to": "ana"})
        events = toolledger.load_run(store, run.run_id).events
        replay = next(e for e in events if e.status == "replayed")
        assert replay.parent_id == step.event_id

    def test_replay_span_starts_and_ends_once_with_its_facts(self, tmp_path: Path) -> None:
        """Telemetry sees the replay's span end once, as replayed, with the decided facts."""
        tel = RecordingTelemetry()
        tool = _tool([])
        with toolledger.run("g", db=tmp_path / "g.db") as run:
            run.telemetry = tel
            run.call(tool, call_id="c1", input={"to": "ana"})
            run.call(tool, call_id="c1", input={"to": "ana"})
        _new, replay = tel.spans
        assert replay.transitions == []
        assert replay.facts == [
            CallFacts(status="completed", revision=2, action="deliver", replayed=True)
        ]
        assert replay.updates == []
        ((event, error),) = replay.ended
        assert event["checkpoint"] == {"namespace": "default", "call_id": "c1", "revision": 2}
        assert event["meta"]["replayed"] is True
        assert error is None
        assert event["status"] == "replayed"
        assert event["outputs"] == {"result": {"sent": "ana"}, "is_error": False}
        assert event["ended_at"] == event["started_at"]

    def test_record_event_asks_its_facts_only_with_telemetry(self, tmp_path: Path) -> None:
        """A one-record event's span facts are computed only when a span will hear them."""
        asked: list[int] = []

        def facts() -> CallFacts:
            asked.append(1)
            return CallFacts(status="completed", revision=2, action="deliver", replayed=True)

        with toolledger.run("g", db=tmp_path / "g.db") as run:
            run.record_event("tool_call", "t", "replayed", facts=facts)
            assert asked == []
            tel = RecordingTelemetry()
            run.telemetry = tel
            run.record_event("tool_call", "t", "replayed", facts=facts)
            assert asked == [1]
        (span,) = tel.spans
        assert span.facts == [facts()]


_PAYLOADS = [
    {"sent": "ana", "to": ["a@example.com"], "n": 2},
    {"price": 1.5, "sizes": [1e21, -0.0, 3.0], "ok": True},
    {"name": "Zoë", "emoji": "😀", "nested": [[{"k": [None, False]}]]},
    ["a", 1, 2.25, {"z": 1, "a": 2}],
    "plain text",
]


def _content_text(data: str) -> str:
    """The content JSON of a stored row's data, as stored (``{"header":…,"content":…}``)."""
    assert data.startswith('{"header":')
    assert data.endswith("}")
    return data[data.index(',"content":') + len(',"content":') : -1]


class TestReplayRecordContent:
    @pytest.mark.parametrize("payload", _PAYLOADS)
    def test_replay_content_is_canonical_of_the_stored_result_with_or_without_telemetry(
        self, tmp_path: Path, payload: Any
    ) -> None:
        """The replay's content text is the canonical JSON of what the call recorded before
        (inputs, justification, meta, the stored result), the same with telemetry on."""
        texts = []
        for telemetry in (None, RecordingTelemetry()):
            store = SQLiteStore(tmp_path / f"{telemetry is None}.db")
            tool = toolledger.tool("send_email", revision="2", execute=lambda i, c: payload)
            with toolledger.run("g", db=store) as run:
                if telemetry is not None:
                    run.telemetry = telemetry
                run.call(tool, call_id="c1", input={"to": ["ana"], "w": 0.5})
                again = run.call(tool, call_id="c1", input={"to": ["ana"], "w": 0.5})
                assert again.replayed is True
            (row,) = [r for r in store.read_events(run.run_id) if r.status == "replayed"]
            text = _content_text(row.data)
            expected = {
                "inputs": {"to": ["ana"], "w": 0.5},
                "meta": {
                    "tool_revision": "2",
                    "input_fingerprint": fingerprint({"to": ["ana"], "w": 0.5}),
                    "replayed": True,
                    "recovered": False,
                },
                "outputs": {"result": payload, "is_error": False},
            }
            assert text == canonical_json(expected)
            header = json.loads(row.data)["header"]
            assert header["content_sha256"] == hashlib.sha256(text.encode()).hexdigest()
            assert toolledger.verify(store, run.run_id).ok
            texts.append(text)
        assert texts[0] == texts[1]


class TestCheckedEventRecord:
    @pytest.mark.parametrize(
        ("justification", "source"), [(None, "developer"), (None, "model"), ("why", "model")]
    )
    def test_checked_event_stores_what_record_event_stores(
        self, tmp_path: Path, justification: str | None, source: str
    ) -> None:
        """``record_checked_event`` (the replay's record, nothing checked again) stores
        the header and content ``record_event`` stores for the same arguments."""
        store = SQLiteStore(tmp_path / "g.db")
        args: dict[str, Any] = {
            "justification": justification,
            "justification_source": source,
            "inputs": {"to": ["ana"], "w": 0.5},
            "outputs": {"result": {"price": 1.5, "name": "Zoë 😀"}, "is_error": False},
            "meta": {"tool_revision": "2", "replayed": True, "recovered": False},
            "checkpoint": {"namespace": "default", "call_id": "c1", "revision": 2},
        }
        with toolledger.run("g", db=store) as run:
            run.record_event("tool_call", "send_email", "replayed", **args)
            run.record_checked_event("tool_call", "send_email", "replayed", **args)
        rows = [r for r in store.read_events(run.run_id) if r.kind == "tool_call"]
        assert len(rows) == 2
        # A row's data holds its header without the row's columns (ids, times, seq).
        assert rows[0].data == rows[1].data
        assert [(r.status, r.name, r.parent_id) for r in rows] == [
            ("replayed", "send_email", None)
        ] * 2
        assert toolledger.verify(store, run.run_id).ok
