"""A call the guard refuses is visible: a journal event, an error span, a metric point."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolledger
from toolledger.cli import main as cli
from toolledger.store import SQLiteStore
from toolledger.telemetry import attributes as a
from toolledger.testing import MemoryStore

from .._pg_dsn import pg_dsn_or_skip


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        s: Any = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "l.db")
    else:
        import psycopg
        from psycopg import sql

        from toolledger.store.postgres import PostgresStore

        dsn = pg_dsn_or_skip()
        schema = f"tl_refused_{uuid.uuid4().hex[:10]}"
        s = PostgresStore(f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}")
    yield s
    s.close()
    if request.param == "postgres":
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


_SEND = toolledger.tool(name="send", revision="1", execute=lambda i, ctx: {"sent": i})


def _refusals(run: toolledger.Run) -> list[str]:
    """Make the guard refuse two calls; return their codes in order."""
    codes = []
    run.call(_SEND, call_id="c1", input={"to": "a"})
    for call_id, value in (("c1", {"to": "b"}), ("", {"to": "c"})):
        with pytest.raises(toolledger.CheckpointError) as info:
            run.call(_SEND, call_id=call_id, input=value)
        codes.append(info.value.code)
    return codes


class TestRefusedCall:
    def test_each_refusal_is_a_refused_tool_call_event_with_its_code(self, store: Any) -> None:
        """BINDING_CONFLICT and INVALID_ARGUMENT each leave a ``refused`` event naming the code."""
        with toolledger.run(goal="g", db=store) as run:
            codes = _refusals(run)
            run_id = run.run_id
        assert codes == ["BINDING_CONFLICT", "INVALID_ARGUMENT"]
        events = [e for e in toolledger.load_run(store, run_id).events if e.kind == "tool_call"]
        assert [(e.status, (e.error or {}).get("code")) for e in events] == [
            ("completed", None),
            ("refused", "BINDING_CONFLICT"),
            ("refused", "INVALID_ARGUMENT"),
        ]
        conflict = events[1]
        assert conflict.inputs == {"to": "b"}
        assert conflict.meta["refused"] == "BINDING_CONFLICT"
        assert conflict.checkpoint is not None
        assert (conflict.checkpoint["namespace"], conflict.checkpoint["call_id"]) == (
            "default",
            "c1",
        )
        found = toolledger.search(store, status="refused")
        assert sorted((h.error or {})["code"] for h in found) == sorted(codes)

    def test_refusal_spans_are_errors_with_the_code_and_counted(
        self, store: Any, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Each refusal is an ERROR span, ``error.type`` = code, outcome ``refused``, a metric."""
        reader = InMemoryMetricReader()
        toolledger.configure(tracer_provider=provider, meter_provider=MeterProvider([reader]))
        with toolledger.run(goal="g", db=store) as run:
            _refusals(run)
        tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool send"]
        assert [(s.status.status_code.name, s.attributes.get(a.ERROR_TYPE)) for s in tools] == [
            ("UNSET", None),
            ("ERROR", "BINDING_CONFLICT"),
            ("ERROR", "INVALID_ARGUMENT"),
        ]
        assert [s.attributes[a.TL_TOOL_OUTCOME] for s in tools] == [
            "executed",
            "refused",
            "refused",
        ]
        points = {
            (p.attributes.get(a.TL_TOOL_OUTCOME), p.attributes.get(a.ERROR_TYPE)): p.value
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "toolledger.tool.calls"
            for p in m.data.data_points
        }
        assert points == {
            ("executed", None): 1,
            ("refused", "BINDING_CONFLICT"): 1,
            ("refused", "INVALID_ARGUMENT"): 1,
        }


def test_cli_show_and_list_show_the_refused_call(tmp_path: Path) -> None:
    """``show`` and the viewer show the refused call and its code; ``runs`` counts it."""
    db = tmp_path / "l.db"
    SQLiteStore(db).close()  # an existing ledger: no NewLedgerWarning
    with toolledger.run(goal="g", db=db) as run:
        _refusals(run)
        run_id = run.run_id
    shown = CliRunner().invoke(cli, ["--db", str(db), "show", run_id])
    assert shown.exit_code == 0, shown.output
    assert "refused" in shown.output
    assert "BINDING_CONFLICT" in shown.output
    page = tmp_path / "run.html"
    exported = CliRunner().invoke(
        cli, ["--db", str(db), "export", run_id, "--format", "html", "-o", str(page)]
    )
    assert exported.exit_code == 0, exported.output
    html = page.read_text()  # the viewer's data: the event, its status and its code
    assert '"status": "refused"' in html or '"status":"refused"' in html
    assert "BINDING_CONFLICT" in html
    listed = CliRunner().invoke(cli, ["--db", str(db), "runs", "--json"])
    assert listed.exit_code == 0, listed.output
    (row,) = [json.loads(line) for line in listed.output.splitlines() if line.strip()]
    assert row["counts"]["refused"] == 2


