"""The backend scenario against the in-memory SDK: every span, log record and metric, exactly.

Paired with and without content capture, live and re-exported (the same span ids, names,
kinds, attributes, events, status), the OpenInference projection on and off, the
``gen_ai.tool.call.decision`` records and the metrics by name, unit and attributes.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import toolledger
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.telemetry import attributes as a
from toolledger.telemetry import observe_reconcile_queue

from . import _scenario

pytest.importorskip("anthropic")

HISTORY = '[{"parts":[{"content":"Refund order 42 and email Ana.","type":"text"}],"role":"user"}]'
SYSTEM = '[{"content":"You are a support agent. Use the tools.","type":"text"}]'
OUTPUT = json.dumps(
    [
        {
            "finish_reason": "tool_use",
            "parts": [
                {"content": "I'll email Ana and look up the order.", "type": "text"},
                {
                    "arguments": {"to": "ana@example.com"},
                    "id": "toolu_email",
                    "name": "send_email",
                    "type": "tool_call",
                },
                {
                    "arguments": {"order": 42},
                    "id": "toolu_lookup",
                    "name": "lookup_order",
                    "type": "tool_call",
                },
            ],
            "role": "assistant",
        }
    ],
    separators=(",", ":"),
)
EMAIL_RESULT = '{"message_id":"m-1","sent_to":"ana@example.com"}'
LOOKUP_RESULT = '{"error":"RuntimeError","message":"boom: disk full"}'
CONTEXT = {
    a.GEN_AI_CONVERSATION_ID: "conv-42",
    a.GEN_AI_AGENT_NAME: "support-bot",
    a.USER_ID: "user-7",
}


def expected(content: bool) -> dict[str, dict[str, Any]]:
    """Every span's GenAI/toolledger attributes (event ids are filled in by the test)."""

    def c(attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs if content else {}

    tool = {
        **CONTEXT,
        a.GEN_AI_OPERATION_NAME: "execute_tool",
        a.GEN_AI_TOOL_TYPE: "function",
        a.TL_CHECKPOINT_NAMESPACE: "default",
        a.TL_CHECKPOINT_STATUS: "completed",
        a.TL_CHECKPOINT_REVISION: 2,
        a.TL_CHECKPOINT_ACTION: "execute",
        a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
    }
    return {
        "invoke_agent support-bot": {
            a.GEN_AI_OPERATION_NAME: "invoke_agent",
            **CONTEXT,
            a.TL_INTENT_GOAL: "Refund order 42 and email Ana.",
            a.TL_RUN_SUMMARY: "Emailed Ana; lookup failed; refund denied.",
            # the records stored (``stored_records``): an event that ends while its start
            # is buffered is one, as a replay is; or two when a flush took the start
            a.TL_JOURNAL_EVENT_COUNT: None,
        },
        "chat claude-x-1": {
            a.GEN_AI_OPERATION_NAME: "chat",
            a.GEN_AI_PROVIDER_NAME: "anthropic",
            a.GEN_AI_REQUEST_MODEL: "claude-x-1",
            a.GEN_AI_REQUEST_MAX_TOKENS: 512,
            a.GEN_AI_REQUEST_STOP_SEQUENCES: ("END",),
            a.SERVER_ADDRESS: "llm.test",
            a.SERVER_PORT: 8080,
            **CONTEXT,
            a.GEN_AI_RESPONSE_MODEL: "claude-x-1-20260101",
            a.GEN_AI_RESPONSE_ID: "msg_01scenario",
            a.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_use",),
            # the requested calls by name, with or without content capture
            a.TL_CHAT_TOOL_CALL_NAMES: ("send_email", "lookup_order"),
            a.TL_CHAT_TOOL_CALL_IDS: ("toolu_email", "toolu_lookup"),
            a.GEN_AI_USAGE_INPUT_TOKENS: 1057,
            a.GEN_AI_USAGE_OUTPUT_TOKENS: 40,
            a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 1000,
            a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 50,
            **c(
                {
                    a.GEN_AI_SYSTEM_INSTRUCTIONS: SYSTEM,
                    a.GEN_AI_INPUT_MESSAGES: HISTORY,
                    a.GEN_AI_OUTPUT_MESSAGES: OUTPUT,
                }
            ),
        },
        "step plan": {
            a.TL_INTENT_JUSTIFICATION: "Two tools requested.",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
            **c({a.TL_STEP_OUTPUTS: '{"calls":2}'}),
        },
        "approval send_email": {
            a.TL_TOOL_NAME: "send_email",
            a.TL_APPROVAL_OUTCOME: "allow",
            a.TL_APPROVAL_BY: "alice",
            a.TL_APPROVAL_REASON: "customer asked",
            a.TL_APPROVAL_CALL_ID: "toolu_email",
        },
        "execute_tool send_email": {
            **tool,
            a.GEN_AI_TOOL_NAME: "send_email",
            a.GEN_AI_TOOL_CALL_ID: "toolu_email",
            a.GEN_AI_TOOL_DESCRIPTION: "Send an email.",
            a.TL_TOOL_OUTCOME: "executed",
            a.TL_INTENT_JUSTIFICATION: "The model asked for send_email.",
            **c(
                {
                    a.GEN_AI_TOOL_CALL_ARGUMENTS: '{"to":"ana@example.com"}',
                    a.GEN_AI_TOOL_CALL_RESULT: EMAIL_RESULT,
                }
            ),
        },
        "execute_tool lookup_order": {
            **tool,
            a.GEN_AI_TOOL_NAME: "lookup_order",
            a.GEN_AI_TOOL_CALL_ID: "toolu_lookup",
            a.TL_TOOL_OUTCOME: "failed",
            a.TL_INTENT_JUSTIFICATION: "The model asked for lookup_order.",
            a.ERROR_TYPE: "RuntimeError",
            **c(
                {
                    a.GEN_AI_TOOL_CALL_ARGUMENTS: '{"order":42}',
                    a.GEN_AI_TOOL_CALL_RESULT: LOOKUP_RESULT,
                }
            ),
        },
        "replay_tool send_email": {
            **CONTEXT,
            a.TL_TOOL_NAME: "send_email",
            a.TL_TOOL_CALL_ID: "toolu_email",
            a.TL_TOOL_OUTCOME: "replayed",
            a.TL_CHECKPOINT_NAMESPACE: "default",
            a.TL_CHECKPOINT_STATUS: "completed",
            a.TL_CHECKPOINT_REVISION: 2,
            a.TL_CHECKPOINT_ACTION: "deliver",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
            **c(
                {
                    a.TL_TOOL_ARGUMENTS: '{"to":"ana@example.com"}',
                    a.TL_TOOL_RESULT: EMAIL_RESULT,
                }
            ),
        },
        "approval refund": {
            a.TL_TOOL_NAME: "refund",
            a.TL_APPROVAL_OUTCOME: "deny",
            a.TL_APPROVAL_BY: "bob",
            a.TL_APPROVAL_REASON: "over the limit",
            a.TL_APPROVAL_CALL_ID: "toolu_refund",
        },
        "note": {
            a.TL_EVENT_KIND: "note",
            a.TL_NOTE_TEXT: "Ana was emailed; the order lookup failed.",
        },
        "artifact order.json": {
            a.TL_EVENT_KIND: "artifact",
            a.TL_ARTIFACT_SHA256: (
                "7522daf3f873864644b93416b89a4294f1b73dcbdffb1d5e38c9eff311be6ee9"
            ),
            a.TL_ARTIFACT_MEDIA_TYPE: "application/json",
            a.TL_ARTIFACT_SIZE: 13,
        },
    }


def is_projection(key: str) -> bool:
    return key.startswith(("llm.", "input.", "output.", "openinference.", "tool.")) or key in (
        a.OI_METADATA,
        a.OI_SESSION_ID,
    )


class Recorded:
    def __init__(self, tmp_path: Path, provider: Any, exporter: Any, content: bool) -> None:
        self.logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.metrics = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.metrics])
        toolledger.configure(
            tracer_provider=provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=content,
        )
        self.rec = _scenario.record(tmp_path / "t.db", capture_content=content)
        self.spans = {s.name: s for s in exporter.get_finished_spans()}


