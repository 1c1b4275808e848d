"""The public read API: load_run, list_runs, search, and the JSON export's merged events."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import threading
import uuid
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Event, RunView, SearchWarning
from toolledger.store import SQLiteStore, Store
from toolledger.testing import MemoryStore

from .._internals import sqlite_search
from .._pg_dsn import pg_dsn_or_skip


def _postgres() -> Store:
    from toolledger.store.postgres import PostgresStore

    return PostgresStore(pg_dsn_or_skip(), schema=f"tl_read_{uuid.uuid4().hex[:12]}")


def _drop(store: Store) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(store.schema))  # type: ignore[attr-defined]
        )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend."""
    if request.param == "memory":
        store: Store = MemoryStore()
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "read.db")
    else:
        store = _postgres()
    yield store
    store.close()
    if request.param == "postgres":
        _drop(store)


class Boom(Exception):
    """A tool failure."""


def _refund_run(db: object) -> str:
    with toolledger.run("Refund order A-1001 for Ana", agent="support", db=db) as run:
        with run.step("lookup", justification="The customer asked twice", order="A-1001") as st:
            st.record_output(refund_id="RF-77", amount=12.5)
            with run.step("inner", justification="nested work"):
                pass
        run.approval("refund", granted=False, by="bob", reason="Over the refund limit")
        with pytest.raises(Boom), run.step("charge_card", justification="take the money"):
            raise Boom("gateway timeout")
        run.note("Told the customer to wait")
    return run.run_id


def _report_run(db: object) -> str:
    with (
        toolledger.run("Weekly report for the team", agent="reports", db=db) as run,
        run.step("totals", justification="sum the week", query="weekly totals"),
    ):
        pass
    return run.run_id


class TestLoadRun:
    def test_load_run_returns_the_merged_typed_view(self, any_store: Store) -> None:
        """One event per step, with its intent, inputs, outputs and tree."""
        run_id = _refund_run(any_store)
        view = toolledger.load_run(any_store, run_id)
        assert isinstance(view, RunView)
        assert (view.run_id, view.goal, view.agent, view.namespace, view.status) == (
            run_id,
            "Refund order A-1001 for Ana",
            "support",
            "default",
            "completed",  # the failed step's exception was handled inside the run
        )
        assert view.event_count == sum(1 for _ in any_store.read_events(run_id))
        names = [e.name for e in view.roots()]
        assert names == ["lookup", "refund", "charge_card", "note", "finish"]
        lookup = view.roots()[0]
        assert isinstance(lookup, Event)
        assert lookup.justification == "The customer asked twice"
        assert lookup.justification_source == "developer"
        assert lookup.inputs == {"order": "A-1001"}
        assert lookup.outputs == {"refund_id": "RF-77", "amount": 12.5}
        assert lookup.status == "completed"
        assert [e.name for e in view.children(lookup.event_id)] == ["inner"]
        assert lookup.started_at is not None
        assert lookup.ended_at is not None
        assert lookup.ts_end_ms is not None
        assert lookup.ts_start_ms is not None
        assert lookup.ts_end_ms >= lookup.ts_start_ms
        failed = view.roots()[2]
        assert failed.status == "failed"
        assert failed.error["message"] == "gateway timeout"
        refusal = view.roots()[1]
        assert refusal.status == "refused"
        assert refusal.approval["reason"] == "Over the refund limit"

    def test_to_dict_round_trips_through_from_dict(self, tmp_path: Path) -> None:
        """``Event.from_dict(e.to_dict()) == e``; both times forms are in the dict."""
        db = tmp_path / "j.db"
        view = toolledger.load_run(db, _refund_run(db))
        for ev in view.events:
            data = ev.to_dict()
            assert Event.from_dict(data) == ev
            assert data["ts_start_ms"] == ev.ts_start_ms
            assert data["started_at"] == ev.started_at.isoformat()  # type: ignore[union-attr]
        doc = view.to_dict()
        assert doc["run_id"] == view.run_id
        assert len(doc["events"]) == len(view.events)
        json.dumps(doc, allow_nan=False)

    def test_unknown_run_id_is_not_found(self, any_store: Store) -> None:
        """An unknown run id is NOT_FOUND."""
        with pytest.raises(toolledger.NotFoundError) as info:
            toolledger.load_run(any_store, "no-such-run")
        assert info.value.code == "NOT_FOUND"

    def test_tool_call_links_to_its_checkpoint_status(self, tmp_path: Path) -> None:
        """A tool call's event names its checkpoint and the checkpoint's status now."""
        db = tmp_path / "j.db"

        @toolledger.tool(revision="1")
        def send(input, ctx):  # type: ignore[no-untyped-def]
            return {"sent": input["to"]}

        with toolledger.run("mail", db=db) as run:
            run.call(send, call_id="c1", input={"to": "ana"})
            run.deliver("c1", post=lambda payload: None)
        (call,) = [e for e in toolledger.load_run(db, run.run_id).events if e.kind == "tool_call"]
        assert call.checkpoint is not None
        assert (call.checkpoint["call_id"], call.checkpoint["status"]) == ("c1", "delivered")

    def test_same_events_from_one_statement_as_from_the_store_rows(self, tmp_path: Path) -> None:
        """SQLite's one-statement read gives the events the rows read page by page give."""
        db = tmp_path / "j.db"
        with toolledger.run("mixed", db=db) as run:
            with run.step("outer", justification="why", q=1) as outer:
                outer.record_output(n=1.5)
                with run.step("inner", x=[1, {"y": None}]) as inner:
                    inner.record_output(ok=True)
            run.approval("refund", granted=False, by="bob", reason="over limit")
            run.note("done")
        store = SQLiteStore(db)
        try:
            rows = store.read_events(run.run_id)
            fast = toolledger.load_run(store, run.run_id)

            class RowsOnly:  # a store without read_event_fields
                def __getattr__(self, name: str) -> Any:
                    if name == "read_event_fields":
                        raise AttributeError(name)
                    if name == "capabilities":
                        return dataclasses.replace(store.capabilities, record_fields=False)
                    return getattr(store, name)

            generic = toolledger.load_run(RowsOnly(), run.run_id)  # type: ignore[arg-type]
        finally:
            store.close()
        assert fast == generic
        assert fast.to_dict() == generic.to_dict()
        assert (fast.head_hash, fast.event_count) == (rows[-1].hash, len(rows))
        assert [e.status for e in fast.events] == [
            "completed", "completed", "refused", "completed", "completed"
        ]  # fmt: skip

    def test_a_damaged_seq_is_store_unavailable(self, tmp_path: Path) -> None:
        """A record whose seq is not an integer (a damaged file) is STORE_UNAVAILABLE."""
        import sqlite3

        db = tmp_path / "j.db"
        with toolledger.run("mixed", db=db) as run:
            run.note("one")
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE events SET seq = 'x' WHERE run_id = ? AND seq = 0", (run.run_id,))
        conn.close()
        with pytest.raises(toolledger.StoreUnavailableError) as info:
            toolledger.load_run(db, run.run_id)
        assert info.value.code == "STORE_UNAVAILABLE"


