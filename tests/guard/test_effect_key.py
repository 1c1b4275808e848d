"""Effect keys: a re-planned action under a new call id never executes a second time."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.errors import CheckpointError
from toolledger.testing import MemoryStore, stored_run

from .conftest import CountingStore, Effects, RecordingTelemetry


def _keyed(effects: Effects, key: Any = "input", **kw: Any) -> toolledger.Tool:
    import dataclasses

    return dataclasses.replace(effects.tool(**kw), effect_key=key)


def _tool_events(run: Any) -> list[dict[str, Any]]:
    run.flush()
    return [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]


def _keys(store: Any) -> list[str]:
    return [r.call_id for r in store.list_effect_keys()]


class TestDeduplication:
    def test_new_call_id_same_input_returns_stored_result_without_executing(
        self, run, db, effects
    ) -> None:
        """A re-planned call (new id, same action) gets the first call's stored result."""
        tool = _keyed(effects)
        first = run.call(tool, call_id="toolu_A", input={"to": "ana"})
        again = run.call(tool, call_id="toolu_B", input={"to": "ana"})
        assert effects.executed == [{"to": "ana"}]
        assert first.deduplicated_from is None
        assert first.replayed is False
        assert again.deduplicated_from == "toolu_A"
        assert again.replayed is True
        assert again.recovered is False
        assert again.call_id == "toolu_B"
        assert again.payload == first.payload
        assert again.is_error is False
        assert _keys(db) == ["toolu_A"]

    def test_deduplicated_call_has_a_completed_alias_checkpoint(self, run, db, effects) -> None:
        """The new id's checkpoint is a completed copy: replay and delivery work by its id."""
        tool = _keyed(effects)
        first = run.call(tool, call_id="A", input={"n": 1})
        run.call(tool, call_id="B", input={"n": 1})
        rec = db.get("default", "B")
        assert rec is not None
        assert rec.status.value == "completed"
        assert rec.result is not None
        assert rec.result.payload == first.payload
        assert [h.transition for h in db.history("default", "B")] == [
            "create_checkpoint",
            "claim_execution",
            "complete_execution",
        ]
        replay = run.call(tool, call_id="B", input={"n": 1})
        assert replay.replayed is True
        assert replay.deduplicated_from is None
        posted: list[Any] = []
        run.deliver("B", post=posted.append)
        assert posted == [first.payload]
        assert effects.executed == [{"n": 1}]

    def test_function_key_dedups_different_inputs_with_the_same_key(self, run, effects) -> None:
        """A function key says which inputs are the same action (the model reworded it)."""
        tool = _keyed(effects, key=lambda i: f"order:{i['order']}")
        run.call(tool, call_id="A", input={"order": 17, "note": "thanks"})
        again = run.call(tool, call_id="B", input={"order": 17, "note": "thank you!"})
        other = run.call(tool, call_id="C", input={"order": 18, "note": "thanks"})
        assert again.deduplicated_from == "A"
        assert other.deduplicated_from is None
        assert other.replayed is False
        assert [i["order"] for i in effects.executed] == [17, 18]

    def test_input_key_differs_by_input_and_revision(self, run, effects) -> None:
        """``"input"`` is tool + revision + input fingerprint: any difference executes."""
        run.call(_keyed(effects), call_id="A", input={"n": 1})
        run.call(_keyed(effects), call_id="B", input={"n": 2})
        run.call(_keyed(effects, revision="2"), call_id="C", input={"n": 1})
        assert len(effects.executed) == 3

    def test_function_key_gets_a_copy_of_the_input_never_the_callers_object(
        self, run, effects
    ) -> None:
        """A key function that mutates its argument changes neither the caller's input
        nor what the tool runs with."""

        def key(i: Any) -> str:
            order = i["order"]
            i["order"] = "changed by the key function"
            i.clear()
            return f"order:{order}"

        given = {"order": 17, "lines": [1, 2]}
        out = run.call(_keyed(effects, key=key), call_id="A", input=given)
        assert given == {"order": 17, "lines": [1, 2]}
        assert effects.executed == [{"order": 17, "lines": [1, 2]}]
        assert out.payload["sent"] == {"order": 17, "lines": [1, 2]}

    def test_function_key_is_scoped_by_the_tool_revision(self, run, effects) -> None:
        """Revision 2 with the same key executes: it never gets revision 1's result."""
        key = lambda i: f"order:{i['order']}"  # noqa: E731
        first = run.call(_keyed(effects, key=key), call_id="A", input={"order": 17})
        second = run.call(_keyed(effects, key=key, revision="2"), call_id="B", input={"order": 17})
        assert (second.replayed, second.deduplicated_from) == (False, None)
        assert second.payload != first.payload
        assert len(effects.executed) == 2

    def test_same_key_on_another_tool_is_another_effect(self, run, effects) -> None:
        """Keys are scoped by tool name: a refund never returns the charge's result."""
        charge = _keyed(effects, key=lambda i: str(i["order"]), name="charge")
        refund = _keyed(effects, key=lambda i: str(i["order"]), name="refund")
        run.call(charge, call_id="A", input={"order": 1})
        out = run.call(refund, call_id="B", input={"order": 1})
        assert out.deduplicated_from is None
        assert len(effects.executed) == 2

    def test_keys_are_scoped_by_namespace(self, db, effects) -> None:
        """Another namespace is another ledger: the same action executes there."""
        tool = _keyed(effects)
        with toolledger.run("a", db=db, namespace="tenant-a") as r:
            r.call(tool, call_id="A", input={})
        with toolledger.run("b", db=db, namespace="tenant-b") as r:
            out = r.call(tool, call_id="B", input={})
        assert out.deduplicated_from is None
        assert len(effects.executed) == 2

    def test_keys_are_scoped_by_the_runs_conversation(self, db, effects) -> None:
        """Within a conversation the key dedups; another conversation's same action runs."""
        tool = _keyed(effects)
        outcomes = []
        for conversation, call_id in (("conv-1", "A"), ("conv-1", "B"), ("conv-2", "C")):
            with toolledger.run("r", db=db, conversation_id=conversation) as r:
                outcomes.append(r.call(tool, call_id=call_id, input={}))
        assert [o.deduplicated_from for o in outcomes] == [None, "A", None]
        assert len(effects.executed) == 2

    def test_tool_without_effect_key_follows_the_same_action_rules(self, run, effects) -> None:
        """Without a key, the default rules: served while unseen, executed once seen."""
        tool = effects.tool()
        run.call(tool, call_id="A", input={})
        assert run.call(tool, call_id="B", input={}).deduplicated_from == "A"
        run.mark_seen(["B"])
        assert run.call(tool, call_id="C", input={}).deduplicated_from is None
        assert len(effects.executed) == 2

    def test_error_result_is_deduplicated_too(self, run, effects) -> None:
        """A stored error result (``on_error="result"``) is the action's result."""
        tool = _keyed(effects, raises=ValueError("bad"), on_error="result")
        first = run.call(tool, call_id="A", input={})
        again = run.call(tool, call_id="B", input={})
        assert first.is_error is True
        assert again.is_error is True
        assert again.payload == first.payload
        assert again.deduplicated_from == "A"
        assert len(effects.executed) == 1


