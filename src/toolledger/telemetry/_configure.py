"""``toolledger.configure()``: process-wide telemetry defaults and an optional SDK pipeline.

Rules of this module:

- The OpenTelemetry SDK and OTLP exporters are imported lazily, only here and only when
  ``configure()`` needs them: an API-only install imports nothing from them.
- Standard variables are honoured: ``OTEL_SDK_DISABLED``, ``OTEL_SERVICE_NAME`` (and
  ``OTEL_RESOURCE_ATTRIBUTES``), ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``,
  ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` (``http/protobuf`` default, or ``grpc``),
  ``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`` / ``_TIMEOUT`` (read by the exporters), ``OTEL_BSP_*``.
- With no endpoint, the SDK is installed without any exporter: spans get real ids (stored
  with each journal event) and nothing goes over the network; the database holds everything.
- Shutting down never hangs the process: shutdown runs with a bound, and the SDK's own
  unbounded ``atexit`` hook is replaced by a bounded one.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import _logs, metrics, trace

from ..errors import InvalidArgumentError
from ._policy import DEFAULTS, Redactor
from ._report import logger as report_logger
from ._report import report
from ._spans import flush_spans
from .attributes import OI_PROJECT_NAME

__all__ = ["PROTOCOLS", "TelemetryHandle", "configure", "resolve_endpoint"]

PROTOCOLS = ("http/protobuf", "grpc")
_SHUTDOWN_SECONDS = 5.0


@dataclass(kw_only=True, eq=False)
class TelemetryHandle:
    """What ``configure()`` set up. ``shutdown()`` flushes, stops and forgets it."""

    tracer_provider: trace.TracerProvider
    endpoint: str | None = None
    protocol: str | None = None
    enabled: bool = True
    owned: bool = False
    #: The meter and logger providers built beside the tracer provider (shut down with it).
    others: list[Any] = field(default_factory=list)
    _closed: bool = field(default=False, repr=False)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export buffered spans now; return whether everything was flushed in time.

        Bounded by ``timeout_millis`` even when an exporter blocks (the SDK's own flush
        may wait on a stuck export forever). Never raises: a failure yields ``False``.
        """
        started = time.monotonic()
        drained = flush_spans(timeout_millis / 1000)
        flush = getattr(self.tracer_provider, "force_flush", None)
        if flush is None:
            return drained
        left = max(0.0, timeout_millis / 1000 - (time.monotonic() - started))
        return _bounded(lambda: flush(int(left * 1000)), left) and drained

    def shutdown(self, timeout: float = _SHUTDOWN_SECONDS) -> None:
        """Flush and stop the pipeline (bounded by ``timeout`` seconds); reset defaults.

        Idempotent. A provider passed in by the caller is flushed, not shut down.
        """
        if self._closed:
            return
        self._closed = True
        if DEFAULTS.tracer_provider is self.tracer_provider:
            DEFAULTS.reset()
        if not self.owned:
            self.force_flush(int(timeout * 1000))
            return
        started = time.monotonic()
        flush_spans(timeout)
        for other in self.others:
            if DEFAULTS.meter_provider is other:
                DEFAULTS.meter_provider = None
            if DEFAULTS.logger_provider is other:
                DEFAULTS.logger_provider = None
        for provider in [*self.others, self.tracer_provider]:
            left = max(0.0, timeout - (time.monotonic() - started))
            _bounded(getattr(provider, "shutdown", None), left)


