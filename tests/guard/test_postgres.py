"""The guard on PostgreSQL: the same semantics, and racing processes execute once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import Binding, Status, claim_execution, create_checkpoint, fingerprint
from toolledger.errors import ApprovalDeniedError, CheckpointError

from .._pg_dsn import pg_dsn_or_skip

pytestmark = pytest.mark.postgres
CHILD = Path(__file__).with_name("_worker_child.py")


@pytest.fixture
def pg() -> Iterator[tuple[str, str]]:
    dsn = pg_dsn_or_skip()
    psycopg = pytest.importorskip("psycopg")
    schema = f"tl_guard_{uuid.uuid4().hex[:10]}"
    yield dsn, schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_run(pg: tuple[str, str]) -> Iterator[toolledger.Run]:
    from toolledger.store.postgres import PostgresStore

    store = PostgresStore(pg[0], schema=pg[1])
    with toolledger.run("guard on postgres", db=store) as run:
        yield run
    store.close()


def test_call_postgres_new_replay_conflict_release(pg_run, effects) -> None:
    """New, replayed, another binding, and a pre-effect failure released, on PostgreSQL."""
    tool = effects.tool()
    first = pg_run.call(tool, call_id="c1", input={"to": "a"})
    again = pg_run.call(tool, call_id="c1", input={"to": "a"})
    assert (first.replayed, again.replayed, again.payload) == (False, True, first.payload)
    with pytest.raises(toolledger.BindingConflictError):
        pg_run.call(tool, call_id="c1", input={"to": "b"})
    with pytest.raises(ValueError):
        pg_run.call(effects.tool(raises=ValueError("x")), call_id="c2", input={})
    assert pg_run.store.get("default", "c2").status is Status.READY
    assert len(effects.executed) == 2


def test_call_postgres_found_executing_recovered_and_delivered(pg_run, effects) -> None:
    """A crashed claim is reconciled through recover, then delivered once."""
    tool = effects.tool(recover=lambda ctx: toolledger.Recovered(ctx.operation.read()))
    now = datetime.now(timezone.utc)
    rec = create_checkpoint(
        Binding("default", "c1", tool.name, tool.revision, fingerprint({})), at=now
    )
    pg_run.store.create_if_absent(rec)
    assert pg_run.store.compare_and_swap(0, claim_execution(rec, attempt_id="dead", at=now).next)
    pg_run.store.operation_write("default", "c1", {"order": "o-1"})
    out = pg_run.call(tool, call_id="c1", input={})
    assert (out.payload, out.recovered) == ({"order": "o-1"}, True)
    posted: list[Any] = []
    pg_run.deliver("c1", posted.append)
    assert pg_run.deliver("c1", posted.append) is None
    assert posted == [{"order": "o-1"}]
    assert effects.executed == []


def test_call_postgres_call_many_claims_together(pg_run, effects) -> None:
    """call_many on PostgreSQL: every call runs once, in order."""
    tool = effects.tool()
    outs = pg_run.call_many([{"tool": tool, "call_id": f"c{i}", "input": i} for i in range(3)])
    assert [o.payload["sent"] for o in outs] == [0, 1, 2]
    assert [h.transition for h in pg_run.store.history("default", "c2")] == [
        "create_checkpoint",
        "claim_execution",
        "complete_execution",
    ]


@pytest.mark.slow
def test_call_postgres_racing_processes_execute_once(pg: tuple[str, str], tmp_path: Path) -> None:
    """Four processes on PostgreSQL start the same call at once: one effect."""
    from toolledger.store.postgres import PostgresStore

    dsn, schema = pg
    PostgresStore(dsn, schema=schema).close()  # create the schema once
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "TOOLLEDGER_TEST_PG_SCHEMA": schema,
    }
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), dsn, str(tmp_path), f"w{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    (tmp_path / "go").touch()
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1])["outcome"])
    assert outcomes.count("new") == 1
    assert set(outcomes) <= {"new", "replayed", "OUTCOME_UNKNOWN"}
    assert len((tmp_path / "effects.log").read_text().split()) == 1


def test_call_postgres_first_read_brings_the_stored_approval(
    pg: tuple[str, str], pg_run, effects
) -> None:
    """One read gives the checkpoint and the approval: a stored denial binds an ungated
    call, a damaged approval row fails a new call and never a replay."""
    plain = effects.tool()
    gated = toolledger.tool(
        plain.name,
        revision=plain.revision,
        execute=lambda inp, ctx: None,
        approval="always",
        approver=lambda request: toolledger.Denied(by="ana", reason="no"),
    )
    with pytest.raises(ApprovalDeniedError):
        pg_run.call(gated, call_id="c1", input={"to": "a"})
    with pytest.raises(ApprovalDeniedError):
        pg_run.call(plain, call_id="c1", input={"to": "a"})  # no gate: the denial binds
    first = pg_run.call(plain, call_id="c2", input={"to": "a"})
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(pg[0], autocommit=True) as conn:
        for cid in ("c2", "c3"):
            conn.execute(
                f'INSERT INTO "{pg[1]}".approvals VALUES '
                "('default', %s, 'pending', 0, '2026-01-01T00:00:00Z', '[damaged')",
                (cid,),
            )
    again = pg_run.call(plain, call_id="c2", input={"to": "a"})
    assert (again.replayed, again.payload) == (True, first.payload)
    with pytest.raises(CheckpointError) as caught:
        pg_run.call(plain, call_id="c3", input={"to": "a"})
    assert caught.value.code == "INVALID_CHECKPOINT"
    assert len(effects.executed) == 1
