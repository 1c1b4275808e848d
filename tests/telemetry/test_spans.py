"""Live spans from the hooks: names, kinds, parentage and EXACT attribute sets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

import toolledger
from toolledger.errors import OutcomeUnknownError
from toolledger.telemetry import (
    CONTENT_MAX_CHARS,
    NOOP_TELEMETRY,
    OTelTelemetry,
    flush_spans,
    hooks_for,
)
from toolledger.telemetry import attributes as a

from .conftest import CLAIM


@pytest.fixture(autouse=True)
def _genai_keys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the GenAI/toolledger attributes; the OpenInference projection is
    pinned by ``test_backend_spans.py``."""
    monkeypatch.setenv("TOOLLEDGER_OPENINFERENCE", "false")


RUN = {
    "run_id": "run-1",
    "agent": "support-bot",
    "goal": "Answer the question",
    "started_at": "2026-01-01T00:00:00+00:00",
}


def tool_event(**over: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "run_id": "run-1",
        "event_id": "ev-tool",
        "parent_id": None,
        "kind": "tool_call",
        "name": "send_email",
        "status": "running",
        "started_at": "2026-01-01T00:00:01+00:00",
        "ended_at": None,
        "justification": "The user asked for it.",
        "justification_source": "model",
        "justification_missing": False,
        "inputs": {"to": "a@b.c", "body": "hi"},
        "outputs": None,
        "error": None,
        "meta": {},
        "checkpoint": {"namespace": "default", "call_id": "toolu_01", "revision": None},
    }
    ev.update(over)
    return ev


def finished(exporter: InMemorySpanExporter) -> dict[str, Any]:
    assert flush_spans()  # spans end on toolledger's telemetry thread
    return {s.name: s for s in exporter.get_finished_spans()}


def run_tool(provider: TracerProvider, *, content: bool | None, **end: Any) -> None:
    hooks = hooks_for(tracer_provider=provider, capture_content=content)
    run = hooks.run_started(RUN)
    span = hooks.event_started(tool_event(), None)
    span.transition(**CLAIM, at="2026-01-01T00:00:01.5+00:00")
    span.update(
        {"tool.description": "Send an email.", "checkpoint.action": "execute", "replayed": False}
    )
    span.transition(
        name="complete_execution",
        status_from="executing",
        status_to="completed",
        expected_revision=1,
        revision=2,
        won=True,
    )
    final = tool_event(
        status="completed",
        ended_at="2026-01-01T00:00:02+00:00",
        outputs={"sent": True},
        checkpoint={"namespace": "default", "call_id": "toolu_01", "revision": 2},
    )
    final.update(end)
    span.end(final)
    run.end({**RUN, "head_hash": "ab" * 32, "event_count": 4})


TOOL_BASE = {
    a.GEN_AI_OPERATION_NAME: "execute_tool",
    a.GEN_AI_TOOL_NAME: "send_email",
    a.GEN_AI_TOOL_CALL_ID: "toolu_01",
    a.GEN_AI_TOOL_TYPE: "function",
    a.GEN_AI_TOOL_DESCRIPTION: "Send an email.",
    a.TL_EVENT_ID: "ev-tool",
    a.TL_CHECKPOINT_NAMESPACE: "default",
    a.TL_INTENT_JUSTIFICATION: "The user asked for it.",
    a.TL_INTENT_JUSTIFICATION_SOURCE: "model",
    a.TL_CHECKPOINT_STATUS: "completed",
    a.TL_CHECKPOINT_REVISION: 2,
    a.TL_CHECKPOINT_ACTION: "execute",
    a.TL_TOOL_OUTCOME: "executed",
    a.GEN_AI_AGENT_NAME: "support-bot",  # the run's: every GenAI span of a run carries it
}


