"""PostgresStore under failure: unknown commits, killed backends, timeouts, restarts."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg import sql

from toolledger import CheckpointError, open_store
from toolledger.checkpoint import (
    Binding,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store._pg_schema import MIGRATIONS
from toolledger.store.base import (
    AppendEvents,
    ClaimEffectKey,
    CreateCheckpoint,
    RemoveOperation,
    RunRow,
    SwapCheckpoint,
    WriteOperation,
)
from toolledger.store.postgres import PostgresStore

from .._pg_dsn import pg_dsn_or_skip
from ._pg_proxy import CommitProxy

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _binding(call_id: str = "c1") -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"to": "a@b.c"}))


def _admin(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture
def schema() -> Iterator[str]:
    dsn = pg_dsn_or_skip()
    name = f"tl_pgfail_{uuid.uuid4().hex[:10]}"
    yield name
    _ensure_server_up()
    with _admin(dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def make_store(schema: str) -> Iterator[Callable[..., PostgresStore]]:
    made: list[PostgresStore] = []

    def make(dsn: str | None = None, **options: Any) -> PostgresStore:
        made.append(PostgresStore(dsn or pg_dsn_or_skip(), schema=schema, **options))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def proxy() -> Iterator[CommitProxy]:
    pg_dsn_or_skip()
    p = CommitProxy()
    yield p
    p.close()


def _claimed(store: PostgresStore, call_id: str = "c1") -> Any:
    rec = create_checkpoint(_binding(call_id), at=T0)
    claim = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1))
    assert store.apply([CreateCheckpoint(rec), SwapCheckpoint(0, claim.next)]) == [
        (True, rec),
        True,
    ]
    return claim.next


def _complete(rec: Any) -> Any:
    return complete_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=2), result=7)


# How a write reaches the server, and where the proxy cuts it: one op is one autocommit
# statement and a batch one autocommit ``apply_ops`` call (both commit at their ``Sync``);
# a batch the function gives up on (its third op loses) runs op by op in BEGIN … COMMIT.
_COMMIT_POINT = {"one": "sync", "batch": "sync", "fallback": "commit"}


def _completion(store: PostgresStore, shape: str) -> tuple[Any, list[Any], list[Any]]:
    """The claimed c1's completion as ``shape``: ``(done, ops, outcomes)``."""
    rec = _claimed(store)
    done = _complete(rec)
    if shape == "one":
        return done, [SwapCheckpoint(1, done.next)], [True]
    assert store.apply([WriteOperation("ns", "c1", {"op": 1})]) == [None]
    ops: list[Any] = [SwapCheckpoint(1, done.next), RemoveOperation("ns", "c1")]
    if shape == "fallback":
        ops.append(SwapCheckpoint(0, rec))  # loses: the function gives up
        return done, ops, [True, True, False]
    return done, ops, [True, True]