@pytest.fixture(params=[True, False], ids=["with_content", "no_content"])
def recorded(request, tmp_path, provider, exporter) -> Recorded:
    return Recorded(tmp_path, provider, exporter, request.param)


def stored_records(recorded: Recorded) -> int:
    """The run's records in its database (12 to 14: the model call and the step are one
    record each, or two when the background flusher took their start records first)."""
    store = toolledger.SQLiteStore(recorded.rec.db)
    try:
        count = len(store.read_events(recorded.rec.run_id))
    finally:
        store.close()
    assert 12 <= count <= 14
    return count


def genai(span: Any) -> dict[str, Any]:
    attrs = {k: v for k, v in span.attributes.items() if not is_projection(k)}
    if not span.name.startswith("invoke_agent"):
        assert len(attrs.pop(a.TL_EVENT_ID)) == 32  # a journal event id, different each run
    attrs.pop(a.TL_JOURNAL_HEAD_HASH, None)
    return attrs


def test_every_span_exact_attributes_live(recorded: Recorded, request) -> None:
    content = "with_content" in request.node.callspec.id
    want = expected(content)
    want["invoke_agent support-bot"][a.TL_RUN_ID] = recorded.rec.run_id
    want["invoke_agent support-bot"][a.TL_JOURNAL_EVENT_COUNT] = stored_records(recorded)
    assert set(recorded.spans) == set(want)
    for name, span in recorded.spans.items():
        assert genai(span) == want[name], name
    assert recorded.spans["chat claude-x-1"].kind is SpanKind.CLIENT
    others = [s for n, s in recorded.spans.items() if n != "chat claude-x-1"]
    assert {s.kind for s in others} == {SpanKind.INTERNAL}
    failed = recorded.spans["execute_tool lookup_order"]
    assert failed.status.status_code is StatusCode.ERROR
    # The message only with content capture on (it may hold data), else the error type.
    assert failed.status.description == ("boom: disk full" if content else "RuntimeError")


