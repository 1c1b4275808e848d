"""Telemetry: OpenTelemetry spans as a view of the store. Never decides anything.

``hooks_for()`` gives the journal/guard the hooks of one run; ``configure()`` sets
process-wide defaults (and can install the SDK with OTLP, or a console tree printer);
``_reexport`` rebuilds a stored
run's spans from what the journal's reader passes in (``toolledger.reexport``, in
``export/``, reads and sends them). Attribute names live in ``toolledger.telemetry.attributes``.

Names imported ``as`` themselves and left out of ``__all__`` are for toolledger's other
packages (process defaults and policy, exporters, the re-export's span building, a
resolution's report), not for users.
"""

from __future__ import annotations

from opentelemetry import _logs, trace
from opentelemetry._logs._internal import ProxyLoggerProvider as _ProxyLoggerProvider

from .._version import __version__
from ._configure import TelemetryHandle, configure, console_requested
from ._configure import make_exporter as make_exporter
from ._configure import make_resource as make_resource
from ._configure import resolve_endpoint as resolve_endpoint
from ._console import ConsoleTreeExporter, render_spans
from ._framework_span import framework_tool_span
from ._hooks import NOOP_TELEMETRY, CallFacts, NoopSpan, NoopTelemetry, SpanHandle, TelemetryHooks
from ._metrics import METRICS, instruments_for, observe_reconcile_queue
from ._policy import CAPTURE_ENV, CONTENT_MAX_CHARS, Policy, Redactor
from ._policy import DEFAULTS as DEFAULTS
from ._policy import resolve_policy as resolve_policy
from ._reexport import ReexportReport
from ._reexport import build_spans as build_spans
from ._reexport import send_spans as send_spans
from ._report import report
from ._resolution import report_resolution as report_resolution
from ._spans import OTelSpan, OTelTelemetry, Signals, flush_spans, get_tracer
from .attributes import SCHEMA_URL

__all__ = [
    "CAPTURE_ENV",
    "CONTENT_MAX_CHARS",
    "CallFacts",
    "ConsoleTreeExporter",
    "METRICS",
    "NOOP_TELEMETRY",
    "NoopSpan",
    "NoopTelemetry",
    "OTelSpan",
    "OTelTelemetry",
    "Policy",
    "ReexportReport",
    "Redactor",
    "SpanHandle",
    "TelemetryHandle",
    "TelemetryHooks",
    "configure",
    "flush_spans",
    "framework_tool_span",
    "hooks_for",
    "observe_reconcile_queue",
    "render_spans",
]


def hooks_for(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool | None = None,
    capture_intent: bool | None = True,
    redact: Redactor | None = None,
) -> TelemetryHooks:
    """Return the telemetry hooks for one run.

    The provider is resolved once, here: ``tracer_provider``, else the one set by
    ``toolledger.configure()``, else OpenTelemetry's global provider. When that is a no-op
    (API only, or no SDK configured yet), the returned hooks record nothing and cost almost
    nothing. Never raises.

    Args:
        tracer_provider: An OpenTelemetry ``TracerProvider``.
        capture_content: Tool arguments/results on spans; ``None``: ``configure()``'s
            setting, else ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        capture_intent: ``False`` drops goal/justification/reason text (a run cannot turn
            it back on when ``configure(capture_intent=False)`` switched it off).
        redact: ``redact(attributes) -> attributes`` run before anything is set on a span
            (``None``: ``configure()``'s).

    Returns:
        ``TelemetryHooks``: ``OTelTelemetry``, or ``NOOP_TELEMETRY``.
    """
    try:
        provider = tracer_provider if tracer_provider is not None else DEFAULTS.tracer_provider
        if provider is None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, trace.ProxyTracerProvider) and console_requested():
                # OTEL_TRACES_EXPORTER=console with no SDK set up: print runs as trees.
                provider = configure(console=True).tracer_provider
        instruments = instruments_for(DEFAULTS.meter_provider)
        noop = isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
        if noop and instruments is None:
            return NOOP_TELEMETRY
        policy = resolve_policy(
            capture_content=capture_content, capture_intent=capture_intent, redact=redact
        )
        logs = DEFAULTS.logger_provider or _logs.get_logger_provider()
        logger = None
        if not isinstance(logs, (_logs.NoOpLoggerProvider, _ProxyLoggerProvider)):
            logger = logs.get_logger("toolledger", __version__, schema_url=SCHEMA_URL)
        return OTelTelemetry(get_tracer(provider), policy, Signals(instruments, logger))
    except Exception as exc:
        report("hooks_for", exc)
        return NOOP_TELEMETRY