class TestUnknownCommit:
    """A commit whose answer is lost is read back once its backend is gone; never guessed."""

    @pytest.mark.parametrize("shape", ["one", "batch", "fallback"])
    def test_commit_lost_after_landing_resolves_to_success(
        self, make_store: Callable[..., PostgresStore], proxy: CommitProxy, shape: str
    ) -> None:
        """Landed but unanswered: the write is reported as done, exactly once."""
        store = make_store(proxy.dsn(), max_size=1)
        done, ops, expected = _completion(store, shape)
        proxy.arm("after", on=_COMMIT_POINT[shape])
        assert store.apply(ops) == expected
        assert proxy.fired.is_set()
        assert store.get("ns", "c1") == done.next
        assert [h.transition for h in store.history("ns", "c1")] == [
            "create_checkpoint",
            "claim_execution",
            "complete_execution",
        ]
        assert store.operation_read("ns", "c1") is None

    @pytest.mark.parametrize("shape", ["one", "batch", "fallback"])
    def test_commit_lost_before_landing_is_run_again_once(
        self, make_store: Callable[..., PostgresStore], proxy: CommitProxy, shape: str
    ) -> None:
        """Proven not landed (backend gone, nothing stored): run again, so the call succeeds."""
        store = make_store(proxy.dsn(), max_size=1)
        done, ops, expected = _completion(store, shape)
        proxy.arm("before", on=_COMMIT_POINT[shape])
        assert store.apply(ops) == expected
        assert proxy.fired.is_set()
        assert store.get("ns", "c1") == done.next
        assert [h.revision for h in store.history("ns", "c1")] == [0, 1, 2]
        assert store.operation_read("ns", "c1") is None

    @pytest.mark.parametrize("shape", ["one", "batch", "fallback"])
    def test_commit_outcome_unreadable_raises_unavailable_with_key_and_revision(
        self, make_store: Callable[..., PostgresStore], proxy: CommitProxy, shape: str
    ) -> None:
        """When the outcome cannot be read back, the error names the key and revision."""
        store = make_store(proxy.dsn(), max_size=1, timeout=1.0)
        done, ops, _ = _completion(store, shape)
        proxy.refuse = True  # the pooled connection stays; new ones are refused
        proxy.arm("after", on=_COMMIT_POINT[shape])
        with pytest.raises(CheckpointError) as info:
            store.apply(ops)
        assert proxy.fired.is_set()
        assert info.value.code == "STORE_UNAVAILABLE"
        assert info.value.details["outcome"] == "unknown"
        assert (info.value.details["namespace"], info.value.details["call_id"]) == ("ns", "c1")
        assert info.value.details["revision"] == 2
        proxy.refuse = False
        with PostgresStore(pg_dsn_or_skip(), schema=store.schema) as direct:
            assert direct.get("ns", "c1") == done.next  # it had landed: never guessed
            assert direct.operation_read("ns", "c1") is None


def test_create_racing_an_erase_never_recreates_the_key(
    make_store: Callable[..., PostgresStore], proxy: CommitProxy
) -> None:
    """A create blocked behind gc's uncommitted erase must not slip in once it commits."""
    from .._internals import build_tombstone, dump_record

    eraser = make_store(proxy.dsn(), max_size=1)
    caller = make_store()
    rec = _claimed(caller)
    done = _complete(rec)
    assert caller.compare_and_swap(1, done.next)
    tomb = build_tombstone(
        done.next,
        stored_json=dump_record(done.next),
        transitions=["create_checkpoint", "claim_execution", "complete_execution"],
        operation_json=None,
        erased_at=T0 + timedelta(days=40),
        reason="retention",
    )
    proxy.arm("hold")
    erased: list[bool] = []
    th = threading.Thread(
        target=lambda: erased.append(eraser.erase_checkpoint(tomb, expected_revision=2))
    )
    th.start()
    assert proxy.fired.wait(30)  # the erase is written, its COMMIT held at the proxy
    outcome: list[Any] = []

    def create() -> None:
        try:
            outcome.append(caller.create_if_absent(create_checkpoint(_binding(), at=T0)))
        except CheckpointError as exc:
            outcome.append(exc)

    racer = threading.Thread(target=create)
    racer.start()
    _wait_for(
        pg_dsn_or_skip(),
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        f"AND query LIKE '%{caller.schema}%checkpoints%'",
    )  # the create waits on the erased row's lock
    proxy.release.set()
    th.join(30)
    racer.join(30)
    assert erased == [True]
    assert caller.get("ns", "c1") is None
    assert caller.tombstone("ns", "c1") == tomb
    # Linearised before the erase (it saw the record) or after it (TOMBSTONED): never a new key.
    assert isinstance(outcome[0], CheckpointError) or outcome[0] == (False, done.next)
    with pytest.raises(CheckpointError) as info:
        caller.create_if_absent(create_checkpoint(_binding(), at=T0))
    assert info.value.code == "TOMBSTONED"


