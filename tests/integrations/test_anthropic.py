"""The Anthropic adapter with the real SDK types and client (offline, MockTransport)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.integrations import OUTCOME_UNKNOWN
from toolledger.integrations import anthropic as tl
from toolledger.testing import stored_run

anthropic = pytest.importorskip("anthropic")
from anthropic.types import Message  # noqa: E402

EXAMPLE = Path(__file__).parents[2] / "examples" / "anthropic_loop.py"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "send_email",
        "description": "Send an email.",
        "input_schema": {
            "type": "object",
            "properties": {"to": {"type": "string"}},
            "required": ["to"],
        },
    },
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    {
        "name": "already",
        "input_schema": {
            "type": "object",
            "properties": {"justification": {"type": "string"}},
        },
    },
]


def message(*blocks: dict[str, Any]) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "On it."}, *blocks],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def use(id: str, name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


class TestWithJustification:
    def test_with_justification_adds_required_argument(self) -> None:
        """Custom tools get a required justification string."""
        out = tl.with_justification(TOOLS)
        schema = out[0]["input_schema"]
        assert schema["properties"]["justification"]["type"] == "string"
        assert schema["required"] == ["to", "justification"]

    def test_with_justification_skips_server_and_justified_tools(self) -> None:
        """Server tools and tools that already have the argument are returned as is."""
        out = tl.with_justification(TOOLS)
        assert out[1] is TOOLS[1]
        assert out[2] is TOOLS[2]

    def test_with_justification_is_idempotent_and_does_not_mutate(self) -> None:
        """Applying twice equals applying once; the caller's list is unchanged."""
        before = copy.deepcopy(TOOLS)
        once = tl.with_justification(TOOLS)
        assert tl.with_justification(once) == once
        assert before == TOOLS


class TestToolCalls:
    def test_tool_calls_parse_sdk_message(self) -> None:
        """One entry per tool_use; justification split off; None when omitted."""
        msg = message(
            use("toolu_1", "send_email", to="a@b.c", justification="User asked."),
            use("toolu_2", "send_email", to="d@e.f"),
        )
        got = [(c.id, c.name, c.args, c.justification, c.provider) for c in tl.tool_calls(msg)]
        assert got == [
            ("toolu_1", "send_email", {"to": "a@b.c"}, "User asked.", "anthropic"),
            ("toolu_2", "send_email", {"to": "d@e.f"}, None, "anthropic"),
        ]

    def test_tool_calls_accept_plain_dicts(self) -> None:
        """A dict response parses the same as the SDK object."""
        msg = message(use("toolu_1", "send_email", to="a@b.c"))
        assert tl.tool_calls(msg.model_dump()) == tl.tool_calls(msg)


class TestRunToolCalls:
    def test_run_tool_calls_returns_result_blocks_and_replays(self, run, calls) -> None:
        """Results are tool_result blocks; running the same response again executes nothing."""
        msg = message(
            use("toolu_1", "send_email", to="a@b.c", justification="Asked."),
            use("toolu_2", "failing", to="x"),
            use("toolu_3", "nope"),
        )
        first = tl.run_tool_calls(run, msg, calls.tools())
        assert first == [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"sent_to":"a@b.c"}'},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": '{"error":"ValueError","message":"mailbox full"}',
                "is_error": True,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_3",
                "content": "unknown tool 'nope'",
                "is_error": True,
            },
        ]
        assert tl.run_tool_calls(run, msg, calls.tools()) == first
        assert len(calls.seen) == 2

    def test_run_tool_calls_unknown_outcome_is_reported_not_rerun(self, run, calls) -> None:
        """A call whose outcome is unknown gets a truthful error result."""
        msg = message(use("toolu_1", "lossy", to="x"))
        for _ in range(2):
            (block,) = tl.run_tool_calls(run, msg, calls.tools())
            assert block["content"] == OUTCOME_UNKNOWN
            assert block["is_error"] is True
        assert len(calls.seen) == 1

    def test_run_tool_calls_records_model_justification(self, run, calls) -> None:
        """The model's justification goes to the journal, marked as the model's."""
        msg = message(use("toolu_1", "send_email", to="a@b.c"))
        tl.run_tool_calls(run, msg, calls.tools())
        run.flush()
        (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
        assert event["justification_source"] == "model"
        assert event["justification_missing"] is True
        assert event["justification"] is None


class TestRepairTranscript:
    def test_repair_transcript_inserts_truthful_results(self, run, calls) -> None:
        """completed: stored payload; executing: outcome unknown; absent: not executed."""
        tools = calls.tools()
        run.call(tools[0], call_id="toolu_done", input={"to": "a"})
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(tools[2], call_id="toolu_lost", input={"to": "b"})
        assistant = message(
            use("toolu_done", "send_email", to="a"),
            use("toolu_lost", "lossy", to="b"),
            use("toolu_never", "send_email", to="c"),
        )
        history = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": assistant.content},
        ]
        before = copy.deepcopy(history[0])
        fixed = tl.repair_transcript(history, run)
        assert len(history) == 2
        assert history[0] == before
        assert fixed[2]["role"] == "user"
        assert [
            (b["tool_use_id"], b["content"], b.get("is_error", False)) for b in fixed[2]["content"]
        ] == [
            ("toolu_done", '{"sent_to":"a"}', False),
            (
                "toolu_lost",
                OUTCOME_UNKNOWN,
                True,
            ),
            ("toolu_never", "not executed", True),
        ]

    def test_repair_transcript_fills_existing_user_turn_results_first(self, run) -> None:
        """Missing results go before the text of an existing user message."""
        history = [
            {"role": "assistant", "content": [use("toolu_a", "t"), use("toolu_b", "t")]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"},
                    {"type": "text", "text": "and?"},
                ],
            },
        ]
        fixed = tl.repair_transcript(history, run.store, namespace="default")
        kinds = [(b["type"], b.get("tool_use_id")) for b in fixed[1]["content"]]
        assert kinds == [("tool_result", "toolu_a"), ("tool_result", "toolu_b"), ("text", None)]
        assert fixed[1]["content"][1]["content"] == "not executed"

    def test_repair_transcript_complete_history_is_unchanged(self, run) -> None:
        """A history with every result is returned equal."""
        history = [
            {"role": "assistant", "content": [use("toolu_a", "t")]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}],
            },
        ]
        assert tl.repair_transcript(history, run) == history


def _phase(workdir: Path, phase: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--workdir", str(workdir), "--phase", phase],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )


@pytest.mark.slow
def test_real_client_failed_post_restart_runs_tool_once_and_posts_same_bytes(
    tmp_path: Path,
) -> None:
    """The results request fails; a new process replays and re-posts the same bytes."""
    first = _phase(tmp_path, "first")
    assert first.returncode == 3, first.stderr
    assert "ConnectError" in first.stderr or "APIConnectionError" in first.stderr
    second = _phase(tmp_path, "second")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {
        "answer": "Done: the email was sent."
    }
    assert len((tmp_path / "outbox.log").read_text().splitlines()) == 1
    posts = sorted(tmp_path.glob("results-post-*.json"))
    assert len(posts) == 2
    assert posts[0].read_bytes() == posts[1].read_bytes()
    body = json.loads(posts[0].read_bytes())
    (result,) = body["messages"][-1]["content"]
    assert result["content"] == '{"message_id":"msg-toolu_01A09q90qw90lq917835lq9","status":"sent"}'
    store = toolledger.SQLiteStore(tmp_path / "ledger.db")
    rec = store.get("default", "toolu_01A09q90qw90lq917835lq9")
    store.close()
    assert (rec.status.value, rec.delivery_attempts) == ("delivered", 2)
