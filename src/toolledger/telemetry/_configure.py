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
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ..errors import InvalidArgumentError
from ._policy import DEFAULTS, Redactor
from ._report import report
from ._spans import flush_spans

__all__ = ["PROTOCOLS", "TelemetryHandle", "configure", "resolve_endpoint"]

PROTOCOLS = ("http/protobuf", "grpc")
_SHUTDOWN_SECONDS = 5.0


@dataclass(kw_only=True, eq=False)
class TelemetryHandle:
    """What ``configure()`` set up. ``shutdown()`` flushes, stops and forgets it."""

    tracer_provider: Any
    endpoint: str | None = None
    protocol: str | None = None
    enabled: bool = True
    owned: bool = False
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
        left = max(0.0, timeout - (time.monotonic() - started))
        _bounded(getattr(self.tracer_provider, "shutdown", None), left)


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


def make_exporter(endpoint: str, protocol: str) -> Any:
    """Return an OTLP span exporter for ``endpoint`` (headers/timeout from ``OTEL_*``)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=endpoint)


def make_resource(service_name: str | None) -> Any:
    """Return the SDK ``Resource``: ``service_name``, else ``OTEL_SERVICE_NAME``, else ours."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    attrs: dict[str, Any] = {}
    if service_name:
        attrs[SERVICE_NAME] = service_name
    elif not _env("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    ):
        attrs[SERVICE_NAME] = "toolledger"
    return Resource.create(attrs)


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    tracer_provider: Any = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: Redactor | None = None,
) -> TelemetryHandle:
    """Set process-wide telemetry defaults and, if needed, install the OTel SDK with OTLP.

    Runs started afterwards use these defaults unless they pass their own. With
    ``tracer_provider`` given, that provider is used as is. Otherwise, unless
    ``OTEL_SDK_DISABLED=true``, an SDK ``TracerProvider`` is created (with a batching OTLP
    exporter when ``endpoint`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, with no exporter
    otherwise) and also installed as the global provider if none was set.

    Args:
        service_name: ``service.name`` (else ``OTEL_SERVICE_NAME``, else ``toolledger``).
        endpoint: OTLP base URL (else ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``).
        protocol: ``http/protobuf`` or ``grpc`` (else ``OTEL_EXPORTER_OTLP_PROTOCOL``).
        tracer_provider: Use this provider instead of building one.
        capture_content: Put tool arguments/results on spans (``None``: the env var).
        capture_intent: ``False`` drops goal/justification/reason text from spans.
        redact: ``redact(attributes) -> attributes``, applied before anything is set.

    Returns:
        A ``TelemetryHandle`` with ``force_flush()`` and ``shutdown()``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown ``protocol``.
    """
    url, proto = resolve_endpoint(endpoint, protocol)
    DEFAULTS.capture_content = capture_content
    DEFAULTS.capture_intent = capture_intent
    DEFAULTS.redact = redact
    if tracer_provider is not None:
        DEFAULTS.tracer_provider = tracer_provider
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
    provider = TracerProvider(resource=make_resource(service_name), shutdown_on_exit=False)
    if url is not None:
        provider.add_span_processor(BatchSpanProcessor(make_exporter(url, proto)))
    handle = TelemetryHandle(
        tracer_provider=provider, endpoint=url, protocol=proto if url else None, owned=True
    )
    atexit.register(handle.shutdown)
    DEFAULTS.tracer_provider = provider
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return handle
