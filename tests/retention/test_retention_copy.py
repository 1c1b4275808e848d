"""toolledger copy: a whole ledger moves between SQLite and PostgreSQL, verified."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger as tl
from toolledger.checkpoint import Status, create_checkpoint
from toolledger.cli import main
from toolledger.store.postgres import PostgresStore
from toolledger.store.sqlite import MIGRATIONS

from ._ret_support import at, make_record


def _ledger(path: Path) -> dict[str, str]:
    """Build a SQLite ledger with every kind of row; return facts to check after a copy."""
    store = tl.SQLiteStore(path)
    for i, status in enumerate(Status):
        make_record(store, f"c-{status.value}", status, start=i)
    make_record(store, "erased", Status.DELIVERED, start=0, namespace="old")
    store.operation_write("ns", "c-executing", {"order_id": "o-42"})
    calls: list[int] = []
    tool = tl.tool(
        "send_email", revision="1", execute=lambda inp, ctx: calls.append(1) or {"ok": inp}
    )
    with tl.run("copy me", db=store, namespace="ns") as run:
        with run.step("s", justification="why") as step:
            step.record_output(n=1)
        run.call(tool, call_id="g1", input={"to": "x"})
    tl.gc(store, older_than=timedelta(days=1), namespace="old")
    store.close()
    return {"run_id": run.run_id}


def test_copy_sqlite_to_postgres_and_back_is_verified_equal(
    tmp_path: Path, pg_url: Callable[[], str]
) -> None:
    facts = _ledger(tmp_path / "a.db")
    url = pg_url()
    report = tl.copy_ledger(tmp_path / "a.db", url)
    assert report.ok, report.problems
    assert (report.checkpoints, report.tombstones, report.operations, report.runs) == (7, 1, 1, 1)
    assert report.history_rows == 1 + 2 + 3 + 3 + 4 + 5 + 3
    with PostgresStore(url) as pg, tl.SQLiteStore(tmp_path / "a.db") as lite:
        assert pg.list() == lite.list()
        assert pg.history("ns", "c-delivered") == lite.history("ns", "c-delivered")
        assert pg.tombstone("old", "erased") == lite.tombstone("old", "erased")
        assert pg.operation_read("ns", "c-executing") == {"order_id": "o-42"}
        assert pg.get_run(facts["run_id"]) == lite.get_run(facts["run_id"])
        assert tl.verify(pg, facts["run_id"]).ok
        binding = lite.list_tombstones()[0].binding
        with pytest.raises(tl.TombstonedError):
            pg.create_if_absent(create_checkpoint(binding, at=at(99)))
    back = tl.copy_ledger(url, f"sqlite:///{tmp_path / 'b.db'}")
    assert back.ok, back.problems
    assert back.events == report.events > 0


def test_copy_into_non_empty_destination_raises_invalid_argument(tmp_path: Path) -> None:
    _ledger(tmp_path / "a.db")
    with tl.SQLiteStore(tmp_path / "b.db") as b:
        b.operation_write("ns", "x", {"k": 1})
    with pytest.raises(tl.InvalidArgumentError):
        tl.copy_ledger(tmp_path / "a.db", tmp_path / "b.db")


def test_copy_cli_with_urls_exits_0_and_prints_counts(
    tmp_path: Path, pg_url: Callable[[], str]
) -> None:
    _ledger(tmp_path / "a.db")
    result = CliRunner().invoke(
        main, ["copy", "--from", f"sqlite:///{tmp_path / 'a.db'}", "--to", pg_url(), "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["ok"] is True
    assert out["checkpoints"] == 7


def test_copy_cli_unmovable_row_fails_verification_exit_1(tmp_path: Path) -> None:
    _ledger(tmp_path / "a.db")
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("UPDATE checkpoints SET record = '{}' WHERE call_id = 'c-ready'")
    result = CliRunner().invoke(
        main, ["copy", "--from", str(tmp_path / "a.db"), "--to", str(tmp_path / "b.db")]
    )
    assert result.exit_code == 1
    assert "c-ready could not be copied" in result.output


def test_migrate_cli_prints_applied_versions(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "m.db"), "migrate"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"{v}\t{name}" for v, name, _ in MIGRATIONS]
    assert result.output.splitlines()[:2] == [
        "1\tcheckpoints_history_operations_runs_events",
        "2\ttombstones",
    ]
