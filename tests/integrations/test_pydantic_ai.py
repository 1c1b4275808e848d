"""``GuardedToolset``: Pydantic AI tool calls through the guard, keyed by ``tool_call_id``."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import toolledger
from toolledger import Denied, Pending
from toolledger.errors import BindingConflictError
from toolledger.integrations import CallIdReuseWarning, ToolGate
from toolledger.integrations.pydantic_ai import GuardedTools, GuardedToolset
from toolledger.telemetry import flush_spans
from toolledger.testing import stored_run

from ._spans import ancestors, only


@pytest.fixture(autouse=True)
def _fresh_event_loop() -> Iterator[None]:
    """``run_sync`` runs on the thread's event loop: a fresh one per test (the Agents SDK's
    ``run_sync`` in another test module leaves one that was shut down)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


def scripted(call_id: str = "call_1", args: dict[str, Any] | None = None) -> FunctionModel:
    """A model that calls ``send_email`` once (id ``call_id``), then answers with the result."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)
        ]
        if returns:
            return ModelResponse(parts=[TextPart(f"done: {returns[-1].model_response_str()}")])
        return ModelResponse(
            parts=[ToolCallPart("send_email", args or {"to": "ana@example.com"}, call_id)]
        )

    return FunctionModel(model)


class Email(BaseModel):
    to: str
    subject: str


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def toolset(self) -> FunctionToolset[Any]:
        def send_email(to: str) -> dict[str, str]:
            """Send one email."""
            self.sent.append(to)
            return {"sent_to": to}

        return FunctionToolset([send_email])


def test_tool_runs_once_and_the_same_call_replays_its_result(run: toolledger.Run) -> None:
    """Two agent runs whose model issues the same call id: one email, the same result twice."""
    box = Outbox()
    agent = Agent(scripted(), toolsets=[GuardedToolset(box.toolset(), run=run)])
    first = agent.run_sync("Tell Ana")
    second = agent.run_sync("Tell Ana")
    assert box.sent == ["ana@example.com"]
    assert first.output == second.output == 'done: {"sent_to":"ana@example.com"}'
    rec = run.store.get(run.namespace, "call_1")
    assert rec.result.payload == {"sent_to": "ana@example.com"}
    assert rec.binding.input_fingerprint is not None


def test_pending_call_in_history_resumes_with_the_stored_result(run: toolledger.Run) -> None:
    """Resuming from a history that ends with the model's tool call: the call is not re-run."""
    box = Outbox()
    agent = Agent(scripted(), toolsets=[GuardedToolset(box.toolset(), run=run)])
    result = agent.run_sync("Tell Ana")
    history = result.all_messages()
    pending = history[: next(i for i, m in enumerate(history) if isinstance(m, ModelResponse)) + 1]
    assert isinstance(pending[-1].parts[0], ToolCallPart)
    resumed = agent.run_sync(None, message_history=pending)
    assert box.sent == ["ana@example.com"]
    assert resumed.output == result.output


