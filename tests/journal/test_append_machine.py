"""A state machine over a fault-injecting SQLite store: every append outcome, any order.

Rules drive one run: notes, steps (one record, and start + end), flushes and guarded
calls (whose claim and completion transactions carry the journal's buffer), while faults
are queued at the store's write points (a commit whose answer is lost, a refusal,
``KeyboardInterrupt`` or ``CancelledError`` before or after the commit) and read-back
points (a failed read), or the store goes down and comes back. After every step: the
stored chain verifies with a dense ``seq``, no record is stored twice, every record a
flush reported written is stored, no effect ran twice. Whenever the store recovers, a
call that executed ends ``completed`` with the result its tool produced.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import toolledger
from toolledger.store import SQLiteStore

from ._faults import WRITE_FAULTS, FaultyStore
from ._ledger import Effects, check_chain

INTERRUPTED = (KeyboardInterrupt, asyncio.CancelledError)
CALL_IDS = st.sampled_from(["c0", "c1", "c2", "c3"])
FAULT = st.sampled_from([None, *WRITE_FAULTS])


class AppendMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.inner = SQLiteStore(Path(self.dir.name) / "m.db", durability="normal")
        self.store = FaultyStore(self.inner)
        self.effects = Effects()
        self.tool = self.effects.tool()
        self.run = toolledger.run("machine", db=self.store)
        self.run.__enter__()
        self.recorded: list[str] = []  # event ids whose recording call returned
        self.reported: list[str] = []  # of those, the ones a flush reported written

    def _quietly(self, action) -> object:  # type: ignore[no-untyped-def]
        try:
            return action()
        except INTERRUPTED:
            return None  # the agent catches the interrupt and goes on
        except toolledger.CheckpointError:
            return None  # a guarded call the store failed (OUTCOME_UNKNOWN, ...)

    @rule()
    def note(self) -> None:
        event_id = self._quietly(lambda: self.run.note("n"))
        if isinstance(event_id, str):
            self.recorded.append(event_id)

    @rule(flush_inside=st.booleans())
    def step(self, flush_inside: bool) -> None:
        def act() -> str:
            with self.run.step("s") as s:
                if flush_inside:
                    self.run.flush()
            return s.event_id

        event_id = self._quietly(act)
        if isinstance(event_id, str):
            self.recorded.append(event_id)

    @rule(fault=FAULT, read_fails=st.integers(0, 2))
    def flush(self, fault: str | None, read_fails: int) -> None:
        """A flush whose append takes ``fault`` and whose read-backs fail ``read_fails``
        times."""
        self.store.queue("append_events", fault)
        self.store.queue("read_events", *(["fail"] * read_fails))
        if self._quietly(self.run.flush) is True:
            self.reported = list(self.recorded)

    @rule(call_id=CALL_IDS, claim=FAULT, completion=FAULT, read_fails=st.integers(0, 2))
    def call(
        self, call_id: str, claim: str | None, completion: str | None, read_fails: int
    ) -> None:
        """A guarded call whose claim and completion commits (carrying the buffer) take
        ``claim`` and ``completion``, and whose journal read-backs fail ``read_fails``
        times."""
        self.store.queue("apply", claim, completion)
        self.store.queue("read_events", *(["fail"] * read_fails))
        n = int(call_id[1:])
        out = self._quietly(lambda: self.run.call(self.tool, call_id=call_id, input={"n": n}))
        if out is not None:
            assert out.payload == {"n": n, "call": call_id}  # type: ignore[attr-defined]

    @rule()
    def down(self) -> None:
        self.store.down = True

    @rule()
    def recover(self) -> None:
        """The store works again: every call that executed ends completed with its result."""
        self.store.down = False
        self.store.plan.clear()
        for call_id in sorted(self.effects.results):
            n = int(call_id[1:])
            out = self.run.call(self.tool, call_id=call_id, input={"n": n})
            assert out.payload == self.effects.results[call_id]
            stored = self.inner.get(self.run.namespace, call_id)
            assert stored is not None
            assert stored.status.value in ("completed", "delivered")
        assert self.run.flush() is True
        self.reported = list(self.recorded)

    @invariant()
    def chain_holds(self) -> None:
        check_chain(self.inner, self.run.run_id, self.reported)
        assert self.effects.double_effects() == []

    def teardown(self) -> None:
        try:
            self.recover()
            self.run.__exit__(None, None, None)
            check_chain(self.inner, self.run.run_id, self.recorded)
        finally:
            self.inner.close()
            self.dir.cleanup()


AppendMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAppendMachine = AppendMachine.TestCase
