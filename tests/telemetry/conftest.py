"""Telemetry fixtures: clean defaults per test (``exporter``, ``provider``: tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: ``span.transition(**CLAIM)``: the winning ready -> executing claim most span tests record.
CLAIM: dict[str, Any] = {
    "name": "claim_execution",
    "status_from": "ready",
    "status_to": "executing",
    "expected_revision": 0,
    "revision": 1,
    "won": True,
}


@pytest.fixture(autouse=True)
def _clean_telemetry_env(clean_telemetry_env: None) -> None:
    """Each test starts with no configure() defaults and no OTEL_* variables."""


@pytest.fixture
def otel_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test install OpenTelemetry's global provider; restored afterwards."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
