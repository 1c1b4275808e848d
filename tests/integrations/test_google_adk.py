"""``ToolledgerPlugin`` / ``GuardCallbacks``: Google ADK tool calls through the guard, keyed by
the function call id.

The ADK runs in its own virtualenv (see ``tests/_adk.py``): ``_adk_child.py`` runs every
scenario there once (the real ``Runner``, ``LlmAgent``, ``FunctionTool``, plugins and tool
confirmation, with a scripted ``BaseLlm``) and prints what it saw; each test asserts on
its scenario.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .._adk import adk_env, adk_python_or_skip

CHILD = Path(__file__).with_name("_adk_child.py")
ANA = {"sent_to": "ana@example.com"}


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = adk_python_or_skip()
    folder = tmp_path_factory.mktemp("adk")
    proc = subprocess.run(
        [python, str(CHILD), str(folder)],
        env=adk_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def scenario(seen: dict[str, Any], name: str) -> dict[str, Any]:
    out = seen[name]
    assert "crashed" not in out, out.get("crashed")
    return out


def test_tool_runs_once_and_the_same_call_replays_its_result(seen: dict[str, Any]) -> None:
    """Two invocations whose model issues the same id: one email, the same response twice."""
    out = scenario(seen, "replay")
    assert out["sent"] == ["ana@example.com"]
    assert out["responses"] == [{"fc_1": ANA}] * 2
    assert out["stored"] == ANA
    assert out["conversation"] == out["first_session"]  # the session's id, the app named none


def test_parallel_calls_each_keyed_by_their_own_id(seen: dict[str, Any]) -> None:
    """Two calls in one model turn run once each, each answered under its own id."""
    out = scenario(seen, "parallel")
    assert out["sent"] == ["ana@example.com", "bob@example.com"]
    assert out["responses"] == {"fc_1": ANA, "fc_2": {"sent_to": "bob@example.com"}}


def test_binding_conflict_fails_the_invocation_and_nothing_runs(seen: dict[str, Any]) -> None:
    """The id reused for another input: BINDING_CONFLICT out of the runner (ADK wraps a
    plugin's error in its RuntimeError), the tool not run."""
    out = scenario(seen, "conflict")
    assert out["sent"] == ["ana@example.com"]
    assert out["error"]["cause"] == "BindingConflictError"
    assert out["error"]["text"].startswith("BINDING_CONFLICT")


def test_models_justification_is_journaled(seen: dict[str, Any]) -> None:
    """``justification`` in the arguments: the model's text is the event's, not the binding's."""
    out = scenario(seen, "justification")
    assert out == {"justification": "Ana asked to be told.", "inputs": {"to": "ana@example.com"}}


def test_tool_error_fails_the_invocation_with_the_claim_released(seen: dict[str, Any]) -> None:
    """``on_error="raise"``: the tool's exception ends the invocation; the call may run again."""
    out = scenario(seen, "tool_error")
    assert out["error"]["cause"] == "ValueError"
    assert out["status"] == "ready"


def test_on_error_result_stores_the_tools_error(seen: dict[str, Any]) -> None:
    """``on_error="result"``: the error is the stored response, the same on a replay."""
    out = scenario(seen, "error_result")
    assert out["sent"] == ["ana@example.com"]
    first, second = out["responses"]
    assert first == second
    assert "mailbox full" in json.dumps(first)


def test_gate_with_an_approver_denies_and_the_model_is_told(seen: dict[str, Any]) -> None:
    """A gate whose approver denies: the response names who and why; nothing runs."""
    out = scenario(seen, "approver_denies")
    assert out == {"sent": [], "responses": {"fc_1": {"error": "denied by ops: not today"}}}


def test_gate_with_a_pending_approver_is_awaiting(seen: dict[str, Any]) -> None:
    """A gate whose approver answers pending: nothing runs, the model is told it waits."""
    out = scenario(seen, "approver_pending")
    assert out["sent"] == []
    assert out["responses"] == {"fc_1": {"error": "awaiting approval; not executed yet"}}


@pytest.mark.parametrize(
    ("name", "sent", "response", "decision"),
    [
        ("person_approves", ["ana@example.com"], ANA, ["approved", "ana"]),
        ("person_denies", [], {"error": "denied by ana: checked"}, ["denied", "ana"]),
        ("adk_confirms", ["ana@example.com"], ANA, ["approved", "google-adk"]),
    ],
)
def test_gated_call_pauses_with_adk_confirmation_then_obeys_the_decision(
    seen: dict[str, Any], name: str, sent: list[str], response: Any, decision: list[str]
) -> None:
    """A toolledger gate without approver: ADK's own pause (a confirmation request) and a
    pending toolledger request; decided in toolledger (which wins over ADK's answer) or
    confirmed in ADK, the resumed call runs once or is refused; answering again does
    nothing."""
    out = scenario(seen, name)
    first = out["first"]
    assert first["responses"] == {"fc_1": {"error": "awaiting approval; not executed yet"}}
    (confirmation,) = first["confirmations"]
    assert confirmation["args"]["originalFunctionCall"]["id"] == "fc_1"
    assert out["pending"] == "pending"
    assert out["sent_before"] == []
    assert out["after"]["responses"] == {"fc_1": response}
    assert out["again"] == {}
    assert out["sent"] == sent
    assert out["decision"] == decision


def test_adk_require_confirmation_asks_first_then_runs_once(seen: dict[str, Any]) -> None:
    """A tool with ADK's ``require_confirmation``: ADK asks (nothing claimed); confirmed, it
    runs once, recorded as approved by google-adk."""
    out = scenario(seen, "adk_confirmation_tool")
    assert out["confirmations"] == 1
    assert out["status_before"] is None
    assert out["responses"] == [{"fc_1": ANA}, {}]
    assert out["sent"] == ["ana@example.com"]
    assert out["decision"] == ["approved", "google-adk"]


def test_replanned_call_with_an_effect_key_returns_the_first_result(seen: dict[str, Any]) -> None:
    """A new function call id for the same action: deduplicated with an effect key."""
    out = scenario(seen, "effect_key")
    assert out["sent"] == ["ana@example.com"]
    assert out["responses"] == [{"fc_1": ANA}, {"fc_2": ANA}]


def test_agent_callbacks_guard_like_the_plugin(seen: dict[str, Any]) -> None:
    """``GuardCallbacks`` on one agent: once per id, the same response on a replay."""
    out = scenario(seen, "agent_callbacks")
    assert out["sent"] == ["ana@example.com"]
    assert out["responses"] == [{"fc_1": ANA}] * 2


def test_plugin_without_a_run_uses_the_active_one(seen: dict[str, Any]) -> None:
    """``ToolledgerPlugin()``: refused outside a run, guarded inside one."""
    out = scenario(seen, "no_run")
    assert out["outside"]["cause"] == "InvalidArgumentError"
    assert "no toolledger run is active" in out["outside"]["text"]
    assert out["inside"] == {"fc_1": ANA}
    assert out["stored"] == "completed"


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without google-adk, importing the adapter raises an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "google.adk", None)
    monkeypatch.setitem(sys.modules, "google.adk.plugins", None)
    monkeypatch.setitem(sys.modules, "google.adk.plugins.base_plugin", None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.google_adk", raising=False)
    with pytest.raises(ImportError, match=r"toolledger\[google-adk\]"):
        importlib.import_module("toolledger.integrations.google_adk")


def test_adk_tracing_one_trace_and_a_guard_under_each_calls_tool_span(
    seen: dict[str, Any],
) -> None:
    """ADK's own tracing on, two calls at once, the turn twice: one trace; ADK's
    ``execute_tool`` span per call is the tool span, toolledger's ``guard_tool`` its child for
    the same call id (never a second ``execute_tool``); a replayed call's span is
    ``replay_tool``."""
    out = scenario(seen, "spans")
    assert out["sent"] == ["ana@example.com", "bob@example.com"]
    spans = out["spans"]
    assert len({s["trace"] for s in spans}) == 1
    by_id = {s["id"]: s for s in spans}
    ours = [s for s in spans if s["scope"] == "toolledger"]
    assert sorted({s["name"] for s in ours}) == ["guard_tool send_email", "invoke_agent mailer"]
    guards = [s for s in ours if s["name"] == "guard_tool send_email"]
    outcomes: dict[str, list[str]] = {}
    for guard in guards:
        host = by_id[guard["parent"]]
        call_id = guard["attributes"]["toolledger.tool.call_id"]
        assert host["scope"] == "gcp.vertex.agent"
        assert host["attributes"]["gen_ai.tool.call.id"] == call_id
        outcome = guard["attributes"]["toolledger.tool.outcome"]
        kind = "replay_tool" if outcome == "replayed" else "execute_tool"
        assert host["name"] == f"{kind} send_email"
        assert "gen_ai.operation.name" not in guard["attributes"]
        outcomes.setdefault(call_id, []).append(outcome)
    assert outcomes == {"fc_1": ["executed", "replayed"], "fc_2": ["executed", "replayed"]}
    per_call = [s for s in spans if s["attributes"].get("gen_ai.tool.call.id") in ("fc_1", "fc_2")]
    assert len(per_call) == 4  # one tool span per call per turn (ADK also adds a "(merged)")
