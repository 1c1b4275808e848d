"""The same action under a new call id (issue 29), on every store.

An *action* is tool name + revision + input fingerprint in a namespace. Rule 1: while a
call of the action is ``executing`` or ``uncertain``, a new call id for it is not executed
(``OUTCOME_UNKNOWN``, ``details["same_action_as"]``); once settled, the stored result is
served, or it executes if the call was resolved as not executed. Rule 2: within one
conversation (the run's ``conversation_id``, else its run id), a new call id for the same
action as a completed call whose result no model turn has seen is served the stored
result; after delivery (``run.deliver``, ``run.mark_seen``) or in another conversation it
executes again. Effect keys keep their own rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.errors import OutcomeUnknownError

from ._stores import STORE_KINDS, open_kind


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_kind(request.param, tmp_path)


class Payments:
    """A payment tool whose effects are counted; it writes its journal before the effect."""

    def __init__(self) -> None:
        self.done: list[tuple[str, Any]] = []

    def tool(
        self, *, name: str = "pay", revision: str = "1", lose: bool = False, **kw: Any
    ) -> toolledger.Tool:
        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            ctx.operation.write({"ref": f"p-{ctx.call_id}"})  # just before the effect
            self.done.append((ctx.call_id, input))
            if lose:  # the effect happened; the answer was lost
                raise TimeoutError("the payment provider did not answer")
            return {"paid": input, "ref": f"p-{ctx.call_id}"}

        return toolledger.tool(name, revision=revision, execute=execute, **kw)


@pytest.fixture
def payments() -> Payments:
    return Payments()


def _independent(tool: toolledger.Tool) -> toolledger.Tool:
    """The per-tool opt-out: identical calls of this tool are independent actions."""
    return dataclasses.replace(tool, independent=True)


def _lose(run: toolledger.Run, payments: Payments, call_id: str, input: Any) -> None:
    """Leave ``call_id`` uncertain: its effect happened, its outcome is unknown."""
    with pytest.raises(OutcomeUnknownError):
        run.call(payments.tool(lose=True), call_id=call_id, input=input)
    rec = run.store.get(run.namespace, call_id)
    assert rec is not None
    assert rec.status.value == "uncertain"


def _resolve(store: Any, call_id: str, outcome: str, **kw: Any) -> None:
    toolledger.resolve(
        store, call_id, outcome=outcome, by="ops@example.com", reason="checked the provider", **kw
    )


# -- rule 1: an unknown outcome blocks the same action --------------------------------------


class TestUnknownOutcomeBlocksTheSameAction:
    def test_uncertain_call_blocks_a_new_id_for_the_same_action(self, store, payments) -> None:
        """A re-asked action whose first call is uncertain is not executed: it names that call."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana", "cents": 500})
            with pytest.raises(OutcomeUnknownError) as info:
                run.call(payments.tool(), call_id="B", input={"to": "ana", "cents": 500})
        assert info.value.code == "OUTCOME_UNKNOWN"
        assert info.value.details["same_action_as"] == "A"
        assert [c for c, _ in payments.done] == ["A"]

    def test_executing_call_blocks_a_new_id_while_it_runs(self, store, payments) -> None:
        """A call asked again while its first attempt is still inside the tool never runs."""
        seen: list[Any] = []

        with toolledger.run("r", db=store) as run:

            def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
                ctx.operation.write({"ref": "p-A"})
                payments.done.append((ctx.call_id, input))
                with toolledger.run("other worker", db=store) as other:
                    try:
                        other.call(payments.tool(), call_id="B", input=input)
                    except OutcomeUnknownError as exc:
                        seen.append(exc.details.get("same_action_as"))
                return {"paid": input}

            slow = toolledger.tool("pay", revision="1", execute=execute)
            first = run.call(slow, call_id="A", input={"to": "ana", "cents": 500})
        assert seen == ["A"]
        assert first.replayed is False
        assert [c for c, _ in payments.done] == ["A"]

    def test_block_holds_across_conversations_in_the_namespace(self, store, payments) -> None:
        """An unknown outcome blocks the action namespace-wide, whatever the conversation."""
        with toolledger.run("r", db=store, conversation_id="conv-1") as run:
            _lose(run, payments, "A", {"to": "ana"})
        with (
            toolledger.run("r", db=store, conversation_id="conv-2") as run,
            pytest.raises(OutcomeUnknownError) as info,
        ):
            run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert info.value.details["same_action_as"] == "A"
        assert len(payments.done) == 1

    def test_blocked_item_of_a_turn_fails_alone(self, store, payments) -> None:
        """In a parallel turn only the item repeating an uncertain action is blocked."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            tool = payments.tool()
            outs = run.call_many(
                [
                    {"tool": tool, "call_id": "B", "input": {"to": "ana"}},
                    {"tool": tool, "call_id": "C", "input": {"to": "bob"}},
                ],
                return_exceptions=True,
            )
        assert isinstance(outs[0], OutcomeUnknownError)
        assert outs[0].details["same_action_as"] == "A"
        assert outs[1].replayed is False
        assert [c for c, _ in payments.done] == ["A", "C"]

    def test_acall_is_blocked_too(self, store, payments) -> None:
        """The async path applies the same rule."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            with pytest.raises(OutcomeUnknownError) as info:
                asyncio.run(run.acall(payments.tool(), call_id="B", input={"to": "ana"}))
        assert info.value.details["same_action_as"] == "A"
        assert len(payments.done) == 1

    @pytest.mark.parametrize(
        "other",
        [
            pytest.param({"input": {"to": "bob"}}, id="input"),
            pytest.param({"revision": "2"}, id="revision"),
            pytest.param({"name": "refund"}, id="tool"),
        ],
    )
    def test_another_action_is_never_blocked(self, store, payments, other) -> None:
        """Another input, revision or tool is another action: it executes."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            input = other.get("input", {"to": "ana"})
            tool = payments.tool(**{k: v for k, v in other.items() if k != "input"})
            out = run.call(tool, call_id="B", input=input)
        assert out.replayed is False
        assert out.deduplicated_from is None
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_another_namespace_is_never_blocked(self, store, payments) -> None:
        """Another namespace is another ledger: the same action executes there."""
        with toolledger.run("r", db=store, namespace="tenant-a") as run:
            _lose(run, payments, "A", {"to": "ana"})
        with toolledger.run("r", db=store, namespace="tenant-b") as run:
            out = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert out.replayed is False
        assert len(payments.done) == 2

    def test_opted_out_tool_is_never_blocked(self, store, payments) -> None:
        """A tool whose identical calls are independent opts out: the new id executes."""
        with toolledger.run("r", db=store) as run:
            with pytest.raises(OutcomeUnknownError):
                run.call(_independent(payments.tool(lose=True)), call_id="A", input={"n": 1})
            out = run.call(_independent(payments.tool()), call_id="B", input={"n": 1})
        assert out.replayed is False
        assert [c for c, _ in payments.done] == ["A", "B"]


class TestSettledActionIsServedOrRuns:
    def test_live_owner_completes_then_the_same_action_is_served(self, store, payments) -> None:
        """Blocked while the owner ran; once it completed, the new id gets its result."""
        with toolledger.run("r", db=store) as run:

            def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
                ctx.operation.write({"ref": "p-A"})
                payments.done.append((ctx.call_id, input))
                with pytest.raises(OutcomeUnknownError):
                    run.call(payments.tool(), call_id="B", input=input)
                return {"paid": input}

            slow = toolledger.tool("pay", revision="1", execute=execute)
            first = run.call(slow, call_id="A", input={"to": "ana"})
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.replayed is True
        assert again.deduplicated_from == "A"
        assert again.payload == first.payload
        assert len(payments.done) == 1

    def test_resolved_completed_is_served_to_the_same_action(self, store, payments) -> None:
        """A person settles the call as completed: the blocked action now gets that result."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            with pytest.raises(OutcomeUnknownError):
                run.call(payments.tool(), call_id="B", input={"to": "ana"})
            _resolve(store, "A", "completed", result={"ref": "p-A", "confirmed": True})
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.replayed is True
        assert again.deduplicated_from == "A"
        assert again.payload == {"ref": "p-A", "confirmed": True}
        assert len(payments.done) == 1

    def test_resolved_not_executed_lets_the_same_action_run(self, store, payments) -> None:
        """A person settles the call as never executed: the same action now executes."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            _resolve(store, "A", "not_executed")
            out = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert out.replayed is False
        assert out.deduplicated_from is None
        assert [c for c, _ in payments.done] == ["A", "B"]


class TestSettlingEdges:
    def test_blocked_id_leaves_nothing_stored_and_is_served_once_settled(
        self, store, payments
    ) -> None:
        """A refused id writes nothing; asked again after the settlement it gets the result."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            for _ in range(2):
                with pytest.raises(OutcomeUnknownError):
                    run.call(payments.tool(), call_id="B", input={"to": "ana"})
            assert store.get("default", "B") is None
            _resolve(store, "A", "completed", result={"ref": "p-A"})
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
            replay = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert (again.deduplicated_from, again.payload) == ("A", {"ref": "p-A"})
        assert (replay.replayed, replay.deduplicated_from) == (True, None)
        assert len(payments.done) == 1

    def test_every_blocked_id_names_the_same_uncertain_call(self, store, payments) -> None:
        """However many new ids ask, each is refused naming the one call that may have run."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            named = []
            for call_id in ("B", "C", "D"):
                with pytest.raises(OutcomeUnknownError) as info:
                    run.call(payments.tool(), call_id=call_id, input={"to": "ana"})
                named.append(info.value.details["same_action_as"])
        assert named == ["A", "A", "A"]
        assert len(payments.done) == 1

    def test_resolved_failed_serves_the_error_to_the_same_action(self, store, payments) -> None:
        """Settled as failed: the unseen error result is what the re-asked action gets."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            _resolve(store, "A", "failed", error="the provider rejected the payment")
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.is_error is True
        assert again.deduplicated_from == "A"
        assert len(payments.done) == 1

    def test_action_run_after_release_is_the_one_served_next(self, store, payments) -> None:
        """After a not-executed settlement the next id runs, and its unseen result is served."""
        with toolledger.run("r", db=store) as run:
            _lose(run, payments, "A", {"to": "ana"})
            _resolve(store, "A", "not_executed")
            second = run.call(payments.tool(), call_id="B", input={"to": "ana"})
            third = run.call(payments.tool(), call_id="C", input={"to": "ana"})
        assert second.replayed is False
        assert (third.deduplicated_from, third.payload) == ("B", second.payload)
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_seen_result_then_a_new_execution_is_served_next(self, store, payments) -> None:
        """The conversation's latest call of the action decides: a new unseen run is served."""
        with toolledger.run("r", db=store) as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
            run.mark_seen(["A"])
            second = run.call(payments.tool(), call_id="B", input={"to": "ana"})
            third = run.call(payments.tool(), call_id="C", input={"to": "ana"})
        assert second.replayed is False
        assert third.deduplicated_from == "B"
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_unseen_result_in_another_namespace_is_not_served(self, store, payments) -> None:
        """Rule 2 stays within the namespace too."""
        with toolledger.run("r", db=store, namespace="a", conversation_id="c") as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, namespace="b", conversation_id="c") as run:
            out = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert out.replayed is False
        assert len(payments.done) == 2

    def test_mark_seen_is_idempotent_and_skips_unfinished_calls(self, store, payments) -> None:
        """Only completed calls move; asking again moves nothing."""
        with toolledger.run("r", db=store) as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
            _lose(run, payments, "L", {"to": "bob"})
            first = run.mark_seen(["A", "L", "nope"])
            second = run.mark_seen(["A"])
        assert (first, second) == (["A"], [])
        assert store.get("default", "L").status.value == "uncertain"


