"""``CallFacts``: what the guard tells a tool call's span, once, equals what re-export derives."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.telemetry import CallFacts
from toolledger.testing import stored_run

from .._internals import call_facts


def _ns(text: str) -> int:
    """ISO-8601 event time to Unix nanoseconds (microsecond precision)."""
    moment = datetime.fromisoformat(text)
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


class _Span:
    """Records the facts its end carries, and anything else it is told."""

    trace_id = "1" * 32
    span_id = "2" * 16

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def activate(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def transition(self, **kw: Any) -> None:
        pass

    def update(self, attributes: Any) -> None:
        self.log.append(("update", dict(attributes)))

    def end(self, event: Any, error: BaseException | None = None, facts: Any = None) -> None:
        self.log.append(("end", (event["event_id"], facts)))


class _Telemetry:
    def __init__(self) -> None:
        self.logs: list[list[tuple[str, Any]]] = []

    def run_started(self, run: Any) -> _Span:
        return _Span([])

    def event_started(self, event: Any, parent: Any) -> _Span:
        self.logs.append([])
        return _Span(self.logs[-1])


def _tools(box: list[str]) -> tuple[toolledger.Tool, toolledger.Tool]:
    def send(input: Any, ctx: Any) -> Any:
        box.append(input["to"])
        if input["to"] == "lost":
            ctx.operation.write({"sent": True})
            raise ConnectionError("answer lost")
        return {"sent": input["to"]}

    def recover(ctx: Any) -> Any:
        return toolledger.Recovered({"sent": "lost"}) if ctx.operation.read() else None

    send_tool = toolledger.tool(
        "send", revision="1", execute=send, recover=recover, description="Sends."
    )
    keyed = toolledger.tool(
        "pay", revision="1", execute=lambda i, c: {"paid": i["n"]}, effect_key="input"
    )
    return send_tool, keyed


@pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
def test_live_facts_are_told_once_and_equal_the_reexported_ones(tmp_path: Path) -> None:
    """New, replayed, recovered and deduplicated calls: each span hears one ``CallFacts``
    at its end and nothing else; re-export derives the same value from the history."""
    db = tmp_path / "l.db"
    tel = _Telemetry()
    box: list[str] = []
    send, pay = _tools(box)
    with toolledger.run("g", db=db) as run:
        run.telemetry = tel
        run.call(send, call_id="c1", input={"to": "ana"})  # executed
        run.call(send, call_id="c1", input={"to": "ana"})  # replayed
        run.call(send, call_id="c2", input={"to": "lost"})  # recovered
        run.call(pay, call_id="p1", input={"n": 5})
        run.call(pay, call_id="p2", input={"n": 5})  # deduplicated from p1
        run_id = run.run_id
    assert box == ["ana", "lost"]
    live: dict[str, CallFacts] = {}
    for log in tel.logs:
        assert [kind for kind, _ in log] == ["end"]  # told once, nothing before
        event_id, facts = log[0][1]
        assert isinstance(facts, CallFacts)
        live[event_id] = facts
    store = toolledger.SQLiteStore(db)
    try:
        events = [e for e in stored_run(store, run_id).events if e["kind"] == "tool_call"]
        derived = {
            e["event_id"]: call_facts(store, e, _ns(e["started_at"]), _ns(e["ended_at"]))[0]
            for e in events
        }
    finally:
        store.close()
    assert [(f.replayed, f.recovered, f.deduplicated_from) for f in live.values()] == [
        (False, False, None),
        (True, False, None),
        (False, True, None),
        (False, False, None),
        (True, False, "p1"),
    ]
    # The description is not stored: the one fact re-export cannot know.
    assert derived == {k: dataclasses.replace(f, description=None) for k, f in live.items()}
