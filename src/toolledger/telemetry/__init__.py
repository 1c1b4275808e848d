"""Telemetry: OpenTelemetry spans as a view of the store. Never decides anything."""

from ._hooks import NOOP_TELEMETRY, NoopTelemetry, SpanHandle, TelemetryHooks

__all__ = ["NOOP_TELEMETRY", "NoopTelemetry", "SpanHandle", "TelemetryHooks"]