def test_every_span_reexported_identically(recorded: Recorded, request) -> None:
    content = "with_content" in request.node.callspec.id
    out = InMemorySpanExporter()
    toolledger.reexport(recorded.rec.db, recorded.rec.run_id, out, capture_content=content)
    again = {s.context.span_id: s for s in out.get_finished_spans()}
    live = {s.context.span_id: s for s in recorded.spans.values()}
    assert set(again) == set(live)  # no duplicates: backends keep the first copy of an id
    for span_id, span in live.items():
        other = again[span_id]
        assert (other.name, other.kind) == (span.name, span.kind)
        want = dict(span.attributes)
        for key in (a.GEN_AI_TOOL_DESCRIPTION, a.OI_TOOL_DESCRIPTION):
            want.pop(key, None)  # the one fact the database does not hold
        assert dict(other.attributes) == want, span.name
        assert (other.status.status_code, other.status.description) == (
            span.status.status_code,
            span.status.description,
        )
        assert (other.start_time, other.end_time) == (span.start_time, span.end_time)
        assert [(e.name, e.timestamp, dict(e.attributes)) for e in other.events] == [
            (e.name, e.timestamp, dict(e.attributes)) for e in span.events
        ]
        assert (other.parent.span_id if other.parent else None) == (
            span.parent.span_id if span.parent else None
        )


def test_transitions_are_ordered_events_inside_the_tool_span(recorded: Recorded) -> None:
    for name in ("execute_tool send_email", "execute_tool lookup_order"):
        span = recorded.spans[name]
        assert [e.name for e in span.events] == [
            "checkpoint create_checkpoint",
            "checkpoint claim_execution",
            "checkpoint complete_execution",
        ]
        assert [e.attributes[a.TL_CHECKPOINT_REVISION] for e in span.events] == [0, 1, 2]
        times = [e.timestamp for e in span.events]
        assert span.start_time <= times[0] < times[1] < times[2] <= span.end_time
    assert recorded.spans["replay_tool send_email"].events == ()


