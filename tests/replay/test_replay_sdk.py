"""Replay and fork re-drive the agent's own code from its record, over the real SDKs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.testing import stored_run

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from ._agent import Effects, Wire, agent


def llm_calls(db: Path, run_id: str) -> list[dict[str, Any]]:
    return [e for e in stored_run(db, run_id).events if e["kind"] == "llm_call"]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str, dict[str, Any], Effects, Wire]:
    """A recorded run of the loop: 4 model calls (create, stream helper, async stream,
    responses), 1 guarded tool call."""
    db = tmp_path / "replay.db"
    effects, wire = Effects(), Wire()
    with toolledger.run("mail ana", db=db) as run:
        seen = agent(run, wire, effects, "Mail a@b.c please.")
    assert len(wire.requests) == 4
    assert len(effects.sent) == 1
    return db, run.run_id, seen, effects, wire


class TestReplay:
    def test_replay_serves_every_call_with_no_request_and_no_execution(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """Same final answer, SDK objects equal to the original, 0 requests, 0 executions."""
        db, source, seen, effects, _ = recorded
        offline = Wire(failing=True)
        with toolledger.run("mail ana", db=db, replay_of=source) as run:
            again = agent(run, offline, effects, "Mail a@b.c please.")
        assert offline.requests == []
        assert len(effects.sent) == 1
        assert again["answer"] == seen["answer"]
        for key in ("first", "second", "chunks", "response", "payload"):
            assert again[key] == seen[key], key
        assert again["replayed_tool"] is True
        report = run.replay_report
        assert report is not None
        assert (report.source_run_id, report.mode) == (source, "replay")
        assert (report.served_model_calls, report.served_tool_calls) == (4, 1)
        assert (report.divergence, report.live_from) == (None, None)

    def test_replayed_run_names_its_source_and_the_recorded_events(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """The hashed header says ``replay_of``; each served call names its recorded event."""
        db, source, _, effects, _ = recorded
        with toolledger.run("mail ana", db=db, replay_of=source) as run:
            agent(run, Wire(failing=True), effects, "Mail a@b.c please.")
        view = toolledger.load_run(db, run.run_id)
        assert toolledger.verify(db, run.run_id).ok
        header = stored_run(db, run.run_id).doc["header"]
        assert header["replay_of"] == {"run_id": source}
        originals = [e["event_id"] for e in llm_calls(db, source)]
        served = [e["meta"]["replayed_from"] for e in llm_calls(db, run.run_id)]
        assert served == [{"run_id": source, "event_id": i} for i in originals]
        assert [e.kind for e in view.events if e.kind == "llm_call"] == ["llm_call"] * 4

    def test_changed_prompt_diverges_at_the_first_model_call_before_sending(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """REPLAY_DIVERGED names index 0, the message that changed, both values; 0 requests."""
        db, source, _, effects, _ = recorded
        offline = Wire(failing=True)
        with (
            pytest.raises(toolledger.ReplayDivergedError) as caught,
            toolledger.run("mail ana", db=db, replay_of=source) as run,
        ):
            agent(run, offline, effects, "Mail b@c.d instead.")
        assert caught.value.code == "REPLAY_DIVERGED"
        d = caught.value.divergence
        assert (d.index, d.kind, d.name, d.field) == (0, "llm_call", "claude-x-1", "messages[0]")
        assert d.recorded == {"role": "user", "content": "Mail a@b.c please."}
        assert d.now == {"role": "user", "content": "Mail b@c.d instead."}
        assert offline.requests == []
        assert len(effects.sent) == 1
        report = run.replay_report
        assert report is not None
        assert report.divergence == d

    def test_on_divergence_live_goes_live_and_never_reexecutes_a_recorded_call(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """``on_divergence="live"``: the changed prompt reaches the provider; the tool call
        id the record holds is answered by its checkpoint."""
        db, source, _, effects, _ = recorded
        wire = Wire()
        with toolledger.run("mail ana", db=db, replay_of=source, on_divergence="live") as run:
            seen = agent(run, wire, effects, "Mail b@c.d instead.")
        assert len(wire.requests) == 4
        assert len(effects.sent) == 1
        assert seen["replayed_tool"] is True
        report = run.replay_report
        assert report is not None
        assert report.divergence is not None
        assert report.divergence.field == "messages[0]"
        assert report.live_from == llm_calls(db, source)[0]["event_id"]
        assert report.served_model_calls == 0

    def test_fork_at_second_model_call_answers_the_first_then_goes_live(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """The first model call comes from the record, the second and later are live, the
        tool is not executed again."""
        db, source, seen, effects, _ = recorded
        second = llm_calls(db, source)[1]["event_id"]
        wire = Wire()
        with toolledger.run("mail ana", db=db, replay_of=source, fork_at=second) as run:
            again = agent(run, wire, effects, "Mail a@b.c please.")
        assert wire.requests == ["/v1/messages", "/v1/chat/completions", "/v1/responses"]
        assert len(effects.sent) == 1
        assert again["answer"] == seen["answer"]
        report = run.replay_report
        assert report is not None
        assert (report.mode, report.served_model_calls, report.live_from) == ("fork", 1, second)
        assert stored_run(db, run.run_id).doc["header"]["forked_from"] == {
            "run_id": source,
            "event_id": second,
        }

    def test_run_recorded_without_content_is_unavailable_naming_the_event(
        self, tmp_path: Path
    ) -> None:
        """``journal_content=False`` runs cannot be replayed: REPLAY_UNAVAILABLE, no run."""
        db = tmp_path / "nocontent.db"
        effects = Effects()
        with toolledger.run("mail", db=db, journal_content=False) as run:
            agent(run, Wire(), effects, "Mail a@b.c please.")
        first = llm_calls(db, run.run_id)[0]
        assert first["inputs"] is None
        assert first["outputs"] is None
        assert first["meta"]["tool_calls"] == [{"id": "toolu_1", "name": "send_email"}]
        with (
            pytest.raises(toolledger.ReplayUnavailableError) as caught,
            toolledger.run("mail", db=db, replay_of=run.run_id),
        ):
            pass
        assert caught.value.code == "REPLAY_UNAVAILABLE"
        assert caught.value.details["event_id"] == first["event_id"]

    def test_env_vars_name_the_source_when_arguments_are_not_given(
        self,
        recorded: tuple[Path, str, dict[str, Any], Effects, Wire],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """TOOLLEDGER_REPLAY_OF / FORK_AT / ON_DIVERGENCE are read by toolledger.run()."""
        db, source, _, effects, _ = recorded
        second = llm_calls(db, source)[1]["event_id"]
        monkeypatch.setenv("TOOLLEDGER_REPLAY_OF", source)
        monkeypatch.setenv("TOOLLEDGER_FORK_AT", second)
        monkeypatch.setenv("TOOLLEDGER_ON_DIVERGENCE", "live")
        with toolledger.run("mail ana", db=db) as run:
            agent(run, Wire(), effects, "Mail a@b.c please.")
        report = run.replay_report
        assert report is not None
        assert (report.source_run_id, report.mode, report.live_from) == (source, "fork", second)
        assert run.replay is not None
        assert run.replay.on_divergence == "live"

    def test_bad_on_divergence_and_unknown_fork_event_are_refused(
        self, recorded: tuple[Path, str, dict[str, Any], Effects, Wire]
    ) -> None:
        """Typed errors, nothing stored for the new run."""
        db, source, _, _, _ = recorded
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.run("x", db=db, replay_of=source, on_divergence="maybe")
        with (
            pytest.raises(toolledger.NotFoundError),
            toolledger.run("x", db=db, replay_of=source, fork_at="nope"),
        ):
            pass
        with (
            pytest.raises(toolledger.NotFoundError),
            toolledger.run("x", db=db, replay_of="no-such-run"),
        ):
            pass
        assert [r.run_id for r in toolledger.list_runs(db)] == [source]
