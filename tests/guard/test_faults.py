"""The guard against a store that fails, loses CAS races and commits with unknown outcomes.

A Hypothesis state machine drives calls and deliveries of a few call ids through a store
that injects, per write: a failure (nothing written, StoreUnavailableError), a lost CAS
(swaps report False, nothing written) or an unknown outcome (written, then
StoreUnavailableError). Invariants: the effect of a call id happens at most once; an
outcome once returned never changes; stored records stay valid.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import toolledger
from toolledger.errors import StoreUnavailableError
from toolledger.store.base import AppendEvents, CreateCheckpoint, SwapCheckpoint
from toolledger.testing import MemoryStore

FAULTS = ("ok", "fail", "lost", "unknown")


class FaultyStore(MemoryStore):
    """A MemoryStore whose checkpoint and operation-journal writes take queued faults."""

    def __init__(self) -> None:
        super().__init__()
        self.faults: list[str] = []
        self.injected: Counter[str] = Counter()

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        if any(isinstance(op, AppendEvents) for op in ops) or not self.faults:
            return super().apply(ops, durable=durable)
        fault = self.faults.pop(0)
        self.injected[fault] += 1
        if fault == "fail":
            raise StoreUnavailableError(message="injected: write failed")
        swaps_only = not any(isinstance(op, CreateCheckpoint) for op in ops)
        if fault == "lost" and swaps_only and isinstance(ops[0], SwapCheckpoint):
            return [False for _ in ops]  # as if another writer had moved first
        result = super().apply(ops, durable=durable)
        if fault == "unknown":
            raise StoreUnavailableError(message="injected: commit outcome unknown")
        return result


class ToolFailed(Exception):
    """The tool's own pre-effect failure."""


class GuardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = FaultyStore()
        self.run = toolledger.run("faults", db=self.store)
        self.run.__enter__()
        self.effects: Counter[str] = Counter()
        self.seen: dict[str, Any] = {}
        self.behaviour: dict[str, str] = {}

        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            mode = self.behaviour[ctx.call_id]
            if mode == "pre":
                raise ToolFailed("before any effect")
            ctx.operation.write({"order": ctx.call_id})
            self.effects[ctx.call_id] += 1
            if mode == "post":
                raise TimeoutError("after the effect")
            return {"order": ctx.call_id, "input": input}

        def recover(ctx: toolledger.RecoverContext) -> Any:
            if self.effects[ctx.call_id]:
                return toolledger.Recovered({"order": ctx.call_id, "input": "recovered"})
            return toolledger.NotRecovered("no effect seen")

        self.plain = toolledger.tool("t", revision="1", execute=execute)
        self.recovering = toolledger.tool("t", revision="1", execute=execute, recover=recover)

    def teardown(self) -> None:
        self.run.__exit__(None, None, None)

    @rule(
        call_id=st.sampled_from(["a", "b"]),
        mode=st.sampled_from(["ok", "pre", "post"]),
        use_recover=st.booleans(),
        faults=st.lists(st.sampled_from(FAULTS), max_size=4),
    )
    def call(self, call_id: str, mode: str, use_recover: bool, faults: list[str]) -> None:
        self.behaviour[call_id] = mode
        self.store.faults = list(faults)
        tool = self.recovering if use_recover else self.plain
        try:
            out = self.run.call(tool, call_id=call_id, input={"id": call_id})
        except (ToolFailed, TimeoutError, toolledger.OutcomeUnknownError) as exc:
            event(f"call raised {type(exc).__name__}")
            return
        except toolledger.StoreError:
            event("call raised StoreError")
            return
        finally:
            self.store.faults = []
        if call_id in self.seen:
            assert out.payload == self.seen[call_id], "an outcome never changes"
            assert out.replayed or out.recovered or out.revision >= 2
        else:
            self.seen[call_id] = out.payload
        event("replayed" if out.replayed else "recovered" if out.recovered else "executed")
        if not out.replayed and not out.recovered:
            assert out.payload == {"order": call_id, "input": {"id": call_id}}

    @precondition(lambda self: bool(self.seen))
    @rule(
        data=st.data(),
        redeliver=st.booleans(),
        faults=st.lists(st.sampled_from(FAULTS), max_size=3),
    )
    def deliver(self, data: st.DataObject, redeliver: bool, faults: list[str]) -> None:
        call_id = data.draw(st.sampled_from(sorted(self.seen)))
        posted: list[Any] = []
        self.store.faults = list(faults)
        try:
            self.run.deliver(call_id, posted.append, redeliver=redeliver)
        except (toolledger.DeliveryUncertainError, toolledger.StoreError):
            pass
        finally:
            self.store.faults = []
        assert all(p == self.seen[call_id] for p in posted), "only the stored payload is posted"

    @invariant()
    def effect_at_most_once(self) -> None:
        assert all(n <= 1 for n in self.effects.values()), self.effects

    @invariant()
    def records_stay_valid(self) -> None:
        for call_id in ("a", "b"):
            rec = self.store.get("default", call_id)  # validates
            if rec is not None and rec.result is not None and call_id in self.seen:
                assert rec.result.payload == self.seen[call_id]


TestGuardUnderFaults = GuardMachine.TestCase
TestGuardUnderFaults.settings = settings(
    max_examples=150,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