def test_openinference_projection_exact(recorded: Recorded, request) -> None:
    content = "with_content" in request.node.callspec.id
    spans = recorded.spans

    def oi(name: str) -> dict[str, Any]:
        return {k: v for k, v in spans[name].attributes.items() if is_projection(k)}

    kinds = {n: s.attributes[a.OI_SPAN_KIND] for n, s in spans.items()}
    assert kinds == {
        "invoke_agent support-bot": "AGENT",
        "chat claude-x-1": "LLM",
        "step plan": "CHAIN",
        "approval send_email": "GUARDRAIL",
        "execute_tool send_email": "TOOL",
        "execute_tool lookup_order": "TOOL",
        "replay_tool send_email": "CHAIN",
        "approval refund": "GUARDRAIL",
        "note": "CHAIN",
        "artifact order.json": "CHAIN",
    }
    assert oi("invoke_agent support-bot") == {
        a.OI_SPAN_KIND: "AGENT",
        a.OI_SESSION_ID: "conv-42",
        a.OI_INPUT_VALUE: "Refund order 42 and email Ana.",
        a.OI_INPUT_MIME_TYPE: "text/plain",
        a.OI_OUTPUT_VALUE: "Emailed Ana; lookup failed; refund denied.",
        a.OI_OUTPUT_MIME_TYPE: "text/plain",
        a.OI_METADATA: json.dumps(
            {"run_id": recorded.rec.run_id, "event_count": stored_records(recorded)}
        ),
    }
    email = oi("execute_tool send_email")
    meta = json.loads(email.pop(a.OI_METADATA))
    assert meta == {
        "call_id": "toolu_email",
        "outcome": "executed",
        "justification": "The model asked for send_email.",
        "justification_source": "developer",
        "checkpoint_status": "completed",
        "checkpoint_revision": 2,
    }
    assert email == {
        a.OI_SPAN_KIND: "TOOL",
        a.OI_SESSION_ID: "conv-42",
        a.OI_TOOL_NAME: "send_email",
        a.OI_TOOL_DESCRIPTION: "Send an email.",
        **(
            {
                a.OI_INPUT_VALUE: '{"to":"ana@example.com"}',
                a.OI_INPUT_MIME_TYPE: "application/json",
                a.OI_OUTPUT_VALUE: EMAIL_RESULT,
                a.OI_OUTPUT_MIME_TYPE: "application/json",
            }
            if content
            else {}
        ),
    }
    chat = oi("chat claude-x-1")
    base = {
        a.OI_SPAN_KIND: "LLM",
        a.OI_SESSION_ID: "conv-42",
        a.OI_LLM_MODEL_NAME: "claude-x-1-20260101",
        a.OI_LLM_PROVIDER: "anthropic",
        a.OI_LLM_INVOCATION_PARAMETERS: '{"max_tokens": 512, "stop_sequences": ["END"]}',
        a.OI_LLM_TOKEN_PROMPT: 1057,
        a.OI_LLM_TOKEN_COMPLETION: 40,
        a.OI_LLM_TOKEN_TOTAL: 1097,
        a.OI_LLM_TOKEN_CACHE_READ: 1000,
        a.OI_LLM_TOKEN_CACHE_WRITE: 50,
    }
    if not content:
        assert chat == base  # no message ever reaches a span without capture
        return
    messages = {k: v for k, v in chat.items() if k not in base}
    assert messages == {
        a.OI_INPUT_VALUE: HISTORY,
        a.OI_INPUT_MIME_TYPE: "application/json",
        a.OI_OUTPUT_VALUE: OUTPUT,
        a.OI_OUTPUT_MIME_TYPE: "application/json",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You are a support agent. Use the tools.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Refund order 42 and email Ana.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "I'll email Ana and look up the order.",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "toolu_email",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "send_email",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
            '{"to": "ana@example.com"}'
        ),
        "llm.output_messages.0.message.tool_calls.1.tool_call.id": "toolu_lookup",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "lookup_order",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": (
            '{"order": 42}'
        ),
    }


def test_openinference_switch_leaves_the_keys_out(tmp_path, provider, exporter) -> None:
    toolledger.configure(tracer_provider=provider, openinference=False)
    _scenario.record(tmp_path / "t.db")
    for span in exporter.get_finished_spans():
        assert not [k for k in span.attributes if is_projection(k)], span.name


