"""Lost CAS races, decided again from what is stored (deterministic interleavings)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import (
    Binding,
    Status,
    claim_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
)
from toolledger.errors import StoreUnavailableError
from toolledger.store import SQLiteStore
from toolledger.store.base import CreateCheckpoint, RemoveOperation

from .conftest import RecordingTelemetry


class InterleavingStore(SQLiteStore):
    """Runs ``before_create`` once, just before the first batch that creates a checkpoint."""

    before_create: Any = None

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        hook = self.before_create
        if hook is not None and any(isinstance(op, CreateCheckpoint) for op in ops):
            self.before_create = None
            hook()
        return super().apply(ops, durable=durable)


def _other(store: SQLiteStore, call_id: str, *, input: Any, claim: bool) -> None:
    now = datetime.now(timezone.utc)
    rec = create_checkpoint(Binding("default", call_id, "t", "1", fingerprint(input)), at=now)
    store.create_if_absent(rec)
    if claim:
        t = claim_execution(rec, attempt_id="other-worker", at=now)
        assert store.compare_and_swap(0, t.next)


@pytest.fixture
def istore(tmp_path: Path):
    store = InterleavingStore(tmp_path / "race.db", durability="normal")
    yield store
    store.close()


def test_call_claim_lost_to_another_worker_never_executes(istore) -> None:
    """Another worker claims between our read and our commit: we lose, re-read, never run."""
    ran: list[Any] = []
    tool = toolledger.tool("t", revision="1", execute=lambda i, c: ran.append(i))
    istore.before_create = lambda: _other(istore, "c1", input={"a": 1}, claim=True)
    tel = RecordingTelemetry()
    with toolledger.run("g", db=istore) as run:
        run.telemetry = tel
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(tool, call_id="c1", input={"a": 1})
    assert ran == []
    won = [(t["name"], t["won"]) for t in tel.spans[0].transitions]
    assert won == [
        ("create_checkpoint", False),
        ("claim_execution", False),
        ("mark_execution_uncertain", True),
    ]
    rec = istore.get("default", "c1")
    assert (rec.status, rec.execution_fence) == (Status.UNCERTAIN, "other-worker")


def test_call_racing_record_of_other_binding_is_restored_and_conflicts(istore) -> None:
    """A ready record of another binding appears before our commit: put back, conflict."""
    ran: list[Any] = []
    tool = toolledger.tool("t", revision="1", execute=lambda i, c: ran.append(i))
    istore.before_create = lambda: _other(istore, "c1", input={"other": True}, claim=False)
    with toolledger.run("g", db=istore) as run, pytest.raises(toolledger.BindingConflictError):
        run.call(tool, call_id="c1", input={"mine": True})
    assert ran == []
    rec = istore.get("default", "c1")
    assert rec.status is Status.READY
    assert rec.binding.input_fingerprint == fingerprint({"other": True})
    assert rec.execution_fence is None


def test_call_owner_completes_after_being_marked_uncertain_mid_execute(run, db) -> None:
    """Another caller marks the call uncertain while it runs: the owner's CAS is lost, the
    re-read shows its own fence, and it completes from uncertain."""

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> str:
        rec = db.get("default", ctx.call_id)
        t = mark_execution_uncertain(
            rec,
            attempt_id=rec.execution_fence,
            at=datetime.now(timezone.utc),
            reason="found executing by another caller (test)",
        )
        assert db.compare_and_swap(t.expected_revision, t.next)
        return "done"

    out = run.call(toolledger.tool("t", revision="1", execute=execute), call_id="c", input=1)
    assert (out.payload, out.replayed, out.recovered, out.revision) == ("done", False, False, 3)
    names = [h.transition for h in db.history("default", "c")]
    assert names[-2:] == ["mark_execution_uncertain", "complete_execution"]


def test_acall_cancelled_while_claim_is_batched_releases_claim(run, db) -> None:
    """A task cancelled while its claim waits in a batch never executes; the claim is released."""
    ran: list[Any] = []

    async def execute(input: Any, ctx: Any) -> str:
        ran.append(input)
        return "x"

    tool = toolledger.tool("t", revision="1", execute=execute)

    async def main() -> None:
        task = asyncio.create_task(run.acall(tool, call_id="c", input=1))
        await asyncio.sleep(0)  # the task submits its claim and waits for the batch
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):  # let the batch callback hand the claim back
            await asyncio.sleep(0)

    asyncio.run(main())
    assert ran == []
    rec = db.get("default", "c")
    assert rec is None or rec.status is Status.READY


class CompletionFailsStore(SQLiteStore):
    """Every completion commit fails (the store went away after the tool ran)."""

    failing = True

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        if self.failing and any(isinstance(op, RemoveOperation) for op in ops):
            raise StoreUnavailableError(message="injected: store went away")
        return super().apply(ops, durable=durable)


def test_call_result_not_storable_after_execute_is_outcome_unknown(tmp_path: Path) -> None:
    """The tool ran but the store refuses the completion: OUTCOME_UNKNOWN, never a re-run."""
    store = CompletionFailsStore(tmp_path / "gone.db", durability="normal")
    ran: list[Any] = []

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> str:
        ctx.operation.write({"order": "o-1"})
        ran.append(input)
        return "done"

    def recover(ctx: toolledger.RecoverContext) -> Any:
        return toolledger.Recovered("done") if ctx.operation.read() else None

    tool = toolledger.tool("t", revision="1", execute=execute, recover=recover)
    with toolledger.run("g", db=store) as run:
        with pytest.raises(toolledger.OutcomeUnknownError) as err:
            run.call(tool, call_id="c", input=1)
        assert isinstance(err.value.__cause__, toolledger.StoreUnavailableError)
        assert store.get("default", "c").status is Status.EXECUTING
        store.failing = False
        out = run.call(tool, call_id="c", input=1)
    store.close()
    assert (out.payload, out.recovered) == ("done", True)
    assert ran == [1]
