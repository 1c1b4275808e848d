"""A step that ends while its start record is still buffered is stored as one record.

The writer keeps the start record unbuilt (``ChainWriter.append_lazy``) until something
needs it: another record, a flush, a ride or a read of the chain. If the step ends first,
one ``point`` record with ``ended_at`` takes its place; otherwise the start record is
built exactly as before and the end is a record of its own. Either way the chain is dense
and verifies, and a reader sees the same event.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolledger
from toolledger.store import SQLiteStore
from toolledger.testing import stored_run

from ._faults import FaultyStore
from ._ledger import check_chain
from .test_internal_api import FailingAppendStore


def _records(store, run_id):
    return [(r.seq, r.kind, r.name, r.status) for r in store.read_events(run_id)]


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "one.db")
    yield s
    s.close()


def test_another_writer_appending_first_rechains_the_step_after_it(store):
    a = toolledger.run("g", db=store, run_id="r1")
    a.start()
    a.note("a0")
    a.flush()
    b = toolledger.run("g", db=store, run_id="r1")
    b.start()
    with a.step("whole", q=1) as st:
        b.note("b0")
        b.flush()  # b appends while a's start record is unbuilt
        st.record_output(x=1)  # one record, still buffered
    with a.step("split", q=2) as st:
        b.note("b1")
        b.flush()
        a.flush()  # a's start is built, loses the race, is chained after b's note
        st.record_output(x=2)
    a.flush()
    assert _records(store, "r1") == [
        (0, "note", "note", "completed"),
        (1, "note", "note", "completed"),  # b0
        (2, "note", "note", "completed"),  # b1
        (3, "step", "whole", "completed"),  # a's buffer, chained after b's notes
        (4, "step", "split", "running"),
        (5, "step", "split", "completed"),
    ]
    assert toolledger.verify(store, "r1").ok
    steps = {e["name"]: e for e in stored_run(store, "r1").events if e["kind"] == "step"}
    for name, q, x in (("whole", 1, 1), ("split", 2, 2)):
        assert (steps[name]["inputs"], steps[name]["outputs"]) == ({"q": q}, {"x": x})
        assert steps[name]["status"] == "completed"
        assert steps[name]["ended_at"] >= steps[name]["started_at"]


def test_a_strict_run_stores_the_start_at_once(store):
    with toolledger.run("g", db=store, strict=True) as run, run.step("s", q=1):
        assert _records(store, run.run_id) == [(0, "step", "s", "running")]
    assert [r[1:] for r in _records(store, run.run_id)] == [
        ("step", "s", "running"),
        ("step", "s", "completed"),
        ("finish", "finish", "completed"),
    ]


def test_reading_the_chain_builds_the_start_record(store):
    with toolledger.run("g", db=store) as run, run.step("s", q=1):
        assert run.event_count == 1  # the start record counts, built or not
        head = run.head_hash
        run.flush()
        assert _records(store, run.run_id) == [(0, "step", "s", "running")]
        assert store.read_events(run.run_id)[0].hash == head
    assert toolledger.verify(store, run.run_id).ok


def test_a_failed_step_is_one_record_with_its_error(store):
    with toolledger.run("g", db=store) as run, pytest.raises(ValueError), run.step("boom", q=1):
        raise ValueError("no")
    (row, _finish) = store.read_events(run.run_id)
    header = json.loads(row.data)["header"]
    assert (row.status, header["phase"]) == ("failed", "point")
    ev = stored_run(store, run.run_id).events[0]
    assert ev["status"] == "failed"
    assert ev["error"]["type"] == "ValueError"
    assert ev["inputs"] == {"q": 1}


def test_threads_recording_steps_in_one_run_keep_a_dense_verified_chain(store):
    with toolledger.run("g", db=store) as run:

        def work(i: int) -> None:
            for j in range(50):
                with run.step(f"t{i}", j=j) as st:
                    st.record_output(j=j)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = store.read_events(run.run_id)
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert toolledger.verify(store, run.run_id).ok
    steps = [e for e in stored_run(store, run.run_id).events if e["kind"] == "step"]
    assert len(steps) == 200
    assert all(e["status"] == "completed" and e["outputs"] == e["inputs"] for e in steps)


def test_the_background_flush_leaves_a_young_start_and_writes_an_old_one(store):
    # The start's age is set on the writer, not through FLUSH_INTERVAL: the background
    # flusher sleeps on that global, and a large value would put it to sleep for good.
    with toolledger.run("g", db=store) as run:
        run.note("older")
        with run.step("s", q=1) as st:
            writer = run._writer
            writer._lazy_at = time.monotonic() + 3600  # the start is young
            assert writer.flush(leave_young=True) is False  # the note went, the start stayed
            assert _records(store, run.run_id) == [(0, "note", "note", "completed")]
            writer._lazy_at = time.monotonic() - 3600  # now it is old
            assert writer.flush(leave_young=True) is True
            assert _records(store, run.run_id)[1:] == [(1, "step", "s", "running")]
            st.record_output(x=1)
    assert [r[1:] for r in _records(store, run.run_id)] == [
        ("note", "note", "completed"),
        ("step", "s", "running"),
        ("step", "s", "completed"),
        ("finish", "finish", "completed"),
    ]
    assert toolledger.verify(store, run.run_id).ok


def test_a_long_step_shows_running_before_it_ends(store):
    from .._internals import FLUSH_INTERVAL

    with toolledger.run("g", db=store) as run, run.step("long", q=1):
        deadline = time.monotonic() + 20 * FLUSH_INTERVAL + 5
        while not store.read_events(run.run_id):  # the background flusher writes the start
            assert time.monotonic() < deadline, "the start of a long step was never written"
            time.sleep(0.01)
        assert _records(store, run.run_id) == [(0, "step", "long", "running")]
    assert [r[1:] for r in _records(store, run.run_id)][:2] == [
        ("step", "long", "running"),
        ("step", "long", "completed"),
    ]


def _flaky(store):
    """``store`` whose ``append_events`` fails while ``.fail`` is set (not set at first)."""
    flaky = FailingAppendStore(store)
    flaky.fail = False
    return flaky


@pytest.mark.parametrize("fault", ["refuse", "lost"])
def test_a_start_whose_flush_failed_is_in_doubt_and_never_replaced(store, fault):
    """A failed flush may have landed (its answer lost): the start it carried is never
    replaced by the step's one record; the step is its start and end records, once each."""
    flaky = FaultyStore(store)
    with toolledger.run("g", db=flaky) as run:
        run.note("before")
        with run.step("s", q=1) as st_:
            flaky.queue("append_events", fault)
            with pytest.warns(toolledger.JournalWarning):
                assert run.flush() is False  # the start was built; its write failed
            st_.record_output(x=1)
    assert [r[1:] for r in _records(store, run.run_id)] == [
        ("note", "note", "completed"),
        ("step", "s", "running"),
        ("step", "s", "completed"),
        ("finish", "finish", "completed"),
    ]
    check_chain(store, run.run_id)
    step = stored_run(store, run.run_id).events[1]
    assert (step["inputs"], step["outputs"]) == ({"q": 1}, {"x": 1})