class TestHolderInFlight:
    def test_holder_executing_is_reconciled_never_executed(self, run, db, effects) -> None:
        """A new id finding the key's holder executing (live): OUTCOME_UNKNOWN, never run."""
        seen: list[Any] = []

        def execute(input: Any, ctx: Any) -> Any:
            effects.executed.append(input)
            with pytest.raises(CheckpointError) as info:
                run.call(tool, call_id="B", input=input)
            seen.append(info.value)
            return {"sent": True}

        tool = toolledger.tool("send", revision="1", execute=execute, effect_key="input")
        out = run.call(tool, call_id="A", input={"to": "ana"})
        (err,) = seen
        assert err.code == "OUTCOME_UNKNOWN"
        assert err.details["effect_key_holder"] == "A"
        assert err.details["for_call_id"] == "B"
        assert err.details["call_id"] == "A"
        assert err.details["live_attempt"] is True  # a live holder is left as it is
        assert "held by a live attempt since" in err.message
        assert db.get("default", "B") is None  # nothing claimed for B
        # The owner completes (executing -> completed); B then deduplicates.
        assert out.replayed is False
        assert [h.transition for h in db.history("default", "A")][-2:] == [
            "claim_execution",
            "complete_execution",
        ]
        later = run.call(tool, call_id="B", input={"to": "ana"})
        assert later.deduplicated_from == "A"
        assert len(effects.executed) == 1

    def test_holder_uncertain_recovered_then_deduplicated(self, run, db, effects) -> None:
        """``recover`` proves the holder's outcome; the new id returns it."""
        calls: list[str] = []

        def recover(ctx: Any) -> Any:
            calls.append(ctx.call_id)
            return toolledger.Recovered({"order": ctx.operation.read()["order"]})

        tool = _keyed(effects, journal=True, raises=RuntimeError("lost"), recover=recover)
        with pytest.raises(CheckpointError) as info:
            run.call(
                _keyed(effects, journal=True, raises=RuntimeError("lost")),
                call_id="A",
                input={"x": 1},
            )
        assert info.value.code == "OUTCOME_UNKNOWN"
        assert db.get("default", "A").status.value == "uncertain"
        out = run.call(tool, call_id="B", input={"x": 1})
        assert calls == ["A"]  # recover ran for the holder, with its operation journal
        assert out.deduplicated_from == "A"
        assert out.payload == {"order": "o-A"}
        assert db.get("default", "A").status.value == "completed"
        assert len(effects.executed) == 1

    def test_holder_uncertain_without_recover_is_outcome_unknown(self, run, db, effects) -> None:
        """No proof, no execution: the new id reports the holder's unknown outcome."""
        tool = _keyed(effects, journal=True, raises=RuntimeError("lost"))
        with pytest.raises(CheckpointError):
            run.call(tool, call_id="A", input={})
        with pytest.raises(CheckpointError) as info:
            run.call(tool, call_id="B", input={})
        assert info.value.code == "OUTCOME_UNKNOWN"
        assert info.value.details["effect_key_holder"] == "A"
        assert db.get("default", "B") is None
        assert len(effects.executed) == 1
        events = _tool_events(run)
        assert events[-1]["status"] == "failed"
        assert events[-1]["error"]["code"] == "OUTCOME_UNKNOWN"


