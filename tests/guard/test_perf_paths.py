"""The journal records that ride inside the guard's own transactions.

A new call's ``tool_call`` start record (and everything buffered before it) is appended in
the create+claim transaction, its end record in the completion transaction (gated on the
completion CAS winning); a replayed call commits nothing until the writer flushes. These
tests pin the commit counts, what a SIGKILL leaves behind, and that every failure of such
a transaction falls back without losing or duplicating a record.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import (
    Binding,
    claim_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
)
from toolledger.errors import StoreUnavailableError
from toolledger.store import SQLiteStore
from toolledger.store.base import AppendEvents, SwapCheckpoint
from toolledger.telemetry import attributes as a

from .conftest import CountingStore, RecordingTelemetry


def _tool(calls: list[Any] | None = None, **kw: Any) -> toolledger.Tool:
    def execute(input: Any, ctx: Any) -> Any:
        if calls is not None:
            calls.append(input)
        return {"sent": input}

    return toolledger.tool("send", revision="1", execute=execute, **kw)


def _records(store: Any, run_id: str) -> list[tuple[int, str, str, str | None]]:
    """``(seq, kind, status, call_id)`` of every stored record of the run."""
    out = []
    for row in store.read_events(run_id):
        header = json.loads(row.data)["header"]
        cp = header.get("checkpoint") or {}
        out.append((row.seq, row.kind, row.status, cp.get("call_id")))
    return out


def _tool_records(store: Any, run_id: str) -> list[tuple[str, str | None]]:
    return [
        (status, cid) for _, kind, status, cid in _records(store, run_id) if kind == "tool_call"
    ]


def _dense_and_verified(store: Any, run_id: str) -> None:
    seqs = [seq for seq, *_ in _records(store, run_id)]
    assert seqs == list(range(len(seqs)))
    report = toolledger.verify(store, run_id)
    assert report.ok, report


def test_new_call_commits_claim_and_completion_only(tmp_path: Path) -> None:
    """Two durable commits carry the claim, the completion and both journal records."""
    store = CountingStore(tmp_path / "g.db", durability="full")
    with toolledger.run("g", db=store) as run:
        with run.step("before"):
            pass
        store.reset()
        run.call(_tool(), call_id="c1", input={"a": 1})
        assert store.commits == [True, True]
        # the step's record (one: it ended while buffered) and the call's start and end
        # records are all stored
        assert [k for _, k, _, _ in _records(store, run.run_id)] == ["step"] + ["tool_call"] * 2
        assert run.flush() is True
    _dense_and_verified(store, run.run_id)


def test_replayed_call_commits_nothing_until_flushed(tmp_path: Path) -> None:
    """A replayed call changed nothing: its one record is buffered like a step's."""
    store = CountingStore(tmp_path / "g.db", durability="full")
    tool = _tool()
    with toolledger.run("g", db=store) as run:
        run.call(tool, call_id="c1", input={"a": 1})
        store.reset()
        out = run.call(tool, call_id="c1", input={"a": 1})
        assert out.replayed is True
        assert store.commits == []
    assert _tool_records(store, run.run_id) == [
        ("running", "c1"),
        ("completed", "c1"),
        ("replayed", "c1"),
    ]
    _dense_and_verified(store, run.run_id)


def test_call_many_claims_and_start_records_share_one_commit(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "g.db", durability="full")
    tool = _tool()
    with toolledger.run("g", db=store) as run:
        store.reset()
        run.call_many([{"tool": tool, "call_id": f"c{i}", "input": {"i": i}} for i in range(3)])
        # one claim transaction for the turn, then one completion per call
        assert store.commits == [True] * 4
    assert sorted(_tool_records(store, run.run_id)) == sorted(
        [("running", f"c{i}") for i in range(3)] + [("completed", f"c{i}") for i in range(3)]
    )
    _dense_and_verified(store, run.run_id)


def test_concurrent_acalls_claim_and_journal_in_one_commit(tmp_path: Path) -> None:
    import asyncio

    store = CountingStore(tmp_path / "g.db", durability="full")

    async def execute(input: Any, ctx: Any) -> Any:
        return input

    tool = toolledger.tool("send", revision="1", execute=execute)

    async def main() -> None:
        async with toolledger.run("g", db=store) as run:
            store.reset()
            await asyncio.gather(
                *(run.acall(tool, call_id=f"c{i}", input={"i": i}) for i in range(3))
            )
            assert store.commits == [True] * 4
            assert len(_tool_records(store, run.run_id)) == 6
            _dense_and_verified(store, run.run_id)

    asyncio.run(main())


