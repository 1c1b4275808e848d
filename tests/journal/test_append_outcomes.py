"""Every outcome of a journal append leaves a run that recovers (SQLite, injected faults).

An append can land and be reported, land with its answer lost, be refused, be
interrupted by a ``BaseException`` (``KeyboardInterrupt``, ``CancelledError``) before or
after its commit, or leave a read-back that fails. After any of them, once the store
works again: the chain verifies with a dense ``seq``, no record is stored twice, every
acknowledged record is stored, and guarded calls (which carry the buffer in their
claim and completion transactions) commit again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toolledger
from toolledger.store import SQLiteStore

from ._faults import FaultyStore
from ._ledger import Effects, check_chain

INTERRUPTS = ("interrupt", "interrupt-after", "cancel", "cancel-after")


@pytest.fixture
def faulty(tmp_path: Path):
    inner = SQLiteStore(tmp_path / "j.db")
    yield FaultyStore(inner)
    inner.close()


def _quiet_flush(run: toolledger.Run) -> bool:
    with pytest.warns(toolledger.JournalWarning) if not run.errors else _nothing():
        return run.flush()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class TestLostAnswerThenRefusedRetry:
    def test_records_already_stored_never_go_back_to_the_buffer(self, faulty):
        """A commit that landed unreported, then a retry whose read-back trims it and whose
        re-append is refused: the run writes again once the store works, each record once."""
        effects = Effects()
        with toolledger.run("g", db=faulty) as run:
            a = run.note("a")
            faulty.queue("append_events", "lost")
            assert _quiet_flush(run) is False  # landed, answer lost
            b = run.note("b")
            faulty.queue("append_events", None, "refuse")  # CAS says landed; retry refused
            assert run.flush() is False
            assert run.flush() is True  # the store works again
            c = run.note("c")
            out = run.call(effects.tool(), call_id="c1", input={"n": 1})
            assert out.payload == {"n": 1, "call": "c1"}
            assert faulty.inner.get(run.namespace, "c1").status.value == "completed"
        check_chain(faulty.inner, run.run_id, [a, b, c])
        assert effects.double_effects() == []

    def test_a_lost_claim_with_a_failed_read_back_leaves_later_calls_working(self, faulty):
        """The claim transaction carries the buffer; it lands unreported and the journal's
        read-back fails: the next calls commit and the chain holds every record once."""
        effects = Effects()
        tool = effects.tool()
        with toolledger.run("g", db=faulty) as run:
            a = run.note("a")
            faulty.queue("apply", "lost")
            faulty.queue("read_events", "fail", "fail")
            faulty.queue("append_events", "refuse")
            out = run.call(tool, call_id="c1", input={"n": 1})
            assert out.payload == {"n": 1, "call": "c1"}
            for i in range(2, 6):
                assert run.call(tool, call_id=f"c{i}", input={"n": i}).payload["n"] == i
            for i in range(1, 6):
                assert faulty.inner.get(run.namespace, f"c{i}").status.value == "completed"
        check_chain(faulty.inner, run.run_id, [a])
        assert effects.double_effects() == []

    def test_a_lost_completion_whose_read_back_fails_is_stored_once(self, faulty):
        """The completion carries the call's end record: landed unreported, read-back
        failed, the guard re-reads and goes on: the end record is stored once."""
        effects = Effects()
        with toolledger.run("g", db=faulty) as run:
            faulty.queue("apply", None, "lost")  # the claim works; the completion is lost
            faulty.queue("read_events", "fail")
            out = run.call(effects.tool(), call_id="c1", input={"n": 1})
            assert out.payload == {"n": 1, "call": "c1"}
            run.note("after")
        records = check_chain(faulty.inner, run.run_id)
        call = [p for _, e, p in records if e == records[0][1]]
        assert call == ["start", "end"]


class TestInterruptedAppend:
    @pytest.mark.parametrize("fault", INTERRUPTS)
    def test_an_interrupted_flush_keeps_its_batch_and_later_calls_work(self, faulty, fault):
        """Ctrl-C (or a cancellation) before or after the commit of a batch: the agent
        catches it and goes on; nothing is lost, nothing stored twice."""
        effects = Effects()
        with toolledger.run("g", db=faulty) as run:
            a = run.note("a")
            with run.step("s") as step, run.step("inner"):
                pass
            faulty.queue("append_events", fault)
            with pytest.raises((KeyboardInterrupt, asyncio.CancelledError)):
                run.flush()
            b = run.note("b")
            out = run.call(effects.tool(), call_id="c1", input={"n": 1})
            assert out.payload == {"n": 1, "call": "c1"}
        assert run.errors == []
        check_chain(faulty.inner, run.run_id, [a, b, step.event_id])
        assert faulty.inner.get(run.namespace, "c1").status.value == "completed"

    @pytest.mark.parametrize("fault", INTERRUPTS)
    def test_an_interrupted_claim_transaction_leaves_the_run_writing(self, faulty, fault):
        """An interrupt at the commit of a claim carrying the buffer: the call raises it;
        the run's later records and calls are stored, each once."""
        effects = Effects()
        tool = effects.tool()
        with toolledger.run("g", db=faulty) as run:
            a = run.note("a")
            faulty.queue("apply", fault)
            with pytest.raises((KeyboardInterrupt, asyncio.CancelledError)):
                run.call(tool, call_id="c1", input={"n": 1})
            b = run.note("b")
            assert run.call(tool, call_id="c2", input={"n": 2}).payload["n"] == 2
        check_chain(faulty.inner, run.run_id, [a, b])
        assert faulty.inner.get(run.namespace, "c2").status.value == "completed"

    @pytest.mark.parametrize("fault", INTERRUPTS)
    def test_an_interrupted_completion_keeps_the_call_result(self, faulty, fault):
        """An interrupt at the commit of the completion (which carries the call's end
        record): once the agent asks again, the call ends completed with the result the
        tool produced, never executed twice; the end record is stored once."""
        effects = Effects()
        tool = effects.tool()
        with toolledger.run("g", db=faulty) as run:
            faulty.queue("apply", None, fault)
            with pytest.raises((KeyboardInterrupt, asyncio.CancelledError)):
                run.call(tool, call_id="c1", input={"n": 1})
            again = run.call(tool, call_id="c1", input={"n": 1})
            assert again.payload == {"n": 1, "call": "c1"}
        assert effects.count["c1"] == 1
        check_chain(faulty.inner, run.run_id)