def test_inputs_are_bound_as_json(run: toolledger.Run) -> None:
    """A pydantic-model argument is bound by its JSON; another input under the id conflicts."""
    sent: list[Email] = []

    def send_email(email: Email) -> str:
        """Send one email."""
        sent.append(email)
        return "ok"

    args = {"email": {"to": "ana@example.com", "subject": "Shipped"}}
    toolset = GuardedToolset(FunctionToolset([send_email]), run=run)
    Agent(scripted(args=args), toolsets=[toolset]).run_sync("go")
    assert [e.to for e in sent] == ["ana@example.com"]
    run.flush()
    (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert event["inputs"] == args
    other = {"email": {"to": "bob@example.com", "subject": "Shipped"}}
    with pytest.raises(toolledger.BindingConflictError):
        Agent(scripted(args=other), toolsets=[toolset]).run_sync("go")
    assert len(sent) == 1


def test_models_justification_is_journaled(run: toolledger.Run) -> None:
    """A tool whose schema has ``justification``: the model's text is the event's."""

    def send_email(to: str, justification: str) -> str:
        """Send one email."""
        return "ok"

    args = {"to": "ana@example.com", "justification": "Ana asked to be told."}
    toolset = GuardedToolset(FunctionToolset([send_email]), run=run)
    Agent(scripted(args=args), toolsets=[toolset]).run_sync("go")
    run.flush()
    (event,) = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert event["justification"] == "Ana asked to be told."
    assert event["inputs"] == {"to": "ana@example.com"}


@pytest.mark.parametrize(
    "error", [ModelRetry("try again"), ApprovalRequired(), CallDeferred()], ids=type
)
def test_control_flow_exceptions_pass_through_with_the_claim_released(
    run: toolledger.Run, error: Exception
) -> None:
    """ModelRetry, ApprovalRequired and CallDeferred reach the framework; nothing is claimed."""
    seen: list[Any] = []

    def send_email(to: str) -> str:
        """Send one email."""
        seen.append(to)
        raise error

    toolset = GuardedToolset(FunctionToolset([send_email], max_retries=0), run=run)
    agent = Agent(
        scripted(),
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
    )
    if isinstance(error, ModelRetry):  # no retries left: the run fails the framework's way
        with pytest.raises(UnexpectedModelBehavior, match="send_email"):
            agent.run_sync("go")
    else:
        out = agent.run_sync("go").output
        assert isinstance(out, DeferredToolRequests)
        assert [c.tool_call_id for c in [*out.calls, *out.approvals]] == ["call_1"]
    assert seen == ["ana@example.com"]
    assert run.store.get(run.namespace, "call_1").status.value == "ready"


def test_approval_required_then_approved_runs_once(run: toolledger.Run) -> None:
    """The SDK's approval flow: deferred, approved on resume, the tool runs once."""
    box = Outbox()

    def send_email(to: str) -> str:
        """Send one email."""
        box.sent.append(to)
        return "ok"

    toolset = FunctionToolset[Any]()
    toolset.add_function(send_email, requires_approval=True)
    agent = Agent(
        scripted(),
        toolsets=[GuardedToolset(toolset, run=run)],
        output_type=[str, DeferredToolRequests],
    )
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    assert box.sent == []
    approvals = DeferredToolResults(approvals={"call_1": True})
    for _ in range(2):
        done = agent.run_sync(
            None, message_history=first.all_messages(), deferred_tool_results=approvals
        )
        assert done.output == "done: ok"
    assert box.sent == ["ana@example.com"]


def test_toolledger_gate_waiting_defers_the_call(run: toolledger.Run) -> None:
    """A toolledger gate with no decision yet defers the call; nothing runs."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Pending("HELP-1"))}
    agent = Agent(
        scripted(),
        toolsets=[GuardedToolset(box.toolset(), run=run, gates=gates)],
        output_type=[str, DeferredToolRequests],
    )
    out = agent.run_sync("go").output
    assert isinstance(out, DeferredToolRequests)
    assert out.metadata == {"call_1": {"toolledger": "awaiting_approval"}}
    assert box.sent == []


def test_denial_is_the_tools_result_not_an_exception(run: toolledger.Run) -> None:
    """A denied call: the model is told who denied it and why; ``agent.run`` returns."""
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda request: Denied("ops", "not today"))}
    agent = Agent(scripted(), toolsets=[GuardedToolset(box.toolset(), run=run, gates=gates)])
    assert agent.run_sync("go").output == "done: denied by ops: not today"
    assert box.sent == []


def test_replanned_denied_call_gets_the_denial_without_asking_again(
    run: toolledger.Run,
) -> None:
    """The model re-plans a denied call under a new id: the denial is its tool result and
    the approver (the operator) is asked once."""
    box = Outbox()
    asked: list[str] = []

    def approver(request: Any) -> Denied:
        asked.append(request.call_id)
        return Denied("ops", "not today")

    gates = {"send_email": ToolGate(approver=approver)}
    toolset = GuardedToolset(box.toolset(), run=run, gates=gates)
    outs = [
        Agent(scripted(call_id), toolsets=[toolset]).run_sync("go").output
        for call_id in ("call_1", "call_2")
    ]
    assert outs == ["done: denied by ops: not today"] * 2
    assert asked == ["call_1"]
    assert box.sent == []
    records = toolledger.approvals.list_approvals(run.store)
    assert [(r.call_id, r.status.value) for r in records] == [
        ("call_1", "denied"),
        ("call_2", "denied"),
    ]


def test_on_error_result_stores_the_tools_error(run: toolledger.Run) -> None:
    """``on_error="result"``: the tool's exception is stored and is the model's result."""

    def send_email(to: str) -> str:
        """Send one email."""
        raise ValueError("mailbox full")

    toolset = GuardedToolset(FunctionToolset([send_email]), run=run, on_error="result")
    out = Agent(scripted(), toolsets=[toolset]).run_sync("go").output
    assert "mailbox full" in out
    stored = run.store.get(run.namespace, "call_1")
    assert stored.result is not None
    assert stored.result.is_error


def test_capability_guards_agent_tool_in_place(run: toolledger.Run) -> None:
    """``capabilities=[GuardedTools(run)]``: an ``@agent.tool_plain`` runs once per call id."""
    sent: list[str] = []
    agent = Agent(scripted(), capabilities=[GuardedTools(run)])

    @agent.tool_plain
    def send_email(to: str) -> str:
        """Send one email."""
        sent.append(to)
        return f"sent to {to}"

    outs = [agent.run_sync("Tell Ana").output for _ in range(2)]
    assert outs == ["done: sent to ana@example.com"] * 2
    assert sent == ["ana@example.com"]
    assert run.store.get(run.namespace, "call_1").result.payload == "sent to ana@example.com"


def two_calls() -> FunctionModel:
    """A model that sends two emails, one per turn, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done == 2:
            return ModelResponse(parts=[TextPart("done")])
        to = ["ana@example.com", "bo@example.com"][done]
        return ModelResponse(parts=[ToolCallPart("send_email", {"to": to}, f"call_{done + 1}")])

    return FunctionModel(model)


@pytest.mark.parametrize(
    ("capability", "last"),
    [(True, "delivered"), (False, "completed")],
    ids=["GuardedTools", "GuardedToolset"],
)
def test_results_the_model_saw_are_marked_seen(
    run: toolledger.Run, capability: bool, last: str
) -> None:
    """``GuardedTools`` sees every completed model request; ``GuardedToolset`` alone sees a
    turn when its calls run, so the last result stays unseen."""
    box = Outbox()
    if capability:
        agent = Agent(two_calls(), toolsets=[box.toolset()], capabilities=[GuardedTools(run)])
    else:
        agent = Agent(two_calls(), toolsets=[GuardedToolset(box.toolset(), run=run)])
    assert agent.run_sync("go").output == "done"
    states = [run.store.get(run.namespace, c).status.value for c in ("call_1", "call_2")]
    assert states == ["delivered", last]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tool_reaches_its_call_context(run: toolledger.Run, is_async: bool) -> None:
    """``toolledger.current_call()`` inside a tool, sync (a worker thread) or async."""

    def context() -> str:
        ctx = toolledger.current_call()
        assert ctx is not None
        ctx.operation.write({"message_id": "m-1"})
        return ctx.call_id

    def send_email(to: str) -> str:
        """Send one email."""
        return context()

    async def asend_email(to: str) -> str:
        """Send one email."""
        return context()

    tool = asend_email if is_async else send_email
    tool.__name__ = "send_email"
    agent = Agent(scripted(), toolsets=[FunctionToolset([tool])], capabilities=[GuardedTools(run)])
    assert agent.run_sync("go").output == "done: call_1"


def test_fixed_id_model_in_a_new_run_warns_with_the_fix(tmp_path: Path) -> None:
    """A test model's fixed id, reused by a second run for another call: the error, and a
    ``CallIdReuseWarning`` naming the fix."""
    db = str(tmp_path / "l.db")
    with toolledger.run("first", db=db) as first:
        Agent(
            scripted(args={"to": "a"}), toolsets=[GuardedToolset(Outbox().toolset(), run=first)]
        ).run_sync("go")
    with toolledger.run("second", db=db) as second:
        agent = Agent(
            scripted(args={"to": "b"}), toolsets=[GuardedToolset(Outbox().toolset(), run=second)]
        )
        with (
            pytest.warns(CallIdReuseWarning, match="own namespace"),
            pytest.raises(BindingConflictError),
        ):
            agent.run_sync("go")


def test_agent_built_before_the_run_uses_the_active_run(tmp_path: Path) -> None:
    """``GuardedTools()`` without a run: each call goes through the run active at the time."""
    box = Outbox()
    agent = Agent(scripted(), toolsets=[box.toolset()], capabilities=[GuardedTools()])
    with pytest.raises(toolledger.InvalidArgumentError, match="no toolledger run is active"):
        agent.run_sync("go")
    assert box.sent == []
    with toolledger.run("later", db=str(tmp_path / "l.db")) as later:
        assert agent.run_sync("go").output == 'done: {"sent_to":"ana@example.com"}'
        assert later.store.get(later.namespace, "call_1") is not None
    assert box.sent == ["ana@example.com"]


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pydantic-ai, importing the adapter raises an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.pydantic_ai")
    with pytest.raises(ImportError, match=r"toolledger\[pydantic-ai\]"):
        importlib.import_module("toolledger.integrations.pydantic_ai")


def test_replanned_call_with_an_effect_key_returns_the_first_result(run: toolledger.Run) -> None:
    """A new call id for the same action: executed again without a key, deduplicated with one."""
    plain = Outbox()
    for call_id in ("call_1", "call_2"):
        # GuardedTools sees the model's last turn, which saw the first result: once the
        # model saw it, the same action asked again is a new one.
        agent = Agent(
            scripted(call_id), toolsets=[plain.toolset()], capabilities=[GuardedTools(run)]
        )
        agent.run_sync("go")
    assert plain.sent == ["ana@example.com"] * 2  # a repeated action is legitimate by default
    keyed = Outbox()
    toolset = GuardedToolset(keyed.toolset(), run=run, effect_keys={"send_email": "input"})
    outs = [
        Agent(scripted(call_id), toolsets=[toolset]).run_sync("go").output
        for call_id in ("call_3", "call_4")
    ]
    assert keyed.sent == ["ana@example.com"]
    assert outs[0] == outs[1]


class TestSpansUnderPydanticAiSpans:
    """With ``instrument=`` on, the agent's tool span is an ancestor of toolledger's."""

    def spans(self, tmp_path: Path, provider: Any, exporter: Any, *, active: bool) -> list[Any]:
        from pydantic_ai.models.instrumented import InstrumentationSettings

        box = Outbox()
        store = toolledger.SQLiteStore(tmp_path / "spans.db", durability="normal")
        with toolledger.run("tell Ana", agent="mailer", db=store, tracer_provider=provider) as run:
            agent = Agent(scripted(), toolsets=[GuardedToolset(box.toolset(), run=run)])
            agent.instrument = InstrumentationSettings(tracer_provider=provider)
            if active:
                with run.span.activate():
                    agent.run_sync("Tell Ana")
            else:
                agent.run_sync("Tell Ana")
        store.close()
        assert box.sent == ["ana@example.com"]
        assert flush_spans()
        return list(exporter.get_finished_spans())

    def test_framework_tool_span_is_an_ancestor_in_one_trace(
        self, tmp_path: Path, provider: Any, exporter: Any
    ) -> None:
        """The run's span current: one trace, our guard_tool under pydantic-ai's execute_tool."""
        spans = self.spans(tmp_path, provider, exporter, active=True)
        ours = only(spans, "toolledger", "guard_tool send_email")
        theirs = only(spans, "pydantic-ai", "execute_tool send_email")
        assert ours.parent.span_id == theirs.context.span_id
        assert theirs.context.span_id in ancestors(ours, spans)
        run_span = only(spans, "toolledger", "invoke_agent mailer")
        assert run_span.context.span_id in ancestors(ours, spans)
        assert {s.context.trace_id for s in spans} == {run_span.context.trace_id}

    def test_quick_start_without_activate_is_one_trace(
        self, tmp_path: Path, provider: Any, exporter: Any
    ) -> None:
        """No ``run.span.activate()``: entering the run made its span current, one trace."""
        spans = self.spans(tmp_path, provider, exporter, active=False)
        ours = only(spans, "toolledger", "guard_tool send_email")
        theirs = only(spans, "pydantic-ai", "execute_tool send_email")
        assert ours.parent.span_id == theirs.context.span_id
        run_span = only(spans, "toolledger", "invoke_agent mailer")
        assert run_span.context.span_id in ancestors(theirs, spans)
        assert {s.context.trace_id for s in spans} == {run_span.context.trace_id}