class TestRelease:
    def test_pre_effect_failure_releases_the_key_with_the_claim(self, run, db, effects) -> None:
        """Proven pre-effect (journal empty): the key goes back, a re-plan may execute."""
        failing = _keyed(effects, raises=ConnectionError("before the effect"))
        with pytest.raises(ConnectionError):
            run.call(failing, call_id="A", input={})
        assert db.get("default", "A").status.value == "ready"
        assert _keys(db) == []
        ok = _keyed(effects)
        out = run.call(ok, call_id="B", input={})
        assert out.replayed is False
        assert _keys(db) == ["B"]
        # The first id retried: its ready checkpoint cannot reclaim the key B holds.
        retry = run.call(ok, call_id="A", input={})
        assert retry.deduplicated_from == "B"
        assert db.get("default", "A").status.value == "completed"
        assert len(effects.executed) == 2  # the failed attempt and B; never a third

    def test_effect_after_journal_write_keeps_the_key(self, run, db, effects) -> None:
        """A failure after the operation-journal write is uncertain: the key stays held."""
        tool = _keyed(effects, journal=True, raises=RuntimeError("after"))
        with pytest.raises(CheckpointError):
            run.call(tool, call_id="A", input={})
        assert _keys(db) == ["A"]


class TestBadInput:
    @pytest.mark.parametrize(
        ("key", "why"),
        [
            (lambda i: 1 / 0, "raised ZeroDivisionError"),
            (lambda i: 17, "got int"),
            (lambda i: None, "got NoneType"),
            (lambda i: "", "a str of 0 characters"),
            (lambda i: "x" * 1025, "a str of 1025 characters"),
            (lambda i: "\ud800", "a str of 1 characters"),
        ],
    )
    def test_bad_effect_key_is_invalid_argument_before_anything_is_claimed(
        self, run, db, effects, key, why
    ) -> None:
        """The key is computed first: a bad one writes nothing and runs nothing."""
        db.reset()
        with pytest.raises(CheckpointError) as info:
            run.call(_keyed(effects, key=key), call_id="A", input={})
        assert info.value.code == "INVALID_ARGUMENT"
        assert why in info.value.message
        assert info.value.details["argument"] == "effect_key"
        assert db.get("default", "A") is None
        assert _keys(db) == []
        assert db.commits == []
        assert effects.executed == []

    def test_longest_key_is_accepted(self, run, effects) -> None:
        """1024 characters is the bound (stored as a fingerprint)."""
        out = run.call(_keyed(effects, key=lambda i: "é" * 1024), call_id="A", input={})
        assert out.replayed is False

    @pytest.mark.parametrize("bad", ["inputs", 5, ["input"]])
    def test_tool_refuses_an_effect_key_that_is_not_input_or_callable(self, bad) -> None:
        """``effect_key`` is ``None``, ``"input"`` or a function."""
        with pytest.raises(CheckpointError) as info:
            toolledger.tool("t", revision="1", execute=lambda i, c: 1, effect_key=bad)
        assert info.value.code == "INVALID_ARGUMENT"

    def test_decorator_takes_effect_key(self) -> None:
        """``@toolledger.tool(effect_key=...)`` keeps it on the tool."""

        @toolledger.tool(revision="1", effect_key="input")
        def send(input: Any, ctx: Any) -> Any:
            return 1

        assert send.effect_key == "input"


