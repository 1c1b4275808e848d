"""Approval spans: `approval {tool}` with exact attributes; a denied call has no execute_tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.telemetry import attributes as a

from .conftest import Approver, Effects

INPUT = {"to": "ana@example.com"}


pytestmark = pytest.mark.usefixtures("clean_telemetry_env")


def _spans(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def _run_call(db: Path, provider: TracerProvider, tool: toolledger.Tool, **kw: Any) -> Any:
    with toolledger.run("g", db=db, tracer_provider=provider) as run:
        try:
            return run.call(tool, call_id="c1", input=INPUT, **kw)
        except toolledger.ApprovalDeniedError as exc:
            return exc


@pytest.mark.parametrize(
    ("answer", "outcome", "by", "reason"),
    [
        (Approved("alice", "ok"), "allow", "alice", "ok"),
        (Denied("bob", "no"), "deny", "bob", "no"),
        (Pending("T-9"), "require_approval", None, None),
    ],
)
def test_approval_span_exact_attributes(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    effects: Effects,
    answer: Any,
    outcome: str,
    by: str | None,
    reason: str | None,
) -> None:
    """The span is `approval send_email`, child of the run, with exactly these attributes."""
    _run_call(tmp_path / "l.db", provider, effects.tool("always", Approver(answer)))
    spans = _spans(exporter)
    (span,) = spans["approval send_email"]
    (run_span,) = spans["invoke_agent"]
    assert span.parent is not None
    assert span.parent.span_id == run_span.context.span_id
    expected: dict[str, Any] = {
        a.TL_EVENT_ID: span.attributes[a.TL_EVENT_ID],
        a.TL_TOOL_NAME: "send_email",
        a.TL_APPROVAL_OUTCOME: outcome,
        a.TL_APPROVAL_CALL_ID: "c1",
    }
    meta: dict[str, Any] = {"tool": "send_email", "call_id": "c1", "decision": outcome}
    if by is not None:
        expected[a.TL_APPROVAL_BY] = by
        expected[a.TL_APPROVAL_REASON] = reason
        meta.update(by=by, reason=reason)
    # What Phoenix/Langfuse read: a GUARDRAIL (never a TOOL; no gen_ai.tool.call.id).
    expected.update(
        {
            a.OI_SPAN_KIND: "GUARDRAIL",
            a.OI_INPUT_VALUE: "send_email",
            a.OI_INPUT_MIME_TYPE: "text/plain",
            a.OI_OUTPUT_VALUE: outcome,
            a.OI_OUTPUT_MIME_TYPE: "text/plain",
            a.OI_METADATA: json.dumps(meta),
        }
    )
    assert dict(span.attributes) == expected
    has_tool_span = "execute_tool send_email" in spans
    assert has_tool_span is (outcome == "allow")


def test_denied_call_has_no_execute_tool_span_and_intent_off_drops_reason(
    tmp_path: Path, exporter: InMemorySpanExporter, effects: Effects
) -> None:
    """capture_intent=False drops the free-text reason; the denial still has no tool span."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    denier = effects.tool("always", Approver(Denied("bob", "secret")))
    with (
        toolledger.run("g", db=tmp_path / "l.db", tracer_provider=tp, capture_intent=False) as run,
        pytest.raises(toolledger.ApprovalDeniedError),
    ):
        run.call(denier, call_id="c1", input=INPUT)
    tp.shutdown()
    spans = _spans(exporter)
    assert sorted(spans) == ["approval send_email", "invoke_agent"]
    (span,) = spans["approval send_email"]
    assert a.TL_APPROVAL_REASON not in span.attributes
    assert span.attributes[a.TL_APPROVAL_OUTCOME] == "deny"
    assert effects.sent == []


def test_reexported_approval_span_matches_the_live_one(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter, effects: Effects
) -> None:
    """Re-export from the journal rebuilds the approval span with the same attributes."""
    db = tmp_path / "l.db"
    _run_call(db, provider, effects.tool("always", Approver(Denied("bob", "no"))))
    (live,) = _spans(exporter)["approval send_email"]
    run_id = next(iter(toolledger.SQLiteStore(db).list_runs())).run_id
    again = InMemorySpanExporter()
    toolledger.reexport(db, run_id, again)
    (rebuilt,) = _spans(again)["approval send_email"]
    assert dict(rebuilt.attributes) == dict(live.attributes)
    assert "execute_tool send_email" not in _spans(again)
