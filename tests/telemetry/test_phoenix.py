"""End to end against a real Arize Phoenix: the scenario reads right in its API.

Phoenix lives in its own virtualenv (its pins differ from ours): ``$TOOLLEDGER_PHOENIX``
(default ``.venv-phoenix`` at the repository root, made by ``.ci/run``). The server and the
client run in a network namespace with only loopback (``unshare --net``, as root), because
Phoenix's gRPC port binds every interface. Without the virtualenv (or without the rights
for a namespace) the test skips, unless ``TOOLLEDGER_REQUIRE_PHOENIX=1`` (set by CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("_phoenix_child.py")
# Ours: run, chat, step, 2 approvals, 2 executions, replay, note, artifact; plus the
# Anthropic SDK's own span, in the run's trace since entering the run makes its span current.
# The framework run (``_framework_run``): toolledger's run span, Pydantic AI's two agent
# runs, three chats and three execute_tool spans, and toolledger's three guard_tool spans.
FRAMEWORK_SPANS = 12
EXPECTED_SPANS = 11


def _phoenix_bin() -> Path | None:
    venv = Path(os.environ.get("TOOLLEDGER_PHOENIX") or ROOT / ".venv-phoenix")
    binary = venv / "bin" / "phoenix"
    return binary if binary.is_file() else None


def _namespace_ok() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "true"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    binary = _phoenix_bin()
    reason = None
    if binary is None:
        reason = "no Phoenix virtualenv (set TOOLLEDGER_PHOENIX or run .ci/run)"
    elif not _namespace_ok():
        reason = "cannot make a network namespace (unshare --net needs root)"
    if reason is not None:
        if os.environ.get("TOOLLEDGER_REQUIRE_PHOENIX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(CHILD.parent), str(ROOT / "tests")]),
    }
    proc = subprocess.run(
        [
            *("unshare", "--net", sys.executable, str(CHILD)),
            *(str(binary), str(workdir), str(EXPECTED_SPANS + FRAMEWORK_SPANS)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def trace_of(doc: dict[str, Any], run_name: str) -> list[dict[str, Any]]:
    """Every span of the trace of the run span named ``run_name``."""
    spans = doc["spans"]
    run = next(s for s in spans if s["name"] == run_name)
    out = [s for s in spans if s["context"]["traceId"] == run["context"]["traceId"]]
    for span in out:
        span["attrs"] = json.loads(span["attributes"])
    return out


def ours(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Our trace's spans by name (the SDK's own instrumentation may add other traces)."""
    spans = doc["spans"]
    run = next(s for s in spans if s["name"] == "invoke_agent support-bot")
    trace = run["context"]["traceId"]
    out: dict[str, dict[str, Any]] = {}
    for span in spans:
        if span["context"]["traceId"] == trace:
            span["attrs"] = json.loads(span["attributes"])
            out[span["name"]] = span
    return out


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def attr(span: dict[str, Any], dotted: str) -> Any:
    node: Any = span["attrs"]
    for part in dotted.split("."):
        node = node[part]
    return node


def test_phoenix_shows_kinds_agent_llm_tool_and_approvals_are_not_tools(phoenix) -> None:
    spans = ours(phoenix)
    assert len(spans) == EXPECTED_SPANS
    kinds = {name: s["spanKind"] for name, s in spans.items()}
    assert kinds == {
        "invoke_agent support-bot": "agent",
        "chat claude-x-1": "llm",
        "step plan": "chain",
        "approval send_email": "guardrail",
        "approval refund": "guardrail",
        "execute_tool send_email": "tool",
        "execute_tool lookup_order": "tool",
        "replay_tool send_email": "chain",
        "note": "chain",
        "artifact order.json": "chain",
        "anthropic.messages.create": "llm",
    }
    # Exactly two tool executions: the replay and the approvals are not counted as tools,
    # and the denied refund never ran.
    assert sorted(n for n, k in kinds.items() if k == "tool") == [
        "execute_tool lookup_order",
        "execute_tool send_email",
    ]


def test_phoenix_chat_span_shows_input_messages_and_tokens(phoenix) -> None:
    chat = ours(phoenix)["chat claude-x-1"]
    messages = attr(chat, "llm.input_messages")
    assert [m["message"]["role"] for m in messages] == ["system", "user"]
    assert messages[1]["message"]["content"] == "Refund order 42 and email Ana."
    calls = attr(chat, "llm.output_messages")[0]["message"]["tool_calls"]
    assert [c["tool_call"]["function"]["name"] for c in calls] == ["send_email", "lookup_order"]
    assert json.loads(chat["input"]["value"])[0]["parts"][0]["content"] == (
        "Refund order 42 and email Ana."
    )
    assert attr(chat, "gen_ai.usage.input_tokens") == 1057  # 7 + 1,000 cache read + 50 written
    assert attr(chat, "llm.token_count.prompt") == 1057