_CHILD = """
import os, signal, sys
import toolledger
import contextlib
from toolledger.testing import crash_at

CRASHING = contextlib.ExitStack()

db, point = sys.argv[1], sys.argv[2]
CRASHING.enter_context(crash_at(point))  # SIGKILL there, for the rest of the process
tool = toolledger.tool("send", revision="1", execute=lambda i, c: {"sent": i})
with toolledger.run("g", db=db, run_id="r1") as run:
    with run.step("before"):
        pass
    run.call(tool, call_id="c1", input={"a": 1})
"""


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ("after-claim", [("running", "c1")]),
        ("after-completion", [("running", "c1"), ("completed", "c1")]),
    ],
)
def test_sigkill_leaves_the_records_its_commit_carried(
    tmp_path: Path, point: str, expected: list[tuple[str, str]]
) -> None:
    """Killed right after the claim (or completion) commit: its journal records are there."""
    db = tmp_path / "k.db"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), str(db), point],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    store = SQLiteStore(db)
    try:
        assert _tool_records(store, "r1") == expected
        kinds = [k for _, k, _, _ in _records(store, "r1")]
        assert kinds[:2] == ["step", "tool_call"]  # buffered before the call: went first
        status = store.get("default", "c1").status.value  # type: ignore[union-attr]
        assert status == ("executing" if point == "after-claim" else "completed")
        _dense_and_verified(store, "r1")
    finally:
        store.close()


class FaultyStore(SQLiteStore):
    """Fails the first matching ``apply`` before (or after) committing it."""

    def __init__(self, path: Path, *, match: Any, after_commit: bool) -> None:
        super().__init__(path, durability="normal")
        self.match = match
        self.after_commit = after_commit
        self.fired = 0

    def apply(self, ops, *, durable=True):  # type: ignore[no-untyped-def]
        if self.fired == 0 and self.match(ops):
            self.fired += 1
            if self.after_commit:
                super().apply(ops, durable=durable)
            raise StoreUnavailableError(message="injected: commit outcome unknown")
        return super().apply(ops, durable=durable)


def _claim_with_journal(ops: Any) -> bool:
    return any(isinstance(op, AppendEvents) for op in ops) and not any(
        isinstance(op, SwapCheckpoint) and op.next.status.value == "completed" for op in ops
    )


def _completion_with_journal(ops: Any) -> bool:
    return any(isinstance(op, AppendEvents) for op in ops) and any(
        isinstance(op, SwapCheckpoint) and op.next.status.value == "completed" for op in ops
    )


@pytest.mark.parametrize("after_commit", [False, True], ids=["rolled-back", "landed"])
@pytest.mark.parametrize(
    "match", [_claim_with_journal, _completion_with_journal], ids=["claim", "completion"]
)
def test_failed_transaction_falls_back_without_losing_or_duplicating(
    tmp_path: Path, match: Any, after_commit: bool
) -> None:
    """Whether the failed transaction landed or not, each record is stored exactly once."""
    store = FaultyStore(tmp_path / "f.db", match=match, after_commit=after_commit)
    calls: list[Any] = []
    with toolledger.run("g", db=store) as run:
        with run.step("before"):
            pass
        out = run.call(_tool(calls), call_id="c1", input={"a": 1})
        assert out.payload == {"sent": {"a": 1}}
        assert run.errors == []
    assert store.fired == 1
    assert calls == [{"a": 1}]  # executed once
    assert _tool_records(store, run.run_id) == [("running", "c1"), ("completed", "c1")]
    assert [k for _, k, _, _ in _records(store, run.run_id)][:2] == ["step", "tool_call"]
    _dense_and_verified(store, run.run_id)


def test_lost_append_race_rechains_after_the_other_writer(tmp_path: Path) -> None:
    """Another writer appended to the run first: the carried records are re-chained."""
    db = tmp_path / "r.db"
    store = CountingStore(db, durability="normal")
    with toolledger.run("g", db=store, run_id="r1") as run:
        with run.step("before"):
            pass
        run.flush()
        other = toolledger.run("g", db=SQLiteStore(db), run_id="r1")
        other.start()
        other.note("written by another process resuming the run")
        assert other.flush() is True
        run.call(_tool(), call_id="c1", input={"a": 1})
        assert run.errors == []
    kinds = [k for _, k, _, _ in _records(store, "r1")]
    assert kinds[:3] == ["step", "note", "tool_call"]
    assert _tool_records(store, "r1") == [("running", "c1"), ("completed", "c1")]
    _dense_and_verified(store, "r1")


def test_lost_completion_cas_withdraws_the_end_record(tmp_path: Path) -> None:
    """A completion CAS that loses appends nothing: the end record says what happened."""
    db = tmp_path / "l.db"
    store = SQLiteStore(db, durability="normal")
    tel = RecordingTelemetry()

    def execute(input: Any, ctx: Any) -> Any:
        # A second caller finds the call executing and marks it uncertain meanwhile.
        rec = store.get("default", "c1")
        assert rec is not None
        t = mark_execution_uncertain(
            rec, attempt_id=rec.execution_fence, at=rec.updated_at, reason="found executing"
        )
        assert store.compare_and_swap(t.expected_revision, t.next, durable=False)
        return {"ok": True}

    tool = toolledger.tool("send", revision="1", execute=execute)
    with toolledger.run("g", db=store) as run:
        run.telemetry = tel
        out = run.call(tool, call_id="c1", input={})
        assert out.revision == 3  # executing(1) -> uncertain(2) -> completed(3)
    names = [(t["name"], t["won"]) for t in tel.spans[0].transitions]
    assert ("complete_execution", False) in names
    assert names[-1] == ("complete_execution", True)
    ends = [
        r for r in store.read_events(run.run_id) if r.kind == "tool_call" and r.status != "running"
    ]
    assert len(ends) == 1
    assert json.loads(ends[0].data)["header"]["checkpoint"]["revision"] == 3
    _dense_and_verified(store, run.run_id)


