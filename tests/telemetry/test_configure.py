"""configure(): standard OTEL_* variables, no-endpoint default, disabled SDK, API-only install."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import trace

import toolledger
from toolledger.errors import InvalidArgumentError
from toolledger.telemetry import NOOP_TELEMETRY, OTelTelemetry, hooks_for

from .._internals import TELEMETRY_DEFAULTS, content_from_env, resolve_endpoint
from .otlp_receiver import http_receiver

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("true", True),
        ("TRUE", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("false", False),
        ("NO_CONTENT", False),
        ("EVENT_ONLY", False),
        ("", False),
    ],
)
def test_capture_env_values(monkeypatch, value, on) -> None:
    monkeypatch.setenv(CAPTURE, value)
    assert content_from_env() is on


def test_capture_env_invalid_warns_and_means_off(monkeypatch, caplog) -> None:
    monkeypatch.setenv(CAPTURE, "everything-please")
    with caplog.at_level(logging.WARNING, logger="toolledger.telemetry"):
        assert content_from_env() is False
    assert any("everything-please" in r.getMessage() for r in caplog.records)


def test_capture_env_unset_is_off() -> None:
    assert content_from_env() is False


def test_resolve_endpoint_env_and_protocols(monkeypatch) -> None:
    assert resolve_endpoint(None, None) == (None, "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert resolve_endpoint(None, None) == ("http://collector:4318/v1/traces", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert resolve_endpoint(None, None) == ("http://collector:4318/", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom")
    assert resolve_endpoint(None, "http/protobuf") == ("http://t:1/custom", "http/protobuf")
    assert resolve_endpoint("http://x:4318", "http/protobuf") == (
        "http://x:4318/v1/traces",
        "http/protobuf",
    )


def test_configure_unknown_protocol_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        toolledger.configure(protocol="carrier-pigeon")
    assert info.value.code == "INVALID_ARGUMENT"


def test_configure_sdk_disabled_records_nothing(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    handle = toolledger.configure(endpoint="http://127.0.0.1:9")
    assert handle.enabled is False
    assert hooks_for() is NOOP_TELEMETRY
    handle.shutdown()


def test_configure_without_endpoint_records_ids_but_exports_nothing(tmp_path, otel_globals) -> None:
    handle = toolledger.configure()
    try:
        assert handle.endpoint is None
        assert isinstance(hooks_for(), OTelTelemetry)
        assert trace.get_tracer_provider() is handle.tracer_provider
        with toolledger.run(goal="g", db=tmp_path / "t.db") as run, run.step("s"):
            pass
        assert run.span.trace_id is not None
        assert not handle.tracer_provider._active_span_processor._span_processors
    finally:
        handle.shutdown()
    # shutdown forgets the defaults; the global provider (set once) stays the SDK's
    assert TELEMETRY_DEFAULTS.tracer_provider is None


def test_configure_honours_headers_service_name_and_content(
    tmp_path, monkeypatch, otel_globals
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret,x-tenant=acme")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "checkout-agent")
    monkeypatch.setenv(CAPTURE, "SPAN_ONLY")
    with http_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        handle = toolledger.configure()
        with toolledger.run(goal="g", agent="bot", db=tmp_path / "t.db") as run, run.step("s", q=1):
            pass
        assert handle.force_flush(10_000) is True
        spans = receiver.wait_for(2)
        handle.shutdown()
    assert {s["name"] for s in spans} == {"invoke_agent bot", "step s"}
    assert receiver.headers[0]["x-api-key"] == "s3cret"
    assert receiver.headers[0]["x-tenant"] == "acme"
    assert spans[0]["resource"]["service.name"] == "checkout-agent"
    step = next(s for s in spans if s["name"] == "step s")
    assert json.loads(step["attributes"]["toolledger.step.inputs"]) == {"q": 1}
    root = next(s for s in spans if s["name"] == "invoke_agent bot")
    assert root["attributes"]["toolledger.run.id"] == run.run_id


API_ONLY = textwrap.dedent(
    """
    import importlib.abc, json, sys, time

    class NoSDK(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
                raise ModuleNotFoundError(f"No module named {name!r} (API-only install)")
            return None

    sys.meta_path.insert(0, NoSDK())
    import toolledger
    from toolledger.telemetry import NOOP_TELEMETRY, hooks_for

    handle = toolledger.configure(endpoint="http://127.0.0.1:9")
    tool = toolledger.tool("t", revision="1", execute=lambda i, c: {"ok": i["n"]})
    with toolledger.run(goal="g", agent="a", db=sys.argv[1]) as run:
        with run.step("s", justification="j") as step:
            step.record_output(n=1)
        out = run.call(tool, call_id="c1", input={"n": 1})
        again = run.call(tool, call_id="c1", input={"n": 1})
        run.approval("ap", granted=True, by="user")
    handle.shutdown()
    hooks = hooks_for()
    span = hooks.run_started({"run_id": "x"})
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        ev = hooks.event_started({"event_id": "e", "kind": "tool_call", "name": "t"}, span)
        ev.transition(name="claim_execution", status_from="ready", status_to="executing",
                      expected_revision=0, revision=1, won=True)
        ev.update({"replayed": False})
        ev.end({"kind": "tool_call"})
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    print(json.dumps({
        "payload": out.payload, "replayed": again.replayed, "status": run.status,
        "errors": len(run.errors), "enabled": handle.enabled,
        "noop": hooks is NOOP_TELEMETRY, "trace_id": run.span.trace_id,
        "sdk_loaded": any(m.startswith("opentelemetry.sdk") for m in sys.modules),
        "per_call_us": per_call_us,
    }))
    """
)


def test_api_only_install_works_and_records_no_spans(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", API_ONLY, str(tmp_path / "t.db")],
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["payload"] == {"ok": 1}
    assert out["replayed"] is True
    assert out["status"] == "completed"
    assert out["errors"] == 0
    assert out["enabled"] is False
    assert out["noop"] is True
    assert out["trace_id"] is None
    assert out["sdk_loaded"] is False
    assert out["per_call_us"] > 0  # measured in bench/bench_telemetry.py, not asserted here


def test_public_api_exports_configure_and_reexport() -> None:
    assert toolledger.configure is toolledger.telemetry.configure
    assert toolledger.reexport is toolledger.export.reexport
    assert {"configure", "reexport"} <= set(toolledger.__all__)


def test_examples_dir_has_demo() -> None:
    assert (Path(__file__).resolve().parents[2] / "examples" / "otlp_demo.py").is_file()
