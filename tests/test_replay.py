"""Replayer: handlers in recorded order, honest skips, recorded outputs offline, run diffs."""

from __future__ import annotations

import pytest

import toolledger
from toolledger.testing import MemoryStore


def _agent(run, answer: int, extra: bool = False) -> None:
    with run.step("search", justification="find it", q="gate") as st:
        st.record_output(hits=3)
    with run.step("compute", x=1) as st:
        st.record_output(answer=answer)
    with run.step("compute", x=1) as st:
        st.record_output(answer=answer + 1)
    if extra:
        run.note("one more thing")


@pytest.fixture
def store():
    return MemoryStore()


def _record(store, answer: int = 42, extra: bool = False) -> str:
    with toolledger.run("g", db=store) as run:
        _agent(run, answer, extra)
    return run.run_id


class TestReplay:
    def test_handlers_get_events_in_recorded_order_and_unregistered_are_skipped(self, store):
        run_id = _record(store)
        replayer = toolledger.Replayer(store)
        seen = []
        replayer.register("compute", lambda ev: seen.append(ev["inputs"]) or ev["outputs"])
        items = list(replayer.replay(run_id))
        assert [(i.event["name"], i.skipped) for i in items] == [
            ("search", True),
            ("compute", False),
            ("compute", False),
            ("finish", True),
        ]
        assert [i.result for i in items if not i.skipped] == [{"answer": 42}, {"answer": 43}]
        assert items[0].reason == "no handler registered for step 'search'"
        assert items[0].result is None
        assert seen == [{"x": 1}, {"x": 1}]

    def test_from_event_starts_there(self, store):
        run_id = _record(store)
        replayer = toolledger.Replayer(store)
        events = [i.event for i in replayer.replay(run_id)]
        rest = list(replayer.replay(run_id, from_event=events[2]["event_id"]))
        assert [i.event["event_id"] for i in rest] == [e["event_id"] for e in events[2:]]

    def test_unknown_run_or_event_is_not_found(self, store):
        run_id = _record(store)
        replayer = toolledger.Replayer(store)
        with pytest.raises(toolledger.NotFoundError):
            list(replayer.replay("missing"))
        with pytest.raises(toolledger.NotFoundError):
            replayer.replay(run_id, from_event="missing")


class TestRecordedOutputs:
    def test_recorded_outputs_are_served_by_name_and_inputs_in_order(self, store):
        run_id = _record(store)
        recorded = toolledger.Replayer(store).recorded(run_id)
        compute = recorded.tool("compute")
        assert [compute(x=1), compute(x=1), compute(x=1)] == [
            {"answer": 42},
            {"answer": 43},
            {"answer": 43},  # exhausted: the last recorded output again
        ]
        assert recorded.lookup("search", {"q": "gate"}) == {"hits": 3}
        with pytest.raises(toolledger.NotFoundError):
            compute(x=2)

    def test_agent_code_reruns_offline_against_a_recorded_run(self, store):
        run_id = _record(store)
        recorded = toolledger.Replayer(store).recorded(run_id)
        search = recorded.tool("search")

        def agent() -> int:
            return search(q="gate")["hits"] * 2

        assert agent() == 6


class TestDiff:
    def test_identical_runs_do_not_diverge(self, store):
        a, b = _record(store), _record(store)
        assert toolledger.Replayer(store).diff(a, b) is None

    def test_first_divergence_is_named(self, store):
        a, b = _record(store, 42), _record(store, 7)
        div = toolledger.Replayer(store).diff(a, b)
        assert (div.index, div.field) == (1, "outputs")
        assert div.a["outputs"] == {"answer": 42}
        assert div.b["outputs"] == {"answer": 7}
        assert div.reason == "event 1 (step 'compute'): outputs differs"

    def test_an_extra_event_is_a_divergence(self, store):
        a, b = _record(store), _record(store, extra=True)
        div = toolledger.Replayer(store).diff(a, b)
        assert div.index == 3
        assert div.field == "kind"  # the note where a has its finish