@pytest.mark.parametrize(
    ("shape", "kills"), [("transaction", 1), ("statement", 1), ("statement", 2)]
)
def test_terminated_backend_mid_batch_rolls_back_whole_batch(
    make_store: Callable[..., PostgresStore], schema: str, shape: str, kills: int
) -> None:
    """pg_terminate_backend mid-batch: nothing of it lands; the next call works.

    The batch waits on a lock after its create, and its backend is killed. In BEGIN …
    COMMIT (a batch with a row-less append: its count's outcome would not follow from a
    landing): ``STORE_UNAVAILABLE``, the server rolled it all back. As one autocommit
    ``apply_ops`` statement: read back, not landed (the create went with it), so it runs
    again; killed again: ``STORE_UNAVAILABLE`` (``not-committed``), nothing written; else
    the second run lands whole, once.
    """
    dsn = pg_dsn_or_skip()
    store = make_store(application_name="tl-victim", max_size=1)
    rec = _claimed(store)
    done = complete_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=2), result=1)
    other = create_checkpoint(_binding("c2"), at=T0)
    ops: list[Any] = [CreateCheckpoint(other), SwapCheckpoint(1, done.next)]
    if shape == "transaction":
        run = RunRow(
            run_id="r1",
            namespace="ns",
            agent=None,
            goal=None,
            status="running",
            started_at="2026-01-01T00:00:00.000000Z",
        )
        store.create_run(run)
        ops.insert(1, AppendEvents("r1", (), expected_count=0))
    errors: list[BaseException] = []
    results: list[Any] = []
    waiting = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'tl-victim' "
        "AND wait_event_type = 'Lock' AND pid <> ALL(ARRAY[{}]::int[])"
    )
    with _admin(dsn) as holder:
        holder.execute("BEGIN")
        holder.execute(
            sql.SQL("SELECT 1 FROM {}.checkpoints WHERE call_id = 'c1' FOR UPDATE").format(
                sql.Identifier(schema)
            )
        )

        def write() -> None:
            try:
                results.append(store.apply(ops))
            except BaseException as exc:
                errors.append(exc)

        th = threading.Thread(target=write)
        th.start()
        killed: list[int] = []
        with _admin(dsn) as killer:
            for _ in range(kills):
                pid = _wait_for(dsn, waiting.format(",".join(map(str, killed)) or "0"))
                seen = killer.execute(
                    sql.SQL("SELECT count(*) FROM {}.checkpoints WHERE call_id = 'c2'").format(
                        sql.Identifier(schema)
                    )
                ).fetchone()
                assert seen == (0,)  # the create waits uncommitted: nobody sees it
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
                killed.append(pid)
            if shape == "statement" and kills == 1:  # run again: it waits on the lock again
                _wait_for(dsn, waiting.format(",".join(map(str, killed))))
        holder.execute("ROLLBACK")
        th.join(30)
    assert not th.is_alive()
    if shape == "statement" and kills == 1:
        assert errors == []
        assert results == [[(True, other), True]]
        assert store.get("ns", "c2") == other
        assert store.get("ns", "c1") == done.next
        assert [h.revision for h in store.history("ns", "c1")] == [0, 1, 2]
        assert [h.revision for h in store.history("ns", "c2")] == [0]
        return
    assert results == []
    assert len(errors) == 1
    assert isinstance(errors[0], CheckpointError)
    assert errors[0].code == "STORE_UNAVAILABLE"
    if shape == "statement":
        assert errors[0].details["outcome"] == "not-committed"
    assert store.get("ns", "c2") is None  # the create in the same batch rolled back
    assert store.get("ns", "c1") == rec
    assert store.compare_and_swap(1, done.next) is True


