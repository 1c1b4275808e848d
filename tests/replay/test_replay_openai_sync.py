"""Replay of the sync OpenAI client: chat create (plain, stream=True), the chat stream
helper and Responses streams; a resumed run in-process, with and without ``resume_turns``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations.openai import journaled

openai = pytest.importorskip("openai")

from ._wire import Wire  # noqa: E402

MESSAGES = [{"role": "user", "content": "Mail a@b.c please."}]


def loop(run: toolledger.Run, wire: Wire) -> list[Any]:
    gpt = journaled(wire.client(), run)
    plain = gpt.chat.completions.create(model="gpt-x", messages=MESSAGES, temperature=0)
    chunks = list(gpt.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True))
    with gpt.chat.completions.stream(model="gpt-x", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    events = list(gpt.responses.create(model="gpt-x", input="Summarize.", stream=True))
    return [plain, chunks, final.choices[0].message.tool_calls, events]


def test_sync_openai_calls_replay_equal_with_no_request(tmp_path: Path) -> None:
    """Every form is answered from the record with SDK objects equal to the original."""
    db = tmp_path / "openai.db"
    live = Wire()
    with toolledger.run("gpt", db=db) as run:
        seen = loop(run, live)
    assert live.requests == 4
    offline = Wire(failing=True)
    with toolledger.run("gpt", db=db, replay_of=run.run_id) as again:
        replayed = loop(again, offline)
    assert offline.requests == 0
    assert replayed == seen
    report = again.replay_report
    assert report is not None
    assert report.served_model_calls == 4


def test_changed_parameter_names_the_parameter(tmp_path: Path) -> None:
    """A parameter that differs is named ``parameters.<name>``."""
    db = tmp_path / "param.db"
    with toolledger.run("gpt", db=db) as run:
        journaled(Wire().client(), run).chat.completions.create(
            model="gpt-x", messages=MESSAGES, temperature=0
        )
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("gpt", db=db, replay_of=run.run_id) as again,
    ):
        journaled(Wire(failing=True).client(), again).chat.completions.create(
            model="gpt-x", messages=MESSAGES, temperature=1
        )
    d = caught.value.divergence
    assert (d.field, d.recorded, d.now) == ("parameters.temperature", 0, 1)


@pytest.mark.parametrize(("resume_turns", "requests"), [(True, 1), (False, 2)])
def test_resumed_run_answers_recorded_turns_unless_turned_off(
    tmp_path: Path, resume_turns: bool, requests: int
) -> None:
    """Resumed under its run id: the recorded turn is answered, a new one goes live;
    ``resume_turns=False`` asks the model again."""
    db = tmp_path / "resume.db"
    with toolledger.run("gpt", db=db, run_id="r1") as run:
        first = journaled(Wire().client(), run).chat.completions.create(
            model="gpt-x", messages=MESSAGES
        )
    wire = Wire()
    with toolledger.run("gpt", db=db, run_id="r1", resume_turns=resume_turns) as again:
        gpt = journaled(wire.client(), again)
        assert gpt.chat.completions.create(model="gpt-x", messages=MESSAGES) == first
        gpt.chat.completions.create(model="gpt-x", messages=[*MESSAGES, *MESSAGES])
    assert wire.requests == requests
    report = again.replay_report
    if resume_turns:
        assert report is not None
        assert (report.mode, report.served_model_calls, report.divergence) == ("resume", 1, None)
    else:
        assert report is None


@pytest.mark.usefixtures("clean_telemetry_env")
def test_replayed_run_span_links_to_the_source_runs_span(
    tmp_path: Path, provider: Any, exporter: Any
) -> None:
    """The replay's ``invoke_agent`` span carries one link: the source run's span; the
    chat span of a served call has no message content with capture off."""
    db = tmp_path / "span.db"
    with toolledger.run("gpt", db=db, tracer_provider=provider) as run:
        journaled(Wire().client(), run).chat.completions.create(model="gpt-x", messages=MESSAGES)
    with toolledger.run("gpt", db=db, replay_of=run.run_id, tracer_provider=provider) as again:
        journaled(Wire(failing=True).client(), again).chat.completions.create(
            model="gpt-x", messages=MESSAGES
        )
    spans = exporter.get_finished_spans()
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(agents) == 2
    source, replayed = agents
    assert source.links == ()
    (link,) = replayed.links
    assert (link.context.trace_id, link.context.span_id) == (
        source.context.trace_id,
        source.context.span_id,
    )
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == 2
    for chat in chats:
        assert "gen_ai.input.messages" not in (chat.attributes or {})


def test_gc_erases_model_call_content_and_the_run_is_no_longer_replayable(
    tmp_path: Path,
) -> None:
    """The journaled request and response are content: gc erases them (the event says
    when and why), and a replay of the erased run is REPLAY_UNAVAILABLE."""
    from datetime import datetime, timedelta, timezone

    db = tmp_path / "gc.db"
    with toolledger.run("gpt", db=db) as run:
        journaled(Wire().client(), run).chat.completions.create(model="gpt-x", messages=MESSAGES)
    (before,) = [e for e in toolledger.load_run(db, run.run_id).events if e.kind == "llm_call"]
    assert before.inputs["messages"] == MESSAGES
    toolledger.gc(db, older_than="1d", now=datetime.now(timezone.utc) + timedelta(days=2))
    (after,) = [e for e in toolledger.load_run(db, run.run_id).events if e.kind == "llm_call"]
    assert after.inputs is None
    assert after.outputs is None
    assert after.erased is not None
    with (
        pytest.raises(toolledger.ReplayUnavailableError) as caught,
        toolledger.run("gpt", db=db, replay_of=run.run_id),
    ):
        pass
    assert caught.value.details["event_id"] == after.event_id


def test_calls_out_of_recorded_order_match_any_unanswered_recorded_call(tmp_path: Path) -> None:
    """Calls made concurrently may arrive in another order than recorded: each is matched
    with the unanswered recorded call equal to it."""
    import asyncio

    async def ask(run: toolledger.Run, wire: Wire, order: list[str]) -> list[Any]:
        gpt = journaled(wire.async_client(), run)
        return [
            await gpt.chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": q}]
            )
            for q in order
        ]

    db = tmp_path / "concurrent.db"
    with toolledger.run("gpt", db=db) as run:
        first = asyncio.run(ask(run, Wire(), ["a", "b"]))
    offline = Wire(failing=True)
    with toolledger.run("gpt", db=db, replay_of=run.run_id) as again:
        second = asyncio.run(ask(again, offline, ["b", "a"]))
    assert second == list(reversed(first))
    assert offline.requests == 0
    served = [
        e.meta["replayed_from"]["event_id"]
        for e in toolledger.load_run(db, again.run_id).events
        if e.kind == "llm_call"
    ]
    recorded = [
        e.event_id for e in toolledger.load_run(db, run.run_id).events if e.kind == "llm_call"
    ]
    assert served == list(reversed(recorded))


def test_resume_without_model_calls_reads_nothing_and_records_no_report(tmp_path: Path) -> None:
    """A resumed run that makes no model call never reads its record for replay: no
    report, no ``replay`` event; its tool calls are the guard's as always."""
    db = tmp_path / "quiet.db"
    tool = toolledger.tool("noop", revision="1", execute=lambda i, c: {"ok": True})
    with toolledger.run("quiet", db=db, run_id="q1") as run:
        run.call(tool, call_id="t1", input={})
    with toolledger.run("quiet", db=db, run_id="q1") as again:
        assert again.call(tool, call_id="t1", input={}).replayed is True
        assert again.replay_report is None
    assert [e.kind for e in toolledger.load_run(db, "q1").events if e.kind == "replay"] == []


def test_volatile_prompt_cache_key_is_not_compared(tmp_path: Path) -> None:
    """A framework's per-run ``prompt_cache_key`` (the Agents SDK makes one up) does not
    make a replay diverge; another parameter does."""
    db = tmp_path / "volatile.db"
    with toolledger.run("gpt", db=db) as run:
        journaled(Wire().client(), run).chat.completions.create(
            model="gpt-x", messages=MESSAGES, prompt_cache_key="run-a"
        )
    offline = Wire(failing=True)
    with toolledger.run("gpt", db=db, replay_of=run.run_id) as again:
        journaled(offline.client(), again).chat.completions.create(
            model="gpt-x", messages=MESSAGES, prompt_cache_key="run-b"
        )
    assert offline.requests == 0
    report = again.replay_report
    assert report is not None
    assert report.served_model_calls == 1
