"""``framework_tool_span``: an adapter hands over a framework's tool span for one call."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolledger
from toolledger.telemetry import attributes as a
from toolledger.telemetry import flush_spans, framework_tool_span


def test_framework_tool_span_is_current_and_known_only_inside(provider: TracerProvider) -> None:
    """Inside the block the span is current; after it, the span current before is."""
    host = provider.get_tracer("framework").start_span("send_email")
    before = trace.get_current_span()
    with framework_tool_span(host):
        assert trace.get_current_span() is host
    assert trace.get_current_span() is before
    host.end()


def test_framework_tool_span_none_changes_nothing(provider: TracerProvider) -> None:
    """No span found: the current span stays."""
    before = trace.get_current_span()
    with framework_tool_span(None):
        assert trace.get_current_span() is before


@pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
@pytest.mark.filterwarnings("ignore::toolledger.UndeliveredWarning")
def test_a_handed_over_span_hosts_the_guard(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A span with no tool attributes, handed over: the call's span is its ``guard_tool``
    child, and the span gets the call id; without the hand-over it is an ``execute_tool``."""
    send = toolledger.tool("send_email", revision="1", execute=lambda i, c: "sent")
    with toolledger.run("t", db=tmp_path / "l.db", tracer_provider=provider) as run:
        for call_id, hand_over in (("call_1", True), ("call_2", False)):
            host = provider.get_tracer("framework").start_span(f"tool {call_id}")
            with trace.use_span(host), framework_tool_span(host if hand_over else None):
                run.call(send, call_id=call_id, input={"to": call_id})
            host.end()
    assert flush_spans()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    guard = spans["guard_tool send_email"]
    assert guard.parent.span_id == spans["tool call_1"].context.span_id
    assert spans["tool call_1"].attributes[a.TL_TOOL_CALL_ID] == "call_1"
    assert guard.attributes[a.OI_SPAN_KIND] == a.OI_GUARDRAIL
    # Not handed over, a span that says nothing of a tool is only the call's parent.
    own = spans["execute_tool send_email"]
    assert own.parent.span_id == spans["tool call_2"].context.span_id
    assert own.attributes[a.GEN_AI_TOOL_CALL_ID] == "call_2"
    assert a.TL_TOOL_CALL_ID not in spans["tool call_2"].attributes
