"""Fixtures for guard tests: a real run on SQLite, counting stores, recording telemetry."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.store import SQLiteStore
from toolledger.testing import crash_at


class CountingStore(SQLiteStore):
    """A SQLite store that counts commits by durability."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.commits: list[bool] = []
        super().__init__(*args, **kw)

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        result = super().apply(ops, durable=durable)
        self.commits.append(bool(durable and self.durability == "full"))
        return result

    def reset(self) -> None:
        self.commits.clear()

    @property
    def durable_commits(self) -> int:
        return sum(self.commits)


class RecordingSpan:
    """A span that records what the guard tells it."""

    def __init__(self, trace_id: str | None, span_id: str | None) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.transitions: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.ended: list[tuple[dict[str, Any], BaseException | None]] = []
        #: The ``CallFacts`` each end carried (a tool call's, told once).
        self.facts: list[Any] = []

    def activate(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def transition(self, **kw: Any) -> None:
        self.transitions.append(kw)

    def update(self, attributes: Any) -> None:
        self.updates.append(dict(attributes))

    def end(self, event: Any, error: BaseException | None = None, facts: Any = None) -> None:
        self.ended.append((dict(event), error))
        if facts is not None:
            self.facts.append(facts)


@dataclass
class RecordingTelemetry:
    """Hooks that hand out recording spans with distinct live ids."""

    spans: list[RecordingSpan] = field(default_factory=list)

    def run_started(self, run: Any) -> RecordingSpan:
        return RecordingSpan("a" * 32, "b" * 16)

    def event_started(self, event: Any, parent: Any) -> RecordingSpan:
        n = len(self.spans) + 1
        span = RecordingSpan(f"{n:032x}", f"{n:016x}")
        self.spans.append(span)
        return span


@pytest.fixture
def db(tmp_path: Path) -> Iterator[CountingStore]:
    store = CountingStore(tmp_path / "guard.db", durability="normal")
    yield store
    store.close()


@pytest.fixture
def run(db: CountingStore) -> Iterator[toolledger.Run]:
    with toolledger.run("guard tests", agent="tester", db=db) as r:
        yield r


@pytest.fixture
def crash_points() -> Iterator[list[tuple[str, Any]]]:
    """Install crash-point actions; tests append (name, action) pairs to trigger."""
    plan: list[tuple[str, Any]] = []
    with contextlib.ExitStack() as stack:

        def run_plan(point: str) -> Any:
            return lambda: [action() for name, action in plan if name == point]

        from toolledger.testing import CRASH_POINTS

        for point in CRASH_POINTS:
            stack.enter_context(crash_at(point, run_plan(point)))
        yield plan


class Effects:
    """A tool whose calls are counted; behaviour is chosen per test."""

    def __init__(self) -> None:
        self.executed: list[Any] = []
        self.recovered: list[Any] = []

    def tool(
        self,
        *,
        name: str = "send",
        revision: str = "1",
        journal: bool = False,
        raises: BaseException | None = None,
        recover: Any = None,
        output: Any = None,
        on_error: str = "raise",
    ) -> toolledger.Tool:
        def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            self.executed.append(input)
            if journal:
                ctx.operation.write({"order": f"o-{ctx.call_id}"})
            if raises is not None:
                raise raises
            return output if output is not None else {"sent": input, "n": len(self.executed)}

        return toolledger.tool(
            name,
            revision=revision,
            execute=execute,
            recover=recover,
            on_error=on_error,  # type: ignore[arg-type]
        )


@pytest.fixture
def effects() -> Effects:
    return Effects()
