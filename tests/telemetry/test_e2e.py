"""End to end over a real connection: examples/otlp_demo.py and export-otlp to OTLP receivers.

A real OTLP receiver (HTTP/protobuf or gRPC, built from opentelemetry-proto and grpcio)
listens on 127.0.0.1; the demo runs in a subprocess with ``configure()`` pointed at it
through ``OTEL_EXPORTER_OTLP_ENDPOINT``; what arrived is decoded and checked: span names,
parent/child links, kinds and the exact attribute sets, with and without content capture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolledger.telemetry import attributes as a

from .otlp_receiver import Receiver, grpc_receiver, http_receiver

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "otlp_demo.py"
RECEIVERS = {"http/protobuf": http_receiver, "grpc": grpc_receiver}

RUN_KEYS = {
    a.GEN_AI_OPERATION_NAME,
    a.GEN_AI_AGENT_NAME,
    a.TL_RUN_ID,
    a.TL_INTENT_GOAL,
    a.TL_RUN_SUMMARY,
    a.TL_JOURNAL_HEAD_HASH,
    a.TL_JOURNAL_EVENT_COUNT,
}
STEP_KEYS = {a.TL_EVENT_ID, a.TL_INTENT_JUSTIFICATION, a.TL_INTENT_JUSTIFICATION_SOURCE}
STEP_CONTENT = {a.TL_STEP_INPUTS, a.TL_STEP_OUTPUTS}
TOOL_KEYS = {
    a.GEN_AI_OPERATION_NAME,
    a.GEN_AI_TOOL_NAME,
    a.GEN_AI_TOOL_CALL_ID,
    a.GEN_AI_TOOL_TYPE,
    a.GEN_AI_TOOL_DESCRIPTION,
    a.TL_EVENT_ID,
    a.TL_CHECKPOINT_NAMESPACE,
    a.TL_INTENT_JUSTIFICATION,
    a.TL_INTENT_JUSTIFICATION_SOURCE,
    a.TL_CHECKPOINT_STATUS,
    a.TL_CHECKPOINT_REVISION,
    a.TL_CHECKPOINT_ACTION,
    a.TL_TOOL_OUTCOME,
    a.GEN_AI_AGENT_NAME,
}
TOOL_CONTENT = {a.GEN_AI_TOOL_CALL_ARGUMENTS, a.GEN_AI_TOOL_CALL_RESULT}
#: A replayed call: no GenAI tool keys (not an execution), its facts under toolledger.*.
REPLAY_KEYS = (
    TOOL_KEYS
    - {
        a.GEN_AI_OPERATION_NAME,
        a.GEN_AI_TOOL_NAME,
        a.GEN_AI_TOOL_CALL_ID,
        a.GEN_AI_TOOL_TYPE,
        a.GEN_AI_TOOL_DESCRIPTION,
    }
) | {a.TL_TOOL_NAME, a.TL_TOOL_CALL_ID}
REPLAY_CONTENT = {a.TL_TOOL_ARGUMENTS, a.TL_TOOL_RESULT}
#: A won transition's event says what it made; its name says which transition.
TRANSITION_KEYS = {a.TL_CHECKPOINT_STATUS_TO, a.TL_CHECKPOINT_REVISION}
APPROVAL_KEYS = {
    a.TL_EVENT_ID,
    a.TL_TOOL_NAME,
    a.TL_APPROVAL_OUTCOME,
    a.TL_APPROVAL_BY,
    a.TL_APPROVAL_REASON,
}


def run_demo(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(DEMO), str(tmp_path / "demo.db")],
        # GenAI/toolledger keys only here (the OpenInference projection: test_backend_spans).
        env={**os.environ, "TOOLLEDGER_OPENINFERENCE": "false", **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``toolledger --db demo.db ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolledger.cli import main; main()",
            "--db",
            str(tmp_path / "demo.db"),
            *args,
        ],
        env={**os.environ, "TOOLLEDGER_OPENINFERENCE": "false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def export_otlp(tmp_path: Path, run_id: str, endpoint: str, protocol: str, *extra: str) -> str:
    proc = cli(
        tmp_path, "export-otlp", run_id, "--endpoint", endpoint, "--protocol", protocol, *extra
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        out.setdefault(s["name"], []).append(s)
    return out


def check_run(spans: list[dict[str, Any]], *, content: bool, guarded: bool, live: bool) -> None:
    """The demo's span tree, exact attribute sets included."""
    named = by_name(spans)
    expected = {"invoke_agent support-bot", "step repo_search", "approval email_findings"}
    if guarded:
        expected |= {"execute_tool lookup_order", "replay_tool lookup_order"}
    assert set(named) == expected
    assert len(spans) == len(expected)
    (run,) = named["invoke_agent support-bot"]
    assert {s["kind"] for s in spans} == {"INTERNAL"}  # (no model call in this demo)
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}
    assert {s["scope"] for s in spans} == {"toolledger"}
    assert {s["schema_url"] for s in spans} == {a.SCHEMA_URL}
    assert run["parent_span_id"] is None
    assert set(run["attributes"]) == RUN_KEYS  # no conversation id: none was given

    (step,) = named["step repo_search"]
    assert step["parent_span_id"] == run["span_id"]
    assert set(step["attributes"]) == STEP_KEYS | (STEP_CONTENT if content else set())

    (approval,) = named["approval email_findings"]
    assert approval["parent_span_id"] == run["span_id"]
    assert set(approval["attributes"]) == APPROVAL_KEYS
    assert approval["attributes"][a.TL_APPROVAL_OUTCOME] == "deny"

    if not guarded:
        return
    (first,) = named["execute_tool lookup_order"]
    (second,) = named["replay_tool lookup_order"]
    tool_keys = TOOL_KEYS if live else TOOL_KEYS - {a.GEN_AI_TOOL_DESCRIPTION}
    assert first["parent_span_id"] == second["parent_span_id"] == run["span_id"]
    assert set(first["attributes"]) == tool_keys | (TOOL_CONTENT if content else set())
    assert set(second["attributes"]) == REPLAY_KEYS | (REPLAY_CONTENT if content else set())
    assert first["attributes"][a.GEN_AI_TOOL_CALL_ID] == "call-42"
    assert second["attributes"][a.TL_TOOL_CALL_ID] == "call-42"
    for tool in (first, second):
        assert tool["attributes"][a.TL_CHECKPOINT_STATUS] == "completed"
        assert tool["attributes"][a.TL_CHECKPOINT_REVISION] == 2
    assert first["attributes"][a.TL_TOOL_OUTCOME] == "executed"
    assert first["attributes"][a.TL_CHECKPOINT_ACTION] == "execute"
    # The second call is served from the checkpoint: it says so, and has no claim.
    assert second["attributes"][a.TL_TOOL_OUTCOME] == "replayed"
    assert second["attributes"][a.TL_CHECKPOINT_ACTION] == "deliver"
    assert second["events"] == []
    if content:
        assert json.loads(first["attributes"][a.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"order": 42}
        assert json.loads(second["attributes"][a.TL_TOOL_RESULT]) == {
            "order": 42,
            "status": "shipped",
        }
    names = ["create_checkpoint", "claim_execution", "complete_execution"]
    assert [e["name"] for e in first["events"]] == [f"checkpoint {n}" for n in names]
    times = [e["time"] for e in first["events"]]
    assert first["start"] <= times[0] < times[1] < times[2] <= first["end"]
    made = [("ready", 0), ("executing", 1), ("completed", 2)]
    for (status, revision), event in zip(made, first["events"], strict=True):
        assert set(event["attributes"]) == TRANSITION_KEYS
        assert event["attributes"][a.TL_CHECKPOINT_STATUS_TO] == status
        assert event["attributes"][a.TL_CHECKPOINT_REVISION] == revision


def _receive(receiver: Receiver, count: int) -> list[dict[str, Any]]:
    spans = receiver.wait_for(count, timeout=15)
    assert len(spans) >= count
    return spans


@pytest.mark.parametrize("protocol", list(RECEIVERS))
@pytest.mark.parametrize("content", [True, False], ids=["with_content", "no_content"])
def test_otlp_demo_live_spans_arrive_exact(tmp_path, protocol, content) -> None:
    with RECEIVERS[protocol]() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true" if content else "false",
        }
        out = run_demo(tmp_path, env)
        spans = receiver.spans()  # the demo flushed on shutdown before exiting
    check_run(spans, content=content, guarded=out["guarded"], live=True)
    run = by_name(spans)["invoke_agent support-bot"][0]
    assert run["trace_id"] == out["trace_id"]
    assert run["resource"]["service.name"] == "toolledger-otlp-demo"