def test_resumed_recovered_call_reports_first_action_live_as_reexported(
    tmp_path: Path,
) -> None:
    """``checkpoint.action`` is what decide_checkpoint said at the first look, live and
    re-exported alike (a resumed call that recovers: ``reconcile-execution``)."""
    from datetime import datetime, timezone

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolledger import reexport

    db = tmp_path / "t.db"
    store = toolledger.open_store(db)
    now = datetime.now(timezone.utc)
    binding = Binding("default", "c9", "charge", "1", fingerprint({"n": 5}))
    _, rec = store.create_if_absent(create_checkpoint(binding, at=now))
    t = claim_execution(rec, attempt_id="1" * 32, at=now)
    assert store.compare_and_swap(t.expected_revision, t.next)
    store.close()

    def never(input: Any, ctx: Any) -> Any:
        raise AssertionError("a claimed call must never execute again")

    tool = toolledger.tool(
        "charge", revision="1", execute=never, recover=lambda ctx: toolledger.Recovered(5)
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tel = RecordingTelemetry()
    with toolledger.run("g", db=db, tracer_provider=provider) as run:
        out = run.call(tool, call_id="c9", input={"n": 5})
        assert out.recovered is True
        run.telemetry = tel
        again = run.call(tool, call_id="c9", input={"n": 5})
        assert again.replayed is True
    live = next(s for s in exporter.get_finished_spans() if s.name == "recover_tool charge")
    assert live.attributes[a.TL_CHECKPOINT_ACTION] == "reconcile-execution"
    out_exp = InMemorySpanExporter()
    reexport(db, run.run_id, out_exp)
    rebuilt = [s for s in out_exp.get_finished_spans() if s.name == "recover_tool charge"]
    assert rebuilt[0].attributes[a.TL_CHECKPOINT_ACTION] == live.attributes[a.TL_CHECKPOINT_ACTION]
    # the replay found it completed: the first look answered "deliver"
    assert tel.spans[0].facts[0].action == "deliver"


# -- the validated read: faster, never weaker -------------------------------------------


def _stored_row(tmp_path: Path, payload: Any) -> tuple[SQLiteStore, str]:
    store = SQLiteStore(tmp_path / "v.db", durability="normal")
    tool = toolledger.tool("send", revision="1", execute=lambda i, c: payload)
    with toolledger.run("g", db=store) as run:
        run.call(tool, call_id="c1", input={})
    text = store._read("SELECT record FROM checkpoints WHERE call_id = 'c1'")[0][0]
    return store, text


def _corrupt(store: SQLiteStore, text: str) -> None:
    conn = store._conn()
    conn.execute("UPDATE checkpoints SET record = ? WHERE call_id = 'c1'", (text,))


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(status="executed"),
        lambda d: d.update(updated_at="yesterday"),
        lambda d: d.update(created_at="2026-01-01T00:00:00"),  # no offset
        lambda d: d["binding"].update(tool_name="bad name"),
        lambda d: d["binding"].update(call_id="other"),  # key mismatch
        lambda d: d["result"].update(payload=[float("nan")]),
        lambda d: d["result"].update(payload=[[0] * 10] * 200_000),  # too many values
        lambda d: d.update(revision=-1),
        lambda d: d.update(extra=True),
    ],
    ids=[
        "status",
        "time",
        "naive-time",
        "identifier",
        "key",
        "nan",
        "values",
        "revision",
        "unknown-field",
    ],
)
def test_corrupted_stored_row_is_still_quarantined(tmp_path: Path, damage: Any) -> None:
    """Reading a row the store wrote itself still runs every check (INVALID_CHECKPOINT)."""
    store, text = _stored_row(tmp_path, {"ok": True})
    assert store.get("default", "c1") is not None  # the intact row (and its binding) loads
    doc = json.loads(text)
    damage(doc)
    _corrupt(store, json.dumps(doc, allow_nan=True))
    with pytest.raises(toolledger.errors.InvalidCheckpointError) as info:
        store.get("default", "c1")
    assert info.value.code == "INVALID_CHECKPOINT"
    store.close()


def test_stored_payload_with_growing_floats_reads_back_exactly(tmp_path: Path) -> None:
    """Float tokens that grow when re-encoded (1e15 -> 1000000000000000.0) read back."""
    store, text = _stored_row(tmp_path, {"ok": True})
    doc = json.loads(text)
    _corrupt(store, text.replace('{"ok":true}', "[" + ",".join(["1e15"] * 1000) + "]"))
    rec = store.get("default", "c1")
    assert rec is not None
    assert rec.result is not None
    assert rec.result.payload == [1e15] * 1000
    assert doc["result"]["payload"] == {"ok": True}
    store.close()
