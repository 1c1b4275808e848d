"""One trace, one tool span per call, with each framework's own instrumentation on.

The framework's span is the call's tool span (``execute_tool`` for Pydantic AI, an
OpenInference ``TOOL`` span for OpenAI Agents); toolledger's facts sit on one child of
another kind, ``guard_tool {tool}`` (OpenInference ``GUARDRAIL``), never a second tool span,
also for a replay and a recovery, and each guard sits under the framework span of its own
call when the model asks for two calls at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolledger
from toolledger.telemetry import attributes as a
from toolledger.telemetry import flush_spans

CALLS = (("call_1", "ana@example.com"), ("call_2", "bo@example.com"))


@pytest.fixture(autouse=True)
def _fresh_event_loop() -> Iterator[None]:
    """Both SDKs' ``run_sync`` use the thread's event loop: a fresh one per test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


class Mailbox:
    """``send_email``: the first attempt at ``lose`` writes its journal entry and raises."""

    def __init__(self, lose: str | None = None) -> None:
        self.sent: list[str] = []
        self.lose = lose

    def send_email(self, to: str) -> str:
        """Send one email."""
        self.sent.append(to)
        if to == self.lose:
            self.lose = None
            ctx = toolledger.current_call()
            assert ctx is not None
            ctx.operation.write({"message_id": f"m-{to}"})
            raise ConnectionError("the answer was lost")
        return f"sent to {to}"

    @staticmethod
    def recover(input: Any, ctx: toolledger.RecoverContext) -> Any:
        entry = ctx.operation.read()
        return None if entry is None else toolledger.Recovered(output=f"sent to {input['to']}")


def tool_spans(spans: list[Any]) -> list[Any]:
    """The spans a backend counts as tool executions."""
    return [
        s
        for s in spans
        if s.name.startswith(("execute_tool", "replay_tool", "recover_tool"))
        or (s.attributes or {}).get(a.GEN_AI_OPERATION_NAME) == a.OPERATION_EXECUTE_TOOL
        or (s.attributes or {}).get(a.OI_SPAN_KIND) == a.OI_TOOL
    ]


def check_guards(
    spans: list[Any], runs: int, call_id_of: Any, paused: int = 0
) -> dict[str, list[str]]:
    """Assert one trace and one guard per framework tool span (besides ``paused`` ones, runs
    an approval paused), its child for the same call; return each call id's guard outcomes
    in order."""
    assert len({s.context.trace_id for s in spans}) == 1
    by_id = {s.context.span_id: s for s in spans}
    ours = [s for s in spans if s.instrumentation_scope.name == "toolledger"]
    assert {s.name for s in ours} == {"guard_tool send_email", "invoke_agent mailer"}
    guards = [s for s in ours if s.name == "guard_tool send_email"]
    assert len(tool_spans(spans)) == len(CALLS) * runs + paused
    assert len(guards) == len(CALLS) * runs
    outcomes: dict[str, list[str]] = {}
    for guard in guards:
        host = by_id[guard.parent.span_id]
        assert host in tool_spans(spans)
        call_id = guard.attributes[a.TL_TOOL_CALL_ID]
        assert call_id_of(host) == call_id  # the guard of call_1 is under call_1's span
        assert guard.attributes[a.OI_SPAN_KIND] == a.OI_GUARDRAIL
        assert a.GEN_AI_OPERATION_NAME not in guard.attributes
        outcomes.setdefault(call_id, []).append(guard.attributes[a.TL_TOOL_OUTCOME])
    return outcomes


