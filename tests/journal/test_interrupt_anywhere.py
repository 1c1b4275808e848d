"""A ``KeyboardInterrupt`` at any line the journal writer runs leaves a run that recovers.

A real SIGINT lands between two bytecodes of whatever the main thread runs, including the
writer's bookkeeping (chaining a step's one record in place of its start, landing a
batch, re-chaining after a lost race, handing the buffer to a guarded call's claim). A
trace function raises ``KeyboardInterrupt`` at the n-th line executed in the writer's
module, for every n a small agent reaches: the agent catches it and goes on (later
records and calls), and the run is checked once it closed: the chain verifies with a
dense ``seq``, no record is stored twice, every acknowledged record is stored, no batch
reaches the store with an unbuilt record, nothing hangs, and the guarded call that ran
keeps its result.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import toolledger
from toolledger.store import SQLiteStore

from ._ledger import Effects, check_chain

WRITER = str(Path(toolledger.__file__).parent / "journal" / "_writer.py")


class InterruptAtLine:
    """A trace function: ``KeyboardInterrupt`` at the ``n``-th line run in the writer."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != WRITER or frame.f_code.co_name == "__del__":
            return None
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.seen += 1
            if self.seen == self.n:
                sys.settrace(None)
                raise KeyboardInterrupt
        return self._line


def _agent(run: toolledger.Run, tool: toolledger.Tool, acked: list[str]) -> int:
    """Record notes, steps (one record, and start + end), a guarded call and flushes,
    catching interrupts as an agent that goes on does; return how many it caught."""
    caught = 0

    def step(name: str, flush: bool) -> None:
        with run.step(name) as s:
            if flush:
                run.flush()
        acked.append(s.event_id)

    actions = [
        lambda: acked.append(run.note("a")),
        lambda: step("one", False),
        lambda: step("two", True),
        lambda: run.call(tool, call_id="c1", input={"n": 1}),
        lambda: acked.append(run.note("b")),
        lambda: step("three", False),
        run.flush,
    ]
    for action in actions:
        try:
            action()
        except KeyboardInterrupt:
            caught += 1
    return caught


def _lines_reached(store: SQLiteStore) -> int:
    counter = InterruptAtLine(10**9)
    with toolledger.run("g", db=store, namespace="count") as run:
        sys.settrace(counter)
        try:
            _agent(run, Effects().tool(), [])
        finally:
            sys.settrace(None)
    return counter.seen


def test_an_interrupt_at_any_writer_line_leaves_a_run_that_recovers(tmp_path: Path):
    """About 1,600 runs, one per line the agent reaches in the writer (one store)."""
    store = SQLiteStore(tmp_path / "i.db", durability="normal")
    try:
        total = _lines_reached(store)
        assert total > 100  # the agent exercises the writer
        for n in range(1, total + 1):
            _interrupt_at(store, n, total)
    finally:
        store.close()


def _interrupt_at(store: SQLiteStore, n: int, total: int) -> None:
    effects = Effects()
    tool = effects.tool()
    acked: list[str] = []
    injector = InterruptAtLine(n)
    with toolledger.run("g", db=store, namespace=f"n{n}") as run:
        sys.settrace(injector)
        try:
            caught = _agent(run, tool, acked)
        finally:
            sys.settrace(None)
        # (A thread contending for the flush lock can make a run reach a few lines less.)
        assert caught == (injector.seen >= n), f"line {n}: the interrupt was raised {caught}x"
        try:
            out = run.call(tool, call_id="c1", input={"n": 1})
        except toolledger.OutcomeUnknownError:
            assert effects.count["c1"] == 0, f"line {n}: an executed call lost its result"
        else:
            assert out.payload == {"n": 1, "call": "c1"}
    assert run.flush() is True
    assert effects.double_effects() == []
    try:
        check_chain(store, run.run_id, acked)
    except AssertionError as exc:
        pytest.fail(f"interrupt at writer line {n} of {total}: {exc}")
