"""A journaled model request that completed marks the tool results it carried as seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import toolledger
from toolledger.integrations.anthropic import journaled as journaled_anthropic
from toolledger.integrations.openai import journaled as journaled_openai

from ._llm_wire import anthropic_client, openai_client


def _pay(done: list[str]) -> toolledger.Tool:
    @toolledger.tool(revision="1")
    def pay(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
        done.append(ctx.call_id)
        return {"paid": input["to"]}

    return pay


class TestCarriedResultsAreSeen:
    def test_responses_function_call_output_marks_its_call_seen(self, tmp_path: Path) -> None:
        """An OpenAI Responses request carrying a function_call_output: that call is seen."""
        done: list[str] = []
        with toolledger.run("r", db=tmp_path / "l.db") as run:
            run.call(_pay(done), call_id="fc_1", input={"to": "ana"})
            client = journaled_openai(openai_client(), run)
            client.responses.create(
                model="gpt-x",
                input=[
                    {"role": "user", "content": "Pay Ana."},
                    {"type": "function_call_output", "call_id": "fc_1", "output": "{}"},
                ],
            )
            assert run.store.get(run.namespace, "fc_1").status.value == "delivered"
            again = run.call(_pay(done), call_id="fc_2", input={"to": "ana"})
        assert again.replayed is False
        assert done == ["fc_1", "fc_2"]

    def test_a_request_carrying_no_results_marks_nothing(self, tmp_path: Path) -> None:
        """A plain question does not touch completed calls: an unseen result stays unseen."""
        done: list[str] = []
        with toolledger.run("r", db=tmp_path / "l.db") as run:
            run.call(_pay(done), call_id="t1", input={"to": "ana"})
            client = journaled_anthropic(anthropic_client(), run)
            client.messages.create(
                model="claude-x", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
            assert run.store.get(run.namespace, "t1").status.value == "completed"
            again = run.call(_pay(done), call_id="t2", input={"to": "ana"})
        assert again.deduplicated_from == "t1"
        assert done == ["t1"]
