"""A replayed call is journaled as one record that every reader shows as the replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import toolledger
from toolledger.store import SQLiteStore

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
            "input_fingerprint": toolledger.fingerprint({"to": "ana"}),
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

    def test_replay_span_starts_updates_and_ends_once(self, tmp_path: Path) -> None:
        """Telemetry sees the replay's span: the decided facts, then its end as replayed."""
        tel = RecordingTelemetry()
        tool = _tool([])
        with toolledger.run("g", db=tmp_path / "g.db") as run:
            run.telemetry = tel
            run.call(tool, call_id="c1", input={"to": "ana"})
            run.call(tool, call_id="c1", input={"to": "ana"})
        _new, replay = tel.spans
        assert replay.transitions == []
        assert replay.updates[0] == {
            "checkpoint.status": "completed",
            "checkpoint.revision": 2,
            "checkpoint.action": "deliver",
            "replayed": True,
            "recovered": False,
        }
        assert replay.updates[1]["checkpoint"] == {
            "namespace": "default",
            "call_id": "c1",
            "revision": 2,
        }
        assert replay.updates[1]["replayed"] is True
        ((event, error),) = replay.ended
        assert error is None
        assert event["status"] == "replayed"
        assert event["outputs"] == {"result": {"sent": "ana"}, "is_error": False}
        assert event["ended_at"] == event["started_at"]