# -- rule 2: a result the model never saw is served to a re-plan -----------------------------


class TestUnseenResultIsServed:
    def test_unseen_result_is_served_to_a_new_id_in_the_run(self, store, payments) -> None:
        """Completed, never delivered: the re-planned call gets the stored result."""
        with toolledger.run("r", db=store) as run:
            first = run.call(payments.tool(), call_id="A", input={"to": "ana"})
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.replayed is True
        assert again.deduplicated_from == "A"
        assert again.payload == first.payload
        assert again.call_id == "B"
        assert len(payments.done) == 1

    def test_served_id_delivers_the_stored_result(self, store, payments) -> None:
        """The new id's result is delivered like any result, by its own id."""
        with toolledger.run("r", db=store) as run:
            first = run.call(payments.tool(), call_id="A", input={"to": "ana"})
            run.call(payments.tool(), call_id="B", input={"to": "ana"})
            posted: list[Any] = []
            run.deliver("B", post=posted.append)
        assert posted == [first.payload]

    def test_unseen_result_is_served_across_runs_of_one_conversation(self, store, payments) -> None:
        """A new run of the same conversation (the app lost its transcript) is served."""
        with toolledger.run("r", db=store, conversation_id="conv-1") as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, conversation_id="conv-1") as run:
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.deduplicated_from == "A"
        assert len(payments.done) == 1

    def test_resumed_run_id_is_the_conversation_without_one(self, store, payments) -> None:
        """Without a conversation id, the run id is the conversation: a resumed run is served."""
        with toolledger.run("r", db=store, run_id="run-1") as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, run_id="run-1") as run:
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.deduplicated_from == "A"
        assert len(payments.done) == 1

    def test_result_cut_short_while_posting_is_unseen(self, store, payments) -> None:
        """A delivery interrupted in ``post`` (left ``delivering``) was not seen: it is served."""

        def interrupted(_payload: Any) -> None:
            raise KeyboardInterrupt

        with toolledger.run("r", db=store) as run:
            first = run.call(payments.tool(), call_id="A", input={"to": "ana"})
            with pytest.raises(KeyboardInterrupt):
                run.deliver("A", post=interrupted)
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.deduplicated_from == "A"
        assert again.payload == first.payload
        assert len(payments.done) == 1

    def test_unseen_error_result_is_served(self, store, payments) -> None:
        """A stored error result is the call's result: the model never saw it, so it is served."""
        failing = payments.tool(on_error="result")

        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            payments.done.append((ctx.call_id, input))
            raise ValueError("card declined")

        failing = dataclasses.replace(failing, execute=execute)
        with toolledger.run("r", db=store) as run:
            first = run.call(failing, call_id="A", input={"to": "ana"})
            again = run.call(failing, call_id="B", input={"to": "ana"})
        assert first.is_error is True
        assert again.is_error is True
        assert again.deduplicated_from == "A"
        assert len(payments.done) == 1