def test_approvals_emit_tool_call_decision_records(recorded: Recorded, request) -> None:
    records = [r.log_record for r in recorded.logs.get_finished_logs()]
    assert [r.event_name for r in records] == [a.EVENT_TOOL_CALL_DECISION] * 2
    spans = recorded.spans
    got = [dict(r.attributes or {}) for r in records]
    for attrs in got:
        attrs.pop(a.TL_EVENT_ID)
    assert got == [
        {
            a.GEN_AI_TOOL_CALL_DECISION_OUTCOME: "allow",
            a.GEN_AI_TOOL_CALL_ID: "toolu_email",
            a.GEN_AI_TOOL_NAME: "send_email",
            a.TL_APPROVAL_BY: "alice",
            a.TL_APPROVAL_REASON: "customer asked",
        },
        {
            a.GEN_AI_TOOL_CALL_DECISION_OUTCOME: "deny",
            a.GEN_AI_TOOL_CALL_ID: "toolu_refund",
            a.GEN_AI_TOOL_NAME: "refund",
            a.TL_APPROVAL_BY: "bob",
            a.TL_APPROVAL_REASON: "over the limit",
        },
    ]
    # Correlated with the approval spans (same trace and span ids).
    for record, name in zip(records, ("approval send_email", "approval refund"), strict=True):
        assert record.trace_id == spans[name].context.trace_id
        assert record.span_id == spans[name].context.span_id


def test_decision_record_reason_follows_the_intent_switch(tmp_path, provider) -> None:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    toolledger.configure(
        tracer_provider=provider, logger_provider=logger_provider, capture_intent=False
    )
    _scenario.record(tmp_path / "t.db")
    for record in logs.get_finished_logs():
        assert a.TL_APPROVAL_REASON not in (record.log_record.attributes or {})


