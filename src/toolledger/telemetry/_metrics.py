"""Metrics through the OpenTelemetry Metrics API: model calls, tool outcomes, the reconcile queue.

Rules of this module:

- API only (``opentelemetry.metrics``); ``configure()`` installs the SDK meter provider.
  Without one, every instrument is a no-op.
- Instruments are created once per meter provider; recording happens on the telemetry
  thread, with the span's ending (never on the thread of a tool call). Counts are
  toolledger's own, behind observable counters read at each collection; only that thread
  writes them, so counting takes no lock.
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
from ..store import StoreLike, open_store
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
    "toolledger.tool.resolutions": (
        "counter",
        "{call}",
        "Stuck tool calls settled by a person or by reconcile, by outcome.",
    ),
    "toolledger.reconcile.queue": (
        "gauge",
        "{checkpoint}",
        "Checkpoints waiting for reconciliation, by status.",
    ),
}
#: Statuses the reconcile-queue gauge reports (``completed``: stored, not yet delivered).
RECONCILE_STATUSES = ("executing", "uncertain", "completed", "delivering")
_lock = threading.Lock()
_cache: dict[int, Instruments] = {}
_PREVENTING = frozenset({a.OUTCOME_REPLAYED, a.OUTCOME_RECOVERED, a.OUTCOME_DEDUPLICATED})


class _ToolCount:
    """One attribute set of tool calls (tool, outcome, error type), bound once: its
    attributes and the two counts the observable counters report."""

    __slots__ = ("calls", "labels", "prevented")

    def __init__(self, labels: dict[str, Any]) -> None:
        self.labels = labels
        self.calls = 0
        self.prevented = 0


class Instruments:
    """The instruments of one meter provider.

    Tool calls and prevented executions are observable counters over toolledger's own
    counts (exported exactly like counters, read by the SDK at each collection). Each
    (tool, outcome, error type) is bound once to a ``_ToolCount``: counting a call is one
    dict lookup and an integer increment, without a lock. The counts are written by the
    telemetry thread only (every recording happens in a span's ending, ``_spans``); a
    collection reads them from its own thread through a snapshot of the dict's values.
    """

    __slots__ = (
        "_counts",
        "chat_duration",
        "prevented",
        "resolutions",
        "token_usage",
        "tool_calls",
        "tool_duration",
    )

    def __init__(self, meter: metrics.Meter) -> None:
        def histogram(name: str) -> metrics.Histogram:
            _, unit, description = METRICS[name]
            return meter.create_histogram(name, unit=unit, description=description)

        def counter(name: str, callback: Any) -> metrics.ObservableCounter:
            _, unit, description = METRICS[name]
            return meter.create_observable_counter(
                name, callbacks=[callback], unit=unit, description=description
            )

        self._counts: dict[tuple[Any, Any, Any], _ToolCount] = {}
        self.chat_duration = histogram("gen_ai.client.operation.duration")
        self.token_usage = histogram("gen_ai.client.token.usage")
        self.tool_calls = counter("toolledger.tool.calls", self._observe_calls)
        self.tool_duration = histogram("toolledger.tool.duration")
        self.prevented = counter("toolledger.executions.prevented", self._observe_prevented)
        _, unit, description = METRICS["toolledger.tool.resolutions"]
        # Rare (a person's decision): a plain counter, added to on the caller's thread.
        self.resolutions = meter.create_counter(
            "toolledger.tool.resolutions", unit=unit, description=description
        )

    def _count(self, tool: Any, outcome: Any, error: Any) -> _ToolCount:
        key = (tool, outcome, error)
        found = self._counts.get(key)
        if found is None:
            labels = {
                k: v
                for k, v in (
                    (a.GEN_AI_TOOL_NAME, tool),
                    (a.TL_TOOL_OUTCOME, outcome),
                    (a.ERROR_TYPE, error),
                )
                if v is not None
            }
            found = self._counts[key] = _ToolCount(labels)
        return found

    def _observe_calls(self, options: Any) -> Iterable[metrics.Observation]:
        counts = list(self._counts.values())
        return [metrics.Observation(c.calls, dict(c.labels)) for c in counts if c.calls]

    def _observe_prevented(self, options: Any) -> Iterable[metrics.Observation]:
        counts = list(self._counts.values())
        return [metrics.Observation(c.prevented, dict(c.labels)) for c in counts if c.prevented]

    def tool(self, tool: Any, outcome: Any, error: Any, seconds: float | None) -> None:
        """Count one tool call (and its duration) by outcome; count a prevented execution."""
        count = self._count(tool, outcome, error)
        count.calls += 1
        if seconds is not None:
            self.tool_duration.record(seconds, count.labels)
        if outcome in _PREVENTING:
            (count if error is None else self._count(tool, outcome, None)).prevented += 1

    def record_tool(self, attrs: Mapping[str, Any], seconds: float | None) -> None:
        """Count one tool call from a span's final raw attributes (see ``tool``)."""
        tool = attrs.get(a.GEN_AI_TOOL_NAME, attrs.get(a.TL_TOOL_NAME))
        self.tool(tool, attrs.get(a.TL_TOOL_OUTCOME), attrs.get(a.ERROR_TYPE), seconds)

    def record_denied(self, tool: Any) -> None:
        """Count a call an approval denied (it never ran)."""
        self._count(tool, a.OUTCOME_DENIED, None).calls += 1

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


def instruments_for(meter_provider: metrics.MeterProvider | None) -> Instruments | None:
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
    db: StoreLike | None, *, meter_provider: metrics.MeterProvider | None = None, limit: int = 1000
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