class TestSeenResultRunsAgain:
    def test_delivered_result_lets_the_same_action_run_again(self, store, payments) -> None:
        """Once the model saw the result, a repeated identical action is legitimate."""
        with toolledger.run("r", db=store) as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
            run.deliver("A", post=lambda _p: None)
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.replayed is False
        assert again.deduplicated_from is None
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_mark_seen_lets_the_same_action_run_again_without_posting(
        self, store, payments
    ) -> None:
        """``run.mark_seen`` records that a model turn saw the result; nothing is posted."""
        with toolledger.run("r", db=store) as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
            run.mark_seen(["A"])  # type: ignore[attr-defined]
            rec = store.get("default", "A")
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert rec.status.value == "delivered"
        assert again.replayed is False
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_another_conversation_runs_the_same_action(self, store, payments) -> None:
        """Another conversation's identical action is its own: it executes."""
        with toolledger.run("r", db=store, conversation_id="conv-1") as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, conversation_id="conv-2") as run:
            out = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert out.replayed is False
        assert len(payments.done) == 2

    def test_another_run_without_conversation_runs_the_same_action(self, store, payments) -> None:
        """Without conversation ids, two runs are two conversations."""
        with toolledger.run("r", db=store, run_id="run-1") as run:
            run.call(payments.tool(), call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, run_id="run-2") as run:
            out = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert out.replayed is False
        assert len(payments.done) == 2

    def test_opted_out_tool_runs_an_unseen_action_again(self, store, payments) -> None:
        """The opt-out covers rule 2 too: identical calls of the tool are independent."""
        tool = _independent(payments.tool())
        with toolledger.run("r", db=store) as run:
            run.call(tool, call_id="A", input={"n": 1})
            out = run.call(tool, call_id="B", input={"n": 1})
        assert out.replayed is False
        assert len(payments.done) == 2


