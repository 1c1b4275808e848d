"""Telemetry never breaks a tool call: raising processors, raising/blocking/down exporters."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import toolledger
from toolledger.telemetry import hooks_for

from .conftest import CLAIM


def lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"order": input["order"], "status": "shipped"}


def guarded_run(tmp_path, provider: Any) -> tuple[Any, list[Any]]:
    """A run with a step, a new guarded call and its replay; returns the run and outcomes."""
    tool = toolledger.tool("lookup_order", revision="1", execute=lookup)
    outcomes = []
    with toolledger.run(goal="g", agent="a", db=tmp_path / "t.db", tracer_provider=provider) as run:
        with run.step("s", justification="j") as step:
            step.record_output(n=1)
        for _ in range(2):
            outcomes.append(run.call(tool, call_id="c1", input={"order": 1}))
        run.approval("ok", granted=True, by="user")
    return run, outcomes


def assert_call_succeeded(run: Any, outcomes: list[Any]) -> None:
    assert [o.payload for o in outcomes] == [{"order": 1, "status": "shipped"}] * 2
    assert [o.replayed for o in outcomes] == [False, True]
    assert run.status == "completed"
    assert run.errors == []


class RaisingProcessor(SpanProcessor):
    def __init__(self, where: str) -> None:
        self.where = where
        self.calls = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.calls += 1
        if self.where == "start":
            raise RuntimeError("processor on_start down")

    def on_end(self, span: ReadableSpan) -> None:
        self.calls += 1
        if self.where == "end":
            raise RuntimeError("processor on_end down")


class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector exploded")


class BlockingExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(30)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


@pytest.mark.parametrize("where", ["start", "end"])
def test_raising_span_processor_costs_only_spans(tmp_path, where) -> None:
    tp = TracerProvider(shutdown_on_exit=False)
    processor = RaisingProcessor(where)
    tp.add_span_processor(processor)
    run, outcomes = guarded_run(tmp_path, tp)
    assert_call_succeeded(run, outcomes)
    assert processor.calls > 0  # the processor really was called, and raised


def test_raising_span_processor_hooks_never_raise(provider) -> None:
    provider.add_span_processor(RaisingProcessor("start"))
    provider.add_span_processor(RaisingProcessor("end"))
    hooks = hooks_for(tracer_provider=provider)
    run = hooks.run_started({"run_id": "r"})
    span = hooks.event_started({"event_id": "e", "kind": "tool_call", "name": "t"}, run)
    with span.activate():
        span.transition(**CLAIM)
        span.update({"replayed": False})
    span.end({"kind": "tool_call"}, ValueError("x"))
    run.end({})  # reaching here without an exception is the assertion
    assert span.span_id is None or len(span.span_id) == 16


@pytest.mark.parametrize("processor", [SimpleSpanProcessor, BatchSpanProcessor])
def test_raising_exporter_costs_only_spans(tmp_path, processor) -> None:
    exporter = RaisingExporter()
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(processor(exporter))
    run, outcomes = guarded_run(tmp_path, tp)
    tp.force_flush()
    assert_call_succeeded(run, outcomes)
    assert exporter.calls >= 1
    tp.shutdown()


def test_blocking_exporter_never_blocks_the_call(tmp_path) -> None:
    exporter = BlockingExporter()
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=1))
    handle = toolledger.configure(tracer_provider=tp)
    try:
        guarded_run(tmp_path, None)  # the configured provider
        assert exporter.entered.wait(10)  # the exporter is now stuck inside export()
        started = time.monotonic()
        run, outcomes = guarded_run(tmp_path / "again", None)
        elapsed = time.monotonic() - started
        flush_started = time.monotonic()
        flushed = handle.force_flush(timeout_millis=300)  # the SDK's flush would hang here
        flush_elapsed = time.monotonic() - flush_started
    finally:
        handle.shutdown(timeout=0.3)
        exporter.release.set()
        tp.shutdown()
    assert_call_succeeded(run, outcomes)
    assert elapsed < 5
    assert flushed is False
    assert flush_elapsed < 3


def test_down_endpoint_costs_only_spans_and_shutdown_is_bounded(
    tmp_path, monkeypatch, otel_globals
) -> None:
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    handle = toolledger.configure(endpoint=f"http://127.0.0.1:{port}")
    run, outcomes = guarded_run(tmp_path, None)
    started = time.monotonic()
    handle.shutdown(timeout=0.5)
    assert time.monotonic() - started < 3
    assert_call_succeeded(run, outcomes)


def test_blackhole_endpoint_shutdown_is_bounded(tmp_path, monkeypatch, otel_globals) -> None:
    """An endpoint that accepts connections and never answers: shutdown still returns."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)  # never accept(): requests hang until the exporter's timeout
        handle = toolledger.configure(endpoint=f"http://127.0.0.1:{server.getsockname()[1]}")
        run, outcomes = guarded_run(tmp_path, None)
        started = time.monotonic()
        handle.shutdown(timeout=0.5)
        elapsed = time.monotonic() - started
    assert elapsed < 3
    assert_call_succeeded(run, outcomes)


class RaisingSampler:
    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sampler down")

    def get_description(self) -> str:
        return "raising"


def test_raising_sampler_costs_only_spans(tmp_path) -> None:
    tp = TracerProvider(sampler=RaisingSampler(), shutdown_on_exit=False)  # type: ignore[arg-type]
    run, outcomes = guarded_run(tmp_path, tp)
    assert_call_succeeded(run, outcomes)


def test_provider_whose_get_tracer_raises_gives_noop_hooks() -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no tracer for you")

    from toolledger.telemetry import NOOP_TELEMETRY

    assert hooks_for(tracer_provider=Broken()) is NOOP_TELEMETRY
