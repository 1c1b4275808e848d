"""A replayed tool call returns its recorded outcome and never runs: a result, an error
result, a denial; a call whose record cannot answer it without running is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Denied


class Tools:
    def __init__(self) -> None:
        self.executed: list[Any] = []
        self.asked: list[Any] = []

    def send(self, *, fail: bool = False, deny: bool = False) -> toolledger.Tool:
        def execute(input: Any, ctx: Any) -> Any:
            self.executed.append(input)
            if fail:
                raise RuntimeError("smtp down")
            return {"sent_to": input["to"]}

        def approver(request: Any) -> Any:
            self.asked.append(request)
            return Denied("bob", "wrong recipient")

        return toolledger.tool(
            "send_email",
            revision="1",
            execute=execute,
            approval="always" if deny else None,
            approver=approver if deny else None,
        )


def _outcomes(run: toolledger.Run, tools: Tools) -> list[Any]:
    ok = run.call(tools.send(), call_id="c1", input={"to": "a"})
    err = run.call(tools.send(fail=True), call_id="c2", input={"to": "b"}, on_error="result")
    denied = run.call(tools.send(deny=True), call_id="c3", input={"to": "c"}, on_error="result")
    return [(o.payload, o.is_error, o.status) for o in (ok, err, denied)]


def test_results_error_results_and_denials_replay_without_running(tmp_path: Path) -> None:
    """Each recorded outcome comes back; no tool runs and no approver is asked again."""
    db = tmp_path / "outcomes.db"
    tools = Tools()
    with toolledger.run("mail", db=db) as run:
        recorded = _outcomes(run, tools)
    assert (len(tools.executed), len(tools.asked)) == (2, 1)
    with toolledger.run("mail", db=db, replay_of=run.run_id) as again:
        replayed = _outcomes(again, tools)
    assert replayed == recorded
    assert (len(tools.executed), len(tools.asked)) == (2, 1)
    report = again.replay_report
    assert report is not None
    assert report.served_tool_calls == 2  # the denial is the gate's, not a checkpoint's


def test_call_id_the_record_lacks_diverges_before_running(tmp_path: Path) -> None:
    """A tool call the record does not hold is a divergence (kind tool_call, call_id)."""
    db = tmp_path / "lacks.db"
    tools = Tools()
    with toolledger.run("mail", db=db) as run:
        run.call(tools.send(), call_id="c1", input={"to": "a"})
    with (
        pytest.raises(toolledger.ReplayDivergedError) as caught,
        toolledger.run("mail", db=db, replay_of=run.run_id) as again,
    ):
        again.call(tools.send(), call_id="c9", input={"to": "a"})
    d = caught.value.divergence
    assert (d.kind, d.name, d.field, d.now) == ("tool_call", "send_email", "call_id", "c9")
    assert len(tools.executed) == 1


def test_failure_before_effect_is_refused_not_rerun(tmp_path: Path) -> None:
    """A call that raised (its claim released) cannot be answered without running it:
    REPLAY_UNAVAILABLE names it, the tool does not run."""
    db = tmp_path / "raised.db"
    tools = Tools()
    with toolledger.run("mail", db=db) as run, pytest.raises(RuntimeError):
        run.call(tools.send(fail=True), call_id="c1", input={"to": "a"})
    with (
        pytest.raises(toolledger.ReplayUnavailableError) as caught,
        toolledger.run("mail", db=db, replay_of=run.run_id) as again,
    ):
        again.call(tools.send(fail=True), call_id="c1", input={"to": "a"})
    assert caught.value.details["call_id"] == "c1"
    assert len(tools.executed) == 1
