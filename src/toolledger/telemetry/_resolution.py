"""Telemetry of a person's decision on a stuck call: one span, one log record, a count.

Rules this module keeps:

- ``report_resolution`` is told what was decided after the store recorded it; it never
  raises and never blocks (a failure goes to ``report``), whatever the SDK does.
- Attributes are structural (tool, call id, namespace, statuses, revision, outcome, who,
  forced); the reason is free text kept in the journal and the checkpoint history, never
  on a span. The metric counts by tool and outcome only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry._logs._internal import ProxyLoggerProvider as _ProxyLoggerProvider

from .._version import __version__
from . import attributes as a
from ._metrics import instruments_for
from ._policy import DEFAULTS, resolve_policy
from ._report import report
from ._spans import get_tracer
from .attributes import SCHEMA_URL

__all__ = ["RESOLUTION_ATTRIBUTES", "report_resolution"]

#: The attributes of a ``resolve_tool {tool}`` span and of its log record.
RESOLUTION_ATTRIBUTES = (
    a.GEN_AI_TOOL_NAME,
    a.GEN_AI_TOOL_CALL_ID,
    a.TL_CHECKPOINT_NAMESPACE,
    a.TL_CHECKPOINT_STATUS_FROM,
    a.TL_CHECKPOINT_STATUS,
    a.TL_CHECKPOINT_REVISION,
    a.TL_RESOLUTION_OUTCOME,
    a.TL_RESOLUTION_BY,
    a.TL_RESOLUTION_FORCED,
    a.TL_RUN_ID,
    a.TL_EVENT_ID,
)


def report_resolution(
    facts: Mapping[str, Any], *, tracer_provider: Any = None, meter_provider: Any = None
) -> None:
    """Emit the span, log record and metric of one settled call. Never raises.

    ``facts`` holds the values of ``RESOLUTION_ATTRIBUTES`` (by attribute name; ``None``
    values are left out).
    """
    try:
        attrs = resolve_policy(capture_content=None, capture_intent=None, redact=None).apply(
            {k: facts.get(k) for k in RESOLUTION_ATTRIBUTES}
        )
        tool = facts.get(a.GEN_AI_TOOL_NAME)
        provider = tracer_provider or DEFAULTS.tracer_provider or trace.get_tracer_provider()
        span = get_tracer(provider).start_span(
            a.SPAN_RESOLVE_TOOL.format(tool), kind=trace.SpanKind.INTERNAL, attributes=attrs
        )
        try:
            _log(span, attrs)
        finally:
            span.end()
        ins = instruments_for(meter_provider or DEFAULTS.meter_provider)
        if ins is not None:
            labels = {
                a.GEN_AI_TOOL_NAME: tool,
                a.TL_RESOLUTION_OUTCOME: facts.get(a.TL_RESOLUTION_OUTCOME),
            }
            ins.resolutions.add(1, {k: v for k, v in labels.items() if v is not None})
    except Exception as exc:  # telemetry never breaks the decision it reports
        report("resolution", exc)


def _log(span: trace.Span, attrs: Mapping[str, Any]) -> None:
    logs = DEFAULTS.logger_provider or _logs.get_logger_provider()
    if isinstance(logs, (_logs.NoOpLoggerProvider, _ProxyLoggerProvider)):
        return
    logger = logs.get_logger("toolledger", __version__, schema_url=SCHEMA_URL)
    logger.emit(
        event_name=a.EVENT_TOOL_CALL_RESOLUTION,
        body=f"tool call resolved: {attrs.get(a.TL_RESOLUTION_OUTCOME)}",
        attributes=dict(attrs),
        context=trace.set_span_in_context(span),
        severity_number=_logs.SeverityNumber.INFO,
    )