def _pay(input: Any, ctx: toolledger.ExecuteContext) -> Any:
    """Writes its journal entry, then loses the answer: the call is left ``uncertain``."""
    ctx.operation.write({"ref": f"p-{ctx.call_id}"})
    raise TimeoutError("the payment provider did not answer")


_PAY = toolledger.tool(name="pay", revision="1", execute=_pay)


def _tool_points(reader: InMemoryMetricReader) -> dict[tuple[Any, Any], Any]:
    return {
        (p.attributes.get(a.TL_TOOL_OUTCOME), p.attributes.get(a.ERROR_TYPE)): p.value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "toolledger.tool.calls"
        for p in m.data.data_points
    }


class TestBlockedAndErased:
    def test_a_same_action_block_is_refused_with_its_code_span_and_metric(
        self, store: Any, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """A call blocked by the same-action rule (decided after its event opened) is a
        ``refused`` event naming ``same_action_as``, an ERROR span and a ``refused`` point."""
        reader = InMemoryMetricReader()
        toolledger.configure(tracer_provider=provider, meter_provider=MeterProvider([reader]))
        with toolledger.run(goal="g", db=store) as run:
            with pytest.raises(toolledger.CheckpointError):
                run.call(_PAY, call_id="A", input={"to": "ana", "cents": 500})
            with pytest.raises(toolledger.CheckpointError) as info:
                run.call(_PAY, call_id="B", input={"to": "ana", "cents": 500})
            run_id = run.run_id
        assert (info.value.code, info.value.details["same_action_as"]) == ("OUTCOME_UNKNOWN", "A")
        events = [e for e in toolledger.load_run(store, run_id).events if e.kind == "tool_call"]
        assert [(e.status, (e.error or {}).get("code")) for e in events] == [
            ("failed", "OUTCOME_UNKNOWN"),
            ("refused", "OUTCOME_UNKNOWN"),
        ]
        blocked = events[1]
        assert blocked.meta["refused"] == "OUTCOME_UNKNOWN"
        assert blocked.meta["same_action_as"] == "A"
        assert blocked.checkpoint is not None
        assert blocked.checkpoint["call_id"] == "B"
        found = toolledger.search(store, status="refused")
        assert [(h.error or {})["code"] for h in found] == ["OUTCOME_UNKNOWN"]
        tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool pay"]
        assert [
            (
                s.status.status_code.name,
                s.attributes.get(a.ERROR_TYPE),
                s.attributes[a.TL_TOOL_OUTCOME],
            )
            for s in tools
        ] == [("ERROR", "OUTCOME_UNKNOWN", "unknown"), ("ERROR", "OUTCOME_UNKNOWN", "refused")]
        assert _tool_points(reader) == {
            ("unknown", "OUTCOME_UNKNOWN"): 1,
            ("refused", "OUTCOME_UNKNOWN"): 1,
        }

    def test_a_call_on_an_erased_checkpoint_is_refused_tombstoned(
        self, store: Any, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Asked again after retention erased its checkpoint: a ``refused`` TOMBSTONED event,
        an ERROR span with ``error.type`` TOMBSTONED, never run."""
        toolledger.configure(tracer_provider=provider)
        with toolledger.run(goal="g", db=store) as run:
            run.call(_SEND, call_id="c1", input={"to": "a"})
        report = toolledger.gc(
            store,
            older_than=timedelta(0),
            now=datetime.now(timezone.utc) + timedelta(days=1),
            include_undelivered=True,
        )
        assert report.checkpoints_erased == 1
        with toolledger.run(goal="g", db=store) as run:
            with pytest.raises(toolledger.CheckpointError) as info:
                run.call(_SEND, call_id="c1", input={"to": "a"})
            run_id = run.run_id
        assert info.value.code == "TOMBSTONED"
        events = [e for e in toolledger.load_run(store, run_id).events if e.kind == "tool_call"]
        assert [(e.status, (e.error or {}).get("code")) for e in events] == [
            ("refused", "TOMBSTONED")
        ]
        assert events[0].meta["refused"] == "TOMBSTONED"
        tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool send"]
        last = tools[-1]
        assert (last.status.status_code.name, last.attributes.get(a.ERROR_TYPE)) == (
            "ERROR",
            "TOMBSTONED",
        )
        assert last.attributes[a.TL_TOOL_OUTCOME] == "refused"
