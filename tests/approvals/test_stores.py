"""The gate on every backend (Memory, SQLite, PostgreSQL), async calls, expiry, the journal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.store import SQLiteStore, Store
from toolledger.testing import MemoryStore

from .._pg_dsn import pg_dsn_or_skip
from .conftest import Approver, Effects, approval_events

INPUT = {"to": "ana@example.com"}


def _postgres() -> Store:
    from toolledger.store.postgres import PostgresStore

    return PostgresStore(pg_dsn_or_skip(), schema=f"tl_appr_{uuid.uuid4().hex[:12]}", max_size=4)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "l.db")
    else:
        s = _postgres()
    yield s
    s.close()
    schema = getattr(s, "schema", None)
    if request.param == "postgres" and schema:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_pending_decided_then_runs_once_on_every_backend(store: Store, effects: Effects) -> None:
    """Waiting → decide_approval on the same store → one execution, then a replay."""
    approver = Approver(Pending("T"))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=store) as run:
        assert run.call(gated, call_id="c1", input=INPUT).status == "awaiting_approval"
        assert [
            r.call_id for r in toolledger.approvals.list_approvals(store, status="pending")
        ] == ["c1"]
        toolledger.decide_approval(store, "default", "c1", True, "alice", "ok")
        outs = [run.call(gated, call_id="c1", input=INPUT) for _ in range(2)]
    assert [o.replayed for o in outs] == [False, True]
    assert effects.sent == [INPUT]
    assert len(approver.requests) == 1
    assert toolledger.verify(store, run.run_id).ok  # approval events are in the hash chain
    assert [e["status"] for e in approval_events(store, run.run_id)] == [
        "pending",
        "granted",
        "granted",
    ]


def test_acall_pending_and_denied(tmp_path: Path, effects: Effects) -> None:
    """acall returns awaiting_approval, then raises ApprovalDenied once denied."""
    db = tmp_path / "l.db"
    gated = effects.tool("effect-only", Approver(Pending()))

    async def call() -> Any:
        with toolledger.run("g", db=db) as run:
            return await run.acall(gated, call_id="c1", input=INPUT)

    assert asyncio.run(call()).status == "awaiting_approval"
    toolledger.decide_approval(db, "default", "c1", False, "bob", "no")
    with pytest.raises(toolledger.ApprovalDeniedError):
        asyncio.run(call())
    assert effects.sent == []


def test_approver_expiry_is_stored_and_honoured(tmp_path: Path, effects: Effects) -> None:
    """Approved(expires_at=...) is stored; a replay under "always" asks again once expired."""
    db = tmp_path / "l.db"
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    approver = Approver(Approved("policy", expires_at=later))
    gated = effects.tool("always", approver)
    with toolledger.run("g", db=db) as run:
        run.call(gated, call_id="c1", input=INPUT)
        stored = SQLiteStore(db).approval_get("default", "c1")
        assert stored.expires_at == later
        assert run.call(gated, call_id="c1", input=INPUT).replayed is True
    assert len(approver.requests) == 1
    with pytest.raises(toolledger.InvalidArgumentError):
        Approved("x", expires_at=datetime(2026, 1, 1))  # naive time


class TestDecideApproval:
    def test_unknown_call_is_not_found(self, tmp_path: Path) -> None:
        """Deciding a call nobody asked about is NOT_FOUND (nothing is pre-approved)."""
        with pytest.raises(toolledger.NotFoundError):
            toolledger.decide_approval(tmp_path / "l.db", "default", "nope", True, "alice")

    def test_decision_is_final_and_idempotent(self, tmp_path: Path, effects: Effects) -> None:
        """The same decision again returns it; the opposite one is INVALID_TRANSITION."""
        db = tmp_path / "l.db"
        with toolledger.run("g", db=db) as run:
            run.call(effects.tool("always", None), call_id="c1", input=INPUT)
        first = toolledger.decide_approval(db, "default", "c1", False, "bob", "no")
        assert toolledger.decide_approval(db, "default", "c1", False, "carol") == first
        with pytest.raises(toolledger.InvalidTransitionError):
            toolledger.decide_approval(db, "default", "c1", True, "alice")

    @pytest.mark.parametrize(
        "kw",
        [
            {"granted": "yes"},
            {"by": ""},
            {"expires_at": datetime(2020, 1, 1, tzinfo=timezone.utc)},
            {"granted": False, "expires_at": datetime(2999, 1, 1, tzinfo=timezone.utc)},
        ],
    )
    def test_bad_arguments_are_refused(
        self, tmp_path: Path, effects: Effects, kw: dict[str, Any]
    ) -> None:
        """Bad arguments are INVALID_ARGUMENT and leave the request pending."""
        db = tmp_path / "l.db"
        with toolledger.run("g", db=db) as run:
            run.call(effects.tool("always", None), call_id="c1", input=INPUT)
        args = {"granted": True, "by": "alice", **kw}
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.decide_approval(db, "default", "c1", **args)
        assert SQLiteStore(db).approval_get("default", "c1").status.value == "pending"


def test_denied_record_round_trip_and_decision_types() -> None:
    """Denied needs a name; Pending's ticket is optional."""
    assert Denied("bob").reason is None
    assert Pending().ticket is None
    with pytest.raises(toolledger.InvalidArgumentError):
        Denied("")


def test_copy_ledger_moves_approvals_with_their_revisions(tmp_path: Path, effects: Effects) -> None:
    """copy_ledger copies requests and decisions; the copy decides as the source would."""
    src = SQLiteStore(tmp_path / "src.db")
    with toolledger.run("g", db=src) as run:
        for cid in ("c1", "c2"):
            run.call(effects.tool("always", None), call_id=cid, input=INPUT)
    toolledger.decide_approval(src, "default", "c1", True, "alice")
    dst = MemoryStore()
    report = toolledger.copy_ledger(src, dst)
    assert report.ok, report.problems
    assert dst.list_approvals() == src.list_approvals()
    assert [r.revision for r in dst.list_approvals()] == [1, 0]
    with toolledger.run("g", db=dst) as run:
        assert run.call(effects.tool("always", None), call_id="c1", input=INPUT).payload == {
            "sent_to": INPUT["to"]
        }
        assert run.call(effects.tool("always", None), call_id="c2", input=INPUT).status == (
            "awaiting_approval"
        )