class TestPydanticAi:
    def run(self, tmp_path: Path, provider: TracerProvider, box: Mailbox, runs: int) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai.models.instrumented import InstrumentationSettings
        from pydantic_ai.toolsets import FunctionToolset

        from toolledger.integrations.pydantic_ai import GuardedToolset

        def model(messages: list[Any], info: Any) -> Any:
            parts = [p for m in messages for p in getattr(m, "parts", [])]
            if any(isinstance(p, ToolReturnPart) for p in parts):
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(
                parts=[ToolCallPart("send_email", {"to": to}, cid) for cid, to in CALLS]
            )

        with toolledger.run(
            "tell them", agent="mailer", db=tmp_path / "l.db", tracer_provider=provider
        ) as run:
            for _ in range(runs):
                toolset = GuardedToolset(
                    FunctionToolset([box.send_email]),
                    run=run,
                    recover={"send_email": box.recover},
                )
                agent = Agent(FunctionModel(model), toolsets=[toolset])
                agent.instrument = InstrumentationSettings(tracer_provider=provider)
                agent.run_sync("go")
        assert flush_spans()

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    def test_parallel_calls_then_a_replay(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Two calls at once, then the same turn again: one tool span per framework call,
        each guard under its own call's span; the replayed call's span is ``replay_tool``."""
        box = Mailbox()
        self.run(tmp_path, provider, box, runs=2)
        spans = list(exporter.get_finished_spans())
        outcomes = check_guards(spans, 2, lambda h: h.attributes[a.GEN_AI_TOOL_CALL_ID])
        assert outcomes == {"call_1": ["executed", "replayed"], "call_2": ["executed", "replayed"]}
        # the two calls run at once, so either may send first
        assert sorted(box.sent) == ["ana@example.com", "bo@example.com"]
        names = sorted(s.name for s in tool_spans(spans))
        assert names == ["execute_tool send_email"] * 2 + ["replay_tool send_email"] * 2

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    def test_a_recovered_call_has_one_tool_span(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """``recover`` proves a lost answer: still one tool span, the guard says recovered."""
        box = Mailbox(lose="bo@example.com")
        self.run(tmp_path, provider, box, runs=1)
        spans = list(exporter.get_finished_spans())
        outcomes = check_guards(spans, 1, lambda h: h.attributes[a.GEN_AI_TOOL_CALL_ID])
        assert outcomes == {"call_1": ["executed"], "call_2": ["recovered"]}


class TestOpenAiAgents:
    @pytest.fixture
    def instrumented(self, provider: TracerProvider) -> Iterator[None]:
        from agents import set_trace_processors
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        set_trace_processors([])
        instrumentor = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        yield
        instrumentor.uninstrument()
        set_trace_processors([])

    def run(self, tmp_path: Path, provider: TracerProvider, box: Mailbox, runs: int) -> None:
        from agents import Agent, Runner, function_tool
        from agents.testing import ScriptedModel, assistant_message, function_call

        from toolledger.integrations.openai_agents import guarded_tools

        send_email = function_tool(box.send_email)
        with toolledger.run(
            "tell them", agent="mailer", db=tmp_path / "l.db", tracer_provider=provider
        ) as run:
            for _ in range(runs):
                model = ScriptedModel(
                    [
                        [function_call("send_email", {"to": to}, call_id=cid) for cid, to in CALLS],
                        [assistant_message("done")],
                    ]
                )
                tools = guarded_tools(run, [send_email], recover={"send_email": box.recover})
                Runner.run_sync(Agent(name="a", model=model, tools=tools), "go")
        assert flush_spans()

    @staticmethod
    def call_id(host: Any) -> str:
        """OpenInference's TOOL span carries no call id: toolledger adds its own key."""
        assert (
            json.loads(host.attributes[a.OI_INPUT_VALUE])["to"]
            == dict(CALLS)[host.attributes[a.TL_TOOL_CALL_ID]]
        )
        return str(host.attributes[a.TL_TOOL_CALL_ID])

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    @pytest.mark.usefixtures("instrumented")
    def test_parallel_calls_then_a_replay(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Two calls at once, twice: one TOOL span per framework call, a guard under each."""
        box = Mailbox()
        self.run(tmp_path, provider, box, runs=2)
        spans = list(exporter.get_finished_spans())
        outcomes = check_guards(spans, 2, self.call_id)
        assert outcomes == {"call_1": ["executed", "replayed"], "call_2": ["executed", "replayed"]}
        replayed = [s for s in tool_spans(spans) if s.attributes.get(a.TL_TOOL_OUTCOME)]
        assert [s.attributes[a.TL_TOOL_OUTCOME] for s in replayed] == ["replayed"] * 2

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    @pytest.mark.usefixtures("instrumented")
    def test_a_recovered_call_has_one_tool_span(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """``recover`` proves a lost answer: still one TOOL span, the guard says recovered."""
        box = Mailbox(lose="bo@example.com")
        self.run(tmp_path, provider, box, runs=1)
        outcomes = check_guards(list(exporter.get_finished_spans()), 1, self.call_id)
        assert outcomes == {"call_1": ["executed"], "call_2": ["recovered"]}


class TestLangGraph:
    @pytest.fixture
    def instrumented(self, provider: TracerProvider) -> Iterator[None]:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor = LangChainInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        yield
        instrumentor.uninstrument()

    @staticmethod
    def app(
        run: toolledger.Run, box: Mailbox, calls: tuple[tuple[str, str], ...] = CALLS, **guard: Any
    ) -> Any:
        """A model that asks for ``calls`` at once, then says done; a guarded ToolNode."""
        from langchain_core.messages import AIMessage
        from langchain_core.tools import StructuredTool
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition

        from toolledger.integrations.langgraph import aguard_tool_calls, guard_tool_calls

        def model(state: MessagesState) -> dict[str, Any]:
            if state["messages"][-1].type == "tool":
                return {"messages": [AIMessage(content="done")]}
            asked = [{"name": "send_email", "args": {"to": to}, "id": cid} for cid, to in calls]
            return {"messages": [AIMessage(content="", tool_calls=asked)]}

        async def send_email(to: str) -> str:
            """Send one email."""
            return box.send_email(to)

        node = ToolNode(
            [StructuredTool.from_function(box.send_email, coroutine=send_email)],
            wrap_tool_call=guard_tool_calls(run, **guard),
            awrap_tool_call=aguard_tool_calls(run, **guard),
        )
        g = StateGraph(MessagesState)
        g.add_node("model", model)
        g.add_node("tools", node)
        g.add_edge(START, "model")
        g.add_conditional_edges("model", tools_condition, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile(checkpointer=InMemorySaver())

    def run(
        self,
        tmp_path: Path,
        provider: TracerProvider,
        box: Mailbox,
        runs: int,
        is_async: bool = False,
    ) -> None:
        with toolledger.run(
            "tell them", agent="mailer", db=tmp_path / "l.db", tracer_provider=provider
        ) as run:
            app = self.app(run, box, recover={"send_email": box.recover})
            for n in range(runs):
                config = {"configurable": {"thread_id": f"t{n}"}}
                start = {"messages": [("user", "go")]}
                if is_async:
                    asyncio.run(app.ainvoke(start, config, durability="sync"))
                else:
                    app.invoke(start, config, durability="sync")
        assert flush_spans()

    @staticmethod
    def call_id(host: Any) -> str:
        """OpenInference's TOOL span carries no call id: toolledger adds its own key."""
        call_id = str(host.attributes[a.TL_TOOL_CALL_ID])
        assert dict(CALLS)[call_id] in host.attributes[a.OI_INPUT_VALUE]
        return call_id

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    @pytest.mark.filterwarnings("ignore::toolledger.integrations.ConversationWarning")
    @pytest.mark.usefixtures("instrumented")
    @pytest.mark.parametrize("is_async", [False, True], ids=["invoke", "ainvoke"])
    def test_parallel_calls_then_a_replay(
        self,
        tmp_path: Path,
        provider: TracerProvider,
        exporter: InMemorySpanExporter,
        is_async: bool,
    ) -> None:
        """Two calls at once, twice: one TOOL span per framework call, a guard under each;
        the replayed calls' TOOL spans say ``replayed``."""
        box = Mailbox()
        self.run(tmp_path, provider, box, runs=2, is_async=is_async)
        spans = list(exporter.get_finished_spans())
        outcomes = check_guards(spans, 2, self.call_id)
        assert outcomes == {"call_1": ["executed", "replayed"], "call_2": ["executed", "replayed"]}
        assert sorted(box.sent) == ["ana@example.com", "bo@example.com"]  # run in parallel
        replayed = [s for s in tool_spans(spans) if s.attributes.get(a.TL_TOOL_OUTCOME)]
        assert sorted(s.name for s in replayed) == ["replay_tool send_email"] * 2
        assert [s.attributes[a.TL_TOOL_OUTCOME] for s in replayed] == ["replayed"] * 2

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    @pytest.mark.usefixtures("instrumented")
    def test_a_recovered_call_has_one_tool_span(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """``recover`` proves a lost answer: still one TOOL span, the guard says recovered."""
        box = Mailbox(lose="bo@example.com")
        self.run(tmp_path, provider, box, runs=1)
        outcomes = check_guards(list(exporter.get_finished_spans()), 1, self.call_id)
        assert outcomes == {"call_1": ["executed"], "call_2": ["recovered"]}

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    @pytest.mark.usefixtures("instrumented")
    def test_an_approval_sits_under_the_tool_span_it_paused(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """A gate pauses the graph (``interrupt()``) inside the call's TOOL span: the approval
        span is its child; after ``Command(resume=...)`` the resumed run's TOOL span holds the
        second approval span and the one guard."""
        from langgraph.types import Command

        from toolledger.integrations import ToolGate

        box = Mailbox()
        config = {"configurable": {"thread_id": "t"}}
        with toolledger.run(
            "tell them", agent="mailer", db=tmp_path / "l.db", tracer_provider=provider
        ) as run:
            app = self.app(run, box, CALLS[:1], gates={"send_email": ToolGate()})
            paused = app.invoke({"messages": [("user", "go")]}, config, durability="sync")
            assert [i.value["call_id"] for i in paused["__interrupt__"]] == ["call_1"]
            assert box.sent == []
            resume = Command(resume={"approved": True, "by": "ops"})
            app.invoke(resume, config, durability="sync")
        assert flush_spans()
        assert box.sent == ["ana@example.com"]
        spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
        assert len({s.context.trace_id for s in spans}) == 1
        hosts = tool_spans(spans)
        assert [h.attributes[a.OI_SPAN_KIND] for h in hosts] == [a.OI_TOOL] * 2
        children = [
            sorted(s.name for s in spans if s.parent and s.parent.span_id == h.context.span_id)
            for h in hosts
        ]
        assert children == [
            ["approval send_email"],
            ["approval send_email", "guard_tool send_email"],
        ]
        (guard,) = [s for s in spans if s.name == "guard_tool send_email"]
        assert guard.attributes[a.TL_TOOL_OUTCOME] == "executed"
        assert hosts[1].attributes[a.TL_TOOL_CALL_ID] == guard.attributes[a.TL_TOOL_CALL_ID]

    @pytest.mark.filterwarnings("ignore::toolledger.NewLedgerWarning")
    def test_without_the_instrumentation_toolledgers_span_is_the_tool_span(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """No OpenInference instrumentor: each call's ``execute_tool`` is under the run's span."""
        box = Mailbox()
        self.run(tmp_path, provider, box, runs=1)
        spans = list(exporter.get_finished_spans())
        (agent,) = [s for s in spans if s.name == "invoke_agent mailer"]
        tools = tool_spans(spans)
        assert sorted(s.name for s in tools) == ["execute_tool send_email"] * len(CALLS)
        assert {s.parent.span_id for s in tools} == {agent.context.span_id}
        assert sorted(s.attributes[a.GEN_AI_TOOL_CALL_ID] for s in tools) == ["call_1", "call_2"]
