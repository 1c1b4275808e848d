"""``toolledger.resolve`` and ``toolledger.reconcile`` on every store: a stuck call settled."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    Result,
    Status,
    claim_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore, Store
from toolledger.testing import MemoryStore, stored_run

from ._internals import guard_now
from ._pg_dsn import pg_dsn_or_skip

KEY = "settle-test-key"


def _postgres(_: Path) -> Store:
    from toolledger.store.postgres import PostgresStore

    return PostgresStore(pg_dsn_or_skip(), schema=f"tl_settle_{uuid.uuid4().hex[:12]}", max_size=4)


FACTORIES: dict[str, Callable[[Path], Store]] = {
    "memory": lambda _: MemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "settle.db"),
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = FACTORIES[request.param](tmp_path)
    yield s
    s.close()
    schema = getattr(s, "schema", None)
    if schema is not None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class Payments:
    """A tool that writes its order id, then (the first time) dies without an answer."""

    def __init__(self, *, crash: bool = True, write: bool = True) -> None:
        self.effects = 0
        self.crash = crash
        self.write = write
        self.recovered_with: list[Any] = []

    def execute(self, input: dict[str, Any], ctx: tl.ExecuteContext) -> dict[str, Any]:
        if self.write:
            ctx.operation.write({"order": input["order"]})
        if self.crash:
            self.crash = False
            raise ConnectionError("the bank did not answer")
        self.effects += 1
        return {"paid": input["amount"]}

    def tool(self, recover: Any = None) -> tl.Tool:
        return tl.tool("pay", revision="1", execute=self.execute, recover=recover)


def _stuck(
    store: Store,
    payments: Payments,
    call_id: str = "toolu_1",
    order: str = "o-1",
    **kw: Any,
) -> str:
    """Leave ``call_id`` uncertain (its outcome lost); return the run id."""
    with tl.run("pay", db=store, **kw) as run:
        with pytest.raises(tl.OutcomeUnknownError):
            run.call(payments.tool(), call_id=call_id, input={"order": order, "amount": 5})
        return run.run_id


def _resolutions(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in stored_run(store, run_id).events if e["kind"] == "resolution"]


def test_resolve_not_executed_releases_claim_and_records_decision(store: Store) -> None:
    """Released: history, journal event under the call, op journal gone; the call executes."""
    pay = Payments()
    run_id = _stuck(store, pay)
    assert store.get("default", "toolu_1").status is Status.UNCERTAIN  # type: ignore[union-attr]
    done = tl.resolve(
        store, "toolu_1", outcome="not_executed", by="ana", reason="no charge at the bank"
    )
    assert (done.status, done.outcome, done.by, done.forced) == (
        "ready",
        "not_executed",
        "ana",
        False,
    )
    assert done.run_id == run_id
    last = store.history("default", "toolu_1")[-1]
    assert last.transition == "resolve_not_executed"
    assert last.record.resolution is not None
    assert (last.record.resolution.by, last.record.resolution.reason) == (
        "ana",
        "no charge at the bank",
    )
    assert store.operation_read("default", "toolu_1") is None
    (event,) = _resolutions(store, run_id)
    call = next(e for e in stored_run(store, run_id).events if e["kind"] == "tool_call")
    assert event["parent_id"] == call["event_id"]
    assert event["event_id"] == done.event_id
    assert event["status"] == "not_executed"
    assert event["justification"] == "no charge at the bank"
    assert event["meta"]["operation"] == {"order": "o-1"}
    assert tl.verify(store, run_id).ok
    with tl.run("pay again", db=store) as run:
        out = run.call(pay.tool(), call_id="toolu_1", input={"order": "o-1", "amount": 5})
    assert (out.payload, out.replayed, pay.effects) == ({"paid": 5}, False, 1)


def test_resolve_completed_result_is_delivered_like_any_result(store: Store) -> None:
    """A person's result is stored and served to the same call without running the tool."""
    pay = Payments()
    _stuck(store, pay)
    tl.resolve(store, "toolu_1", outcome="completed", result={"paid": 5}, by="ana", reason="seen")
    with tl.run("again", db=store) as run:
        out = run.call(pay.tool(), call_id="toolu_1", input={"order": "o-1", "amount": 5})
    assert (out.payload, out.is_error, out.replayed, pay.effects) == ({"paid": 5}, False, True, 0)
    assert store.history("default", "toolu_1")[-1].transition == "resolve_completed"


