"""Metrics through the OpenTelemetry Metrics API: model calls, tool outcomes, the reconcile queue.

Rules of this module:

- API only (``opentelemetry.metrics``); ``configure()`` installs the SDK meter provider.
  Without one, every instrument is a no-op.
- Instruments are created once per meter provider; recording happens on the telemetry
  thread, with the span's ending (never on the thread of a tool call).
- Metric attributes are structural only (tool and model names, outcome, provider, server,
  ``error.type``): never content or intent, whatever the capture policy.
- The reconcile-queue gauge reads at most ``limit`` checkpoints per status per collection
  (one bounded ``Store.list`` each): a value equal to ``limit`` means "at least".
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics._internal import _ProxyMeterProvider

from .._version import __version__
from ..store import open_store
from . import attributes as a
from ._policy import DEFAULTS
from ._report import report
from .attributes import SCHEMA_URL

__all__ = [
    "METRICS",
    "RECONCILE_STATUSES",
    "Instruments",
    "ReconcileQueueGauge",
    "instruments_for",
    "observe_reconcile_queue",
]

#: Name, instrument type, unit and description of every metric toolledger records.
METRICS: Mapping[str, tuple[str, str, str]] = {
    "gen_ai.client.operation.duration": ("histogram", "s", "Duration of a model call."),
    "gen_ai.client.token.usage": ("histogram", "{token}", "Tokens used by a model call."),
    "toolledger.tool.calls": ("counter", "{call}", "Guarded tool calls by outcome."),
    "toolledger.tool.duration": ("histogram", "s", "Duration of a guarded tool call."),
    "toolledger.executions.prevented": (
        "counter",
        "{execution}",
        "Tool executions a naive retry would have run again (replays, recoveries).",
    ),
    "toolledger.reconcile.queue": (
        "gauge",
        "{checkpoint}",
        "Checkpoints waiting for reconciliation, by status.",
    ),
}
#: Statuses the reconcile-queue gauge reports (``completed``: stored, not yet delivered).
RECONCILE_STATUSES = ("executing", "uncertain", "completed", "delivering")
_TOOL_OUTCOME_METRIC = a.TL_TOOL_OUTCOME
_lock = threading.Lock()
_cache: dict[int, Instruments] = {}


class Instruments:
    """The instruments of one meter provider."""

    __slots__ = ("chat_duration", "prevented", "token_usage", "tool_calls", "tool_duration")

    def __init__(self, meter: metrics.Meter) -> None:
        def histogram(name: str) -> metrics.Histogram:
            _, unit, description = METRICS[name]
            return meter.create_histogram(name, unit=unit, description=description)

        def counter(name: str) -> metrics.Counter:
            _, unit, description = METRICS[name]
            return meter.create_counter(name, unit=unit, description=description)

        self.chat_duration = histogram("gen_ai.client.operation.duration")
        self.token_usage = histogram("gen_ai.client.token.usage")
        self.tool_calls = counter("toolledger.tool.calls")
        self.tool_duration = histogram("toolledger.tool.duration")
        self.prevented = counter("toolledger.executions.prevented")

    def record_tool(self, attrs: Mapping[str, Any], seconds: float | None) -> None:
        """Count one tool call (and its duration) by outcome; count prevented executions."""
        outcome = attrs.get(a.TL_TOOL_OUTCOME)
        tool = attrs.get(a.GEN_AI_TOOL_NAME, attrs.get(a.TL_TOOL_NAME))
        labels = {a.GEN_AI_TOOL_NAME: tool, a.TL_TOOL_OUTCOME: outcome}
        if a.ERROR_TYPE in attrs:
            labels[a.ERROR_TYPE] = attrs[a.ERROR_TYPE]
        clean = {k: v for k, v in labels.items() if v is not None}
        self.tool_calls.add(1, clean)
        if seconds is not None:
            self.tool_duration.record(seconds, clean)
        if outcome in (a.OUTCOME_REPLAYED, a.OUTCOME_RECOVERED, a.OUTCOME_DEDUPLICATED):
            self.prevented.add(1, {a.GEN_AI_TOOL_NAME: tool, a.TL_TOOL_OUTCOME: outcome})

    def record_denied(self, tool: Any) -> None:
        """Count a call an approval denied (it never ran)."""
        labels = {a.TL_TOOL_OUTCOME: a.OUTCOME_DENIED}
        if tool is not None:
            labels[a.GEN_AI_TOOL_NAME] = tool
        self.tool_calls.add(1, labels)

    def record_chat(self, attrs: Mapping[str, Any], seconds: float | None) -> None:
        """Record a model call's duration and token usage (the conventions' client metrics)."""
        labels = {
            key: attrs[key]
            for key in (
                a.GEN_AI_OPERATION_NAME,
                a.GEN_AI_PROVIDER_NAME,
                a.GEN_AI_REQUEST_MODEL,
                a.GEN_AI_RESPONSE_MODEL,
                a.SERVER_ADDRESS,
                a.SERVER_PORT,
                a.ERROR_TYPE,
            )
            if attrs.get(key) is not None
        }
        if seconds is not None:
            self.chat_duration.record(seconds, labels)
        for kind, key in (
            ("input", a.GEN_AI_USAGE_INPUT_TOKENS),
            ("output", a.GEN_AI_USAGE_OUTPUT_TOKENS),
        ):
            count = attrs.get(key)
            if isinstance(count, int):
                self.token_usage.record(count, {**labels, a.GEN_AI_TOKEN_TYPE: kind})


def instruments_for(meter_provider: Any) -> Instruments | None:
    """Return the instruments of ``meter_provider`` (``None``: the global), or ``None``."""
    try:
        provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        if isinstance(provider, (metrics.NoOpMeterProvider, _ProxyMeterProvider)):
            return None  # nothing configured: no instruments, no cost
        key = id(provider)
        with _lock:
            found = _cache.get(key)
            if found is None:
                meter = provider.get_meter("toolledger", __version__, schema_url=SCHEMA_URL)
                found = _cache[key] = Instruments(meter)
        return found
    except Exception as exc:
        report("metrics", exc)
        return None


class ReconcileQueueGauge:
    """The observable gauge ``toolledger.reconcile.queue`` over one store."""

    def __init__(self, store: Any, meter: metrics.Meter, limit: int) -> None:
        self._store = store
        self._limit = limit
        _, unit, description = METRICS["toolledger.reconcile.queue"]
        self._gauge = meter.create_observable_gauge(
            "toolledger.reconcile.queue",
            callbacks=[self._observe],
            unit=unit,
            description=description,
        )

    def _observe(self, options: Any) -> Iterable[metrics.Observation]:
        out = []
        for status in RECONCILE_STATUSES:
            try:
                rows = self._store.list(status=status, limit=self._limit)
            except Exception as exc:  # a store that is down costs the reading, not the app
                report("reconcile queue gauge", exc)
                continue
            out.append(metrics.Observation(len(rows), {a.TL_CHECKPOINT_STATUS: status}))
        return out


def observe_reconcile_queue(
    db: Any, *, meter_provider: Any = None, limit: int = 1000
) -> ReconcileQueueGauge:
    """Report the reconcile queue of ``db`` as the gauge ``toolledger.reconcile.queue``.

    Each collection reads at most ``limit`` checkpoints per status (``executing``,
    ``uncertain``, ``completed`` but undelivered, ``delivering``), so its cost is bounded
    whatever the backlog; a value equal to ``limit`` means "at least ``limit``".

    Args:
        db: A path, URL or ``Store``; it stays open for the gauge's life.
        meter_provider: The ``MeterProvider`` (``None``: the one ``configure()`` set, else
            the global one).
        limit: Checkpoints read per status per collection.

    Returns:
        The gauge (keep a reference for as long as it should report).
    """
    provider = meter_provider or DEFAULTS.meter_provider or metrics.get_meter_provider()
    meter = provider.get_meter("toolledger", __version__, schema_url=SCHEMA_URL)
    return ReconcileQueueGauge(open_store(db), meter, int(limit))