def _bounded(fn: Any, timeout: float) -> bool:
    """Run ``fn()`` in a daemon thread for at most ``timeout`` seconds.

    Returns ``fn``'s truthiness (``None`` counts as success), or ``False`` when it raised
    or did not finish in time; never raises.
    """
    if fn is None:
        return True
    outcome: list[bool] = []

    def target() -> None:
        try:
            result = fn()
            outcome.append(result is None or bool(result))
        except Exception as exc:
            report("flush/shutdown", exc)
            outcome.append(False)

    worker = threading.Thread(target=target, name="toolledger-otel-flush", daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(outcome and outcome[0])


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def resolve_endpoint(endpoint: str | None, protocol: str | None) -> tuple[str | None, str]:
    """Return the traces endpoint URL (or ``None``) and protocol ``configure()`` would use.

    An explicit ``endpoint`` is a base URL like ``OTEL_EXPORTER_OTLP_ENDPOINT``: for
    ``http/protobuf`` ``/v1/traces`` is appended unless already there.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown protocol.
    """
    proto = protocol or _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    proto = (proto or "http/protobuf").strip().lower()
    if proto not in PROTOCOLS:
        raise InvalidArgumentError(
            message=f"OTLP protocol must be one of {', '.join(PROTOCOLS)}; got {proto!r}"
        )
    if endpoint is None:
        traces = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if traces is not None:
            return traces, proto
        endpoint = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
        if endpoint is None:
            return None, proto
    if proto == "http/protobuf" and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return endpoint, proto


_SIGNAL_PATHS = {"traces": "/v1/traces", "metrics": "/v1/metrics", "logs": "/v1/logs"}
_MLFLOW_HEADER = "x-mlflow-experiment-id"


class _MlflowHint(logging.Filter):
    """Turns the OTLP/HTTP exporter's bare 422 into a warning naming MLflow's header."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        if "code: 422" in message:
            report_logger.warning(
                "the OTLP endpoint answered 422 (Unprocessable Entity): an MLflow tracking "
                "server requires the %s header (OTEL_EXPORTER_OTLP_HEADERS=%s=<experiment id>, "
                "or configure(headers={%r: ...})); spans of this batch were dropped",
                _MLFLOW_HEADER,
                _MLFLOW_HEADER,
                _MLFLOW_HEADER,
            )
        return True


_HINT = _MlflowHint()


def _signal_url(traces_url: str, protocol: str, signal: str) -> str:
    if protocol != "http/protobuf":
        return traces_url
    base = traces_url.removesuffix("/v1/traces")
    return base + _SIGNAL_PATHS[signal]


def _require_grpc() -> None:
    """Fail with the install command when the gRPC exporter (the ``otlp-grpc`` extra) is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.grpc  # noqa: F401
    except ModuleNotFoundError as exc:
        raise InvalidArgumentError(
            message=(
                "OTLP over gRPC needs the [otlp-grpc] extra (the [otlp] extra speaks "
                "HTTP/protobuf only): pip install 'toolledger[otlp-grpc]', or use "
                "protocol 'http/protobuf'"
            ),
            details={"extra": "otlp-grpc", "install": "pip install 'toolledger[otlp-grpc]'"},
        ) from exc


def make_exporter(
    endpoint: str, protocol: str, headers: Mapping[str, str] | None = None, signal: str = "traces"
) -> Any:
    """Return an OTLP exporter of ``signal`` (traces, metrics, logs) for ``endpoint``.

    Headers and timeouts come from ``OTEL_*`` unless ``headers`` is given. On HTTP, a 422
    answer (MLflow without its experiment header) is logged as a warning that says so.
    """
    url = _signal_url(endpoint, protocol, signal)
    kw: dict[str, Any] = {"endpoint": url}
    if headers:
        kw["headers"] = dict(headers)
    if protocol == "grpc":
        _require_grpc()
        if signal == "metrics":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

            return OTLPMetricExporter(**kw)
        if signal == "logs":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

            return OTLPLogExporter(**kw)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(**kw)
    if signal == "metrics":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        return HttpMetricExporter(**kw)
    if signal == "logs":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )

        return HttpLogExporter(**kw)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").addFilter(_HINT)
    logging.getLogger("opentelemetry.exporter.otlp.common.http").addFilter(_HINT)
    return HttpExporter(**kw)