def _crash(db: str, ready: Any) -> None:
    run = toolledger.run("will crash", db=db, run_id="crashed")
    run.start()
    step = run.step("long", justification="never ends", x=1)
    step.__enter__()
    run.flush()
    ready.set()
    threading.Event().wait(60)  # killed long before; the bound only frees a lost child


@pytest.mark.slow
def test_killed_run_events_are_interrupted_in_every_reader(tmp_path: Path) -> None:
    """A SIGKILLed run's open step reads as ``interrupted`` in load_run, search and export."""
    db = str(tmp_path / "crash.db")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_crash, args=(db, ready))
    proc.start()
    assert ready.wait(60), "child never became ready"
    os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
    proc.join(timeout=30)
    view = toolledger.load_run(db, "crashed")
    assert view.status == "interrupted"
    assert [(e.name, e.status, e.interrupted) for e in view.events] == [
        ("long", "interrupted", True)
    ]
    assert [e.name for e in toolledger.search(db, status="interrupted")] == ["long"]
    assert toolledger.search(db, status="running") == []
    toolledger.export_json(db, "crashed", tmp_path / "crash.json")
    doc = json.loads((tmp_path / "crash.json").read_text())
    assert [e["status"] for e in doc["events"]] == ["interrupted"]


class TestJsonExport:
    def test_export_carries_merged_events_equal_to_load_run(self, tmp_path: Path) -> None:
        """``events`` is one object per event, equal to ``load_run(...).to_dict()``'s."""
        db = tmp_path / "j.db"
        run_id = _refund_run(db)
        out = tmp_path / "run.json"
        toolledger.export_json(db, run_id, out)
        doc = json.loads(out.read_text())
        view = toolledger.load_run(db, run_id)
        assert doc["events"] == view.to_dict()["events"]
        assert len(doc["events"]) == len(view.events) < len(doc["records"])
        step = doc["events"][0]
        for key in ("justification", "inputs", "outputs", "ts_start_ms", "ts_end_ms", "goal"):
            assert step[key] is not None, key
        assert [e["seq"] for e in doc["events"]] == sorted(e["seq"] for e in doc["events"])

    def test_export_with_events_still_verifies_and_reimports(self, tmp_path: Path) -> None:
        """The merged view is never hashed: verify_export and import_json keep working."""
        db = tmp_path / "j.db"
        run_id = _refund_run(db)
        out = tmp_path / "run.json"
        toolledger.export_json(db, run_id, out)
        assert toolledger.verify_export(out).ok
        other = tmp_path / "other.db"
        assert toolledger.import_json(out, other) == run_id
        assert toolledger.verify(other, run_id).ok
        assert (
            toolledger.load_run(other, run_id).to_dict()["events"]
            == json.loads(out.read_text())["events"]
        )
        # And the imported run is searchable (the index follows imports).
        assert [e.name for e in toolledger.search(other, "gateway")] == ["charge_card"]

    def test_erased_content_shows_as_erased(self, tmp_path: Path) -> None:
        """After gc the events say erased (when, why), and their content is gone."""
        db = tmp_path / "j.db"
        run_id = _refund_run(db)
        toolledger.gc(db, older_than="0s")
        out = tmp_path / "run.json"
        toolledger.export_json(db, run_id, out)
        step = json.loads(out.read_text())["events"][0]
        assert step["erased"]["reason"].startswith("retention")
        assert step["inputs"] is None
        assert step["justification"] is None
        assert step["name"] == "lookup"