def test_ctrl_c_while_the_run_closes_keeps_its_closing_record(tmp_path: Path):
    """A process whose run is interrupted while writing its last batch (the closing record
    with it) and that then exits on the KeyboardInterrupt: the batch is written at exit."""
    db = tmp_path / "j.db"
    child = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent.parent.parent)!r})
        import toolledger
        from toolledger.store import SQLiteStore
        from tests.journal._faults import FaultyStore

        store = FaultyStore(SQLiteStore({str(db)!r}))
        with toolledger.run("g", db=store, run_id="r1") as run:
            run.note("a")
            with run.step("last"):
                pass
            store.queue("append_events", "interrupt")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60
    )
    assert "KeyboardInterrupt" in proc.stderr
    store = SQLiteStore(db)
    try:
        records = check_chain(store, "r1")
        kinds = [r.kind for r in store.read_events("r1")]
        assert kinds == ["note", "step", "finish"], records
        assert store.get_run("r1").status == "completed"
    finally:
        store.close()


@pytest.mark.parametrize("fault", INTERRUPTS)
@pytest.mark.parametrize("commit", ["claim", "completion"])
def test_an_interrupted_async_call_leaves_the_run_writing(faulty, fault, commit):
    """``acall`` with an interrupt at its claim or completion commit: the next calls of
    the run work, the call that ran keeps its result, every record is stored once."""
    effects = Effects()
    tool = effects.tool()

    async def agent() -> str:
        async with toolledger.run("g", db=faulty) as run:
            a = run.note("a")
            faulty.queue("apply", *([None] if commit == "completion" else []), fault)
            with pytest.raises((KeyboardInterrupt, asyncio.CancelledError)):
                await run.acall(tool, call_id="c1", input={"n": 1})
            out = await run.acall(tool, call_id="c2", input={"n": 2})
            assert out.payload == {"n": 2, "call": "c2"}
            if effects.count["c1"]:
                again = await run.acall(tool, call_id="c1", input={"n": 1})
                assert again.payload == {"n": 1, "call": "c1"}
        check_chain(faulty.inner, run.run_id, [a])
        return run.run_id

    asyncio.run(agent())
    assert effects.double_effects() == []


@pytest.mark.parametrize("row", [None, "r", 3])
def test_a_batch_with_a_row_that_is_not_an_event_row_is_refused_typed(store, row):
    """What reaches a store's append is checked before the transaction: a value that is not
    an ``EventRow`` is ``INVALID_ARGUMENT`` (never a raw ``AttributeError``), nothing
    written."""
    with toolledger.run("g", db=store) as run:
        run.note("a")
        assert run.flush() is True
        with pytest.raises(toolledger.InvalidArgumentError, match="EventRow"):
            store.append_events(run.run_id, [row], expected_count=1)
    check_chain(store, run.run_id)