def make_resource(service_name: str | None, project: str | None = None) -> Any:
    """Return the SDK ``Resource``: ``service_name``, else ``OTEL_SERVICE_NAME``, else ours.

    ``project`` becomes ``openinference.project.name`` (the project Phoenix files spans under).
    """
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    attrs: dict[str, Any] = {}
    if service_name:
        attrs[SERVICE_NAME] = service_name
    elif not _env("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    ):
        attrs[SERVICE_NAME] = "toolledger"
    if project:
        attrs[OI_PROJECT_NAME] = project
    return Resource.create(attrs)


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: Redactor | None = None,
    *,
    project: str | None = None,
    headers: Mapping[str, str] | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    logger_provider: _logs.LoggerProvider | None = None,
    metrics: bool = True,
    logs: bool = True,
    openinference: bool | None = None,
    console: bool | None = None,
) -> TelemetryHandle:
    """Set process-wide telemetry defaults and, if needed, install the OTel SDK with OTLP.

    Runs started afterwards use these defaults unless they pass their own. With
    ``tracer_provider`` given, that provider is used as is. Otherwise, unless
    ``OTEL_SDK_DISABLED=true``, an SDK ``TracerProvider`` is created (with a batching OTLP
    exporter when ``endpoint`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, with no exporter
    otherwise) and also installed as the global provider if none was set. With an endpoint,
    an SDK ``MeterProvider`` (periodic OTLP metric export) and ``LoggerProvider`` (batching
    OTLP log export, for the ``gen_ai.tool.call.decision`` records) are installed beside it.

    Args:
        service_name: ``service.name`` (else ``OTEL_SERVICE_NAME``, else ``toolledger``).
        endpoint: OTLP base URL (else ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``).
        protocol: ``http/protobuf`` or ``grpc`` (else ``OTEL_EXPORTER_OTLP_PROTOCOL``).
        tracer_provider: Use this provider instead of building one.
        capture_content: Put tool arguments/results on spans (``None``: the env var).
        capture_intent: ``False`` drops goal/justification/reason text from spans.
        redact: ``redact(attributes) -> attributes``, applied before anything is set.
        project: The backend project: the resource attribute ``openinference.project.name``
            (Phoenix files spans under it).
        headers: Headers for every OTLP request (else ``OTEL_EXPORTER_OTLP_HEADERS``), e.g.
            ``{"x-mlflow-experiment-id": "1"}`` for MLflow.
        meter_provider: Record metrics with this provider (else the one built here, else
            the global one).
        logger_provider: Emit log records with this provider (else the one built here,
            else the global one).
        metrics: ``False`` builds no meter provider (a backend that ingests traces only:
            Phoenix, Langfuse, MLflow, Jaeger answer ``/v1/metrics`` with an error).
        logs: ``False`` builds no logger provider (likewise for ``/v1/logs``).
        openinference: ``False`` leaves the OpenInference keys out (``None``:
            ``TOOLLEDGER_OPENINFERENCE``, default on).
        console: Print each finished trace to stdout as a tree (the demo's), beside any
            exporter (``None``: on when ``OTEL_TRACES_EXPORTER`` lists ``console``).

    Returns:
        A ``TelemetryHandle`` with ``force_flush()`` and ``shutdown()``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown ``protocol``.
    """
    url, proto = resolve_endpoint(endpoint, protocol)
    DEFAULTS.capture_content = capture_content
    DEFAULTS.capture_intent = capture_intent
    DEFAULTS.redact = redact
    DEFAULTS.openinference = openinference
    DEFAULTS.meter_provider = meter_provider
    DEFAULTS.logger_provider = logger_provider
    if console is None:
        console = console_requested()
    if tracer_provider is not None:
        DEFAULTS.tracer_provider = tracer_provider
        if console:
            _add_console(tracer_provider)
        return TelemetryHandle(tracer_provider=tracer_provider, endpoint=url, protocol=proto)
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        DEFAULTS.tracer_provider = trace.NoOpTracerProvider()
        return TelemetryHandle(tracer_provider=DEFAULTS.tracer_provider, enabled=False)
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        report("configure (no OpenTelemetry SDK: pip install toolledger[otlp])", exc)
        DEFAULTS.tracer_provider = None
        return TelemetryHandle(tracer_provider=trace.NoOpTracerProvider(), enabled=False)
    resource = make_resource(service_name, project)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    owned: list[Any] = []
    if console:
        _add_console(provider)
    if url is not None:
        provider.add_span_processor(BatchSpanProcessor(make_exporter(url, proto, headers)))
        if metrics and meter_provider is None:
            DEFAULTS.meter_provider = _meter_provider(url, proto, headers, resource)
            owned.append(DEFAULTS.meter_provider)
        if logs and logger_provider is None:
            DEFAULTS.logger_provider = _logger_provider(url, proto, headers, resource)
            owned.append(DEFAULTS.logger_provider)
    handle = TelemetryHandle(
        tracer_provider=provider,
        endpoint=url,
        protocol=proto if url else None,
        owned=True,
        others=owned,
    )
    atexit.register(handle.shutdown)
    DEFAULTS.tracer_provider = provider
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return handle


def console_requested() -> bool:
    """Return whether ``OTEL_TRACES_EXPORTER`` (a comma-separated list) names ``console``."""
    names = os.environ.get("OTEL_TRACES_EXPORTER", "")
    return "console" in {name.strip().lower() for name in names.split(",")}


def _add_console(provider: Any) -> None:
    """Print the provider's finished traces as trees (a simple processor: printed at once)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ._console import ConsoleTreeExporter

    provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter()))


def _meter_provider(url: str, proto: str, headers: Any, resource: Any) -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(make_exporter(url, proto, headers, "metrics"))
    return MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)


def _logger_provider(url: str, proto: str, headers: Any, resource: Any) -> Any:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logs.add_log_record_processor(
        BatchLogRecordProcessor(make_exporter(url, proto, headers, "logs"))
    )
    return logs