def test_resolve_failed_stores_an_error_result(store: Store) -> None:
    """``failed`` stores the error text as an is_error result."""
    _stuck(store, Payments())
    done = tl.resolve(
        store, "toolu_1", outcome="failed", error="card declined", by="ana", reason="bank"
    )
    rec = store.get("default", "toolu_1")
    assert rec is not None
    assert rec.result == Result(payload="card declined", is_error=True)
    assert done.outcome == "failed"


def test_resolve_executing_is_refused_unless_forced(store: Store) -> None:
    """A live attempt may hold an executing call: refused, then forced and recorded so."""
    b = Binding("default", "toolu_2", "pay", "1", fingerprint({"order": "o-2"}))
    rec = create_checkpoint(b, at=guard_now())
    store.create_if_absent(rec)
    claim = claim_execution(rec, attempt_id="a1", at=guard_now()).next
    assert store.compare_and_swap(0, claim)
    with pytest.raises(tl.FenceConflictError, match="a live attempt may hold it"):
        tl.resolve(store, "toolu_2", outcome="not_executed", by="ana", reason="r")
    assert store.get("default", "toolu_2") == claim
    done = tl.resolve(store, "toolu_2", outcome="not_executed", by="ana", reason="r", force=True)
    assert done.forced
    assert done.run_id is None  # no run's journal holds the call
    assert store.get("default", "toolu_2").resolution.forced  # type: ignore[union-attr]


def test_resolve_settled_or_unknown_call_is_refused(store: Store) -> None:
    """Only executing/uncertain calls; an unknown call is NOT_FOUND; nothing changes."""
    _stuck(store, Payments())
    tl.resolve(store, "toolu_1", outcome="completed", result=1, by="a", reason="r")
    before = store.history("default", "toolu_1")
    with pytest.raises(tl.InvalidTransitionError):
        tl.resolve(store, "toolu_1", outcome="not_executed", by="a", reason="r")
    with pytest.raises(tl.NotFoundError):
        tl.resolve(store, "nope", outcome="not_executed", by="a", reason="r")
    assert store.history("default", "toolu_1") == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"outcome": "maybe"},
        {"outcome": "failed"},
        {"outcome": "failed", "error": "x", "result": 1},
        {"outcome": "not_executed", "result": 1},
        {"outcome": "completed", "error": "x"},
        {"outcome": "not_executed", "by": ""},
        {"outcome": "completed", "result": {1, 2}},
    ],
)
def test_resolve_bad_arguments_are_invalid_argument(store: Store, kwargs: dict[str, Any]) -> None:
    """Bad outcome/result/error/by combinations are refused before anything is written."""
    _stuck(store, Payments())
    before = store.get("default", "toolu_1")
    args = {"by": "ana", "reason": "r", **kwargs}
    with pytest.raises(tl.InvalidArgumentError):
        tl.resolve(store, "toolu_1", **args)
    assert store.get("default", "toolu_1") == before


def test_resolve_keyed_run_records_with_its_key(store: Store) -> None:
    """A keyed run takes the decision only with its key; the chain verifies after."""
    run_id = _stuck(store, Payments(), key=KEY)
    done = tl.resolve(store, "toolu_1", outcome="not_executed", by="a", reason="r")
    assert done.run_id is None
    assert done.journal_error is not None
    assert "keyed" in done.journal_error
    assert store.get("default", "toolu_1").status is Status.READY  # type: ignore[union-attr]
    run_id = _stuck(store, Payments(), "toolu_9", key=KEY)
    done = tl.resolve(store, "toolu_9", outcome="not_executed", by="a", reason="r", key=KEY)
    assert done.run_id == run_id
    assert tl.verify(store, run_id, key=KEY).ok


