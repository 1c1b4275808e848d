"""Entering a run makes its span current: spans started inside nest under it (one trace)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolledger


def _by_name(exporter: InMemorySpanExporter) -> dict[str, object]:
    return {str(s.name): s for s in exporter.get_finished_spans()}


class TestRunSpanIsCurrent:
    def test_a_framework_span_inside_the_block_is_a_child_of_the_run(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """A span another library starts inside ``with toolledger.run(...)`` is the run's child."""
        tracer = provider.get_tracer("some.framework")
        with (
            toolledger.run(goal="g", db=tmp_path / "l.db", tracer_provider=provider),
            tracer.start_as_current_span("framework step"),
        ):
            pass
        spans = exporter.get_finished_spans()
        (run_span,) = [s for s in spans if s.name.startswith("invoke_agent")]
        (step,) = [s for s in spans if s.name == "framework step"]
        assert step.parent is not None
        assert step.parent.span_id == run_span.context.span_id
        assert step.context.trace_id == run_span.context.trace_id

    def test_after_the_block_the_outer_context_is_back(
        self, tmp_path: Path, provider: TracerProvider
    ) -> None:
        """Leaving the block restores whatever span was current before it."""
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("app request") as outer:
            with toolledger.run(goal="g", db=tmp_path / "l.db", tracer_provider=provider):
                assert trace.get_current_span() is not outer
            assert trace.get_current_span() is outer

    def test_a_run_started_inside_a_framework_span_nests_under_it(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """The framework's own span is the parent of the run's span when the run starts in it."""
        tracer = provider.get_tracer("some.framework")
        with (
            tracer.start_as_current_span("graph") as graph,
            toolledger.run(goal="g", db=tmp_path / "l.db", tracer_provider=provider),
        ):
            pass
        (run_span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke")]
        assert run_span.parent is not None
        assert run_span.parent.span_id == graph.get_span_context().span_id

    def test_async_block_makes_the_run_current_too(
        self, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """``async with toolledger.run(...)`` does the same for coroutines inside it."""
        tracer = provider.get_tracer("some.framework")

        async def main() -> None:
            async with toolledger.run(goal="g", db=tmp_path / "l.db", tracer_provider=provider):
                await asyncio.sleep(0)
                with tracer.start_as_current_span("async step"):
                    pass

        asyncio.run(main())
        spans = exporter.get_finished_spans()
        (run_span,) = [s for s in spans if s.name.startswith("invoke_agent")]
        (step,) = [s for s in spans if s.name == "async step"]
        assert step.parent is not None
        assert step.parent.span_id == run_span.context.span_id
