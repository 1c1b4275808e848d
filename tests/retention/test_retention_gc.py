"""toolledger.gc: tombstones replace old terminal records; nothing in progress is touched."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger as tl
from toolledger import Store
from toolledger.checkpoint import Status, create_checkpoint, fingerprint
from toolledger.cli import main
from toolledger.retention import parse_age
from toolledger.store.base import Tombstone

from ._ret_support import at, make_record

NON_TERMINAL = [Status.READY, Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING]


def test_gc_old_delivered_record_becomes_tombstone(store: Store) -> None:
    rec = make_record(store, "old", Status.DELIVERED, start=0)
    history = store.history("ns", "old")
    store.operation_write("ns", "old", {"order_id": "o-1"})
    report = tl.gc(store, older_than=timedelta(days=30), now=at(100) + timedelta(days=30))
    assert (report.checkpoints_erased, report.history_rows_erased) == (1, 5)
    assert report.operation_entries_erased == 1
    assert store.get("ns", "old") is None
    assert store.history("ns", "old") == []
    assert store.operation_read("ns", "old") is None
    tomb = store.tombstone("ns", "old")
    assert tomb is not None
    assert tomb.binding == rec.binding
    assert (tomb.status, tomb.revision) == (Status.DELIVERED, 4)
    assert (tomb.created_at, tomb.updated_at, tomb.delivered_at) == (at(0), at(4), at(4))
    assert tomb.completed_at == at(2)
    assert tomb.transitions == tuple(h.transition for h in history)
    assert rec.result is not None
    assert tomb.result_sha256 == fingerprint(rec.result.to_dict())
    assert tomb.erased_at == at(100) + timedelta(days=30)
    assert tomb.reason == "retention: terminal for longer than 30d"
    assert "s-old" not in json.dumps([str(v) for v in vars_of(tomb)])


def vars_of(tomb: Tombstone) -> list[object]:
    return [getattr(tomb, f) for f in tomb.__slots__]  # type: ignore[attr-defined]


def test_gc_tombstoned_key_refuses_creation_with_when_and_why(store: Store) -> None:
    rec = make_record(store, "old", Status.DELIVERED)
    tl.gc(store, older_than=at(50), reason="policy P-7", now=at(70))
    with pytest.raises(tl.TombstonedError) as info:
        store.create_if_absent(create_checkpoint(rec.binding, at=at(60)))
    assert info.value.code == "TOMBSTONED"
    assert "policy P-7" in info.value.message
    assert info.value.details["erased_at"] == "2026-01-01T00:01:10.000000+00:00"
    assert store.get("ns", "old") is None


@pytest.mark.parametrize("status", NON_TERMINAL, ids=lambda s: s.value)
def test_gc_non_terminal_record_untouched(store: Store, status: Status) -> None:
    rec = make_record(store, "live", status)
    history = store.history("ns", "live")
    report = tl.gc(store, older_than=at(1000), include_undelivered=True)
    assert report.checkpoints_erased == 0
    assert store.get("ns", "live") == rec
    assert store.history("ns", "live") == history
    assert store.tombstone("ns", "live") is None


def test_gc_completed_erased_only_with_include_undelivered(store: Store) -> None:
    make_record(store, "done", Status.COMPLETED)
    assert tl.gc(store, older_than=at(1000)).checkpoints_erased == 0
    assert store.get("ns", "done") is not None
    assert tl.gc(store, older_than=at(1000), include_undelivered=True).checkpoints_erased == 1
    tomb = store.tombstone("ns", "done")
    assert tomb is not None
    assert tomb.status is Status.COMPLETED


def test_gc_cutoff_and_namespace_limit_what_is_erased(store: Store) -> None:
    make_record(store, "old", Status.DELIVERED, start=0)
    make_record(store, "new", Status.DELIVERED, start=500)
    make_record(store, "elsewhere", Status.DELIVERED, start=0, namespace="other")
    report = tl.gc(store, older_than=at(100), namespace="ns")
    assert report.checkpoints_erased == 1
    assert [r.binding.call_id for r in store.list()] == ["elsewhere", "new"]
    assert [t.binding.call_id for t in store.list_tombstones()] == ["old"]


def test_gc_second_pass_erases_nothing(store: Store) -> None:
    make_record(store, "a", Status.DELIVERED)
    make_record(store, "b", Status.DELIVERED)
    assert tl.gc(store, older_than=at(100)).checkpoints_erased == 2
    again = tl.gc(store, older_than=at(100))
    assert (again.checkpoints_erased, again.events_erased) == (0, 0)
    assert len(store.list_tombstones()) == 2


def _count_tool(counter: list[int]) -> tl.Tool:
    def execute(inp: dict[str, str], ctx: object) -> dict[str, str]:
        counter.append(1)
        return {"secret": "s3cr3t-" + inp["to"]}

    return tl.tool("send_email", revision="1", execute=execute)


def test_gc_journal_content_erased_and_verify_still_passes(store: Store) -> None:
    ran: list[int] = []
    tool = _count_tool(ran)
    with tl.run("mail the report", db=store, namespace="ns") as run:
        with run.step("draft", justification="the user asked", body="s3cr3t-draft") as step:
            step.record_output(text="s3cr3t-output")
        run.call(tool, call_id="c1", input={"to": "x"})
        run.deliver("c1", lambda payload: None)
        run.finish("sent")
    with tl.run("still going", db=store, namespace="ns") as live:
        live.note("s3cr3t-live")
        report = tl.gc(store, older_than=timedelta(0))
        assert report.runs_erased == 1
        assert report.events_erased >= 4
        assert report.checkpoints_erased == 1
        done = [e.data for e in store.read_events(run.run_id)]
        assert not any("s3cr3t" in d for d in done)
        assert all(json.loads(d)["erased"]["reason"] for d in done)
        assert tl.verify(store, run.run_id).ok
    # The run still going at the cutoff keeps its content.
    assert any("s3cr3t-live" in e.data for e in store.read_events(live.run_id))


def test_guard_call_on_tombstoned_call_raises_tombstoned_without_running(store: Store) -> None:
    ran: list[int] = []
    tool = _count_tool(ran)
    with tl.run("first", db=store, namespace="ns") as run:
        run.call(tool, call_id="c1", input={"to": "x"})
        run.deliver("c1", lambda payload: None)
    tl.gc(store, older_than=timedelta(0))
    with (
        pytest.raises(tl.TombstonedError) as info,
        tl.run("again", db=store, namespace="ns") as run,
    ):
        run.call(tool, call_id="c1", input={"to": "x"})
    assert "erased by retention" in info.value.message
    assert ran == [1]


def test_gc_cli_erases_and_reports(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    store = tl.SQLiteStore(db)
    make_record(store, "old", Status.DELIVERED)
    make_record(store, "live", Status.EXECUTING)
    store.close()
    result = CliRunner().invoke(main, ["--db", str(db), "gc", "--older-than", "1d", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["checkpoints_erased"] == 1
    with tl.SQLiteStore(db) as again:
        assert again.tombstone("ns", "old") is not None
        assert again.get("ns", "live") is not None


def test_gc_cli_bad_age_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "x.db"), "gc", "--older-than", "soon"]
    )
    assert result.exit_code == 2
    assert "30d" in result.output


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("1w2d", 9 * 86400), ("45m", 2700), ("0s", 0)],
)
def test_parse_age_valid_values_parse(text: str, seconds: int) -> None:
    assert parse_age(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "d", "3x", "-1d", "1d and more"])
def test_parse_age_invalid_values_raise_invalid_argument(text: str) -> None:
    with pytest.raises(tl.InvalidArgumentError):
        parse_age(text)