class TestCost:
    def test_new_keyed_call_costs_the_same_two_durable_commits(self, tmp_path: Path) -> None:
        """The key rides in the create+claim transaction: no extra commit."""
        store = CountingStore(tmp_path / "g.db", durability="full")
        tool = toolledger.tool("t", revision="1", execute=lambda i, c: 1, effect_key="input")
        with toolledger.run("g", db=store) as run:
            store.reset()
            run.call(tool, call_id="A", input={})
            assert store.commits == [True, True]
            store.reset()
            out = run.call(tool, call_id="B", input={})
            assert out.deduplicated_from == "A"
            assert store.commits == [False]  # one relaxed commit: the alias checkpoint
            store.reset()
            run.call(tool, call_id="B", input={})
            assert store.commits == []  # a replay commits nothing
        store.close()


class TestTelling:
    def test_journal_meta_and_span_name_the_deduplicated_call(self, db, effects) -> None:
        """The end record's meta and the span's facts carry ``deduplicated_from``."""
        tel = RecordingTelemetry()
        tool = _keyed(effects)
        with toolledger.run("g", db=db) as r:
            r.telemetry = tel
            r.call(tool, call_id="A", input={})
            r.call(tool, call_id="B", input={})
            events = _tool_events(r)
        assert "deduplicated_from" not in events[0]["meta"]
        assert events[1]["meta"]["deduplicated_from"] == "A"
        assert events[1]["status"] == "replayed"
        assert events[1]["outputs"]["result"] == events[0]["outputs"]["result"]
        first, second = tel.spans
        assert first.facts[0].deduplicated_from is None
        assert second.facts[0].deduplicated_from == "A"
        assert second.facts[0].replayed is True
        assert [t["name"] for t in second.transitions] == [
            "create_checkpoint",
            "claim_execution",
            "complete_execution",
        ]


class TestRetention:
    def test_erased_holder_keeps_refusing_the_action(self, run, db, effects) -> None:
        """gc keeps the key: a re-plan after the holder was erased is TOMBSTONED."""
        from datetime import datetime, timedelta, timezone

        tool = _keyed(effects)
        run.call(tool, call_id="A", input={})
        run.deliver("A", post=lambda p: None)
        report = toolledger.gc(
            db, older_than="0s", now=datetime.now(timezone.utc) + timedelta(seconds=5)
        )
        assert report.checkpoints_erased == 1
        assert _keys(db) == ["A"]
        with pytest.raises(CheckpointError) as info:
            run.call(tool, call_id="B", input={})
        assert info.value.code == "TOMBSTONED"
        assert info.value.details["effect_key_holder"] == "A"
        assert info.value.details["call_id"] == "A"
        assert db.get("default", "B") is None
        assert len(effects.executed) == 1


