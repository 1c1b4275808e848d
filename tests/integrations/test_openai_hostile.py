"""Hostile model output through the OpenAI adapter: every bad call is an error result for
that call, decided before anything of the turn executes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolledger.integrations import openai as tl


def chat(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(tool_calls)}


def fn(call_id: Any, arguments: str, name: str = "send_email") -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


def items(*calls: tuple[Any, str]) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": i, "name": "send_email", "arguments": a}
        for i, a in calls
    ]


class TestDeepArguments:
    def test_run_tool_calls_arguments_nested_5000_deep_are_an_error_result(
        self, run, calls
    ) -> None:
        """JSON nested past the parser's depth is that call's error; the others run."""
        deep = '{"to":' + "[" * 5000 + "]" * 5000 + "}"
        out = tl.run_tool_calls(
            run, chat(fn("c_deep", deep), fn("c_ok", '{"to":"a"}')), calls.tools()
        )
        assert out[0]["tool_call_id"] == "c_deep"
        assert out[0]["content"].startswith("invalid arguments:")
        assert out[1] == {"role": "tool", "tool_call_id": "c_ok", "content": '{"sent_to":"a"}'}
        assert calls.seen == [{"to": "a"}]

    def test_run_tool_calls_mapping_arguments_nested_5000_deep_are_an_error_result(
        self, run, calls
    ) -> None:
        """Already-parsed (mapping) arguments nested 5,000 deep are refused the same way."""
        deep: Any = []
        for _ in range(5000):
            deep = [deep]
        out = tl.run_tool_calls(
            run,
            [
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "send_email",
                    "arguments": {"to": deep},
                }
            ],
            calls.tools(),
        )
        assert out[0]["output"].startswith("invalid arguments:")
        assert calls.seen == []


class TestMissingId:
    @pytest.mark.parametrize("bad_id", [None, "", 7])
    def test_run_tool_calls_call_without_id_is_refused(self, run, calls, bad_id) -> None:
        """A call with no usable id never runs (not under the id "None"); the others run."""
        out = tl.run_tool_calls(
            run, chat(fn(bad_id, '{"to":"x"}'), fn("c_ok", '{"to":"a"}')), calls.tools()
        )
        assert out[0]["content"].startswith("invalid tool call:")
        assert out[1]["content"] == '{"sent_to":"a"}'
        assert calls.seen == [{"to": "a"}]
        assert run.store.get(run.namespace, "None") is None

    def test_responses_item_without_call_id_is_refused(self, run, calls) -> None:
        out = tl.run_tool_calls(run, items((None, '{"to":"x"}')), calls.tools())
        assert out[0]["output"].startswith("invalid tool call:")
        assert calls.seen == []


class TestUnstorableArguments:
    @pytest.mark.parametrize(
        "arguments",
        [
            '{"to":"a","n":NaN}',
            '{"to":"a","n":Infinity}',
            '{"to":"a","n":-Infinity}',
            '{"to":"a","n":' + "9" * 400 + "}",
            '{"to":"a","n":1e999}',
        ],
        ids=["nan", "inf", "-inf", "huge-int", "huge-float"],
    )
    def test_run_tool_calls_unstorable_number_is_that_calls_error(
        self, run, calls, arguments
    ) -> None:
        """A number JSON cannot hold exactly fails only its call, before anything runs."""
        out = tl.run_tool_calls(
            run, chat(fn("c_ok", '{"to":"a"}'), fn("c_bad", arguments)), calls.tools()
        )
        assert out[0]["content"] == '{"sent_to":"a"}'
        assert out[1]["tool_call_id"] == "c_bad"
        assert out[1]["content"].startswith("invalid arguments:")
        assert calls.seen == [{"to": "a"}]
        assert run.store.get(run.namespace, "c_bad") is None


class TestDuplicateIds:
    def test_run_tool_calls_duplicate_ids_are_errors_and_nothing_of_them_runs(
        self, run, calls
    ) -> None:
        """Both calls sharing an id are refused before either executes; others run."""
        out = tl.run_tool_calls(
            run,
            chat(fn("dup", '{"to":"a"}'), fn("c_ok", '{"to":"b"}'), fn("dup", '{"to":"c"}')),
            calls.tools(),
        )
        assert [m["tool_call_id"] for m in out] == ["dup", "c_ok", "dup"]
        assert out[0]["content"].startswith("invalid tool call: duplicate")
        assert out[2]["content"].startswith("invalid tool call: duplicate")
        assert out[1]["content"] == '{"sent_to":"b"}'
        assert calls.seen == [{"to": "b"}]
        assert run.store.get(run.namespace, "dup") is None
        # Running the same turn again executes nothing twice.
        assert (
            tl.run_tool_calls(
                run,
                chat(fn("dup", '{"to":"a"}'), fn("c_ok", '{"to":"b"}'), fn("dup", '{"to":"c"}')),
                calls.tools(),
            )
            == out
        )
        assert calls.seen == [{"to": "b"}]

    def test_arun_tool_calls_duplicate_ids_are_errors(self, run, calls) -> None:
        out = asyncio.run(
            tl.arun_tool_calls(
                run, items(("dup", '{"to":"a"}'), ("dup", '{"to":"a"}')), calls.tools()
            )
        )
        assert all(o["output"].startswith("invalid tool call: duplicate") for o in out)
        assert calls.seen == []

    def test_deliver_results_skips_refused_calls(self, run, calls) -> None:
        """Refused calls have no checkpoint; delivery posts only what ran."""
        response = chat(fn("dup", '{"to":"a"}'), fn("dup", '{"to":"a"}'), fn("ok", '{"to":"b"}'))
        tl.run_tool_calls(run, response, calls.tools())
        posted: list[Any] = []
        tl.deliver_results(run, response, lambda payloads: posted.append(json.dumps(payloads)))
        assert [json.loads(p) for p in posted] == [{"ok": {"sent_to": "b"}}]


class TestAnthropicShares:
    """The Anthropic adapter goes through the same per-call refusals."""

    def test_anthropic_deep_missing_id_and_duplicates_are_per_call_errors(self, run, calls) -> None:
        from toolledger.integrations import anthropic as ta

        deep: Any = []
        for _ in range(5000):
            deep = [deep]

        def use(call_id: Any, inp: Any) -> dict[str, Any]:
            block = {"type": "tool_use", "name": "send_email", "input": inp}
            if call_id is not None:
                block["id"] = call_id
            return block

        message = {
            "role": "assistant",
            "content": [
                use("deep", {"to": deep}),
                use(None, {"to": "x"}),
                use("dup", {"to": "y"}),
                use("dup", {"to": "y"}),
                use("ok", {"to": "a"}),
                use("nan", {"to": float("nan")}),
            ],
        }
        out = ta.run_tool_calls(run, message, calls.tools())
        assert [b["tool_use_id"] for b in out] == ["deep", None, "dup", "dup", "ok", "nan"]
        assert [b.get("is_error", False) for b in out] == [True, True, True, True, False, True]
        assert calls.seen == [{"to": "a"}]


class TestRepairFromAPath:
    def test_repair_transcript_from_a_missing_database_is_not_found(self, tmp_path) -> None:
        """A mistyped path is NOT_FOUND, never "not executed" for calls it cannot see;
        nothing is created."""
        import toolledger

        history = [chat(fn("c1", '{"to":"a"}'))]
        with pytest.raises(toolledger.NotFoundError):
            tl.repair_transcript(history, tmp_path / "nodir" / "typo.db")
        assert list(tmp_path.iterdir()) == []

    def test_repair_transcript_from_a_path_reads_the_stored_result(self, tmp_path, calls) -> None:
        import toolledger

        db = tmp_path / "l.db"
        with toolledger.run("g", db=db) as r:
            tl.run_tool_calls(r, chat(fn("c1", '{"to":"a"}')), calls.tools())
        fixed = tl.repair_transcript([chat(fn("c1", '{"to":"a"}'))], db)
        assert fixed[1] == {"role": "tool", "tool_call_id": "c1", "content": '{"sent_to":"a"}'}