# -- effect keys keep their own rules ---------------------------------------------------------


class TestEffectKeysUnchanged:
    def test_key_dedups_even_after_the_result_was_delivered(self, store, payments) -> None:
        """A keyed action is served its first result after delivery too (unlike rule 2)."""
        tool = payments.tool(effect_key=lambda i: f"invoice:{i['invoice']}")
        with toolledger.run("r", db=store) as run:
            first = run.call(tool, call_id="A", input={"invoice": 7, "note": "thanks"})
            run.deliver("A", post=lambda _p: None)
            again = run.call(tool, call_id="B", input={"invoice": 7, "note": "thank you"})
        assert again.deduplicated_from == "A"
        assert again.payload == first.payload
        assert len(payments.done) == 1

    def test_uncertain_key_holder_is_named_as_before(self, store, payments) -> None:
        """A keyed action whose holder is uncertain reports the holder as it always did."""
        with toolledger.run("r", db=store) as run:
            lost = payments.tool(lose=True, effect_key="input")
            with pytest.raises(OutcomeUnknownError):
                run.call(lost, call_id="A", input={"to": "ana"})
            with pytest.raises(OutcomeUnknownError) as info:
                run.call(payments.tool(effect_key="input"), call_id="B", input={"to": "ana"})
        assert info.value.details["effect_key_holder"] == "A"
        assert len(payments.done) == 1

    def test_key_in_another_conversation_executes(self, store, payments) -> None:
        """Keys stay scoped by conversation."""
        tool = payments.tool(effect_key="input")
        with toolledger.run("r", db=store, conversation_id="conv-1") as run:
            run.call(tool, call_id="A", input={"to": "ana"})
        with toolledger.run("r", db=store, conversation_id="conv-2") as run:
            out = run.call(tool, call_id="B", input={"to": "ana"})
        assert out.deduplicated_from is None
        assert len(payments.done) == 2