class TestStores:
    def test_memory_store_runs_effect_keys(self, effects) -> None:
        """MemoryStore holds effect keys like the durable stores."""
        store = MemoryStore()
        tool = _keyed(effects)
        with toolledger.run("m", db=store) as r:
            r.call(tool, call_id="A", input={})
            out = r.call(tool, call_id="B", input={})
        assert out.deduplicated_from == "A"
        assert len(effects.executed) == 1

    def test_store_without_effect_keys_is_refused(self, tmp_path: Path, effects) -> None:
        """A backend that cannot hold keys refuses the tool instead of running it unkeyed."""

        class Plain(MemoryStore):
            capabilities = dataclasses.replace(MemoryStore.capabilities, effect_keys=False)

        with toolledger.run("m", db=Plain()) as r, pytest.raises(CheckpointError) as info:
            r.call(_keyed(effects), call_id="A", input={})
        assert info.value.code == "INVALID_ARGUMENT"
        assert effects.executed == []


class TestCopy:
    def test_copied_ledger_keeps_refusing_the_action(self, tmp_path: Path, effects) -> None:
        """copy_ledger moves effect keys: the copy still deduplicates a re-plan."""
        tool = _keyed(effects)
        src = toolledger.SQLiteStore(tmp_path / "a.db")
        with toolledger.run("a", db=src) as r:
            r.call(tool, call_id="A", input={"to": "ana"})
        dst = MemoryStore()
        report = toolledger.copy_ledger(src, dst)
        assert report.ok, report.problems
        assert [(k.namespace, k.key, k.call_id) for k in dst.list_effect_keys()] == [
            (k.namespace, k.key, k.call_id) for k in src.list_effect_keys()
        ]
        with toolledger.run("b", db=dst) as r:
            out = r.call(tool, call_id="B", input={"to": "ana"})
        assert out.deduplicated_from == "A"
        assert len(effects.executed) == 1
        src.close()

    def test_copy_reports_an_effect_key_that_differs(self, tmp_path: Path, effects) -> None:
        """Verification compares holders: a destination that drops keys fails the copy."""

        class Forgetful(MemoryStore):
            def list_effect_keys(self, **kw: Any) -> list[Any]:
                return []

        src = MemoryStore()
        with toolledger.run("a", db=src) as r:
            r.call(_keyed(effects), call_id="A", input={})
        report = toolledger.copy_ledger(src, Forgetful())
        assert "effect keys differ" in report.problems


class TestOneTurn:
    def test_call_many_with_the_same_action_twice_runs_it_once(self, run, effects) -> None:
        """A turn repeating an action: the first executes, the second returns its result."""
        tool = _keyed(effects)
        first, second = run.call_many(
            [
                {"tool": tool, "call_id": "A", "input": {"to": "ana"}},
                {"tool": tool, "call_id": "B", "input": {"to": "ana"}},
            ]
        )
        assert first.replayed is False
        assert second.deduplicated_from == "A"
        assert second.payload == first.payload
        assert len(effects.executed) == 1

    def test_concurrent_acalls_with_the_same_action_never_run_it_twice(self, run, effects) -> None:
        """Concurrent acalls claim in one transaction: the loser copies the result."""
        import asyncio

        tool = _keyed(effects)

        async def turn() -> list[Any]:
            return await asyncio.gather(
                run.acall(tool, call_id="A", input={}), run.acall(tool, call_id="B", input={})
            )

        a, b = asyncio.run(turn())
        assert a.replayed is False
        assert b.deduplicated_from == "A"  # A ran to completion before B looked again
        assert len(effects.executed) == 1

    def test_concurrent_acall_finding_the_holder_mid_execute_reports_unknown(self, run) -> None:
        """The loser finds the winner inside its async execute: it never executes."""
        import asyncio

        executed: list[str] = []

        async def execute(input: Any, ctx: Any) -> Any:
            executed.append(ctx.call_id)
            await asyncio.sleep(0)  # a yield point: the other call's task runs now
            return {"by": ctx.call_id}

        tool = toolledger.tool("send", revision="1", execute=execute, effect_key="input")

        async def turn() -> list[Any]:
            return await asyncio.gather(
                run.acall(tool, call_id="A", input={}),
                run.acall(tool, call_id="B", input={}),
                return_exceptions=True,
            )

        a, b = asyncio.run(turn())
        assert a.payload == {"by": "A"}  # the owner completes (uncertain -> completed)
        assert isinstance(b, CheckpointError)
        assert b.code == "OUTCOME_UNKNOWN"
        assert b.details["effect_key_holder"] == "A"
        assert executed == ["A"]
        later = asyncio.run(run.acall(tool, call_id="B", input={}))
        assert later.deduplicated_from == "A"

    def test_claims_joined_into_one_transaction_gate_on_their_own_key(self, db) -> None:
        """Batched claims: each call's checkpoint ops are gated on its own key claim."""
        from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
        from toolledger.store.base import CreateCheckpoint, SwapCheckpoint

        from .._internals import EffectKey, join_claims
        from .._internals import guard_now as now

        def claim(call_id: str, key: str) -> tuple[Any, ...]:
            rec = create_checkpoint(Binding("default", call_id, "t", "1", "sha256:x"), at=now())
            t = claim_execution(rec, attempt_id=f"a-{call_id}", at=now())
            ek = EffectKey("default", fingerprint(key))
            return (
                ek.claim(call_id),
                CreateCheckpoint(rec, requires=0),
                SwapCheckpoint(0, t.next, requires=0),
            )

        db.apply([claim("X", "taken")[0]])  # another call holds "taken"
        ops = join_claims([claim("A", "free"), claim("B", "taken"), claim("C", "free-2")])
        assert [getattr(op, "requires", None) for op in ops] == [None, 0, 0, None, 3, 3, None, 6, 6]
        out = db.apply(ops)
        assert [bool(o[0]) if isinstance(o, tuple) else bool(o) for o in out] == [
            True, True, True, False, False, False, True, True, True,
        ]  # fmt: skip
        assert db.get("default", "B") is None
        assert db.get("default", "A").status.value == "executing"