@pytest.mark.parametrize("protocol", list(RECEIVERS))
def test_export_otlp_resends_stored_run_with_live_ids(tmp_path, protocol) -> None:
    with http_receiver() as live_receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": live_receiver.endpoint,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        }
        out = run_demo(tmp_path, env)
        live = live_receiver.spans()
    with RECEIVERS[protocol]() as receiver:
        export_otlp(tmp_path, out["run_id"], receiver.endpoint, protocol, "--capture-content")
        first = _receive(receiver, len(live))
        export_otlp(tmp_path, out["run_id"], receiver.endpoint, protocol, "--no-capture-content")
        both = _receive(receiver, 2 * len(live))
    second = both[len(first) :]
    check_run(first, content=True, guarded=out["guarded"], live=False)
    check_run(second, content=False, guarded=out["guarded"], live=False)
    # Sending twice gives the same ids, and they are the ids seen live.
    ids = {(s["name"], s["trace_id"], s["span_id"], s["parent_span_id"]) for s in first}
    assert ids == {(s["name"], s["trace_id"], s["span_id"], s["parent_span_id"]) for s in second}
    # Exactly the spans seen live, with the ids seen live: a backend keeps one copy of each.
    assert {(s["name"], s["span_id"], s["parent_span_id"]) for s in live} == {
        (n, sid, parent) for n, _, sid, parent in ids
    }
    # Original timestamps and transition events, from the database.
    live_times = {s["span_id"]: (s["start"], s["end"], s["events"]) for s in live}
    assert {s["span_id"]: (s["start"], s["end"], s["events"]) for s in first} == live_times


def test_export_otlp_unknown_run_exits_2(tmp_path) -> None:
    run_demo(tmp_path, {})  # no endpoint: nothing leaves the machine
    proc = cli(tmp_path, "export-otlp", "no-such-run", "--endpoint", "http://127.0.0.1:9")
    assert proc.returncode == 2
    assert "no-such-run" in proc.stderr
    assert proc.stdout == ""


def test_export_otlp_endpoint_down_exits_1(tmp_path, monkeypatch) -> None:
    import socket

    out = run_demo(tmp_path, {})
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    proc = cli(tmp_path, "export-otlp", out["run_id"], "--endpoint", f"http://127.0.0.1:{port}")
    assert proc.returncode == 1
    assert "did not accept" in proc.stderr
    assert proc.stdout == ""
