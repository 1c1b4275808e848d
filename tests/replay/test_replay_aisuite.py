"""aisuite's ``JournaledClient``: a replayed run's completions come from the record (as
aisuite's own response objects), its guarded tools from their checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolledger

pytest.importorskip("aisuite")

from toolledger.integrations.aisuite import JournaledClient

from ..integrations.test_aisuite import SENT, client_with, response, send_email


def _script() -> list[object]:
    return [
        response(calls=[("call_1", "send_email", {"to": "a@b.c", "justification": "Asked."})]),
        response(text="Sent."),
    ]


def _ask(run: toolledger.Run, client: object, prompt: str) -> str:
    out = JournaledClient(run, client).chat.completions.create(
        "openai:gpt-test",
        [{"role": "user", "content": prompt}],
        tools=[send_email],
        max_turns=3,
    )
    return str(out.choices[0].message.content)


def test_aisuite_replay_serves_both_turns_and_never_reruns_the_tool(tmp_path: Path) -> None:
    """The same answer with no provider request; the tool ran once, in the recording."""
    SENT.clear()
    db = tmp_path / "aisuite.db"
    client, stub = client_with(_script())
    with toolledger.run("aisuite", db=db) as run:
        assert _ask(run, client, "mail a@b.c") == "Sent."
    offline, empty = client_with([])
    with toolledger.run("aisuite", db=db, replay_of=run.run_id) as again:
        assert _ask(again, offline, "mail a@b.c") == "Sent."
    assert (len(stub.requests), empty.requests) == (2, [])
    assert SENT == [{"to": "a@b.c", "subject": "hi"}]
    report = again.replay_report
    assert report is not None
    assert (report.served_model_calls, report.served_tool_calls) == (2, 1)
    SENT.clear()


def test_aisuite_changed_prompt_diverges_before_the_provider_is_asked(tmp_path: Path) -> None:
    """REPLAY_DIVERGED at the first completion; the provider gets no request."""
    db = tmp_path / "aisuite.db"
    client, _ = client_with(_script())
    with toolledger.run("aisuite", db=db) as run:
        _ask(run, client, "mail a@b.c")
    offline, empty = client_with([])
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("aisuite", db=db, replay_of=run.run_id) as again,
    ):
        _ask(again, offline, "mail b@c.d")
    assert caught.value.divergence.field == "messages[0]"
    assert empty.requests == []
    SENT.clear()
