"""Shared fixtures. Area-specific fixtures live in each test folder's conftest.

The span fixtures (``clean_telemetry_env``, ``exporter``, ``provider``) live here because
telemetry, integration and approval tests all assert exact spans the same way; the
OpenTelemetry SDK is imported only by the tests that use them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def clean_telemetry_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``configure()`` defaults and no ``OTEL_*`` variables during the test."""
    from ._internals import TELEMETRY_DEFAULTS

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    TELEMETRY_DEFAULTS.reset()
    yield
    TELEMETRY_DEFAULTS.reset()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """An in-memory span exporter, fresh per test."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A fresh ``TracerProvider`` exporting every span to ``exporter`` as it ends."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()
