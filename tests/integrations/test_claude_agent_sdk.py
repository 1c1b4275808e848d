"""``ToolledgerHooks``: Claude Agent SDK tool calls through the guard, keyed by ``tool_use_id``.

The SDK's real ``query`` runs against ``FakeCLI`` (its ``Transport``): its control protocol,
hook dispatch, in-process MCP bridge and ``create_sdk_mcp_server`` are the package's own.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query, tool

import toolledger
from toolledger import Denied, Pending, decide_approval
from toolledger.integrations import ToolGate
from toolledger.integrations.claude_agent_sdk import ToolledgerHooks
from toolledger.testing import stored_run

from ._claude_cli import FakeCLI, tool_results

NAME = "mcp__mail__send_email"


class Outbox:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[Any] = []
        self.fail = fail

    def tool(self) -> Any:
        @tool("send_email", "Send one email.", {"to": str})
        async def send_email(args: dict[str, Any]) -> dict[str, Any]:
            self.sent.append(args["to"])
            if self.fail:
                raise ValueError("mailbox full")
            return {"content": [{"type": "text", "text": f"sent to {args['to']}"}]}

        return send_email


def scripted(*calls: tuple[str, dict[str, Any]]) -> Any:
    """A model that makes ``calls`` (id, input) in its first turn, then is done."""

    def model(history: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
        if any(m["role"] == "assistant" for m in history):
            return []
        return [(call_id, NAME, args) for call_id, args in calls]

    return model


def drive(guard: ToolledgerHooks, box: Outbox, cli: FakeCLI) -> list[Any]:
    """Run one ``query`` with the guarded server and hooks; return its messages."""
    options = ClaudeAgentOptions(
        mcp_servers={"mail": guard.server("mail", [box.tool()])}, hooks=guard.hooks()
    )

    async def go() -> list[Any]:
        return [m async for m in query(prompt="Tell Ana", options=options, transport=cli)]

    return asyncio.run(go())


ANA = {"to": "ana@example.com"}


def test_tool_runs_once_and_the_same_call_replays_its_result(run: toolledger.Run) -> None:
    """Two sessions whose model issues the same tool_use_id: one email, the same result twice."""
    box = Outbox()
    guard = ToolledgerHooks(run)
    clis = [FakeCLI(scripted(("toolu_1", ANA))) for _ in range(2)]
    for cli in clis:
        drive(guard, box, cli)
    assert box.sent == ["ana@example.com"]
    assert [tool_results(c.history) for c in clis] == [
        {"toolu_1": ("sent to ana@example.com", False)}
    ] * 2
    rec = run.store.get(run.namespace, "toolu_1")
    assert rec.result.payload == {"content": [{"type": "text", "text": "sent to ana@example.com"}]}
    assert run.conversation_id == "sess-1"  # the session's id, the app named none


def test_resumed_session_runs_its_unanswered_call_with_the_stored_result(
    run: toolledger.Run, tmp_path: Path
) -> None:
    """A session resumed from a transcript whose last turn has no result: not run again."""
    box = Outbox()
    guard = ToolledgerHooks(run)
    transcript = tmp_path / "session.json"
    drive(guard, box, FakeCLI(scripted(("toolu_1", ANA)), transcript=transcript))
    history = __import__("json").loads(transcript.read_text())
    transcript.write_text(__import__("json").dumps(history[:2]))  # up to the tool use
    resumed = FakeCLI(scripted(), transcript=transcript)
    drive(guard, box, resumed)
    assert box.sent == ["ana@example.com"]
    assert tool_results(resumed.history) == {"toolu_1": ("sent to ana@example.com", False)}


def test_parallel_calls_each_keyed_by_their_own_id(run: toolledger.Run) -> None:
    """Two calls in one turn, different inputs: each runs once under its own id."""
    box = Outbox()
    bob = {"to": "bob@example.com"}
    cli = FakeCLI(scripted(("toolu_1", ANA), ("toolu_2", bob)))
    drive(ToolledgerHooks(run), box, cli)
    assert box.sent == ["ana@example.com", "bob@example.com"]
    assert run.store.get(run.namespace, "toolu_2").binding.call_id == "toolu_2"
    assert tool_results(cli.history)["toolu_2"] == ("sent to bob@example.com", False)


def test_binding_conflict_is_refused_and_nothing_runs(run: toolledger.Run) -> None:
    """The id reused for another input: the SDK reports the refusal, the tool does not run."""
    box = Outbox()
    guard = ToolledgerHooks(run)
    drive(guard, box, FakeCLI(scripted(("toolu_1", ANA))))
    cli = FakeCLI(scripted(("toolu_1", {"to": "bob@example.com"})))
    drive(guard, box, cli)
    assert box.sent == ["ana@example.com"]
    text, is_error = tool_results(cli.history)["toolu_1"]
    assert is_error
    assert "toolu_1" in text


def test_models_justification_is_journaled(run: toolledger.Run) -> None:
    """``justification`` in the input: the model's text is the event's, not the binding's."""
    box = Outbox()
    args = {**ANA, "justification": "Ana asked to be told."}
    drive(ToolledgerHooks(run), box, FakeCLI(scripted(("toolu_1", args))))
    run.flush()
    (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert event["justification"] == "Ana asked to be told."
    assert event["inputs"] == ANA


def test_call_without_the_hooks_is_refused_not_run_unguarded(run: toolledger.Run) -> None:
    """The server without ``hooks()``: no id for the call, so it is an error result."""
    box = Outbox()
    guard = ToolledgerHooks(run)
    options = ClaudeAgentOptions(mcp_servers={"mail": guard.server("mail", [box.tool()])})
    cli = FakeCLI(scripted(("toolu_1", ANA)))

    async def go() -> None:
        async for _ in query(prompt="go", options=options, transport=cli):
            pass

    asyncio.run(go())
    assert box.sent == []
    text, is_error = tool_results(cli.history)["toolu_1"]
    assert is_error
    assert "PreToolUse" in text
    assert run.store.get(run.namespace, "toolu_1") is None


def test_tool_error_releases_the_claim_and_the_model_is_told(run: toolledger.Run) -> None:
    """``on_error="raise"``: the SDK reports the exception; the call may run again."""
    box = Outbox(fail=True)
    cli = FakeCLI(scripted(("toolu_1", ANA)))
    drive(ToolledgerHooks(run), box, cli)
    assert tool_results(cli.history)["toolu_1"] == ("mailbox full", True)
    assert run.store.get(run.namespace, "toolu_1").status.value == "ready"


def test_on_error_result_stores_the_tools_error(run: toolledger.Run) -> None:
    """``on_error="result"``: stored, and the same error text on a replay."""
    box = Outbox(fail=True)
    guard = ToolledgerHooks(run, on_error="result")
    clis = [FakeCLI(scripted(("toolu_1", ANA))) for _ in range(2)]
    for cli in clis:
        drive(guard, box, cli)
    assert box.sent == ["ana@example.com"]
    first, second = (tool_results(c.history)["toolu_1"] for c in clis)
    assert first == second
    assert first[1] is True
    assert "mailbox full" in first[0]


def test_gate_with_an_approver_denies_and_the_model_is_told(run: toolledger.Run) -> None:
    """A gate whose approver denies: the tool's error result names who and why."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Denied("ops", "not today"))}
    cli = FakeCLI(scripted(("toolu_1", ANA)))
    drive(ToolledgerHooks(run, gates=gates), box, cli)
    assert box.sent == []
    assert tool_results(cli.history)["toolu_1"] == ("denied by ops: not today", True)


def test_gate_with_a_pending_approver_is_awaiting(run: toolledger.Run) -> None:
    """A gate whose approver answers pending: nothing runs, the model is told it waits."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Pending("HELP-1"))}
    cli = FakeCLI(scripted(("toolu_1", ANA)))
    drive(ToolledgerHooks(run, gates=gates), box, cli)
    assert box.sent == []
    assert tool_results(cli.history)["toolu_1"] == ("awaiting approval; not executed yet", True)


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
def test_person_decides_a_deferred_call_then_the_resumed_session_obeys(
    run: toolledger.Run, tmp_path: Path, approve: bool
) -> None:
    """A gate without approver: the SDK's own pause (``defer``), then ``toolledger approve``
    or ``deny`` and a resumed session: runs once, or the model is told who denied it."""
    box = Outbox()
    guard = ToolledgerHooks(run, gates={"send_email": ToolGate()})
    transcript = tmp_path / "session.json"
    messages = drive(guard, box, FakeCLI(scripted(("toolu_1", ANA)), transcript=transcript))
    (result,) = [m for m in messages if isinstance(m, ResultMessage)]
    assert result.deferred_tool_use is not None
    assert result.deferred_tool_use.id == "toolu_1"
    assert box.sent == []
    assert toolledger.approvals.get_approval(run.store, run.namespace, "toolu_1") is not None
    decide_approval(run.store, run.namespace, "toolu_1", approve, "ana", "checked")
    for _ in range(2):  # resumed twice: one decision, at most one effect
        resumed = FakeCLI(scripted(), transcript=transcript)
        drive(guard, box, resumed)
    expected = ("sent to ana@example.com", False) if approve else ("denied by ana: checked", True)
    assert tool_results(resumed.history)["toolu_1"] == expected
    assert box.sent == (["ana@example.com"] if approve else [])


def test_replanned_call_with_an_effect_key_returns_the_first_result(run: toolledger.Run) -> None:
    """A new tool_use_id for the same action: deduplicated with an effect key."""
    box = Outbox()
    guard = ToolledgerHooks(run, effect_keys={"send_email": "input"})
    clis = [FakeCLI(scripted((call_id, ANA))) for call_id in ("toolu_1", "toolu_2")]
    for cli in clis:
        drive(guard, box, cli)
    assert box.sent == ["ana@example.com"]
    assert tool_results(clis[1].history)["toolu_2"] == ("sent to ana@example.com", False)


def test_hooks_built_before_the_run_use_the_active_run(tmp_path: Path) -> None:
    """``ToolledgerHooks()`` without a run: refused outside a run, guarded inside one."""
    box = Outbox()
    guard = ToolledgerHooks()
    cli = FakeCLI(scripted(("toolu_1", ANA)))
    drive(guard, box, cli)
    assert box.sent == []
    assert "no toolledger run is active" in tool_results(cli.history)["toolu_1"][0]
    with toolledger.run("later", db=str(tmp_path / "l.db")) as later:
        drive(guard, box, FakeCLI(scripted(("toolu_1", ANA))))
        assert later.store.get(later.namespace, "toolu_1") is not None
    assert box.sent == ["ana@example.com"]


def test_server_refuses_a_tool_that_is_not_an_sdk_tool(run: toolledger.Run) -> None:
    """Only ``@tool`` tools can be guarded."""
    with pytest.raises(toolledger.InvalidArgumentError) as info:
        ToolledgerHooks(run).server("mail", [lambda args: args])
    assert info.value.code == "INVALID_ARGUMENT"


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK, importing the adapter raises an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.claude_agent_sdk")
    with pytest.raises(ImportError, match=r"toolledger\[claude-agent-sdk\]"):
        importlib.import_module("toolledger.integrations.claude_agent_sdk")
