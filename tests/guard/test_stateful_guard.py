"""Calls, deliveries, approvals and crashes interleave; the guard's promises hold throughout.

A model keeps the world the tools act on (every effect, by call id) and the approval
state the test decided. Rules make guarded calls (``call``, ``acall``, ``call_many``,
with a gated tool or a plain ``Tool`` for the same call), answer or decide approvals,
deliver with posts that mutate their payload and sometimes fail, and crash a run at a
named boundary (the guard's crash hook raises; a fresh ``Run`` on the same database file
then carries on, as a restarted process would). Invariants, after every step:

- no double effect: each call id took effect at most once;
- no stored result differs from what the tool returned for that call (byte for byte),
  and every post got exactly those bytes;
- no call denied (by the approver or by ``decide_approval``) ever ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.checkpoint import canonical_json
from toolledger.store import SQLiteStore
from toolledger.testing import CRASH_POINTS as ALL_POINTS
from toolledger.testing import crash_at

CALLS = ["c0", "c1", "c2"]
CRASH_POINTS = ["before-claim", "after-claim", "after-execute", "after-completion"]
DELIVERY_CRASHES = ["after-delivery-claim", "after-post"]
ANSWERS = {"approve": Approved("alice"), "deny": Denied("bob", "no"), "pend": Pending("T")}


class Crash(BaseException):
    """The process died here (raised by the crash hook; nothing below it runs)."""


class GuardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tl-stateful-"))
        self.path = self.dir / "ledger.db"
        self.stores: list[SQLiteStore] = []
        self.runs: list[toolledger.Run] = []
        self.world: dict[str, list[Any]] = {c: [] for c in CALLS}  # effects by call id
        self.denied: set[str] = set()
        self.posted: list[tuple[str, str]] = []
        self.crash_at: str | None = None
        self.answer: Any = Pending("T")
        self.counter = 0
        self.run = self._fresh_run()
        self.hooks = contextlib.ExitStack()
        for point in ALL_POINTS:
            self.hooks.enter_context(crash_at(point, self._hook(point)))

    # -- plumbing ----------------------------------------------------------------------

    def _hook(self, name: str) -> Any:
        def action() -> None:
            if self.crash_at == name:
                self.crash_at = None
                raise Crash(name)

        return action

    def _fresh_run(self) -> toolledger.Run:
        store = SQLiteStore(self.path, durability="normal", busy_timeout=5)
        self.stores.append(store)
        run = toolledger.run("stateful", db=store)
        run.start()
        self.runs.append(run)
        return run

    def _restart(self) -> None:
        """The process died: its run is abandoned as it was; a new one takes over."""
        self.run = self._fresh_run()

    def _tool(self, gated: bool) -> toolledger.Tool:
        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            ctx.operation.write({"call": ctx.call_id})  # just before the effect
            self.counter += 1
            result = {"call": ctx.call_id, "n": self.counter, "rows": [self.counter, [1]]}
            self.world[ctx.call_id].append(canonical_json(result))
            return result

        def recover(ctx: toolledger.RecoverContext) -> Any:
            done = self.world[ctx.call_id]
            if done:  # proven at the "provider": the effect happened, with this result
                import json

                return toolledger.Recovered(json.loads(done[0]))
            return toolledger.NotRecovered("no trace of the effect")

        return toolledger.tool(
            "act",
            revision="1",
            execute=execute,
            recover=recover,
            approval="effect-only" if gated else None,
            approver=(lambda request: self.answer) if gated else None,
        )

    def _call(self, entry: str, call_id: str, gated: bool) -> Any:
        tool = self._tool(gated)
        try:
            if entry == "call":
                return self.run.call(tool, call_id=call_id, input={"id": call_id})
            if entry == "acall":
                return asyncio.run(self.run.acall(tool, call_id=call_id, input={"id": call_id}))
            item = {"tool": tool, "call_id": call_id, "input": {"id": call_id}}
            return self.run.call_many([item, item])[1]
        except Crash:
            self._restart()
            return None
        except toolledger.ApprovalDeniedError as exc:
            self.denied.add(call_id)
            return exc
        except toolledger.CheckpointError as exc:
            if exc.code not in ("OUTCOME_UNKNOWN", "DELIVERY_UNCERTAIN"):
                raise
            return exc

    # -- rules ---------------------------------------------------------------------------

    @rule(
        entry=st.sampled_from(["call", "acall", "call_many"]),
        call_id=st.sampled_from(CALLS),
        gated=st.booleans(),
        answer=st.sampled_from(sorted(ANSWERS)),
    )
    def make_call(self, entry: str, call_id: str, gated: bool, answer: str) -> None:
        self.answer = ANSWERS[answer]
        before = list(self.world[call_id])
        out = self._call(entry, call_id, gated)
        if call_id in self.denied:
            assert self.world[call_id] == before == []
            assert isinstance(out, toolledger.ApprovalDeniedError)
        if isinstance(out, toolledger.ToolOutcome) and out.status == "awaiting_approval":
            assert self.world[call_id] == before
        elif isinstance(out, toolledger.ToolOutcome):
            assert [canonical_json(out.payload)] == self.world[call_id]
            out.payload["rows"].append("the caller scribbles on its outcome")

    @rule(
        call_id=st.sampled_from(CALLS),
        point=st.sampled_from(CRASH_POINTS),
    )
    def crash_at_point(self, call_id: str, point: str) -> None:
        self.crash_at = point
        self._crash_call(call_id, "call")

    def _crash_call(self, call_id: str, entry: str) -> None:
        self._call(entry, call_id, gated=False)
        self.crash_at = None

    @rule(call_id=st.sampled_from(CALLS), granted=st.booleans())
    def decide(self, call_id: str, granted: bool) -> None:
        rec = self.run.store.approval_get("default", call_id)
        if rec is None or rec.status.value != "pending":
            return
        toolledger.decide_approval(self.run.store, "default", call_id, granted, "carol")
        if not granted:
            self.denied.add(call_id)

    @rule(
        call_id=st.sampled_from(CALLS),
        fail=st.booleans(),
        redeliver=st.booleans(),
        crash=st.sampled_from([None, None, *DELIVERY_CRASHES]),
        entry=st.sampled_from(["deliver", "adeliver"]),
    )
    def deliver(
        self, call_id: str, fail: bool, redeliver: bool, crash: str | None, entry: str
    ) -> None:
        def post(payload: Any) -> str:
            self.posted.append((call_id, canonical_json(payload)))
            payload["rows"].clear()
            payload["mutated"] = True
            if fail:
                raise ConnectionError("model API down")
            return "ok"

        async def apost(payload: Any) -> str:
            return post(payload)

        self.crash_at = crash
        try:
            if entry == "deliver":
                self.run.deliver(call_id, post, redeliver=redeliver)
            else:
                asyncio.run(self.run.adeliver(call_id, apost, redeliver=redeliver))
        except Crash:
            self._restart()
        except ConnectionError:
            assert fail
        except toolledger.CheckpointError as exc:
            if exc.code not in ("NOT_FOUND", "INVALID_TRANSITION", "DELIVERY_UNCERTAIN"):
                raise
        finally:
            self.crash_at = None

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def no_double_effect(self) -> None:
        assert all(len(effects) <= 1 for effects in self.world.values()), self.world

    @invariant()
    def stored_results_are_what_the_tool_returned(self) -> None:
        store = self.run.store
        for call_id in CALLS:
            rec = store.get("default", call_id)
            if rec is not None and rec.result is not None:
                assert [canonical_json(rec.result.payload)] == self.world[call_id]
        for call_id, text in self.posted:
            assert [text] == self.world[call_id]

    @invariant()
    def denied_calls_never_ran(self) -> None:
        for call_id in self.denied:
            assert self.world[call_id] == []

    def teardown(self) -> None:
        self.hooks.close()
        for run in self.runs:  # a crashed run's buffered records are simply lost
            with contextlib.suppress(Exception):
                run.close()
        for store in self.stores:
            store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


GuardMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGuardStateful = GuardMachine.TestCase