def test_statement_timeout_raises_store_busy(
    make_store: Callable[..., PostgresStore], schema: str
) -> None:
    """A statement blocked past statement_timeout is STORE_BUSY; the record is unchanged."""
    dsn = pg_dsn_or_skip()
    store = make_store(statement_timeout=0.3)
    rec = _claimed(store)
    done = complete_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=2), result=1)
    with _admin(dsn) as holder:
        holder.execute("BEGIN")
        holder.execute(
            sql.SQL("SELECT 1 FROM {}.checkpoints FOR UPDATE").format(sql.Identifier(schema))
        )
        with pytest.raises(CheckpointError) as info:
            store.compare_and_swap(1, done.next)
        holder.execute("ROLLBACK")
    assert info.value.code == "STORE_BUSY"
    assert isinstance(info.value.__cause__, psycopg.errors.QueryCanceled)
    assert store.compare_and_swap(1, done.next) is True


def test_newer_schema_raises_schema_too_new(
    make_store: Callable[..., PostgresStore], schema: str
) -> None:
    make_store().close()
    with _admin(pg_dsn_or_skip()) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.toolledger_schema (version, name, applied_at) "
                "VALUES (99, 'future', 'x')"
            ).format(sql.Identifier(schema))
        )
    with pytest.raises(CheckpointError) as info:
        make_store()
    assert info.value.code == "STORE_SCHEMA_TOO_NEW"
    assert info.value.details["version"] == 99


def _open_and_report(dsn: str, schema: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    try:
        with PostgresStore(dsn, schema=schema) as s:
            out.put(("ok", s.applied_migrations()))
    except BaseException as exc:
        out.put(("error", repr(exc)))


def test_hosts_migrating_at_once_all_succeed(schema: str) -> None:
    """Four processes opening a fresh schema together: every one succeeds, once each."""
    dsn = pg_dsn_or_skip()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_open_and_report, args=(dsn, schema, barrier, out)) for _ in range(4)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert [r[0] for r in results] == ["ok"] * 4, results
    expected = [(version, name) for version, name, _ in MIGRATIONS]
    assert all(r[1] == expected for r in results)


def test_open_store_routes_dsn_with_schema_parameter(schema: str) -> None:
    dsn = pg_dsn_or_skip()
    store = open_store(f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}")
    try:
        assert isinstance(store, PostgresStore)
        assert store.schema == schema
        assert store.get("ns", "nope") is None
    finally:
        store.close()


def test_corrupt_row_is_quarantined_not_rewritten(
    make_store: Callable[..., PostgresStore], schema: str
) -> None:
    store = make_store()
    _claimed(store, "c1")
    _claimed(store, "c2")
    with _admin(pg_dsn_or_skip()) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.checkpoints SET record = '{{\"bad\": 1}}' WHERE call_id = 'c1'"
            ).format(sql.Identifier(schema))
        )
    with pytest.raises(CheckpointError) as info:
        store.get("ns", "c1")
    assert info.value.code == "INVALID_CHECKPOINT"
    assert [r.binding.call_id for r in store.list()] == ["c2"]
    assert [(q.namespace, q.call_id) for q in store.quarantined()] == [("ns", "c1")]


def _race(dsn: str, schema: str, i: int, barrier: Any, out: Any) -> None:
    with PostgresStore(dsn, schema=schema) as s:
        rec = s.get("ns", "race")
        assert rec is not None
        t = claim_execution(rec, attempt_id=f"p{i}", at=T0 + timedelta(seconds=1))
        barrier.wait()
        out.put((i, s.compare_and_swap(0, t.next)))


def test_processes_racing_one_cas_have_one_winner(
    make_store: Callable[..., PostgresStore], schema: str
) -> None:
    dsn = pg_dsn_or_skip()
    store = make_store()
    store.create_if_absent(create_checkpoint(_binding("race"), at=T0))
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(dsn, schema, i, barrier, out)) for i in range(6)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    got = store.get("ns", "race")
    assert got is not None
    assert got.execution_fence == f"p{winners[0]}"
    assert [h.revision for h in store.history("ns", "race")] == [0, 1]


def _pg_ctl() -> list[str] | None:
    if (
        shutil.which("pg_ctlcluster") is None
        or os.geteuid() != 0
        or not os.path.isdir("/etc/postgresql")
    ):
        return None
    versions = sorted(os.listdir("/etc/postgresql"))
    return (
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main"] if versions else None
    )