def test_phoenix_run_has_input_output_and_conversation_on_children(phoenix) -> None:
    spans = ours(phoenix)
    run = spans["invoke_agent support-bot"]
    assert run["input"]["value"] == "Refund order 42 and email Ana."
    assert run["output"]["value"] == "Emailed Ana; lookup failed; refund denied."
    for name in ("chat claude-x-1", "execute_tool send_email", "execute_tool lookup_order"):
        assert attr(spans[name], "gen_ai.conversation.id") == "conv-42", name
        assert attr(spans[name], "session.id") == "conv-42", name
        assert attr(spans[name], "user.id") == "user-7", name
        assert attr(spans[name], "gen_ai.agent.name") == "support-bot", name


def test_phoenix_replay_marked_and_failure_says_why(phoenix) -> None:
    spans = ours(phoenix)
    replay = spans["replay_tool send_email"]
    assert attr(replay, "toolledger.tool.outcome") == "replayed"
    assert "operation" not in replay["attrs"].get("gen_ai", {})
    failed = spans["execute_tool lookup_order"]
    assert failed["statusCode"] == "ERROR"
    assert failed["statusMessage"] == "boom: disk full"


def test_phoenix_parentage_and_transition_order(phoenix) -> None:
    spans = ours(phoenix)
    ids = {name: s["context"]["spanId"] for name, s in spans.items()}
    run = spans["invoke_agent support-bot"]
    assert run["parentId"] is None
    for name in ("chat claude-x-1", "step plan", "approval refund", "note"):
        assert spans[name]["parentId"] == ids["invoke_agent support-bot"], name
    for name in ("execute_tool send_email", "execute_tool lookup_order"):
        tool = spans[name]
        assert tool["parentId"] == ids["chat claude-x-1"], name  # the model asked for it
        events = tool["events"]
        assert [e["name"] for e in events] == [
            "checkpoint create_checkpoint",
            "checkpoint claim_execution",
            "checkpoint complete_execution",
        ]
        stamps = [when(e["timestamp"]) for e in events]
        assert stamps[0] < stamps[1] < stamps[2]  # strictly increasing, in revision order
        assert when(tool["startTime"]) <= stamps[0]
        assert stamps[-1] <= when(tool["endTime"])


def test_phoenix_framework_run_is_one_trace_with_one_tool_span_per_call(phoenix) -> None:
    """Pydantic AI with its instrumentation on: every span of the run in one trace; each
    call is one TOOL span (Pydantic AI's ``execute_tool``) with toolledger's guard under it."""
    spans = trace_of(phoenix, "invoke_agent pydantic-mailer")
    framework = [s for s in phoenix["spans"] if s["name"] == "invoke_agent agent"]
    assert len(spans) == FRAMEWORK_SPANS
    assert {s["context"]["traceId"] for s in framework} == {spans[0]["context"]["traceId"]}
    ids = {s["context"]["spanId"]: s for s in spans}
    tools = [s for s in spans if s["spanKind"] == "tool"]
    guards = [s for s in spans if s["name"] == "guard_tool send_email"]
    assert sorted(s["name"] for s in tools) == ["execute_tool send_email"] * 3
    assert [s["spanKind"] for s in guards] == ["guardrail"] * 3
    for guard in guards:
        host = ids[guard["parentId"]]
        assert host["spanKind"] == "tool"
        assert attr(guard, "toolledger.tool.call_id") == attr(host, "gen_ai.tool.call.id")
        assert attr(guard, "toolledger.checkpoint.namespace") == "default"
    executed = sorted(
        attr(g, "toolledger.tool.call_id") for g in guards if g["statusCode"] != "ERROR"
    )
    assert executed == ["call_1", "call_2"]
    for guard in guards:
        if guard["statusCode"] != "ERROR":
            assert attr(guard, "toolledger.tool.outcome") == "executed"
            assert attr(guard, "toolledger.checkpoint.status") == "completed"


def test_phoenix_framework_refused_call_is_an_error_span_with_its_code(phoenix) -> None:
    """The model reused ``call_1`` for another input: refused, visible as an error."""
    spans = trace_of(phoenix, "invoke_agent pydantic-mailer")
    (refused,) = [
        s for s in spans if s["name"] == "guard_tool send_email" and s["statusCode"] == "ERROR"
    ]
    assert attr(refused, "error.type") == "BINDING_CONFLICT"
    assert attr(refused, "toolledger.tool.outcome") == "refused"
    assert attr(refused, "toolledger.tool.call_id") == "call_1"
    assert "BINDING_CONFLICT" in refused["statusMessage"]
