"""A span processor that blocks never hangs a tool call nor leaves its claim held.

Span endings run on toolledger's telemetry thread: a ``SimpleSpanProcessor`` whose
exporter blocks, or a processor whose ``on_end`` blocks, stalls that thread only. Each
scenario runs in a worker thread joined with a timeout, so a regression fails instead of
hanging the suite.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import toolledger
from toolledger.checkpoint import Status
from toolledger.telemetry import flush_spans

GUARD_SECONDS = 60  # far above any real run; only a hang reaches it


class BlockingExporter(SpanExporter):
    """Blocks in ``export()`` until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait()
        self.left.set()
        self.left.set()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


class BlockingOnEnd(SpanProcessor):
    """Blocks in ``on_end`` until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()

    def on_end(self, span: ReadableSpan) -> None:
        self.entered.set()
        self.release.wait()
        self.left.set()


Blocker = BlockingExporter | BlockingOnEnd


@pytest.fixture(params=["simple-processor-blocking-exporter", "processor-blocking-on-end"])
def blocked(request: pytest.FixtureRequest) -> Iterator[tuple[TracerProvider, Blocker]]:
    tp = TracerProvider(shutdown_on_exit=False)
    blocker: Blocker
    if request.param.startswith("simple"):
        blocker = BlockingExporter()
        tp.add_span_processor(SimpleSpanProcessor(blocker))
    else:
        blocker = BlockingOnEnd()
        tp.add_span_processor(blocker)
    try:
        yield tp, blocker
    finally:
        blocker.release.set()
        assert blocker.left.wait(GUARD_SECONDS) or not blocker.entered.is_set()
        assert flush_spans(GUARD_SECONDS)  # the telemetry thread is free again for other tests
        tp.shutdown()


def within_guard(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a thread; fail (not hang) if it has not returned within the guard."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(GUARD_SECONDS)
    assert not worker.is_alive(), "the call hung on a blocking span processor"
    if errors:
        raise errors[0]
    return out[0]


def lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"order": input["order"], "status": "shipped"}


TOOL = toolledger.tool("lookup_order", revision="1", execute=lookup)


def test_blocking_processor_never_hangs_calls_or_holds_the_claim(tmp_path, blocked) -> None:
    tp, blocker = blocked
    db = tmp_path / "t.db"

    def scenario() -> list[Any]:
        with toolledger.run(goal="g", agent="a", db=db, tracer_provider=tp) as run:
            first = run.call(TOOL, call_id="c1", input={"order": 1})
            assert blocker.entered.wait(GUARD_SECONDS)  # the processor really is stuck now
            again = run.call(TOOL, call_id="c1", input={"order": 1})
            other = run.call(TOOL, call_id="c2", input={"order": 2})
        with toolledger.run(goal="g2", agent="a", db=db, tracer_provider=tp) as later:
            last = later.call(TOOL, call_id="c3", input={"order": 3})
        return [first, again, other, last]

    outcomes = within_guard(scenario)
    assert [o.payload["order"] for o in outcomes] == [1, 1, 2, 3]
    assert [o.replayed for o in outcomes] == [False, True, False, False]
    assert not blocker.release.is_set()  # it was blocking the whole time
    store = toolledger.open_store(db)
    try:
        statuses = {cid: store.get("default", cid).status for cid in ("c1", "c2", "c3")}
    finally:
        store.close()
    assert set(statuses.values()) <= {Status.COMPLETED, Status.DELIVERED}


def test_blocking_processor_never_hangs_async_calls(tmp_path, blocked) -> None:
    tp, blocker = blocked

    async def calls() -> list[Any]:
        with toolledger.run(goal="g", agent="a", db=tmp_path / "t.db", tracer_provider=tp) as run:
            first = await run.acall(TOOL, call_id="c1", input={"order": 1})
            again = await run.acall(TOOL, call_id="c1", input={"order": 1})
        return [first, again]

    outcomes = within_guard(lambda: asyncio.run(calls()))
    assert [o.replayed for o in outcomes] == [False, True]
    assert blocker.entered.is_set()
    assert not blocker.release.is_set()


def test_spans_reach_the_processor_once_it_unblocks(tmp_path, blocked) -> None:
    tp, blocker = blocked
    seen: list[str] = []

    class Names(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span.name)

    tp.add_span_processor(Names())

    def scenario() -> None:
        with toolledger.run(goal="g", agent="a", db=tmp_path / "t.db", tracer_provider=tp) as run:
            run.call(TOOL, call_id="c1", input={"order": 1})

    within_guard(scenario)
    assert not flush_spans(0.1)  # stuck: a flush returns instead of waiting
    blocker.release.set()
    assert blocker.left.wait(GUARD_SECONDS)
    assert flush_spans(GUARD_SECONDS)
    assert "execute_tool lookup_order" in seen
    assert seen[-1] == "invoke_agent a"  # in order: the run's span ends last