class TestSpans:
    def test_execute_tool_span_carries_deduplicated_from(self, db, provider, exporter) -> None:
        """The real SDK span: only the copying call has the attribute, with the holder id."""
        from toolledger.telemetry import attributes as a

        tool = toolledger.tool("send", revision="1", execute=lambda i, c: 1, effect_key="input")
        with toolledger.run("g", db=db, tracer_provider=provider) as r:
            r.call(tool, call_id="A", input={})
            r.call(tool, call_id="B", input={})
        spans = {s.name: s for s in exporter.get_finished_spans()}
        # A's call ran; B's is a copy of A's stored result: not an execution (replay_tool).
        ran, copied = spans["execute_tool send"], spans["replay_tool send"]
        assert ran.attributes[a.GEN_AI_TOOL_CALL_ID] == "A"
        assert a.TL_CHECKPOINT_DEDUPLICATED_FROM not in ran.attributes
        assert copied.attributes[a.TL_TOOL_CALL_ID] == "B"
        assert copied.attributes[a.TL_CHECKPOINT_DEDUPLICATED_FROM] == "A"
        assert copied.attributes[a.TL_TOOL_OUTCOME] == "deduplicated"


class TestApprovals:
    def test_gated_keyed_tool_asks_then_deduplicates(self, run, effects) -> None:
        """The gate runs first (it cannot know the key's holder); then the copy, no effect."""
        import dataclasses

        asked: list[str] = []

        def approver(request: Any) -> Any:
            asked.append(request.call_id)
            return toolledger.Approved("alice")

        tool = dataclasses.replace(_keyed(effects), approval="effect-only", approver=approver)
        run.call(tool, call_id="A", input={})
        out = run.call(tool, call_id="B", input={})
        assert asked == ["A", "B"]
        assert out.deduplicated_from == "A"
        assert len(effects.executed) == 1

    def test_pending_keyed_call_claims_the_key_only_when_approved(self, db, run, effects) -> None:
        """A call waiting for approval holds no key: the re-plan may run; the first copies."""
        import dataclasses

        tool = dataclasses.replace(
            _keyed(effects), approval="effect-only", approver=lambda r: toolledger.Pending("T-1")
        )
        waiting = run.call(tool, call_id="A", input={})
        assert waiting.status == "awaiting_approval"
        assert _keys(db) == []
        out = run.call(_keyed(effects), call_id="B", input={})  # ungated copy of the tool
        assert out.replayed is False
        toolledger.decide_approval(db, "default", "A", True, "alice", "ok")
        later = run.call(tool, call_id="A", input={})
        assert later.deduplicated_from == "B"
        assert len(effects.executed) == 1