class TestSearch:
    def test_text_matches_justification_inputs_outputs_error(self, any_store: Store) -> None:
        """Full text covers why, what went in, what came out, and what went wrong."""
        _refund_run(any_store)
        _report_run(any_store)

        def names(text: str, **kw: object) -> list[str | None]:
            return [e.name for e in toolledger.search(any_store, text, **kw)]  # type: ignore[arg-type]

        assert names("asked twice") == ["lookup"]
        assert names("A-1001", kind="step", name="lookup") == ["lookup"]
        assert names("RF-77") == ["lookup"]
        assert names("gateway timeout") == ["charge_card"]
        assert names("refund limit", kind="approval") == ["refund"]
        assert names("weekly") == ["finish", "totals"]  # goal of the report run, newest first
        assert names("weekly", kind="step", agent="reports") == ["totals"]
        assert names("gateway", status="completed") == []
        assert names("customer", since="1d", until=datetime.now(timezone.utc) + timedelta(1)) == [
            "note",
            "lookup",
        ]
        assert names("customer", until="1d") == []
        hit = toolledger.search(any_store, "RF-77")[0]
        assert hit.goal == "Refund order A-1001 for Ana"
        assert hit.agent == "support"

    def test_filters_without_text(self, any_store: Store) -> None:
        """Kinds, statuses and runs filter alone too; results are newest first."""
        refund = _refund_run(any_store)
        _report_run(any_store)
        refused = toolledger.search(any_store, kind="approval", status="refused")
        assert [(e.name, e.run_id) for e in refused] == [("refund", refund)]
        failed = toolledger.search(any_store, status="failed", kind=["step", "tool_call"])
        assert [e.name for e in failed] == ["charge_card"]
        in_run = toolledger.search(any_store, run_id=refund, kind="step")
        assert [e.name for e in in_run] == ["charge_card", "inner", "lookup"]
        assert len(toolledger.search(any_store, limit=2)) == 2

    def test_erased_content_is_not_found_after_gc(self, any_store: Store) -> None:
        """gc takes erased content out of the index; names stay findable."""
        _refund_run(any_store)
        assert toolledger.search(any_store, "gateway")
        toolledger.gc(any_store, older_than="0s")
        assert toolledger.search(any_store, "gateway") == []
        assert toolledger.search(any_store, "RF-77") == []
        assert [e.name for e in toolledger.search(any_store, "charge_card")] == ["charge_card"]

    @pytest.mark.parametrize(
        "text", ['"unbalanced', "NEAR(", "a AND OR", "*", "x:y", "col:value", "(((", "-1001"]
    )
    def test_query_syntax_is_never_an_error(self, tmp_path: Path, text: str) -> None:
        """Text that FTS5 would reject is searched as words, never a raw sqlite3 error."""
        db = tmp_path / "j.db"
        _refund_run(db)
        if text.strip("*(") == "":  # no words at all: a typed error
            with pytest.raises(toolledger.InvalidArgumentError):
                toolledger.search(db, text)
        else:
            assert isinstance(toolledger.search(db, text), list)

    @pytest.mark.parametrize(
        ("kwargs", "argument"),
        [
            ({"since": "7x"}, "since"),
            ({"until": "soon"}, "until"),
            ({"since": datetime(2026, 1, 1)}, "since"),
            ({"since": 7}, "since"),
            ({"text": "!!!"}, "text"),
            ({"text": 5}, "text"),
            ({"text": " ".join(f"w{i}" for i in range(33))}, "text"),
            ({"limit": 0}, "limit"),
            ({"limit": 10**30}, "limit"),
            ({"kind": []}, "kind"),
            ({"status": 3}, "status"),
            ({"since": "99999999999d"}, "since"),
        ],
    )
    def test_bad_arguments_are_invalid_argument(
        self, tmp_path: Path, kwargs: dict[str, object], argument: str
    ) -> None:
        """Malformed filters are INVALID_ARGUMENT naming the argument."""
        db = tmp_path / "j.db"
        _refund_run(db)
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            toolledger.search(db, **kwargs)  # type: ignore[arg-type]
        assert info.value.code == "INVALID_ARGUMENT"
        assert info.value.details.get("argument") == argument

    def test_without_fts5_search_scans_with_a_warning(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A build without FTS5 creates no index; search scans, warns, and agrees."""
        indexed = SQLiteStore(tmp_path / "indexed.db")
        _refund_run(indexed)
        _report_run(indexed)
        monkeypatch.setattr(sqlite_search, "fts5_available", lambda conn: False)
        plain = tmp_path / "plain.db"
        store = SQLiteStore(plain)
        try:
            assert not store.applied_migrations() or not store._read(
                "SELECT 1 FROM sqlite_master WHERE name = 'events_fts'"
            )
            _refund_run(store)
            _report_run(store)
            for text in ("asked twice", "gateway", "weekly", "look*", "refund"):
                with pytest.warns(SearchWarning):
                    got = [e.name for e in toolledger.search(store, text)]
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    want = [e.name for e in toolledger.search(indexed, text)]
                assert got == want, text
        finally:
            store.close()
            indexed.close()

    def test_existing_database_is_migrated_and_indexed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A database written before the index existed is indexed by its migration."""
        from toolledger.store import sqlite as sqlite_module

        db = tmp_path / "old.db"
        index = next(v for v, name, _ in sqlite_module.MIGRATIONS if name == "search_index")
        before = sqlite_module.MIGRATIONS[: index - 1]  # every migration before the index's
        monkeypatch.setattr(sqlite_module, "MIGRATIONS", before)
        monkeypatch.setattr(sqlite_module, "LATEST_VERSION", before[-1][0])
        run_id = _refund_run(db)
        monkeypatch.undo()
        store = SQLiteStore(db)
        try:
            assert (len(before) + 1, "search_index") in store.applied_migrations()
            assert [e.name for e in toolledger.search(store, "gateway")] == ["charge_card"]
            assert {e.run_id for e in toolledger.search(store, "Ana")} == {run_id}
            _report_run(store)  # new writes are indexed too
            assert [e.name for e in toolledger.search(store, "totals", kind="step")] == ["totals"]
        finally:
            store.close()


class TestListRuns:
    def test_list_runs_filters_and_orders(self, any_store: Store) -> None:
        """Newest first; status, agent, namespace and time filters combine."""
        refund = _refund_run(any_store)
        report = _report_run(any_store)
        runs = toolledger.list_runs(any_store)
        assert [r.run_id for r in runs] == [report, refund]
        assert all(r.events == () and r.event_count > 0 for r in runs)
        assert [r.run_id for r in toolledger.list_runs(any_store, agent="support")] == [refund]
        assert [r.run_id for r in toolledger.list_runs(any_store, limit=1)] == [report]
        assert toolledger.list_runs(any_store, status="running") == []
        assert len(toolledger.list_runs(any_store, status="completed", since="1h")) == 2
        assert toolledger.list_runs(any_store, until="1h") == []
        assert toolledger.list_runs(any_store, namespace="elsewhere") == []
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.list_runs(any_store, status="done")

    @pytest.mark.parametrize("reader", ["load_run", "list_runs", "search"])
    def test_readers_never_create_a_database(self, tmp_path: Path, reader: str) -> None:
        """Reading a missing path is NOT_FOUND; nothing is created there."""
        missing = tmp_path / "nope" / "ledger.db"
        args: tuple[object, ...] = (missing, "run") if reader == "load_run" else (missing,)
        with pytest.raises(toolledger.CheckpointError) as info:
            getattr(toolledger, reader)(*args)
        assert info.value.code == "NOT_FOUND"
        assert not missing.parent.exists()


def test_existing_postgres_schema_is_migrated_and_indexed() -> None:
    """A PostgreSQL schema written before the index existed is indexed by its migration."""
    import psycopg
    from psycopg import sql

    from toolledger.store.postgres import PostgresStore

    old = _postgres()
    try:
        run_id = _refund_run(old)
    finally:
        old.close()
    schema = old.schema  # type: ignore[attr-defined]
    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:  # back to before it
        conn.execute(
            sql.SQL("DROP TABLE {}.event_search, {}.run_search").format(
                sql.Identifier(schema), sql.Identifier(schema)
            )
        )
        conn.execute(  # the index's migration and every later one: not applied yet
            sql.SQL(
                "DELETE FROM {0}.toolledger_schema WHERE version >= "
                "(SELECT version FROM {0}.toolledger_schema WHERE name = 'search_index')"
            ).format(sql.Identifier(schema))
        )
    store = PostgresStore(pg_dsn_or_skip(), schema=schema)
    try:
        assert "search_index" in [name for _, name in store.applied_migrations()]
        assert [e.name for e in toolledger.search(store, "gateway")] == ["charge_card"]
        assert {e.run_id for e in toolledger.search(store, "Ana")} == {run_id}
    finally:
        store.close()
        _drop(store)


def _overlapping_runs(db: Store) -> None:
    """Three short runs inside a long one that started first and wrote last."""
    early = toolledger.run("long job", agent="a", db=db)
    early.start()
    with early.step("work", justification="common words here"):
        pass
    for i in range(3):
        with toolledger.run(f"short job {i}", agent="b", db=db) as run:
            with run.step("work", justification="common words here", i=i):
                pass
            run.approval("ok", granted=False, by="x", reason="common")
    with early.step("late", justification="common words, written last"):
        pass
    early.close()


BROAD_QUERIES: list[dict[str, object]] = [
    {"text": "common"},
    {"text": "common", "limit": 1},
    {"text": "common words", "limit": 3},
    {"text": "common", "kind": "approval"},
    {"text": "common", "agent": "b", "limit": 2},
    {"kind": "step"},
    {"status": "refused", "limit": 2},
    {"text": "job", "since": "1h"},
    {},
]


def _answers(db: Store) -> list[list[tuple[object, ...]]]:
    return [
        [(e.goal, e.name, e.kind, e.status) for e in toolledger.search(db, **q)]  # type: ignore[arg-type]
        for q in BROAD_QUERIES
    ]


def test_broad_searches_visit_runs_newest_first_and_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run-by-run path (many hits) answers exactly what one query over all hits does.

    A run that started first but wrote last (overlapping runs) still comes first.
    """
    db = SQLiteStore(tmp_path / "broad.db")
    try:
        _overlapping_runs(db)
        want = [[e.event_id for e in toolledger.search(db, **q)] for q in BROAD_QUERIES]  # type: ignore[arg-type]
        monkeypatch.setattr(sqlite_search, "FEW_HITS", 0)  # every text query goes run by run
        got = [[e.event_id for e in toolledger.search(db, **q)] for q in BROAD_QUERIES]  # type: ignore[arg-type]
        assert got == want
        assert toolledger.search(db, "common", limit=1)[0].name == "late"
        assert all(want)
    finally:
        db.close()


def test_broad_postgres_searches_answer_as_the_memory_store_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On PostgreSQL the run-by-run path and the one statement answer as MemoryStore does.

    MemoryStore filters and orders every event in Python: the reference for both paths.
    """
    from toolledger.store import _pg_search

    memory = MemoryStore()
    _overlapping_runs(memory)
    want = _answers(memory)
    pg = _postgres()
    try:
        _overlapping_runs(pg)
        monkeypatch.setattr(_pg_search, "FEW_HITS", 10**9)  # text: one statement
        one_statement = _answers(pg)
        monkeypatch.setattr(_pg_search, "FEW_HITS", 0)  # text: run by run
        run_by_run = _answers(pg)
    finally:
        pg.close()
        _drop(pg)
    assert one_statement == want
    assert run_by_run == want
    assert want[1] == [("long job", "late", "step", "completed")]
