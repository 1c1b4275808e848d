"""Telemetry fixtures: a fresh TracerProvider + in-memory exporter per test, clean defaults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolledger.telemetry import _policy

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.fixture(autouse=True)
def _clean_telemetry_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no configure() defaults and no OTEL_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    _policy.DEFAULTS.reset()
    yield
    _policy.DEFAULTS.reset()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def otel_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test install OpenTelemetry's global provider; restored afterwards."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
