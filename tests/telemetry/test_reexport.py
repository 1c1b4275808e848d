"""reexport(): spans rebuilt from the database match the live ones; ids are stable."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import toolledger
from toolledger import reexport
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.errors import NotFoundError
from toolledger.telemetry import attributes as a


def lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"order": input["order"], "status": "shipped"}


def record(db, provider=None, *, fail_step: bool = False) -> str:
    tool = toolledger.tool("lookup_order", revision="1", execute=lookup, description="Look up.")
    with toolledger.run(
        goal="Answer", agent="bot", db=db, tracer_provider=provider, capture_content=True
    ) as run:
        with run.step("search", justification="names a codebase", query="gate") as step:
            step.record_output(n_hits=3)
            with run.step("inner"):
                pass
        run.call(tool, call_id="c1", input={"order": 1}, justification="asked")
        run.call(tool, call_id="c1", input={"order": 1}, justification="asked")
        run.approval("email", granted=False, by="user", reason="local", for_call="c1")
        if fail_step:
            with pytest.raises(KeyError), run.step("broken"):
                raise KeyError("x")
    return run.run_id


def key(span) -> tuple[Any, ...]:
    return (span.name, span.context.trace_id, span.context.span_id)


def test_reexport_matches_live_spans(tmp_path, provider, exporter) -> None:
    run_id = record(tmp_path / "t.db", provider)
    live = {key(s): s for s in exporter.get_finished_spans()}
    out = InMemorySpanExporter()
    report = reexport(tmp_path / "t.db", run_id, out, capture_content=True)
    again = {key(s): s for s in out.get_finished_spans()}
    assert report.success is True
    assert report.span_count == len(again) == len(live)
    assert report.trace_id == format(next(iter(live))[1], "032x")
    assert set(again) == set(live)  # the same span ids: nothing a backend would keep twice
    for k, span in live.items():
        other = again[k]
        assert other.kind is span.kind
        assert (other.parent.span_id if other.parent else None) == (
            span.parent.span_id if span.parent else None
        )
        assert (other.start_time, other.end_time) == (span.start_time, span.end_time)
        expected = dict(span.attributes)
        expected.pop(a.GEN_AI_TOOL_DESCRIPTION, None)  # not stored in the database
        expected.pop(a.OI_TOOL_DESCRIPTION, None)  # (its OpenInference copy)
        assert dict(other.attributes) == expected, span.name
        assert other.instrumentation_scope.schema_url == a.SCHEMA_URL
        assert (other.status.status_code, other.status.description) == (
            span.status.status_code,
            span.status.description,
        )
        # Transitions: the same events, at the same times (won CASes are stored).
        assert [(e.name, e.timestamp, dict(e.attributes)) for e in other.events] == [
            (e.name, e.timestamp, dict(e.attributes)) for e in span.events
        ], span.name


def test_reexport_without_sdk_uses_deterministic_ids(tmp_path) -> None:
    run_id = record(tmp_path / "t.db", None, fail_step=True)  # API only: no live ids
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    reexport(tmp_path / "t.db", run_id, first, capture_content=False)
    reexport(tmp_path / "t.db", run_id, second, capture_content=False)
    spans = first.get_finished_spans()
    assert [key(s) for s in spans] == [key(s) for s in second.get_finished_spans()]
    trace_id = int(hashlib.sha256(f"toolledger:trace:{run_id}".encode()).hexdigest()[:32], 16)
    run_span = int(hashlib.sha256(f"toolledger:run:{run_id}".encode()).hexdigest()[:16], 16)
    assert {s.context.trace_id for s in spans} == {trace_id}
    by_name = {s.name: s for s in spans}
    root = by_name["invoke_agent bot"]
    assert root.context.span_id == run_span
    assert root.parent is None
    event_id = by_name["step search"].attributes[a.TL_EVENT_ID]
    assert by_name["step search"].context.span_id == int(
        hashlib.sha256(f"toolledger:event:{event_id}".encode()).hexdigest()[:16], 16
    )
    assert by_name["step inner"].parent.span_id == by_name["step search"].context.span_id
    assert by_name["step search"].parent.span_id == run_span
    broken = by_name["step broken"]
    assert broken.status.status_code is StatusCode.ERROR
    assert broken.attributes[a.ERROR_TYPE] == "KeyError"
    assert by_name["approval email"].attributes[a.TL_APPROVAL_CALL_ID] == "c1"
    # content capture off: no content attributes on any span
    assert not any(set(s.attributes) & a.CONTENT_ATTRIBUTES for s in spans)


def test_reexport_unknown_run_is_not_found(tmp_path) -> None:
    record(tmp_path / "t.db")
    with pytest.raises(NotFoundError) as info:
        reexport(tmp_path / "t.db", "no-such-run", InMemorySpanExporter())
    assert info.value.code == "NOT_FOUND"


def test_resumed_call_links_to_crashed_attempt_live_and_reexported(
    tmp_path, provider, exporter
) -> None:
    """A call that finds another attempt's claim (a crash) links to that attempt's span."""
    crashed_trace, crashed_span = "ab" * 16, "cd" * 8
    db = tmp_path / "t.db"
    store = toolledger.open_store(db)
    now = datetime.now(timezone.utc)
    binding = Binding("default", "c9", "charge", "1", fingerprint({"amount": 5}))
    _, rec = store.create_if_absent(create_checkpoint(binding, at=now))
    t = claim_execution(rec, attempt_id=f"{'1' * 32}.{crashed_trace}.{crashed_span}", at=now)
    assert store.compare_and_swap(t.expected_revision, t.next)
    store.close()

    def never(input: Any, ctx: Any) -> Any:
        raise AssertionError("a claimed call must never execute again")

    tool = toolledger.tool(
        "charge",
        revision="1",
        execute=never,
        recover=lambda ctx: toolledger.Recovered({"charged": 5}),
    )
    with toolledger.run(goal="g", agent="bot", db=db, tracer_provider=provider) as run:
        outcome = run.call(tool, call_id="c9", input={"amount": 5})
    assert outcome.recovered is True
    live = next(s for s in exporter.get_finished_spans() if s.name == "recover_tool charge")
    expected_link = [(int(crashed_trace, 16), int(crashed_span, 16))]
    assert [(lk.context.trace_id, lk.context.span_id) for lk in live.links] == expected_link
    assert live.attributes[a.TL_TOOL_OUTCOME] == "recovered"

    out = InMemorySpanExporter()
    reexport(db, run.run_id, out)
    again = next(s for s in out.get_finished_spans() if s.name == "recover_tool charge")
    assert [(lk.context.trace_id, lk.context.span_id) for lk in again.links] == expected_link
    assert again.attributes[a.TL_CHECKPOINT_ACTION] == "reconcile-execution"
    assert again.attributes[a.TL_TOOL_OUTCOME] == "recovered"


def test_reexport_resumed_run_never_links_across_traces(tmp_path, provider, exporter) -> None:
    db = tmp_path / "t.db"
    for _ in range(2):  # the second run resumes the first (same run id): a new live trace
        with (
            toolledger.run(
                goal="g", agent="bot", db=db, run_id="r1", tracer_provider=provider
            ) as run,
            run.step("s"),
        ):
            pass
    out = InMemorySpanExporter()
    reexport(db, "r1", out)
    spans = out.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 2
    ids = {s.context.span_id: s.context.trace_id for s in spans}
    for span in spans:
        if span.parent is not None:
            assert ids[span.parent.span_id] == span.context.trace_id


def test_reexport_sends_in_batches(tmp_path) -> None:
    run_id = record(tmp_path / "t.db")
    calls: list[int] = []

    class Counting(InMemorySpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            calls.append(len(spans))
            return super().export(spans)

    report = reexport(tmp_path / "t.db", run_id, Counting(), batch_size=3)
    assert sum(calls) == report.span_count
    assert max(calls) == 3
    assert len(calls) == -(-report.span_count // 3)