def _ensure_server_up() -> None:
    ctl = _pg_ctl()
    if ctl is None:
        return
    if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode != 0:
        subprocess.run([*ctl, "start"], check=False, capture_output=True)
        _wait_ready()


def _wait_ready(deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise AssertionError("PostgreSQL did not come back")
        time.sleep(0.1)


def test_server_restart_typed_errors_then_next_call_works(
    make_store: Callable[..., PostgresStore],
) -> None:
    """Across a restart: calls fail only with typed errors and work again once it is up."""
    ctl = _pg_ctl()
    if ctl is None:
        if os.environ.get("TOOLLEDGER_REQUIRE_PG"):
            pytest.fail("the restart test needs root and pg_ctlcluster (present in CI)")
        pytest.skip("needs root and pg_ctlcluster")
    store = make_store(max_size=2, timeout=2.0)
    rec = _claimed(store)
    try:
        subprocess.run([*ctl, "stop", "-m", "fast"], check=True, capture_output=True)
        with pytest.raises(CheckpointError) as info:
            store.get("ns", "c1")
        assert info.value.code == "STORE_UNAVAILABLE"
    finally:
        subprocess.run([*ctl, "start"], check=False, capture_output=True)
        _wait_ready()
    assert store.get("ns", "c1") == rec  # stale pooled connections are replaced
    done = complete_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=2), result=1)
    assert store.compare_and_swap(1, done.next) is True


def _wait_for(dsn: str, query: str, deadline_s: float = 20.0) -> Any:
    deadline = time.monotonic() + deadline_s
    with _admin(dsn) as conn:
        while True:
            row = conn.execute(query).fetchone()  # type: ignore[arg-type]
            if row is not None:
                return row[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing matched {query!r}")
            time.sleep(0.01)


class TestUnknownEffectKeyCommit:
    """A lost commit of an effect-key claim is read back like any other; never doubled."""

    @pytest.mark.parametrize("when", ["after", "before"])
    def test_lost_commit_of_a_keyed_claim_resolves_to_one_claim(
        self, make_store: Callable[..., PostgresStore], proxy: CommitProxy, when: str
    ) -> None:
        """Landed or not, the caller learns the claim holds, with one history row each."""
        store = make_store(proxy.dsn(), max_size=1)
        key = fingerprint({"tool": "send_email", "key": "k"})
        rec = create_checkpoint(_binding(), at=T0)
        claim = claim_execution(rec, attempt_id="a1", at=T0 + timedelta(seconds=1))
        proxy.arm(when, on="sync")  # one autocommit apply_ops statement
        out = store.apply(
            [
                ClaimEffectKey("ns", key, "c1"),
                CreateCheckpoint(rec, requires=0),
                SwapCheckpoint(0, claim.next, requires=0),
            ]
        )
        assert out == [True, (True, rec), True]
        assert proxy.fired.is_set()
        assert store.effect_key_holder("ns", key) == "c1"
        assert [h.transition for h in store.history("ns", "c1")] == [
            "create_checkpoint",
            "claim_execution",
        ]

    @pytest.mark.parametrize("when", ["after", "before"])
    def test_lost_commit_of_key_claims_alone_is_read_back(
        self, make_store: Callable[..., PostgresStore], proxy: CommitProxy, when: str
    ) -> None:
        """A batch of key claims only (a copy) is probed by its holders."""
        store = make_store(proxy.dsn(), max_size=1)
        keys = [fingerprint({"key": i}) for i in range(2)]
        proxy.arm(when, on="sync")
        out = store.apply([ClaimEffectKey("ns", k, f"c{i}") for i, k in enumerate(keys)])
        assert out == [True, True]
        assert proxy.fired.is_set()
        assert [store.effect_key_holder("ns", k) for k in keys] == ["c0", "c1"]
