"""The same action under a new call id, by default: an unknown outcome blocks it, a
result no model turn has seen is served to it (on every store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import Status
from toolledger.errors import OutcomeUnknownError
from toolledger.testing import crash_at

from ._stores import STORE_KINDS, open_kind
from .conftest import CountingStore


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_kind(request.param, tmp_path)


class Payments:
    """A ``pay`` tool whose effects are counted."""

    def __init__(self) -> None:
        self.paid: list[Any] = []

    def tool(
        self,
        *,
        journal: bool = True,
        raises: BaseException | None = None,
        recover: Any = None,
        independent: bool = False,
    ) -> toolledger.Tool:
        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            if journal:
                ctx.operation.write({"payment": ctx.call_id})
            if raises is not None:
                raise raises
            self.paid.append(input)
            return {"paid": input["amount"], "by": ctx.call_id}

        return toolledger.tool(
            "pay", revision="1", execute=execute, recover=recover, independent=independent
        )


@pytest.fixture
def pay() -> Payments:
    return Payments()


def _uncertain(run: Any, pay: Payments, call_id: str, amount: int = 5) -> None:
    """Leave ``call_id`` uncertain: the tool wrote its journal, then failed."""
    with pytest.raises(OutcomeUnknownError):
        run.call(pay.tool(raises=OSError("timeout")), call_id=call_id, input={"amount": amount})


class TestServedToARePlan:
    def test_completed_unseen_result_is_served_to_a_new_id(self, store, pay) -> None:
        """Same run (one conversation): the stored result, ``deduplicated_from``."""
        with toolledger.run("t", db=store) as run:
            first = run.call(pay.tool(), call_id="A", input={"amount": 5})
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert pay.paid == [{"amount": 5}]
        assert (again.replayed, again.deduplicated_from) == (True, "A")
        assert again.payload == first.payload
        rec = store.get("default", "B")
        assert rec.status is Status.COMPLETED
        assert rec.result.payload == first.payload

    def test_after_deliver_the_same_action_executes_again(self, store, pay) -> None:
        """The model saw it (``run.deliver``): a repeat is a new action."""
        with toolledger.run("t", db=store) as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
            run.deliver("A", lambda payload: None)
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert (again.replayed, again.deduplicated_from) == (False, None)
        assert len(pay.paid) == 2

    def test_after_mark_seen_the_same_action_executes_again(self, store, pay) -> None:
        """``mark_seen``: delivered without posting; idempotent; unknown ids ignored."""
        with toolledger.run("t", db=store) as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
            assert run.mark_seen(["A", "nope"]) == ["A"]
            assert run.mark_seen(["A"]) == []
            assert store.get("default", "A").status is Status.DELIVERED
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert again.deduplicated_from is None
        assert len(pay.paid) == 2
        names = [h.transition for h in store.history("default", "A")]
        assert names[-2:] == ["claim_delivery", "complete_delivery"]

    def test_a_served_copy_seen_counts_for_the_action(self, store, pay) -> None:
        """Served B, then B seen: C executes (the original A was never delivered)."""
        with toolledger.run("t", db=store) as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
            assert run.call(pay.tool(), call_id="B", input={"amount": 5}).replayed
            run.mark_seen(["B"])
            third = run.call(pay.tool(), call_id="C", input={"amount": 5})
        assert third.deduplicated_from is None
        assert len(pay.paid) == 2

    def test_another_conversation_executes_again(self, store, pay) -> None:
        """A repeated identical action in another conversation is legitimate."""
        with toolledger.run("t", db=store, conversation_id="c1") as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
        with toolledger.run("t", db=store, conversation_id="c2") as run:
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert again.deduplicated_from is None
        assert len(pay.paid) == 2

    def test_conversation_id_spans_runs(self, store, pay) -> None:
        """Two runs of one conversation: the second is served the unseen result."""
        with toolledger.run("t", db=store, conversation_id="c1") as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
        with toolledger.run("t", db=store, conversation_id="c1") as run:
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert again.deduplicated_from == "A"
        assert len(pay.paid) == 1

    def test_resumed_run_id_is_the_same_conversation(self, store, pay) -> None:
        """No conversation id: the run id is the conversation (a resumed run is one)."""
        with toolledger.run("t", db=store, run_id="r" * 32) as run:
            run.call(pay.tool(), call_id="A", input={"amount": 5})
        with toolledger.run("t", db=store, run_id="r" * 32) as run:
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        with toolledger.run("t", db=store) as run:
            other = run.call(pay.tool(), call_id="C", input={"amount": 5})
        assert again.deduplicated_from == "A"
        assert other.deduplicated_from is None
        assert len(pay.paid) == 2

    def test_call_many_repeating_an_action_in_one_turn_runs_it_once(self, store, pay) -> None:
        """One turn asking the same payment twice: one effect, the second served."""
        tool = pay.tool()
        with toolledger.run("t", db=store) as run:
            outs = run.call_many(
                [{"tool": tool, "call_id": c, "input": {"amount": 5}} for c in ("A", "B")]
            )
        assert [o.deduplicated_from for o in outs] == [None, "A"]
        assert len(pay.paid) == 1


class TestUnknownBlocks:
    def test_uncertain_blocks_the_same_action_under_a_new_id(self, store, pay) -> None:
        """OUTCOME_UNKNOWN naming the earlier call; nothing executes, nothing is written."""
        with toolledger.run("t", db=store) as run:
            _uncertain(run, pay, "A")
            with pytest.raises(OutcomeUnknownError) as info:
                run.call(pay.tool(), call_id="B", input={"amount": 5})
        err = info.value
        assert err.code == "OUTCOME_UNKNOWN"
        assert err.details["same_action_as"] == "A"
        assert "may already have happened" in err.message
        assert "do not retry" in err.message.lower()
        assert "toolledger resolve" in err.message
        assert pay.paid == []
        assert store.get("default", "B") is None

    def test_block_is_namespace_wide_across_conversations(self, store, pay) -> None:
        """Another conversation in the namespace is blocked too; another namespace is not."""
        with toolledger.run("t", db=store, conversation_id="c1") as run:
            _uncertain(run, pay, "A")
        with toolledger.run("t", db=store, conversation_id="c2") as run:
            with pytest.raises(OutcomeUnknownError) as info:
                run.call(pay.tool(), call_id="B", input={"amount": 5})
            assert info.value.details["same_action_as"] == "A"
        with toolledger.run("t", db=store, namespace="other") as run:
            run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert len(pay.paid) == 1

    def test_different_inputs_never_block_each_other(self, store, pay) -> None:
        """Three different payments, the first uncertain: the other two execute."""
        with toolledger.run("t", db=store) as run:
            _uncertain(run, pay, "A", amount=1)
            outs = run.call_many(
                [{"tool": pay.tool(), "call_id": f"B{n}", "input": {"amount": n}} for n in (2, 3)]
            )
        assert [o.replayed for o in outs] == [False, False]
        assert pay.paid == [{"amount": 2}, {"amount": 3}]

    def test_independent_tool_is_never_blocked_or_served(self, store, pay) -> None:
        """``independent=True``: identical calls are independent actions."""
        with toolledger.run("t", db=store) as run:
            _uncertain(run, pay, "A")
            run.call(pay.tool(independent=True), call_id="B", input={"amount": 5})
            out = run.call(pay.tool(independent=True), call_id="C", input={"amount": 5})
        assert out.deduplicated_from is None
        assert len(pay.paid) == 2

    def test_recovered_holder_is_then_served(self, store, pay) -> None:
        """Once the earlier call is settled as completed, the re-plan gets its result."""
        with toolledger.run("t", db=store) as run:
            _uncertain(run, pay, "A")
            recovered = pay.tool(recover=lambda ctx: toolledger.Recovered({"paid": 5}))
            assert run.call(recovered, call_id="A", input={"amount": 5}).recovered
            again = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert (again.payload, again.deduplicated_from) == ({"paid": 5}, "A")
        assert pay.paid == []

    def test_released_holder_lets_the_action_execute(self, store, pay) -> None:
        """A pre-effect failure (empty journal) released its claim: the re-plan executes."""
        with toolledger.run("t", db=store) as run:
            failing = pay.tool(journal=False, raises=ValueError("card declined"))
            with pytest.raises(ValueError):
                run.call(failing, call_id="A", input={"amount": 5})
            out = run.call(pay.tool(), call_id="B", input={"amount": 5})
        assert (out.replayed, out.deduplicated_from) == (False, None)
        assert len(pay.paid) == 1

    def test_live_attempt_is_reported_live_and_never_marked_uncertain(self, store, pay) -> None:
        """Asked again while its attempt runs (same id or a re-plan): "held by a live attempt"."""
        errors: list[OutcomeUnknownError] = []

        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            for call_id in ("A", "B"):
                with toolledger.run("other", db=store) as other:
                    try:
                        other.call(pay.tool(), call_id=call_id, input={"amount": 5})
                    except OutcomeUnknownError as exc:
                        errors.append(exc)
            assert store.get("default", "A").status is Status.EXECUTING
            return {"paid": 5}

        with toolledger.run("t", db=store) as run:
            tool = toolledger.tool("pay", revision="1", execute=execute)
            out = run.call(tool, call_id="A", input={"amount": 5})
        assert len(errors) == 2
        for err in errors:
            assert "held by a live attempt since" in err.message
            assert "stays" not in err.message
            assert err.details["live_attempt"] is True
        assert errors[1].details["same_action_as"] == "A"
        assert out.replayed is False
        names = [h.transition for h in store.history("default", "A")]
        assert "mark_execution_uncertain" not in names
        assert pay.paid == []

    def test_claim_left_by_an_ended_call_of_this_process_is_not_live(self, store, pay) -> None:
        """A call that ended with its claim left executing: marked uncertain as before."""

        class Stop(Exception):
            pass

        def stop() -> None:
            raise Stop

        with toolledger.run("t", db=store) as run:
            with crash_at("after-claim", stop), pytest.raises(Stop):
                run.call(pay.tool(), call_id="A", input={"amount": 5})
            with pytest.raises(OutcomeUnknownError) as info:
                run.call(pay.tool(), call_id="A", input={"amount": 5})
        assert "live_attempt" not in info.value.details
        assert store.get("default", "A").status is Status.UNCERTAIN


def test_new_call_still_costs_two_durable_commits(tmp_path: Path, pay: Payments) -> None:
    """The same-action checks ride the claim transaction."""
    store = CountingStore(tmp_path / "full.db", durability="full")
    with toolledger.run("t", db=store) as run:
        store.reset()
        run.call(pay.tool(journal=False), call_id="A", input={"amount": 5})
        assert store.durable_commits == 2
    store.close()


def test_mark_seen_refuses_a_bare_string(tmp_path: Path) -> None:
    """``mark_seen("A")`` would mean ids "A": INVALID_ARGUMENT, nothing written."""
    with toolledger.run("t", db=tmp_path / "s.db") as run:
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            run.mark_seen("A")  # type: ignore[arg-type]
        assert info.value.details == {"argument": "call_ids"}


def test_independent_must_be_a_bool() -> None:
    """``independent`` is True or False (a typo'd truthy value is refused)."""
    with pytest.raises(toolledger.InvalidArgumentError):
        toolledger.tool("t", revision="1", execute=lambda i, c: None, independent="yes")  # type: ignore[arg-type]