class TestToolSpan:
    def test_execute_tool_no_content_exact_attributes(self, provider, exporter) -> None:
        run_tool(provider, content=False)
        span = finished(exporter)["execute_tool send_email"]
        assert span.kind is SpanKind.INTERNAL
        assert dict(span.attributes) == TOOL_BASE
        assert span.status.status_code is StatusCode.UNSET

    def test_execute_tool_with_content_adds_arguments_and_result(self, provider, exporter) -> None:
        run_tool(provider, content=True)
        span = finished(exporter)["execute_tool send_email"]
        assert dict(span.attributes) == {
            **TOOL_BASE,
            a.GEN_AI_TOOL_CALL_ARGUMENTS: '{"body":"hi","to":"a@b.c"}',  # keys sorted, as stored
            a.GEN_AI_TOOL_CALL_RESULT: '{"sent":true}',
        }

    def test_execute_tool_env_span_only_turns_content_on(
        self, provider, exporter, monkeypatch
    ) -> None:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        run_tool(provider, content=None)
        attrs = finished(exporter)["execute_tool send_email"].attributes
        assert a.GEN_AI_TOOL_CALL_ARGUMENTS in attrs
        assert a.GEN_AI_TOOL_CALL_RESULT in attrs

    def test_execute_tool_parentage_run_tool_transition(self, provider, exporter) -> None:
        run_tool(provider, content=False)
        spans = finished(exporter)
        run = spans["invoke_agent support-bot"]
        tool = spans["execute_tool send_email"]
        assert set(spans) == {"invoke_agent support-bot", "execute_tool send_email"}
        assert run.parent is None
        assert tool.parent.span_id == run.context.span_id
        assert {s.context.trace_id for s in spans.values()} == {run.context.trace_id}
        assert tool.start_time == 1767225601 * 10**9
        assert tool.end_time == 1767225602 * 10**9
        # Transitions are events on the tool's span: revision order, inside its bounds.
        names = [e.name for e in tool.events]
        assert names == ["checkpoint claim_execution", "checkpoint complete_execution"]
        times = [e.timestamp for e in tool.events]
        assert tool.start_time <= times[0] < times[1] <= tool.end_time
        assert times[0] == 1767225601 * 10**9 + 5 * 10**8  # the claim's own time, kept

    def test_execute_tool_failure_sets_error_qualname(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=False)
        hooks.run_started(RUN)
        span = hooks.event_started(tool_event(), None)

        class Boom(Exception):
            pass

        span.end(tool_event(status="failed"), Boom("secret detail"))
        tool = finished(exporter)["execute_tool send_email"]
        assert tool.status.status_code is StatusCode.ERROR
        assert tool.attributes[a.ERROR_TYPE] == Boom.__qualname__
        assert "secret detail" not in (tool.status.description or "")

    def test_execute_tool_toolledger_error_uses_code(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=False)
        span = hooks.event_started(tool_event(), None)
        span.end(tool_event(status="failed"), OutcomeUnknownError(message="lost"))
        tool = finished(exporter)["execute_tool send_email"]
        assert tool.attributes[a.ERROR_TYPE] == "OUTCOME_UNKNOWN"

    def test_execute_tool_error_from_event_dict(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=True)
        span = hooks.event_started(tool_event(), None)
        span.end(tool_event(status="failed", error={"type": "KeyError", "message": "'x'"}))
        tool = finished(exporter)["execute_tool send_email"]
        assert tool.attributes[a.ERROR_TYPE] == "KeyError"
        assert tool.status.description == "'x'"

    def test_execute_tool_replayed_says_so_without_claim(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=False)
        span = hooks.event_started(tool_event(), None)
        span.update(
            {
                "replayed": True,
                "checkpoint.status": "delivered",
                "checkpoint.action": "none",
                "checkpoint.revision": 5,
            }
        )
        span.end(tool_event(status="replayed"))
        spans = finished(exporter)
        assert list(spans) == ["replay_tool send_email"]  # not an execution: no GenAI tool keys
        assert dict(spans["replay_tool send_email"].attributes) == {
            a.TL_TOOL_NAME: "send_email",
            a.TL_TOOL_CALL_ID: "toolu_01",
            a.TL_TOOL_OUTCOME: "replayed",
            a.TL_EVENT_ID: "ev-tool",
            a.TL_CHECKPOINT_NAMESPACE: "default",
            a.TL_CHECKPOINT_STATUS: "delivered",
            a.TL_CHECKPOINT_REVISION: 5,
            a.TL_CHECKPOINT_ACTION: "none",
            a.TL_INTENT_JUSTIFICATION: "The user asked for it.",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "model",
        }

    def test_execute_tool_resumed_call_links_original_span(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        span = hooks.event_started(tool_event(), None)
        original = {"trace_id": "ab" * 16, "span_id": "cd" * 8}
        span.update({"link": original, "recovered": True})
        span.end(tool_event(status="completed"))
        tool = finished(exporter)["recover_tool send_email"]
        assert [(lk.context.trace_id, lk.context.span_id) for lk in tool.links] == [
            (int("ab" * 16, 16), int("cd" * 8, 16))
        ]
        assert tool.attributes[a.TL_TOOL_OUTCOME] == "recovered"
        assert a.GEN_AI_OPERATION_NAME not in tool.attributes
        assert "link" not in tool.attributes

    def test_execute_tool_unknown_update_keys_never_leak(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=False)
        bare = {"inputs": None, "justification": None, "justification_source": None}
        span = hooks.event_started(tool_event(**bare), None)
        span.update({"secret": "x", "toolledger.approval.by": "y", a.GEN_AI_TOOL_CALL_RESULT: "z"})
        span.end(tool_event(**bare))
        attrs = finished(exporter)["execute_tool send_email"].attributes
        assert set(attrs) == {
            a.GEN_AI_OPERATION_NAME,
            a.GEN_AI_TOOL_NAME,
            a.GEN_AI_TOOL_CALL_ID,
            a.GEN_AI_TOOL_TYPE,
            a.TL_EVENT_ID,
            a.TL_CHECKPOINT_NAMESPACE,
            a.TL_TOOL_OUTCOME,
        }

    def test_old_fact_spellings_are_ignored(self, provider, exporter) -> None:
        """One spelling per fact: ``status``/``checkpoint_status`` are not ``checkpoint.status``."""
        span = hooks_for(tracer_provider=provider).event_started(tool_event(), None)
        span.update({"status": "x", "checkpoint_status": "y", "tool_description": "z"})
        span.end(tool_event())
        attrs = finished(exporter)["execute_tool send_email"].attributes
        assert a.TL_CHECKPOINT_STATUS not in attrs
        assert a.GEN_AI_TOOL_DESCRIPTION not in attrs


class TestTransitionSpan:
    def test_checkpoint_transition_lost_cas_exact_attributes(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        span = hooks.event_started(tool_event(), None)
        span.transition(
            name="claim_execution",
            status_from="ready",
            status_to="executing",
            expected_revision=0,
            revision=1,
            won=False,
        )
        span.end(tool_event(status="completed"))
        spans = finished(exporter)
        (child,) = spans["execute_tool send_email"].events
        assert child.name == "checkpoint claim_execution"
        assert dict(child.attributes) == {
            a.TL_CHECKPOINT_STATUS_FROM: "ready",
            a.TL_CHECKPOINT_STATUS_TO: "executing",
            a.TL_CHECKPOINT_EXPECTED_REVISION: 0,
            a.TL_CHECKPOINT_REVISION: 1,
            a.TL_CHECKPOINT_CAS: "lost",
        }
        # A lost CAS never moves the call's status.
        assert a.TL_CHECKPOINT_STATUS not in spans["execute_tool send_email"].attributes

    def test_checkpoint_transition_won_says_what_it_made(self, provider, exporter) -> None:
        """A won CAS's event carries only the status and revision after it."""
        span = hooks_for(tracer_provider=provider).event_started(tool_event(), None)
        span.transition(
            name="create_checkpoint",
            status_from=None,
            status_to="ready",
            expected_revision=-1,
            revision=0,
            won=True,
        )
        span.end(tool_event())
        (child,) = finished(exporter)["execute_tool send_email"].events
        assert child.name == "checkpoint create_checkpoint"
        assert dict(child.attributes) == {
            a.TL_CHECKPOINT_STATUS_TO: "ready",
            a.TL_CHECKPOINT_REVISION: 0,
        }


class TestStepAndApproval:
    def step(self, provider, content: bool | None, intent: bool = True) -> Any:
        hooks = hooks_for(tracer_provider=provider, capture_content=content, capture_intent=intent)
        run = hooks.run_started(RUN)
        ev = {
            "run_id": "run-1",
            "event_id": "ev-step",
            "parent_id": None,
            "kind": "step",
            "name": "repo_search",
            "status": "running",
            "started_at": "2026-01-01T00:00:01+00:00",
            "justification": "The question names a codebase.",
            "justification_source": "developer",
            "justification_missing": False,
            "inputs": {"query": "gate"},
        }
        span = hooks.event_started(ev, None)
        span.end({**ev, "status": "completed", "outputs": {"n_hits": 3}})
        run.end(RUN)

    def test_step_no_content_exact_attributes(self, provider, exporter) -> None:
        self.step(provider, content=False)
        assert dict(finished(exporter)["step repo_search"].attributes) == {
            a.TL_EVENT_ID: "ev-step",
            a.TL_INTENT_JUSTIFICATION: "The question names a codebase.",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
        }

    def test_step_with_content_adds_inputs_outputs(self, provider, exporter) -> None:
        self.step(provider, content=True)
        assert dict(finished(exporter)["step repo_search"].attributes) == {
            a.TL_EVENT_ID: "ev-step",
            a.TL_INTENT_JUSTIFICATION: "The question names a codebase.",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
            a.TL_STEP_INPUTS: '{"query":"gate"}',
            a.TL_STEP_OUTPUTS: '{"n_hits":3}',
        }

    def test_step_intent_off_drops_text(self, provider, exporter) -> None:
        self.step(provider, content=False, intent=False)
        spans = finished(exporter)
        assert dict(spans["step repo_search"].attributes) == {
            a.TL_EVENT_ID: "ev-step",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "developer",
        }
        assert a.TL_INTENT_GOAL not in spans["invoke_agent support-bot"].attributes

    def test_step_missing_justification_flag(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        ev = {
            "event_id": "e",
            "kind": "step",
            "name": "s",
            "justification": None,
            "meta": {"justification_source": "model", "justification_missing": True},
        }
        hooks.event_started(ev, None).end(ev)
        assert dict(finished(exporter)["step s"].attributes) == {
            a.TL_EVENT_ID: "e",
            a.TL_INTENT_JUSTIFICATION_SOURCE: "model",
            a.TL_INTENT_JUSTIFICATION_MISSING: True,
        }

    @pytest.mark.parametrize(
        ("granted", "outcome"), [(True, "allow"), (False, "deny"), (None, "require_approval")]
    )
    def test_approval_exact_attributes(self, provider, exporter, granted, outcome) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=True)
        ev = {
            "event_id": "ev-ap",
            "kind": "approval",
            "name": "email_findings",
            "status": "refused",
            "approval": {"by": "user", "granted": granted, "reason": "Local.", "for_call": "c1"},
        }
        hooks.event_started(ev, None).end(ev)
        span = finished(exporter)["approval email_findings"]
        assert span.kind is SpanKind.INTERNAL
        assert span.status.status_code is StatusCode.UNSET
        assert dict(span.attributes) == {
            a.TL_EVENT_ID: "ev-ap",
            a.TL_APPROVAL_OUTCOME: outcome,
            a.TL_APPROVAL_BY: "user",
            a.TL_APPROVAL_REASON: "Local.",
            a.TL_APPROVAL_CALL_ID: "c1",
            # Not gen_ai.tool.call.id: a backend would show an approval as a tool call.
            a.TL_TOOL_NAME: "email_findings",
        }

    def test_step_failed_sets_error(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        ev = {"event_id": "e", "kind": "step", "name": "s"}
        hooks.event_started(ev, None).end(ev, ValueError("bad"))
        span = finished(exporter)["step s"]
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes) == {a.TL_EVENT_ID: "e", a.ERROR_TYPE: "ValueError"}

    def test_note_gets_generic_span(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        ev = {"event_id": "e", "kind": "note", "name": "note", "text": "private"}
        hooks.event_started(ev, None).end(ev)
        assert dict(finished(exporter)["note"].attributes) == {
            a.TL_EVENT_ID: "e",
            a.TL_EVENT_KIND: "note",
            a.TL_NOTE_TEXT: "private",  # intent text (on by default)
        }

    def test_nested_parent_handle_is_used(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider)
        run = hooks.run_started(RUN)
        outer = hooks.event_started({"event_id": "o", "kind": "step", "name": "outer"}, None)
        inner = hooks.event_started({"event_id": "i", "kind": "step", "name": "inner"}, outer)
        inner.end({"kind": "step"})
        outer.end({"kind": "step"})
        run.end(RUN)
        spans = finished(exporter)
        assert spans["step inner"].parent.span_id == spans["step outer"].context.span_id
        assert (
            spans["step outer"].parent.span_id == spans["invoke_agent support-bot"].context.span_id
        )


class TestParentUnderCurrentSpan:
    """An event's span starts under the innermost of its journal parent and the current span."""

    def ids(self, exporter: InMemorySpanExporter) -> dict[str, Any]:
        assert flush_spans()
        return {s.name: s for s in exporter.get_finished_spans()}

    def test_framework_span_parents_the_tool_span_and_links_the_run(
        self, provider, exporter
    ) -> None:
        """A framework's span current at the call parents the tool span; the run is linked."""
        hooks = hooks_for(tracer_provider=provider)
        run = hooks.run_started(RUN)
        with provider.get_tracer("framework").start_as_current_span("framework tool"):
            tool = hooks.event_started(tool_event(), None)
            tool.end(tool_event(status="completed"))
        run.end(RUN)
        spans = self.ids(exporter)
        framework, ours = spans["framework tool"], spans["execute_tool send_email"]
        assert ours.parent.span_id == framework.context.span_id
        assert ours.context.trace_id == framework.context.trace_id
        run_span = spans["invoke_agent support-bot"]
        assert [link.context.span_id for link in ours.links] == [run_span.context.span_id]

    def test_framework_span_inside_the_active_run_is_one_trace(self, provider, exporter) -> None:
        """With the run's span current, the framework's span and the tool span share its trace."""
        hooks = hooks_for(tracer_provider=provider)
        run = hooks.run_started(RUN)
        with (
            run.activate(),
            provider.get_tracer("framework").start_as_current_span("framework tool"),
        ):
            tool = hooks.event_started(tool_event(), None)
            tool.end(tool_event(status="completed"))
        run.end(RUN)
        spans = self.ids(exporter)
        run_span, framework = spans["invoke_agent support-bot"], spans["framework tool"]
        ours = spans["execute_tool send_email"]
        assert framework.parent.span_id == run_span.context.span_id
        assert ours.parent.span_id == framework.context.span_id
        assert {s.context.trace_id for s in spans.values()} == {run_span.context.trace_id}
        assert ours.links == ()

    def test_span_the_run_started_in_does_not_parent_its_events(self, provider, exporter) -> None:
        """A call made in the context the run was started in stays under the run's span."""
        hooks = hooks_for(tracer_provider=provider)
        with provider.get_tracer("server").start_as_current_span("request"):
            run = hooks.run_started(RUN)
            tool = hooks.event_started(tool_event(), None)
            tool.end(tool_event(status="completed"))
            run.end(RUN)
        spans = self.ids(exporter)
        run_span = spans["invoke_agent support-bot"]
        assert run_span.parent.span_id == spans["request"].context.span_id
        assert spans["execute_tool send_email"].parent.span_id == run_span.context.span_id
        assert spans["execute_tool send_email"].links == ()

    def test_journal_parent_started_under_the_current_span_wins(self, provider, exporter) -> None:
        """A model call opened under the framework's span keeps the tool call it requested."""
        hooks = hooks_for(tracer_provider=provider)
        run = hooks.run_started(RUN)
        with provider.get_tracer("framework").start_as_current_span("framework turn"):
            chat = hooks.event_started({"event_id": "c", "kind": "llm_call", "name": "m"}, None)
            chat.end({"kind": "llm_call"})
            tool = hooks.event_started(tool_event(), chat)
            tool.end(tool_event(status="completed"))
        run.end(RUN)
        spans = self.ids(exporter)
        assert spans["chat m"].parent.span_id == spans["framework turn"].context.span_id
        assert spans["execute_tool send_email"].parent.span_id == spans["chat m"].context.span_id

    def test_active_step_parents_the_events_inside_it(self, provider, exporter) -> None:
        """A step made current is the parent of the calls journaled inside it."""
        hooks = hooks_for(tracer_provider=provider)
        run = hooks.run_started(RUN)
        step = hooks.event_started({"event_id": "s", "kind": "step", "name": "plan"}, None)
        with step.activate():
            tool = hooks.event_started(tool_event(), step)
            tool.end(tool_event(status="completed"))
        step.end({"kind": "step"})
        run.end(RUN)
        spans = self.ids(exporter)
        assert spans["execute_tool send_email"].parent.span_id == spans["step plan"].context.span_id


class TestRunSpan:
    def test_invoke_agent_exact_attributes(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=True)
        run = hooks.run_started(RUN)
        run.end({**RUN, "status": "completed", "head_hash": "ff" * 32, "event_count": 7})
        span = finished(exporter)["invoke_agent support-bot"]
        assert span.kind is SpanKind.INTERNAL
        assert dict(span.attributes) == {
            a.GEN_AI_OPERATION_NAME: "invoke_agent",
            a.GEN_AI_AGENT_NAME: "support-bot",
            a.TL_RUN_ID: "run-1",
            a.TL_INTENT_GOAL: "Answer the question",
            a.TL_JOURNAL_HEAD_HASH: "ff" * 32,
            a.TL_JOURNAL_EVENT_COUNT: 7,
        }
        assert span.instrumentation_scope.name == "toolledger"
        assert span.instrumentation_scope.version
        assert span.instrumentation_scope.schema_url == a.SCHEMA_URL

    def test_invoke_agent_without_agent_drops_none(self, provider, exporter) -> None:
        run = hooks_for(tracer_provider=provider).run_started({"run_id": "r", "goal": None})
        run.end({})
        span = exporter.get_finished_spans()[0]
        assert span.name == "invoke_agent"
        assert dict(span.attributes) == {
            a.GEN_AI_OPERATION_NAME: "invoke_agent",
            a.TL_RUN_ID: "r",
        }

    def test_handle_exposes_hex_ids(self, provider, exporter) -> None:
        run = hooks_for(tracer_provider=provider).run_started(RUN)
        run.end(RUN)
        span = exporter.get_finished_spans()[0]
        assert run.trace_id == format(span.context.trace_id, "032x")
        assert run.span_id == format(span.context.span_id, "016x")

    def test_activate_makes_span_current(self, provider, exporter) -> None:
        from opentelemetry import trace

        run = hooks_for(tracer_provider=provider).run_started(RUN)
        with run.activate():
            inner = provider.get_tracer("user").start_span("user-span")
            inner.end()
        run.end(RUN)
        spans = finished(exporter)
        assert (
            spans["user-span"].parent.span_id == spans["invoke_agent support-bot"].context.span_id
        )
        assert not trace.get_current_span().get_span_context().is_valid


class TestPolicy:
    def test_redact_runs_before_set(self, provider, exporter) -> None:
        def redact(attrs: dict[str, Any]) -> dict[str, Any]:
            return {
                k: ("[redacted]" if "justification" in k and isinstance(v, str) else v)
                for k, v in attrs.items()
            }

        hooks = hooks_for(tracer_provider=provider, capture_content=False, redact=redact)
        span = hooks.event_started(tool_event(), None)
        span.end(tool_event())
        attrs = finished(exporter)["execute_tool send_email"].attributes
        assert attrs[a.TL_INTENT_JUSTIFICATION] == "[redacted]"
        assert attrs[a.TL_INTENT_JUSTIFICATION_SOURCE] == "[redacted]"

    def test_redact_that_raises_drops_attributes(self, provider, exporter) -> None:
        def redact(attrs: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("redactor down")

        hooks = hooks_for(tracer_provider=provider, capture_content=True, redact=redact)
        span = hooks.event_started(tool_event(), None)
        span.end(tool_event(outputs={"secret": 1}))
        spans = finished(exporter)
        assert dict(spans["execute_tool send_email"].attributes) == {}

    def test_content_truncated_to_bound(self, provider, exporter) -> None:
        hooks = hooks_for(tracer_provider=provider, capture_content=True)
        big = {"body": "x" * (CONTENT_MAX_CHARS * 2)}
        span = hooks.event_started(tool_event(inputs=big), None)
        span.end(tool_event(inputs=big, outputs=None))
        value = finished(exporter)["execute_tool send_email"].attributes[
            a.GEN_AI_TOOL_CALL_ARGUMENTS
        ]
        assert len(value) <= CONTENT_MAX_CHARS + 20
        assert value.endswith("[truncated]")
        assert json.loads(value[:10] + '"}') == {"body": "x"}

    def test_always_off_sampler_records_nothing_and_never_raises(self) -> None:
        exp = InMemorySpanExporter()
        tp = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
        tp.add_span_processor(SimpleSpanProcessor(exp))
        hooks = hooks_for(tracer_provider=tp, capture_content=True)
        run = hooks.run_started(RUN)
        span = hooks.event_started(tool_event(), run)
        span.transition(**CLAIM)
        span.update({"replayed": True})
        span.end(tool_event(), ValueError("x"))
        run.end(RUN)
        assert flush_spans()
        assert exp.get_finished_spans() == ()
        assert run.trace_id is not None  # ids exist (unsampled), so the journal can link

    def test_hooks_for_without_sdk_provider_is_noop(self) -> None:
        assert hooks_for() is NOOP_TELEMETRY

    def test_hooks_for_configured_defaults_apply(self, provider, exporter) -> None:
        from toolledger.telemetry import configure

        handle = configure(tracer_provider=provider, capture_content=True, capture_intent=False)
        try:
            hooks = hooks_for()
            assert isinstance(hooks, OTelTelemetry)
            assert hooks.policy.capture_content is True
            assert hooks.policy.capture_intent is False
            # a run may switch content off for itself, but not intent back on
            own = hooks_for(capture_content=False, capture_intent=True)
            assert own.policy.capture_content is False
            assert own.policy.capture_intent is False
        finally:
            handle.shutdown()
        assert hooks_for() is NOOP_TELEMETRY


def test_execute_tool_error_result_marks_error(provider, exporter) -> None:
    """on_error="result": the tool failed, the model is told; the span says ERROR."""
    tool = toolledger.tool("flaky", revision="1", execute=lambda i, c: 1 / 0, on_error="result")
    with toolledger.run(goal="g", db=":memory:", tracer_provider=provider) as run:
        outcome = run.call(tool, call_id="c1", input={})
    assert outcome.is_error is True
    span = finished(exporter)["execute_tool flaky"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[a.ERROR_TYPE] == "ZeroDivisionError"


def test_redact_applies_before_processors_see_attributes(provider, exporter) -> None:
    """Even a span processor's on_start never sees an unredacted value."""
    from opentelemetry.sdk.trace import SpanProcessor

    seen: list[dict[str, Any]] = []

    class Spy(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            seen.append(dict(span.attributes))

        def on_end(self, span: Any) -> None:
            seen.append(dict(span.attributes))

    provider.add_span_processor(Spy())
    secret = "sk-live-0123456789"

    def redact(attrs: dict[str, Any]) -> dict[str, Any]:
        return {
            k: (v.replace(secret, "[key]") if isinstance(v, str) else v) for k, v in attrs.items()
        }

    hooks = hooks_for(tracer_provider=provider, capture_content=True, redact=redact)
    span = hooks.event_started(tool_event(inputs={"key": secret}, justification=secret), None)
    span.update({"tool_description": f"uses {secret}"})
    span.end(tool_event(outputs={"echo": secret}))
    assert flush_spans()
    assert len(seen) == 2
    assert not any(secret in str(v) for attrs in seen for v in attrs.values())
    assert seen[1][a.GEN_AI_TOOL_CALL_RESULT] == '{"echo":"[key]"}'


class TestEndingThread:
    """Span endings gather on toolledger's thread and reach the processors in order."""

    def test_a_lone_ending_reaches_the_processor_without_a_flush(self, provider) -> None:
        """Nobody drains: the gathering wait ends by itself and the span is exported."""
        import threading

        from opentelemetry.sdk.trace import SpanProcessor

        ended = threading.Event()

        class Seen(SpanProcessor):
            def on_end(self, span: Any) -> None:
                ended.set()

        provider.add_span_processor(Seen())
        hooks_for(tracer_provider=provider).event_started(tool_event(), None).end(
            tool_event(status="completed")
        )
        assert ended.wait(10)

    def test_endings_run_in_submission_order(self, provider, exporter) -> None:
        """Many endings, fewer than a batch and more than one: exported in the order ended."""
        hooks = hooks_for(tracer_provider=provider)
        names = [f"step s{i}" for i in range(40)]
        for i in range(40):
            hooks.event_started({"event_id": f"e{i}", "kind": "step", "name": f"s{i}"}, None).end(
                {"kind": "step"}
            )
        assert flush_spans()
        assert [s.name for s in exporter.get_finished_spans()] == names
