"""Metrics through the OpenTelemetry Metrics API: model calls, tool outcomes, the reconcile queue.

Rules of this module:

- API only (``opentelemetry.metrics``); ``configure()`` installs the SDK meter provider.
  Without one, every instrument is a no-op.
- Instruments are created once per meter provider; recording happens on the telemetry
  thread, with the span's ending (never on the thread of a tool call). Counts are
  toolledger's own tallies behind observable counters, read at each collection.
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
#: Attribute sets of tool calls kept built (tool x outcome x error type) at most.
_MAX_LABEL_SETS = 1024
_lock = threading.Lock()
_cache: dict[int, Instruments] = {}


class _Tally:
    """Counts kept by toolledger and read by the SDK at each collection (an observable
    counter): adding one is a dict update, not the SDK's per-measurement work."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[tuple[str, Any], ...], int] = {}

    def add(self, labels: tuple[tuple[str, Any], ...]) -> None:
        with self._lock:
            self._counts[labels] = self._counts.get(labels, 0) + 1

    def observe(self, options: Any) -> Iterable[metrics.Observation]:
        with self._lock:
            counts = list(self._counts.items())
        return [metrics.Observation(n, dict(labels)) for labels, n in counts]


class Instruments:
    """The instruments of one meter provider.

    Tool calls and prevented executions are observable counters over toolledger's own
    tallies (exported exactly like counters); a tool call's attribute set is built once per
    (tool, outcome, error type) and reused.
    """

    __slots__ = (
        "_calls",
        "_labels",
        "_prevented",
        "chat_duration",
        "prevented",
        "token_usage",
        "tool_calls",
        "tool_duration",
    )

    def __init__(self, meter: metrics.Meter) -> None:
        def histogram(name: str) -> metrics.Histogram:
            _, unit, description = METRICS[name]
            return meter.create_histogram(name, unit=unit, description=description)

        def counter(name: str, tally: _Tally) -> metrics.ObservableCounter:
            _, unit, description = METRICS[name]
            return meter.create_observable_counter(
                name, callbacks=[tally.observe], unit=unit, description=description
            )

        self._calls = _Tally()
        self._prevented = _Tally()
        self._labels: dict[
            tuple[Any, Any, Any], tuple[tuple[tuple[str, Any], ...], dict[str, Any]]
        ] = {}
        self.chat_duration = histogram("gen_ai.client.operation.duration")
        self.token_usage = histogram("gen_ai.client.token.usage")
        self.tool_calls = counter("toolledger.tool.calls", self._calls)
        self.tool_duration = histogram("toolledger.tool.duration")
        self.prevented = counter("toolledger.executions.prevented", self._prevented)

    def _tool_labels(
        self, tool: Any, outcome: Any, error: Any
    ) -> tuple[tuple[tuple[str, Any], ...], dict[str, Any]]:
        key = (tool, outcome, error)
        found = self._labels.get(key)
        if found is None:
            pairs = tuple(
                (k, v)
                for k, v in (
                    (a.GEN_AI_TOOL_NAME, tool),
                    (a.TL_TOOL_OUTCOME, outcome),
                    (a.ERROR_TYPE, error),
                )
                if v is not None
            )
            if len(self._labels) >= _MAX_LABEL_SETS:
                self._labels.clear()  # bounded: tool names and error types come from callers
            found = self._labels[key] = (pairs, dict(pairs))
        return found

    def record_tool(self, attrs: Mapping[str, Any], seconds: float | None) -> None:
        """Count one tool call (and its duration) by outcome; count prevented executions."""
        outcome = attrs.get(a.TL_TOOL_OUTCOME)
        tool = attrs.get(a.GEN_AI_TOOL_NAME, attrs.get(a.TL_TOOL_NAME))
        pairs, labels = self._tool_labels(tool, outcome, attrs.get(a.ERROR_TYPE))
        self._calls.add(pairs)
        if seconds is not None:
            self.tool_duration.record(seconds, labels)
        if outcome in (a.OUTCOME_REPLAYED, a.OUTCOME_RECOVERED, a.OUTCOME_DEDUPLICATED):
            self._prevented.add(self._tool_labels(tool, outcome, None)[0])

    def record_denied(self, tool: Any) -> None:
        """Count a call an approval denied (it never ran)."""
        self._calls.add(self._tool_labels(tool, a.OUTCOME_DENIED, None)[0])

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