# -- what counts as seen: a model turn a journaled client completed --------------------------


def _anthropic_turn(call_id: str, text: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": call_id, "name": "pay", "input": {"to": "ana"}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    return [
        {"role": "user", "content": "Pay Ana."},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


def _openai_turn(call_id: str, text: str) -> list[dict[str, Any]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "pay", "arguments": '{"to":"ana"}'},
    }
    return [
        {"role": "user", "content": "Pay Ana."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": text},
    ]


def _ask(provider: str, run: toolledger.Run, call_id: str, text: str, status: int) -> None:
    """Send one model request carrying ``call_id``'s result through a journaled client."""
    from ..integrations._llm_wire import anthropic_client, openai_client

    if provider == "anthropic":
        from toolledger.integrations.anthropic import journaled

        client = journaled(anthropic_client(status=status), run)
        client.messages.create(
            model="claude-x", max_tokens=64, messages=_anthropic_turn(call_id, text)
        )
    else:
        from toolledger.integrations.openai import journaled

        client = journaled(openai_client(), run)
        client.chat.completions.create(model="gpt-x", messages=_openai_turn(call_id, text))


class TestSeenByAJournaledClient:
    @pytest.mark.parametrize("provider", ["anthropic", "openai"])
    def test_completed_model_turn_carrying_the_result_marks_it_seen(
        self, store, payments, provider
    ) -> None:
        """A journaled request that carried the result and completed: the model saw it."""
        with toolledger.run("r", db=store) as run:
            first = run.call(payments.tool(), call_id="A", input={"to": "ana"})
            _ask(provider, run, "A", json.dumps(first.payload), status=200)
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.replayed is False
        assert [c for c, _ in payments.done] == ["A", "B"]

    def test_failed_model_turn_leaves_the_result_unseen(self, store, payments) -> None:
        """A request that carried the result but failed was not seen: the result is served."""
        import anthropic

        with toolledger.run("r", db=store) as run:
            first = run.call(payments.tool(), call_id="A", input={"to": "ana"})
            with pytest.raises(anthropic.InternalServerError):
                _ask("anthropic", run, "A", json.dumps(first.payload), status=500)
            again = run.call(payments.tool(), call_id="B", input={"to": "ana"})
        assert again.deduplicated_from == "A"
        assert len(payments.done) == 1
