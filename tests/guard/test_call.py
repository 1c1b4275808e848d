"""Every row of the ``run.call`` semantics table (README, section "Guarded tool calls")."""

from __future__ import annotations

import builtins
import os
import signal
from datetime import datetime, timezone
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import (
    Binding,
    Status,
    claim_delivery,
    claim_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.telemetry import CallFacts
from toolledger.testing import stored_run

from .._internals import ASYNC_TOOLS, ASYNC_TOOLS_MAX, RecoveryFailed
from .conftest import CountingStore, Effects, RecordingTelemetry


def _claim_elsewhere(store: Any, tool: toolledger.Tool, call_id: str, input: Any, attempt: str):
    """Leave a checkpoint executing as a crashed worker would (claim committed, no result)."""
    now = datetime.now(timezone.utc)
    b = Binding("default", call_id, tool.name, tool.revision, fingerprint(input))
    rec = create_checkpoint(b, at=now)
    t = claim_execution(rec, attempt_id=attempt, at=now)
    store.create_if_absent(rec)
    assert store.compare_and_swap(0, t.next)
    return t.next


def _tool_events(run: Any) -> list[dict[str, Any]]:
    """The run's tool_call events, start and end records merged, as readers see them."""
    run.flush()
    return [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]


class TestNewCall:
    def test_call_new_executes_once_and_completes(self, run, db, effects: Effects) -> None:
        """A new call executes, stores the result, and returns it (not replayed)."""
        out = run.call(effects.tool(), call_id="c1", input={"to": "a"})
        assert effects.executed == [{"to": "a"}]
        assert (out.payload, out.is_error, out.status, out.revision) == (
            {"sent": {"to": "a"}, "n": 1},
            False,
            "completed",
            2,
        )
        assert (out.replayed, out.recovered) == (False, False)
        names = [h.transition for h in db.history("default", "c1")]
        assert names == ["create_checkpoint", "claim_execution", "complete_execution"]

    def test_call_new_uses_two_durable_commits(self, tmp_path, effects: Effects) -> None:
        """Claim and completion are the only durable commits of a new call."""
        store = CountingStore(tmp_path / "full.db", durability="full")
        with toolledger.run("g", db=store) as r:
            store.reset()
            r.call(effects.tool(), call_id="c1", input={"x": 1})
            assert store.durable_commits == 2
            store.reset()
            r.call(effects.tool(), call_id="c1", input={"x": 1})
            assert store.durable_commits == 0
        store.close()

    def test_call_new_claim_is_durable_before_execute(self, run, db) -> None:
        """When execute starts, the claim is already stored (executing, fenced)."""
        seen: list[Any] = []

        def execute(input: Any, ctx: toolledger.ExecuteContext) -> str:
            rec = db.get("default", ctx.call_id)
            seen.append((rec.status, rec.execution_fence == ctx.attempt_id))
            return "ok"

        run.call(toolledger.tool("t", revision="1", execute=execute), call_id="c", input=1)
        assert seen == [(Status.EXECUTING, True)]

    def test_call_new_removes_operation_journal_entry(self, run, db, effects: Effects) -> None:
        """The operation-journal entry is removed once the result is stored."""
        run.call(effects.tool(journal=True), call_id="c1", input={})
        assert db.operation_read("default", "c1") is None


class TestSameCallAgain:
    @pytest.mark.parametrize("then", ["completed", "delivering", "delivered"])
    def test_call_again_returns_stored_payload_without_executing(
        self, run, db, effects: Effects, then: str
    ) -> None:
        """completed/delivering/delivered: the stored payload, replayed, no execution."""
        tool = effects.tool()
        first = run.call(tool, call_id="c1", input={"to": "a"})
        if then == "delivering":  # a deliverer claimed it and stopped
            rec = db.get("default", "c1")
            t = claim_delivery(rec, delivery_id="d-1", at=datetime.now(timezone.utc))
            assert db.compare_and_swap(t.expected_revision, t.next)
        if then == "delivered":
            run.deliver("c1", lambda payload: None)
        again = run.call(tool, call_id="c1", input={"to": "a"})
        assert len(effects.executed) == 1
        assert again.payload == first.payload
        assert (again.replayed, again.recovered, again.status) == (True, False, then)

    def test_call_same_id_different_input_is_binding_conflict(self, run, effects) -> None:
        """Same call id, another input: BINDING_CONFLICT, nothing executed."""
        tool = effects.tool()
        run.call(tool, call_id="c1", input={"to": "a"})
        with pytest.raises(toolledger.BindingConflictError) as err:
            run.call(tool, call_id="c1", input={"to": "b"})
        assert err.value.code == "BINDING_CONFLICT"
        assert "input_fingerprint" in err.value.details["differs"]
        assert len(effects.executed) == 1

    def test_call_same_id_new_revision_is_binding_conflict(self, run, effects) -> None:
        """A tool revision bump never replays the old result."""
        run.call(effects.tool(revision="1"), call_id="c1", input={})
        with pytest.raises(toolledger.BindingConflictError) as err:
            run.call(effects.tool(revision="2"), call_id="c1", input={})
        assert err.value.details["differs"] == ["tool_revision"]


class TestFoundExecuting:
    def test_call_found_executing_without_recover_is_outcome_unknown(
        self, run, db, effects
    ) -> None:
        """executing (crash): never execute; OUTCOME_UNKNOWN; left uncertain with a reason."""
        tool = effects.tool()
        _claim_elsewhere(db, tool, "c1", {"a": 1}, "crashed-attempt")
        with pytest.raises(toolledger.OutcomeUnknownError) as err:
            run.call(tool, call_id="c1", input={"a": 1})
        assert err.value.code == "OUTCOME_UNKNOWN"
        assert "do not retry under a new call id" in err.value.message
        assert effects.executed == []
        rec = db.get("default", "c1")
        assert rec.status is Status.UNCERTAIN
        assert rec.uncertain_reason.startswith("found executing by another caller")
        assert "crashed-attempt" in rec.uncertain_reason

    def test_call_found_executing_with_recover_completes_for_recorded_attempt(
        self, run, db, effects
    ) -> None:
        """recover proves the outcome: completed acting for the recorded attempt."""
        contexts: list[toolledger.RecoverContext] = []

        def recover(ctx: toolledger.RecoverContext) -> toolledger.Recovered:
            contexts.append(ctx)
            return toolledger.Recovered({"order": ctx.operation.read()["order"]})

        tool = effects.tool(recover=recover)
        _claim_elsewhere(db, tool, "c1", {}, "crashed-attempt")
        db.operation_write("default", "c1", {"order": "o-9"})
        out = run.call(tool, call_id="c1", input={})
        assert (out.payload, out.recovered, out.replayed) == ({"order": "o-9"}, True, False)
        assert effects.executed == []
        assert contexts[0].attempt_id == "crashed-attempt"
        assert contexts[0].error is None
        assert contexts[0].reason.startswith("found executing by another caller")
        rec = db.get("default", "c1")
        assert (rec.status, rec.execution_fence) == (Status.COMPLETED, "crashed-attempt")
        assert db.operation_read("default", "c1") is None
        again = run.call(tool, call_id="c1", input={})
        assert (again.payload, again.replayed, again.recovered) == ({"order": "o-9"}, True, False)

    @pytest.mark.parametrize("answer", [None, toolledger.NotRecovered("no order found")])
    def test_call_found_uncertain_not_recovered_stays_uncertain(
        self, run, db, effects, answer
    ) -> None:
        """recover cannot prove it: OUTCOME_UNKNOWN, still uncertain, never executed."""
        tool = effects.tool(recover=lambda ctx: answer)
        _claim_elsewhere(db, tool, "c1", {}, "crashed-attempt")
        for _ in range(2):  # executing, then uncertain
            with pytest.raises(toolledger.OutcomeUnknownError) as err:
                run.call(tool, call_id="c1", input={})
            if answer is not None:
                assert "no order found" in err.value.message
        assert db.get("default", "c1").status is Status.UNCERTAIN
        assert effects.executed == []


class TestExecuteRaises:
    def test_call_execute_raises_with_empty_journal_releases_and_reraises(
        self, run, db, effects
    ) -> None:
        """Pre-effect failure: released to ready, the original exception unchanged."""
        boom = ValueError("bad address")
        tool = effects.tool(raises=boom)
        with pytest.raises(ValueError) as err:
            run.call(tool, call_id="c1", input={})
        assert err.value is boom
        assert err.value.__cause__ is None
        rec = db.get("default", "c1")
        assert (rec.status, rec.execution_fence) == (Status.READY, None)
        ok = run.call(effects.tool(), call_id="c1", input={})  # a retry may execute
        assert ok.replayed is False
        assert len(effects.executed) == 2

    @pytest.mark.parametrize("where", ["tool", "call"])
    def test_call_execute_raises_on_error_result_stores_error(
        self, run, db, effects, where
    ) -> None:
        """on_error="result" (tool or call, the call's wins): the error is the result."""
        tool = effects.tool(
            raises=ValueError("bad address"), on_error="result" if where == "tool" else "raise"
        )
        kw = {"on_error": "result"} if where == "call" else {}
        out = run.call(tool, call_id="c1", input={}, **kw)
        assert out.is_error is True
        assert out.payload == {"error": "ValueError", "message": "bad address"}
        again = run.call(tool, call_id="c1", input={}, **kw)
        assert (again.payload, again.is_error, again.replayed) == (out.payload, True, True)
        assert len(effects.executed) == 1

    def test_call_on_error_call_keyword_overrides_tool(self, run, effects) -> None:
        """The call's on_error="raise" wins over the tool's "result"."""
        tool = effects.tool(raises=KeyError("k"), on_error="result")
        with pytest.raises(KeyError):
            run.call(tool, call_id="c1", input={}, on_error="raise")

    def test_call_execute_raises_after_journal_write_is_outcome_unknown(
        self, run, db, effects
    ) -> None:
        """Failure after the journal write: uncertain; OUTCOME_UNKNOWN caused by the original."""
        boom = TimeoutError("provider timed out")
        tool = effects.tool(journal=True, raises=boom, on_error="result")
        with pytest.raises(toolledger.OutcomeUnknownError) as err:
            run.call(tool, call_id="c1", input={})
        assert err.value.__cause__ is boom
        rec = db.get("default", "c1")
        assert rec.status is Status.UNCERTAIN
        assert "TimeoutError: provider timed out" in rec.uncertain_reason
        assert db.operation_read("default", "c1") == {"order": "o-c1"}

    def test_call_execute_raises_after_journal_write_recovered(self, run, db, effects) -> None:
        """recover proves the effect: completed, recovered=True, journal entry removed."""
        seen: list[Any] = []

        def recover(ctx: toolledger.RecoverContext) -> toolledger.Recovered:
            seen.append(ctx.error)
            return toolledger.Recovered({"order": ctx.operation.read()["order"]})

        boom = TimeoutError("provider timed out")
        tool = effects.tool(journal=True, raises=boom, recover=recover)
        out = run.call(tool, call_id="c1", input={})
        assert (out.payload, out.recovered, out.replayed) == ({"order": "o-c1"}, True, False)
        assert seen == [boom]
        assert db.operation_read("default", "c1") is None
        assert len(effects.executed) == 1

    def test_call_recover_raising_groups_both_exceptions(self, run, db, effects) -> None:
        """recover raising: OUTCOME_UNKNOWN whose cause groups both exceptions."""
        boom, oops = TimeoutError("t"), ConnectionError("c")

        def recover(ctx: Any) -> Any:
            raise oops

        tool = effects.tool(journal=True, raises=boom, recover=recover)
        with pytest.raises(toolledger.OutcomeUnknownError) as err:
            run.call(tool, call_id="c1", input={})
        cause = err.value.__cause__
        group = getattr(builtins, "BaseExceptionGroup", RecoveryFailed)
        assert isinstance(cause, group)
        assert list(cause.exceptions) == [boom, oops]
        assert db.get("default", "c1").status is Status.UNCERTAIN

    def test_call_result_that_cannot_be_stored_completes_as_an_error(self, run, db) -> None:
        """A result over the bound: the tool ran, so the call completes with an error result
        naming the bound (never re-runnable, never stuck uncertain for its shape)."""
        tool = toolledger.tool(
            "big", revision="1", execute=lambda i, c: "x" * 100, max_result_bytes=10
        )
        out = run.call(tool, call_id="c1", input={})
        assert out.is_error
        assert "PAYLOAD_LIMIT" in out.payload["message"]
        rec = db.get("default", "c1")
        assert rec.status is Status.COMPLETED


class TestInterruption:
    @pytest.mark.parametrize("journal", [False, True])
    def test_call_keyboard_interrupt_in_execute_never_recovers(
        self, run, db, effects, journal
    ) -> None:
        """Ctrl-C inside execute: no recovery; released if pre-effect, else uncertain."""
        recovered: list[Any] = []
        tool = effects.tool(journal=journal, raises=KeyboardInterrupt(), recover=recovered.append)
        with pytest.raises(KeyboardInterrupt):
            run.call(tool, call_id="c1", input={})
        assert recovered == []
        status = db.get("default", "c1").status
        assert status is (Status.UNCERTAIN if journal else Status.READY)

    def test_call_sigint_after_execute_returns_still_completes(
        self, run, db, effects, crash_points
    ) -> None:
        """SIGINT between execute returning and completion: completion first, then it raises."""
        # Python's own handler, whatever an earlier test or library left installed; the signal
        # goes to this thread (a process-directed kill may land on another thread's mask).
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        crash_points.append(("after-execute", lambda: signal.raise_signal(signal.SIGINT)))
        try:
            with pytest.raises(KeyboardInterrupt):
                run.call(effects.tool(), call_id="c1", input={})
        finally:
            current = signal.signal(signal.SIGINT, previous)
        assert current is signal.default_int_handler
        rec = db.get("default", "c1")
        assert rec.status is Status.COMPLETED
        assert rec.result.payload == {"sent": {}, "n": 1}

    def test_call_sigint_deferred_to_custom_handler_once(self, run, db, effects, crash_points):
        """An app's own SIGINT handler still gets the signal, once, after the completion."""
        got: list[str] = []

        def handler(signum: int, frame: Any) -> None:
            got.append(db.get("default", "c1").status.value)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            crash_points.append(("after-execute", lambda: os.kill(os.getpid(), signal.SIGINT)))
            out = run.call(effects.tool(), call_id="c1", input={})
        finally:
            signal.signal(signal.SIGINT, previous)
        assert out.status == "completed"
        assert got == ["completed"]


class TestToolChecks:
    def test_call_async_tool_needs_acall(self, run) -> None:
        """An async execute under run.call is refused before anything is written."""

        async def execute(input: Any, ctx: Any) -> int:
            return 1

        with pytest.raises(toolledger.InvalidArgumentError):
            run.call(toolledger.tool("a", revision="1", execute=execute), call_id="c", input=1)
        assert run.store.get("default", "c") is None

    def test_call_async_tool_needs_acall_every_time(self, run) -> None:
        """The answer kept per tool object refuses an async tool again, and a replay too."""

        async def execute(input: Any, ctx: Any) -> int:
            return 1

        gone = toolledger.tool("a", revision="1", execute=execute)
        for _ in range(3):
            with pytest.raises(toolledger.InvalidArgumentError):
                run.call(gone, call_id="c", input=1)
        sync = toolledger.tool("a", revision="1", execute=lambda input, ctx: 2)
        assert run.call(sync, call_id="c", input=1).payload == 2
        with pytest.raises(toolledger.InvalidArgumentError):  # the stored call, replayed
            run.call(gone, call_id="c", input=1)
        assert run.call(sync, call_id="c", input=1).replayed

    def test_call_tools_asked_is_bounded(self, run) -> None:
        """Many tool objects keep at most the bounded number of answers."""
        for i in range(ASYNC_TOOLS_MAX + 10):
            tool = toolledger.tool("t", revision="1", execute=lambda input, ctx: None)
            run.call(tool, call_id=f"c-{i % 3}", input=1)
        assert len(ASYNC_TOOLS) <= ASYNC_TOOLS_MAX

    def test_call_non_json_input_is_invalid_argument(self, run, effects) -> None:
        """Input must be exact JSON (it is fingerprinted)."""
        with pytest.raises(toolledger.InvalidArgumentError):
            run.call(effects.tool(), call_id="c", input={"x": {1, 2}})


class TestJournalAndTelemetry:
    def test_call_appears_as_tool_call_event_with_justification(self, run, db, effects) -> None:
        """Each call is a tool_call event linked to its checkpoint, with its justification."""
        run.call(effects.tool(), call_id="c1", input={"a": 1}, justification="User asked.")
        run.call(effects.tool(), call_id="c1", input={"a": 1}, justification="Again.")
        events = _tool_events(run)
        assert [e["justification"] for e in events] == ["User asked.", "Again."]
        assert [e["checkpoint"] for e in events] == [
            {"namespace": "default", "call_id": "c1", "revision": 2}
        ] * 2
        assert [e["status"] for e in events] == ["completed", "replayed"]
        assert [e["meta"]["replayed"] for e in events] == [False, True]
        assert events[0]["outputs"] == {"result": {"sent": {"a": 1}, "n": 1}, "is_error": False}

    def test_call_failures_are_failed_or_cancelled_events(self, run, db, effects) -> None:
        """An unknown outcome is a failed event with its code; an interruption is cancelled."""
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(effects.tool(journal=True, raises=OSError("x")), call_id="a", input={})
        with pytest.raises(KeyboardInterrupt):
            run.call(effects.tool(raises=KeyboardInterrupt()), call_id="b", input={"b": 1})
        events = _tool_events(run)
        assert [e["status"] for e in events] == ["failed", "cancelled"]
        assert events[0]["error"]["code"] == "OUTCOME_UNKNOWN"
        assert events[1]["error"]["type"] == "KeyboardInterrupt"

    def test_call_span_gets_transitions_and_its_facts_once(self, db, effects) -> None:
        """Transitions are reported per CAS; the span is told the call's facts once, at its
        end, as one ``CallFacts``, and no string-keyed update."""
        tel = RecordingTelemetry()
        tool = toolledger.tool("t", revision="1", execute=lambda i, c: 1, description="Sends.")
        with toolledger.run("g", db=db) as r:
            r.telemetry = tel
            r.call(tool, call_id="c1", input={})
            r.call(tool, call_id="c1", input={})
        new, replay = tel.spans
        assert [
            (t["name"], t["status_from"], t["status_to"], t["won"]) for t in new.transitions
        ] == [
            ("create_checkpoint", None, "ready", True),
            ("claim_execution", "ready", "executing", True),
            ("complete_execution", "executing", "completed", True),
        ]
        assert new.facts == [
            CallFacts(
                status="completed",
                revision=2,
                action="execute",
                replayed=False,
                recovered=False,
                description="Sends.",
            )
        ]
        assert new.updates == []
        assert replay.updates == []
        assert len(new.ended) == 1
        assert replay.transitions == []
        (facts,) = replay.facts
        assert (facts.replayed, facts.action) == (True, "deliver")

    def test_call_resumed_after_crash_links_original_span(self, db, effects) -> None:
        """A call that finds another attempt's claim links to that attempt's span."""
        tel = RecordingTelemetry()
        tool = effects.tool(recover=lambda ctx: toolledger.Recovered("ok"))
        _claim_elsewhere(db, tool, "c1", {}, f"{'1' * 32}.{'2' * 32}.{'3' * 16}")
        with toolledger.run("g", db=db) as r:
            r.telemetry = tel
            out = r.call(tool, call_id="c1", input={})
        assert out.recovered is True
        (facts,) = tel.spans[0].facts
        assert facts.link == ("2" * 32, "3" * 16)
        assert facts.action == "reconcile-execution"
        names = [t["name"] for t in tel.spans[0].transitions]
        assert names == ["mark_execution_uncertain", "complete_execution"]

    def test_call_attempt_id_carries_live_span_ids(self, db, effects) -> None:
        """The claim's attempt id carries the live trace and span ids (for later links)."""
        tel = RecordingTelemetry()
        with toolledger.run("g", db=db) as r:
            r.telemetry = tel
            r.call(effects.tool(), call_id="c1", input={})
        fence = db.get("default", "c1").execution_fence
        span = tel.spans[0]
        assert fence.endswith(f".{span.trace_id}.{span.span_id}")


class TestSameCallInOneBatch:
    def test_call_many_identical_items_execute_once_and_replay_the_rest(
        self, run, db, effects
    ) -> None:
        """Five identical items of one turn: one execution, four replays of its result."""
        tool = effects.tool()
        items = [{"tool": tool, "call_id": "c1", "input": {"a": 1}} for _ in range(5)]
        outs = run.call_many(items)
        assert [o.replayed for o in outs] == [False, True, True, True, True]
        assert all(o.payload == outs[0].payload for o in outs)
        assert len(effects.executed) == 1
        assert db.get("default", "c1").status is Status.COMPLETED

    def test_call_many_same_id_other_input_in_one_batch_conflicts(self, run, db, effects) -> None:
        """A later item reusing the id with another input is BINDING_CONFLICT, not a run."""
        tool = effects.tool()
        outs = run.call_many(
            [
                {"tool": tool, "call_id": "c1", "input": {"a": 1}},
                {"tool": tool, "call_id": "c1", "input": {"a": 2}},
            ],
            return_exceptions=True,
        )
        assert outs[0].replayed is False
        assert isinstance(outs[1], toolledger.BindingConflictError)
        assert effects.executed == [{"a": 1}]


class TestCrashHook:
    def test_crash_at_runs_its_action_at_the_point_and_only_inside_the_block(
        self, run, db, effects
    ) -> None:
        """crash_at(point, action) fires where named, within the with block only."""
        from toolledger.testing import crash_at

        class Stop(BaseException):
            pass

        def stop() -> None:
            raise Stop

        with crash_at("after-execute", stop), pytest.raises(Stop):
            run.call(effects.tool(), call_id="c1", input={})
        assert db.get("default", "c1").status is Status.EXECUTING  # the result was lost
        assert len(effects.executed) == 1
        out = run.call(effects.tool(), call_id="c2", input={"n": 2})  # uninstalled: runs through
        assert out.replayed is False
