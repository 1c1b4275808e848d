"""Telemetry: OpenTelemetry spans as a view of the store. Never decides anything."""

from ._hooks import NOOP_TELEMETRY, NoopTelemetry, SpanHandle, TelemetryHooks

__all__ = ["NOOP_TELEMETRY", "NoopTelemetry", "SpanHandle", "TelemetryHooks"]


def hooks_for(
    *,
    tracer_provider: object = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: object = None,
) -> TelemetryHooks:
    """Return the telemetry hooks for a run (placeholder until OTel spans land)."""
    return NOOP_TELEMETRY


__all__ += ["hooks_for"]