_OPS = st.lists(
    st.sampled_from(["open", "close", "note", "flush", "fail", "heal", "other"]),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(ops=_OPS)
def test_any_interleaving_keeps_every_event_in_a_dense_verified_chain(tmp_path_factory, ops):
    """Steps opened and closed, notes, flushes, failing appends and another writer, in any
    order: every event is stored once, as recorded, and the chain verifies."""
    path = tmp_path_factory.mktemp("walk") / "w.db"
    inner = SQLiteStore(path)
    store = _flaky(inner)
    other_store = SQLiteStore(path)
    other = toolledger.run("g", db=other_store, run_id="w")
    want: dict[str, tuple[dict, dict | None]] = {}
    try:
        with toolledger.run("g", db=store, run_id="w") as run:
            other.start()
            open_steps: list = []
            for i, op in enumerate(ops):
                if op == "open":
                    cm = run.step(f"s{i}", i=i)
                    handle = cm.__enter__()
                    open_steps.append((cm, handle, f"s{i}", i))
                elif op == "close" and open_steps:
                    cm, handle, name, n = open_steps.pop()
                    handle.record_output(n=n)
                    cm.__exit__(None, None, None)
                    want[name] = ({"i": n}, {"n": n})
                elif op == "note":
                    run.note(f"n{i}")
                    want[f"n{i}"] = ({}, None)
                elif op == "flush":
                    run.flush()
                elif op == "fail":
                    store.fail = True
                elif op == "heal":
                    store.fail = False
                elif op == "other":
                    other.note(f"o{i}")
                    other.flush()
                    want[f"o{i}"] = ({}, None)
            while open_steps:
                cm, handle, name, n = open_steps.pop()
                handle.record_output(n=n)
                cm.__exit__(None, None, None)
                want[name] = ({"i": n}, {"n": n})
            store.fail = False
        assert other.flush() is True
        rows = inner.read_events("w")
        assert [r.seq for r in rows] == list(range(len(rows)))
        assert toolledger.verify(inner, "w").ok
        events = stored_run(inner, "w").events
        got = {
            (e["name"] if e["kind"] == "step" else e["text"]): e
            for e in events
            if e["kind"] in ("step", "note")
        }
        assert set(got) == set(want)
        for name, (inputs, outputs) in want.items():
            if name.startswith("s"):
                assert got[name]["status"] == "completed"
                assert (got[name]["inputs"], got[name]["outputs"]) == (inputs, outputs)
    finally:
        other.flush()
        other_store.close()
        inner.close()


@pytest.mark.parametrize(
    ("justification", "source"), [(None, "developer"), (None, "model"), ("why", "model")]
)
@pytest.mark.parametrize("whole", [True, False])
def test_a_checked_begin_stores_what_a_begin_stores(
    store, justification: str | None, source: str, whole: bool
):
    """``begin_event(checked=True)`` (the guard checked the arguments when the call
    started) stores the records an unchecked ``begin_event`` stores for the same
    arguments: its start and end, or the one record of the whole event."""
    args: dict = {
        "justification": justification,
        "justification_source": source,
        "inputs": {"to": ["ana"], "w": 0.5},
        "meta": {"tool_revision": "2", "input_fingerprint": "sha256:00"},
        "checkpoint": {"namespace": "default", "call_id": "c1", "revision": None},
    }
    with toolledger.run("g", db=store) as run:
        for checked in (False, True):
            handle = run.begin_event("tool_call", "send_email", **args, checked=checked)
            if not whole:
                run.flush()  # the start record is stored: the end is a record of its own
            handle.end("completed", outputs={"result": {"ok": 1.5}, "is_error": False})
    rows = [r for r in store.read_events(run.run_id) if r.kind == "tool_call"]
    assert len(rows) == (2 if whole else 4)
    half = len(rows) // 2
    # A row's data holds its header without the row's columns (ids, times, seq), but
    # for the whole event's end time.
    docs = [json.loads(r.data) for r in rows]
    for doc in docs:
        doc["header"].pop("ended_at", None)
    assert docs[:half] == docs[half:]
    assert toolledger.verify(store, run.run_id).ok


def test_a_checked_prepared_end_is_the_record_an_unchecked_one_prepares(store):
    """``prepare_end(checked=True)`` (the guard's own meta and link) prepares the very end
    record an unchecked ``prepare_end`` prepares for the same values, floats included."""
    meta = {"tool_revision": "2", "attempt_id": "a" * 32, "replayed": False, "recovered": True}
    link = {"namespace": "default", "call_id": "c1", "revision": 2}
    outputs = {"result": {"ok": 1.5, "n": [1, "x"]}, "is_error": False}
    with toolledger.run("g", db=store) as run:
        handle = run.begin_event(
            "tool_call",
            "send_email",
            inputs={"w": 0.5},
            meta={"tool_revision": "2", "input_fingerprint": "sha256:00"},
            checkpoint={"namespace": "default", "call_id": "c1", "revision": None},
            checked=True,
        )
        plain, checked = (
            run.prepare_end(
                handle, "completed", outputs=outputs, meta=meta, checkpoint=link, checked=c
            )
            for c in (False, True)
        )
        handle.end("completed", outputs=outputs, meta=meta, checkpoint=link)
    assert checked.content_json == plain.content_json
    assert (checked.meta, checked.link, checked.floats) == (plain.meta, plain.link, plain.floats)
    assert checked.link is not link  # the caller's dict is not kept