def _points(reader: InMemoryMetricReader) -> dict[str, tuple[str, list[tuple[dict, Any]]]]:
    data = reader.get_metrics_data()
    out: dict[str, tuple[str, list[tuple[dict, Any]]]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points = []
                for p in metric.data.data_points:
                    value = getattr(p, "value", None)
                    if value is None:
                        value = (p.count, p.sum)
                    points.append((dict(p.attributes), value))
                out[metric.name] = (metric.unit, points)
    return out


def test_metrics_names_units_and_exact_attributes(recorded: Recorded) -> None:
    metrics = _points(recorded.metrics)
    assert {name: unit for name, (unit, _) in metrics.items()} == {
        "gen_ai.client.operation.duration": "s",
        "gen_ai.client.token.usage": "{token}",
        "toolledger.tool.calls": "{call}",
        "toolledger.tool.duration": "s",
        "toolledger.executions.prevented": "{execution}",
    }
    calls = sorted(
        (sorted(attrs.items()), value) for attrs, value in metrics["toolledger.tool.calls"][1]
    )
    assert calls == sorted(
        [
            (sorted({"gen_ai.tool.name": "send_email", a.TL_TOOL_OUTCOME: "executed"}.items()), 1),
            (
                sorted(
                    {
                        "gen_ai.tool.name": "lookup_order",
                        a.TL_TOOL_OUTCOME: "failed",
                        a.ERROR_TYPE: "RuntimeError",
                    }.items()
                ),
                1,
            ),
            (sorted({"gen_ai.tool.name": "send_email", a.TL_TOOL_OUTCOME: "replayed"}.items()), 1),
            (sorted({"gen_ai.tool.name": "refund", a.TL_TOOL_OUTCOME: "denied"}.items()), 1),
        ]
    )
    (prevented,) = metrics["toolledger.executions.prevented"][1]
    assert prevented == ({"gen_ai.tool.name": "send_email", a.TL_TOOL_OUTCOME: "replayed"}, 1)
    chat_labels = {
        a.GEN_AI_OPERATION_NAME: "chat",
        a.GEN_AI_PROVIDER_NAME: "anthropic",
        a.GEN_AI_REQUEST_MODEL: "claude-x-1",
        a.GEN_AI_RESPONSE_MODEL: "claude-x-1-20260101",
        a.SERVER_ADDRESS: "llm.test",
        a.SERVER_PORT: 8080,
    }
    (duration,) = metrics["gen_ai.client.operation.duration"][1]
    assert duration[0] == chat_labels
    assert duration[1][0] == 1
    usage = {
        attrs[a.GEN_AI_TOKEN_TYPE]: value
        for attrs, value in metrics["gen_ai.client.token.usage"][1]
    }
    assert usage == {"input": (1, 1057), "output": (1, 40)}
    for attrs, _ in metrics["gen_ai.client.token.usage"][1]:
        assert {k: v for k, v in attrs.items() if k != a.GEN_AI_TOKEN_TYPE} == chat_labels
    tool_durations = {
        (attrs["gen_ai.tool.name"], attrs[a.TL_TOOL_OUTCOME]): value[0]
        for attrs, value in metrics["toolledger.tool.duration"][1]
    }
    assert tool_durations == {
        ("send_email", "executed"): 1,
        ("lookup_order", "failed"): 1,
        ("send_email", "replayed"): 1,
    }


def test_metrics_count_calls_whose_spans_are_not_sampled(tmp_path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    reader = InMemoryMetricReader()
    toolledger.configure(
        tracer_provider=TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False),
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    tool = toolledger.tool("lookup_order", revision="1", execute=lambda i, ctx: {"ok": True})
    with toolledger.run(goal="g", agent="a", db=tmp_path / "s.db") as run:
        run.call(tool, call_id="c1", input={"order": 1})
        run.call(tool, call_id="c1", input={"order": 1})  # replayed
    calls = _points(reader)["toolledger.tool.calls"][1]
    assert sorted((sorted(attrs.items()), n) for attrs, n in calls) == [
        ([("gen_ai.tool.name", "lookup_order"), (a.TL_TOOL_OUTCOME, "executed")], 1),
        ([("gen_ai.tool.name", "lookup_order"), (a.TL_TOOL_OUTCOME, "replayed")], 1),
    ]


def test_reconcile_queue_gauge_counts_by_status_within_its_bound(tmp_path) -> None:
    from datetime import datetime, timezone

    db = tmp_path / "q.db"
    store = toolledger.open_store(db)
    now = datetime.now(timezone.utc)
    for i in range(5):  # five claimed, never completed: executing
        binding = Binding("default", f"c{i}", "t", "1", fingerprint(i))
        _, rec = store.create_if_absent(create_checkpoint(binding, at=now))
        t = claim_execution(rec, attempt_id=f"{i:032x}", at=now)
        assert store.compare_and_swap(t.expected_revision, t.next)
    store.close()
    reader = InMemoryMetricReader()
    gauge = observe_reconcile_queue(
        db, meter_provider=MeterProvider(metric_readers=[reader]), limit=3
    )
    unit, points = _points(reader)["toolledger.reconcile.queue"]
    assert unit == "{checkpoint}"
    by_status = {attrs[a.TL_CHECKPOINT_STATUS]: value for attrs, value in points}
    assert by_status == {"executing": 3, "uncertain": 0, "completed": 0, "delivering": 0}
    assert gauge is not None


def test_configure_project_sets_the_phoenix_project_resource(otel_globals) -> None:
    handle = toolledger.configure(project="support-bot", metrics=False, logs=False)
    try:
        resource = handle.tracer_provider.resource
        assert resource.attributes[a.OI_PROJECT_NAME] == "support-bot"
    finally:
        handle.shutdown(timeout=1)


def test_mlflow_422_warning_names_the_missing_header(caplog, otel_globals) -> None:
    import http.server
    import threading

    class Reject(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(422)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Reject)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        from opentelemetry.sdk.trace import TracerProvider

        from .._internals import make_exporter

        exporter = make_exporter(
            f"http://127.0.0.1:{server.server_port}/v1/traces", "http/protobuf"
        )
        tp = TracerProvider()
        span = tp.get_tracer("t").start_span("s")
        span.end()
        with caplog.at_level(logging.WARNING, logger="toolledger.telemetry"):
            exporter.export([span])  # type: ignore[list-item]
        exporter.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolledger.telemetry"]
    assert any("x-mlflow-experiment-id" in w and "422" in w for w in warnings), warnings