def test_resolve_not_executed_releases_the_effect_key(store: Store) -> None:
    """A released call lets go of its effect key: the same action may execute again."""
    pay = Payments()
    tool = tl.tool("pay", revision="1", execute=pay.execute, effect_key="input")
    with tl.run("pay", db=store) as run, pytest.raises(tl.OutcomeUnknownError):
        run.call(tool, call_id="toolu_1", input={"order": "o-1", "amount": 5})
    assert [k.call_id for k in store.list_effect_keys()] == ["toolu_1"]
    tl.resolve(store, "toolu_1", outcome="not_executed", by="ana", reason="no charge")
    assert store.list_effect_keys() == []
    with tl.run("again", db=store) as run:
        out = run.call(tool, call_id="toolu_2", input={"order": "o-1", "amount": 5})
    assert (out.replayed, pay.effects) == (False, 1)


def test_resolve_telemetry_span_log_and_metric(
    store: Store, clean_telemetry_env: None, provider: Any, exporter: Any
) -> None:
    """One ``resolve_tool`` span with structural attributes, a log record and a count."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from ._internals import TELEMETRY_DEFAULTS

    _stuck(store, Payments())
    reader = InMemoryMetricReader()
    logs = InMemoryLogRecordExporter()
    log_provider = LoggerProvider()
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    TELEMETRY_DEFAULTS.tracer_provider = provider
    TELEMETRY_DEFAULTS.meter_provider = MeterProvider(metric_readers=[reader])
    TELEMETRY_DEFAULTS.logger_provider = log_provider
    exporter.clear()
    tl.resolve(store, "toolu_1", outcome="not_executed", by="ana", reason="secret why")
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "resolve_tool pay"]
    attrs = dict(span.attributes or {})
    assert attrs["toolledger.resolution.outcome"] == "not_executed"
    assert attrs["toolledger.resolution.by"] == "ana"
    assert attrs["toolledger.checkpoint.status_from"] == "uncertain"
    assert attrs["toolledger.checkpoint.status"] == "ready"
    assert "secret why" not in json.dumps(attrs)
    (record,) = logs.get_finished_logs()
    assert record.log_record.event_name == "toolledger.tool.call.resolution"
    data = reader.get_metrics_data()
    points = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "toolledger.tool.resolutions"
        for p in m.data.data_points
    ]
    assert [(p.value, dict(p.attributes)) for p in points] == [
        (1, {"gen_ai.tool.name": "pay", "toolledger.resolution.outcome": "not_executed"})
    ]


def test_resolve_broken_telemetry_never_blocks(store: Store, clean_telemetry_env: None) -> None:
    """A tracer provider that raises costs the span, not the decision."""
    from ._internals import TELEMETRY_DEFAULTS

    class Broken:
        def get_tracer(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("exporter down")

    _stuck(store, Payments())
    TELEMETRY_DEFAULTS.tracer_provider = Broken()
    done = tl.resolve(store, "toolu_1", outcome="not_executed", by="ana", reason="r")
    assert done.status == "ready"


# -- reconcile -------------------------------------------------------------------------------


def test_reconcile_dry_run_then_apply_completes_with_recover_proof(store: Store) -> None:
    """recover(input, ctx) gets the recorded input; a dry run writes nothing; --apply does."""
    pay = Payments()
    seen: list[Any] = []

    def recover(input: Any, ctx: tl.RecoverContext) -> tl.Recovered:
        seen.append((input, ctx.operation.read(), ctx.call_id))
        return tl.Recovered({"paid": input["amount"], "found": True})

    _stuck(store, pay)
    before = store.get("default", "toolu_1")
    (item,) = tl.reconcile(store, [pay.tool(recover)])
    assert (item.action, item.applied) == ("complete", False)
    assert store.get("default", "toolu_1") == before
    assert seen == [({"order": "o-1", "amount": 5}, {"order": "o-1"}, "toolu_1")]
    (item,) = tl.reconcile(store, [pay.tool(recover)], apply=True, by="ops")
    assert (item.action, item.applied) == ("complete", True)
    rec = store.get("default", "toolu_1")
    assert rec is not None
    assert rec.result == Result(payload={"paid": 5, "found": True})
    assert rec.resolution is not None
    assert rec.resolution.by == "ops"


def test_reconcile_not_recovered_releases_only_an_empty_journal(store: Store) -> None:
    """Not proven + empty operation journal: released; with an entry: kept for a person."""
    kept, released = Payments(), Payments(write=False)
    _stuck(store, kept, "toolu_k")
    with tl.run("r", db=store) as run:  # dies before writing its journal: stuck executing
        b = Binding("default", "toolu_r", "pay", "1", fingerprint({"order": "o"}))
        rec = create_checkpoint(b, at=guard_now())
        store.create_if_absent(rec)
        assert store.compare_and_swap(0, claim_execution(rec, attempt_id="a", at=guard_now()).next)
        assert run.run_id
    tool = released.tool(lambda ctx: tl.NotRecovered("no trace at the bank"))
    items = {i.call_id: i for i in tl.reconcile(store, [tool], apply=True)}
    assert (items["toolu_k"].action, items["toolu_k"].applied) == ("keep", False)
    assert "operation journal has an entry" in items["toolu_k"].why
    assert items["toolu_r"].action == "skip"  # executing: a live attempt may hold it
    items = {i.call_id: i for i in tl.reconcile(store, [tool], apply=True, force=True)}
    assert (items["toolu_r"].action, items["toolu_r"].applied) == ("release", True)
    assert store.get("default", "toolu_r").status is Status.READY  # type: ignore[union-attr]
    assert store.get("default", "toolu_k").status is Status.UNCERTAIN  # type: ignore[union-attr]


def test_reconcile_refuses_non_tools(store: Store) -> None:
    """Only Tool objects."""
    with pytest.raises(tl.InvalidArgumentError):
        tl.reconcile(store, ["pay"])  # type: ignore[list-item]


def test_reconcile_keeps_a_call_settled_meanwhile_and_goes_on(store: Store) -> None:
    """A call another process settled between the read and the write is kept, not fatal."""
    pay = Payments()
    _stuck(store, pay, "toolu_a")
    _stuck(store, Payments(), "toolu_b", order="o-2")  # another action (the same is blocked)

    def recover(input: Any, ctx: tl.RecoverContext) -> tl.Recovered:
        if ctx.call_id == "toolu_a":  # someone settles it while recover runs
            tl.resolve(store, "toolu_a", outcome="not_executed", by="ana", reason="r")
        return tl.Recovered({"ok": ctx.call_id, "at": guard_now()})

    items = {i.call_id: i for i in tl.reconcile(store, [pay.tool(recover)], apply=True)}
    assert items["toolu_a"].action == "keep"
    assert "INVALID_TRANSITION" in items["toolu_a"].why
    assert items["toolu_b"].applied
    rec = store.get("default", "toolu_b")
    assert rec is not None
    assert rec.result is not None
    assert rec.result.payload["at"]["$type"] == "datetime"  # encoded by the journal's rules


def test_copy_ledger_keeps_a_decision_and_its_label(store: Store, tmp_path: Path) -> None:
    """A copied ledger's history labels the decision as the source does (by its record)."""
    run_id = _stuck(store, Payments())
    tl.resolve(store, "toolu_1", outcome="not_executed", by="ana", reason="no charge")
    with tl.run("again", db=store) as run:
        run.call(
            Payments(crash=False).tool(), call_id="toolu_1", input={"order": "o-1", "amount": 5}
        )
    dst = SQLiteStore(tmp_path / "copy.db")
    try:
        report = tl.copy_ledger(store, dst)
        assert report.ok, report.problems
        labels = [h.transition for h in dst.history("default", "toolu_1")]
        assert labels == [h.transition for h in store.history("default", "toolu_1")]
        assert "resolve_not_executed" in labels
        assert tl.verify(dst, run_id).ok
    finally:
        dst.close()
