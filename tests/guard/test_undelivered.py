"""A run that ends with completed calls nobody delivered says so; delivered ones say nothing."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import toolledger


@toolledger.tool(revision="1")
def _send(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
    return {"sent": input["to"]}


class TestUndeliveredWarning:
    def test_forgotten_deliver_is_named_when_the_run_closes(self, tmp_path: Path) -> None:
        """A completed call never delivered: one warning naming it and what to do."""
        with (
            pytest.warns(toolledger.UndeliveredWarning, match="never delivered: toolu_1") as got,
            toolledger.run("g", db=tmp_path / "l.db") as run,
        ):
            run.call(_send, call_id="toolu_1", input={"to": "ana"})
        mine = [w for w in got if issubclass(w.category, toolledger.UndeliveredWarning)]
        assert len(mine) == 1
        assert "run.deliver(call_id, post)" in str(mine[0].message)

    def test_delivered_seen_or_framework_posted_calls_do_not_warn(self, tmp_path: Path) -> None:
        """deliver, deliver_many, mark_seen and mark_posted each settle what the run owes."""
        with warnings.catch_warnings():
            warnings.simplefilter("error", toolledger.UndeliveredWarning)
            with toolledger.run("g", db=tmp_path / "l.db") as run:
                for call_id in ("a", "b", "c", "d"):
                    run.call(_send, call_id=call_id, input={"to": call_id})
                run.deliver("a", post=lambda payload: None)
                run.deliver_many(["b"], post=lambda payloads: None)
                run.mark_seen(["c"])
                run.mark_posted(["d"])

    def test_a_replayed_call_delivered_before_owes_nothing(self, tmp_path: Path) -> None:
        """After a restart, a call the first process delivered is not owed again."""
        db = tmp_path / "l.db"
        with toolledger.run("g", db=db) as run:
            run.call(_send, call_id="a", input={"to": "ana"})
            run.deliver("a", post=lambda payload: None)
        with warnings.catch_warnings():
            warnings.simplefilter("error", toolledger.UndeliveredWarning)
            with toolledger.run("g", db=db) as run:
                again = run.call(_send, call_id="a", input={"to": "ana"})
        assert again.replayed
        assert again.status == "delivered"

    def test_framework_adapter_calls_never_warn(self, tmp_path: Path) -> None:
        """A framework posts its tools' results itself: no warning for adapter calls."""
        pytest.importorskip("pydantic_ai")
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel

        from toolledger.integrations.pydantic_ai import GuardedToolset

        sent: list[str] = []

        def model(messages: list[Any], info: Any) -> ModelResponse:
            if len(messages) == 1:
                return ModelResponse(
                    parts=[ToolCallPart("send", {"to": "ana"}, tool_call_id="call_1")]
                )
            return ModelResponse(parts=[TextPart("done")])

        from pydantic_ai.toolsets import FunctionToolset

        plain = FunctionToolset()

        @plain.tool_plain
        def send(to: str) -> str:
            sent.append(to)
            return "ok"

        with warnings.catch_warnings():
            warnings.simplefilter("error", toolledger.UndeliveredWarning)
            with toolledger.run("g", db=tmp_path / "l.db") as run:
                Agent(FunctionModel(model), toolsets=[GuardedToolset(plain, run=run)]).run_sync(
                    "go"
                )
        assert sent == ["ana"]


def test_restart_rebuilds_the_transcript_from_payload_and_posts_only_the_undelivered(
    tmp_path: Path,
) -> None:
    """The documented restart pattern: the rebuilt transcript has every result, each posted once."""
    db = tmp_path / "l.db"
    posted: list[tuple[str, Any]] = []
    with toolledger.run("g", db=db, run_id="r1") as run:
        for call_id in ("a", "b"):
            run.call(_send, call_id=call_id, input={"to": call_id})
        run.deliver("a", post=lambda payload: posted.append(("a", payload)))
        # the process dies here: "b" was completed but never delivered
        run.mark_posted(["b"])  # (keeps this test's run quiet; a crash would not warn)
    transcript: list[tuple[str, Any]] = []
    with toolledger.run("g", db=db, run_id="r1") as run:
        for call_id in ("a", "b"):
            outcome = run.call(_send, call_id=call_id, input={"to": call_id})
            assert outcome.replayed
            transcript.append((call_id, outcome.payload))
            if outcome.status != "delivered":
                run.deliver(call_id, post=lambda payload, c=call_id: posted.append((c, payload)))
    assert transcript == [("a", {"sent": "a"}), ("b", {"sent": "b"})]
    assert posted == [("a", {"sent": "a"}), ("b", {"sent": "b"})]
