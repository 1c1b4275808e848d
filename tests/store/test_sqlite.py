"""SQLiteStore specifics: migrations, quarantine, locking, durability, driver errors."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    Result,
    Status,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    fingerprint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
    resolve_completed,
    resolve_not_executed,
)
from toolledger.store import SQLiteStore
from toolledger.store.base import EventRow, RunRow
from toolledger.store.sqlite import LATEST_VERSION, MIGRATIONS
from toolledger.testing import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _binding(call_id: str) -> Binding:
    return Binding("ns", call_id, "send_email", "1", fingerprint({"id": call_id}))


def _completed(store: tl.Store, call_id: str, result: object = None, **kw: object) -> None:
    rec = create_checkpoint(_binding(call_id), at=_at(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    assert store.compare_and_swap(t.expected_revision, t.next)
    t = complete_execution(t.next, attempt_id="a", at=_at(2), result=result, **kw)  # type: ignore[arg-type]
    assert store.compare_and_swap(t.expected_revision, t.next)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db)
    yield s
    s.close()


def _raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(db), isolation_level=None)


# -- migrations ----------------------------------------------------------------------


def test_sqlite_new_file_records_every_migration_and_user_version(
    store: SQLiteStore, db: Path
) -> None:
    """A new file has every numbered migration recorded and user_version at the latest."""
    expected = [(v, name) for v, name, _ in MIGRATIONS]
    assert store.applied_migrations() == expected
    assert [v for v, _ in expected] == list(range(1, LATEST_VERSION + 1))
    conn = _raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    rows = conn.execute("SELECT version, name, applied_at FROM toolledger_schema").fetchall()
    assert [(v, n) for v, n, _ in rows] == expected
    assert all(datetime.fromisoformat(a).tzinfo is not None for _, _, a in rows)
    conn.close()


def test_sqlite_reopen_does_not_reapply_migrations(store: SQLiteStore, db: Path) -> None:
    """Opening an up-to-date file changes nothing and keeps the data."""
    _completed(store, "c1", result={"x": 1})
    store.close()
    with SQLiteStore(db) as again:
        assert again.applied_migrations() == [(v, n) for v, n, _ in MIGRATIONS]
        rec = again.get("ns", "c1")
        assert rec is not None
        assert rec.status is Status.COMPLETED


def test_sqlite_partial_migration_history_is_completed(db: Path) -> None:
    """A file migrated to version 1 only gets the later migrations applied."""
    if LATEST_VERSION < 2:
        pytest.skip("only one migration exists")
    conn = _raw(db)
    conn.execute("BEGIN")
    conn.execute(
        "CREATE TABLE toolledger_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TEXT NOT NULL)"
    )
    for statement in MIGRATIONS[0][2]:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO toolledger_schema VALUES (1, ?, '2026-01-01T00:00:00+00:00')",
        (MIGRATIONS[0][1],),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(db) as store:
        assert store.applied_migrations() == [(v, n) for v, n, _ in MIGRATIONS]


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_sqlite_newer_file_is_schema_too_new_and_not_modified(db: Path, journal_mode: str) -> None:
    """A file written by a newer toolledger is refused and left byte for byte as it was."""
    SQLiteStore(db).close()
    conn = _raw(db)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(tl.StoreSchemaTooNewError) as info:
        SQLiteStore(db)
    assert info.value.code == "STORE_SCHEMA_TOO_NEW"
    assert info.value.details["version"] == LATEST_VERSION + 1
    assert str(db) in info.value.message
    assert db.read_bytes() == before


def test_sqlite_newer_schema_table_is_schema_too_new(db: Path) -> None:
    """A migration table naming a newer version is refused even if user_version lags."""
    SQLiteStore(db).close()
    conn = _raw(db)
    conn.execute(
        "INSERT INTO toolledger_schema VALUES (?, 'future', '2030-01-01T00:00:00+00:00')",
        (LATEST_VERSION + 5,),
    )
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    with pytest.raises(tl.StoreSchemaTooNewError):
        SQLiteStore(db)


# -- quarantine: corrupt stored rows ----------------------------------------------------


def _corrupt(db: Path, call_id: str, text: str) -> bytes:
    conn = _raw(db)
    conn.execute("UPDATE checkpoints SET record = ? WHERE call_id = ?", (text, call_id))
    row = conn.execute("SELECT record FROM checkpoints WHERE call_id = ?", (call_id,)).fetchone()
    conn.close()
    return str(row[0]).encode()


def _row(db: Path, call_id: str) -> bytes:
    conn = _raw(db)
    row = conn.execute(
        "SELECT status, revision, record FROM checkpoints WHERE call_id = ?", (call_id,)
    ).fetchone()
    conn.close()
    return repr(row).encode()


def _invalid_json(store: tl.Store) -> str:
    return "{not json"


def _invalid_invariant(store: tl.Store) -> str:
    rec = store.get("ns", "good")
    assert rec is not None
    data = rec.to_dict()
    data["binding"]["call_id"] = "bad"
    data["status"] = "executing"  # executing without a fence
    return json.dumps(data)


def _other_key(store: tl.Store) -> str:
    rec = store.get("ns", "good")
    assert rec is not None
    return json.dumps(rec.to_dict())  # the record of ns/good stored under ns/bad


@pytest.mark.parametrize(
    "make", [_invalid_json, _invalid_invariant, _other_key], ids=lambda f: f.__name__[1:]
)
def test_sqlite_corrupt_row_is_quarantined_never_rewritten(
    store: SQLiteStore, db: Path, make: object
) -> None:
    """get raises INVALID_CHECKPOINT naming the key; the row stays; others stay readable."""
    _completed(store, "good", result=1)
    _completed(store, "bad", result=2)
    _corrupt(db, "bad", make(store))  # type: ignore[operator]
    before = _row(db, "bad")

    with pytest.raises(tl.InvalidCheckpointError) as info:
        store.get("ns", "bad")
    assert info.value.code == "INVALID_CHECKPOINT"
    assert info.value.details["namespace"] == "ns"
    assert info.value.details["call_id"] == "bad"
    assert "ns/bad" in info.value.message

    good = store.get("ns", "good")
    assert good is not None
    assert good.result == Result(payload=1)
    assert [r.binding.call_id for r in store.list()] == ["good"]
    quarantined = store.quarantined()
    assert [(q.namespace, q.call_id) for q in quarantined] == [("ns", "bad")]
    assert "ns/bad" in quarantined[0].reason
    assert [h.revision for h in store.history("ns", "bad")] == [0, 1, 2]  # history intact
    with pytest.raises(tl.InvalidCheckpointError):
        store.create_if_absent(create_checkpoint(_binding("bad"), at=_at(9)))
    assert _row(db, "bad") == before


def test_sqlite_unknown_status_column_is_invalid_checkpoint_on_cas(
    store: SQLiteStore, db: Path
) -> None:
    """A CAS over a row whose status column is garbage fails cleanly, writing nothing."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    conn = _raw(db)
    conn.execute("UPDATE checkpoints SET status = 'exploded' WHERE call_id = 'c'")
    conn.close()
    before = _row(db, "c")
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    with pytest.raises(tl.InvalidCheckpointError) as info:
        store.compare_and_swap(t.expected_revision, t.next)
    assert info.value.details["call_id"] == "c"
    assert _row(db, "c") == before
    assert len(store.history("ns", "c")) == 1


@pytest.mark.parametrize(
    "damage",
    ["{not json", "__other_revision__", "__other_key__"],
    ids=["invalid_json", "revision_disagrees", "key_disagrees"],
)
def test_sqlite_cas_over_damaged_document_is_invalid_checkpoint(
    store: SQLiteStore, db: Path, damage: str
) -> None:
    """A CAS whose columns still match never overwrites a row whose JSON is damaged."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    data = rec.to_dict()
    if damage == "__other_revision__":
        data["revision"] = 7
        damage = json.dumps(data)
    elif damage == "__other_key__":
        data["binding"]["call_id"] = "elsewhere"
        damage = json.dumps(data)
    _corrupt(db, "c", damage)
    before = _row(db, "c")
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    with pytest.raises(tl.InvalidCheckpointError) as info:
        store.compare_and_swap(t.expected_revision, t.next)
    assert info.value.details["call_id"] == "c"
    assert _row(db, "c") == before
    assert len(store.history("ns", "c")) == 1


def test_memory_store_corrupt_row_cas_is_invalid_checkpoint() -> None:
    """MemoryStore refuses to swap over a row it cannot read, and keeps it."""
    store = MemoryStore()
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    store.rows[("ns", "c")] = "[1, 2"
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    with pytest.raises(tl.InvalidCheckpointError):
        store.compare_and_swap(t.expected_revision, t.next)
    assert store.rows[("ns", "c")] == "[1, 2"
    assert [(q.namespace, q.call_id) for q in store.quarantined()] == [("ns", "c")]


# -- locking -------------------------------------------------------------------------


def test_sqlite_lock_held_past_busy_timeout_is_store_busy(db: Path) -> None:
    """A write lock held by another connection past busy_timeout is STORE_BUSY."""
    store = SQLiteStore(db, busy_timeout=0.1)
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    holder = _raw(db)
    holder.execute("BEGIN IMMEDIATE")
    try:
        t = claim_execution(rec, attempt_id="a", at=_at(1))
        with pytest.raises(tl.StoreBusyError) as info:
            store.compare_and_swap(t.expected_revision, t.next)
        assert info.value.code == "STORE_BUSY"
        assert isinstance(info.value, tl.StoreError)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(tl.StoreBusyError):
            store.create_if_absent(create_checkpoint(_binding("d"), at=_at(0)))
        with pytest.raises(tl.StoreBusyError):
            store.operation_write("ns", "c", {"k": 1})
        got = store.get("ns", "c")  # WAL: readers are not blocked by the writer
        assert got == rec
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    assert store.compare_and_swap(t.expected_revision, t.next)
    store.close()


def test_sqlite_first_open_while_locked_is_store_busy(db: Path) -> None:
    """Opening (migrating) a file that stays write-locked is STORE_BUSY, not a raw error."""
    holder = _raw(db)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE unrelated (x)")
    try:
        with pytest.raises(tl.StoreBusyError):
            SQLiteStore(db, busy_timeout=0.1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with SQLiteStore(db) as store:
        assert store.applied_migrations()[-1][0] == LATEST_VERSION


# -- durability and pragmas ----------------------------------------------------------


def _pragma(store: SQLiteStore, name: str) -> object:
    return store._conn().execute(f"PRAGMA {name}").fetchone()[0]


def test_sqlite_durability_full_syncs_durable_writes(db: Path) -> None:
    """durability="full": durable writes run with synchronous=FULL, relaxed ones NORMAL."""
    with SQLiteStore(db) as store:
        assert store.durability == "full"
        store.create_if_absent(create_checkpoint(_binding("c"), at=_at(0)))
        assert _pragma(store, "synchronous") == 2  # FULL
        store.operation_write("ns", "c", {"k": 1}, durable=False)
        assert _pragma(store, "synchronous") == 1  # NORMAL
        store.operation_write("ns", "c", {"k": 2})
        assert _pragma(store, "synchronous") == 2


def test_sqlite_durability_normal_never_syncs_full(db: Path) -> None:
    """durability="normal": every write runs with synchronous=NORMAL."""
    with SQLiteStore(db, durability="normal") as store:
        store.create_if_absent(create_checkpoint(_binding("c"), at=_at(0)))
        assert _pragma(store, "synchronous") == 1
        store.operation_write("ns", "c", {"k": 1}, durable=True)
        assert _pragma(store, "synchronous") == 1


def test_sqlite_pragmas_wal_and_busy_timeout(db: Path) -> None:
    """Connections use WAL and the configured busy timeout."""
    with SQLiteStore(db, busy_timeout=2.5) as store:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "busy_timeout") == 2500


@pytest.mark.parametrize(
    "kwargs", [{"durability": "fast"}, {"durability": None}, {"busy_timeout": -1}]
)
def test_sqlite_bad_options_are_invalid_argument(db: Path, kwargs: dict[str, object]) -> None:
    """Unknown durability or a negative timeout is INVALID_ARGUMENT."""
    with pytest.raises(tl.InvalidArgumentError):
        SQLiteStore(db, **kwargs)  # type: ignore[arg-type]


# -- driver errors never leak --------------------------------------------------------


def test_sqlite_not_a_database_is_store_unavailable(db: Path) -> None:
    """A file that is not SQLite raises a StoreError chained to the driver error."""
    db.write_bytes(b"this is not a database, just text " * 100)
    with pytest.raises(tl.StoreError) as info:
        SQLiteStore(db)
    assert info.value.code == "STORE_UNAVAILABLE"
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_sqlite_closed_store_is_store_unavailable(store: SQLiteStore) -> None:
    """Using a closed store is STORE_UNAVAILABLE; close is idempotent."""
    store.close()
    store.close()
    with pytest.raises(tl.StoreUnavailableError):
        store.get("ns", "c")


# -- payloads, history, threads --------------------------------------------------------


def test_sqlite_result_under_raised_limit_stays_readable(store: SQLiteStore) -> None:
    """A result stored under a raised max_payload_bytes is returned by get and history."""
    big = "x" * 200_000
    _completed(store, "big", result=big, max_payload_bytes=300_000)
    rec = store.get("ns", "big")
    assert rec is not None
    assert rec.result == Result(payload=big)
    assert store.history("ns", "big")[-1].record == rec
    assert store.list(status="completed") == [rec]


def test_sqlite_history_entries_carry_revision_status_action_at(store: SQLiteStore) -> None:
    """History rows say which transition led to each revision, its action and time."""
    _completed(store, "c", result=[1])
    hist = store.history("ns", "c")
    assert [(h.revision, h.status.value, h.transition, h.action.value, h.at) for h in hist] == [
        (0, "ready", "create_checkpoint", "execute", _at(0)),
        (1, "executing", "claim_execution", "execute", _at(1)),
        (2, "completed", "complete_execution", "deliver", _at(2)),
    ]


def test_sqlite_payload_bytes_stored_exactly(store: SQLiteStore, db: Path) -> None:
    """The stored JSON keeps key order and non-ASCII text as given."""
    _completed(store, "c", result={"z": "é", "a": [1.5, None]})
    conn = _raw(db)
    (text,) = conn.execute("SELECT record FROM checkpoints WHERE call_id = 'c'").fetchone()
    conn.close()
    assert '"result":{"payload":{"z":"é","a":[1.5,null]},"is_error":false}' in text


def test_sqlite_store_is_a_store(store: SQLiteStore) -> None:
    """SQLiteStore satisfies the Store protocol."""
    assert isinstance(store, tl.Store)


def test_sqlite_relative_path_and_parent_directory_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing parent directory is created; relative paths are relative to cwd."""
    monkeypatch.chdir(tmp_path)
    with SQLiteStore(Path("sub") / "dir" / "x.db") as store:
        store.create_if_absent(create_checkpoint(_binding("c"), at=_at(0)))
    assert (tmp_path / "sub" / "dir" / "x.db").exists()


@pytest.mark.parametrize("factory", [MemoryStore, None], ids=["memory", "sqlite"])
def test_store_refuses_dicts_instead_of_records(db: Path, factory: object) -> None:
    """create_if_absent/compare_and_swap take records; a dict is INVALID_ARGUMENT."""
    store: tl.Store = MemoryStore() if factory is MemoryStore else SQLiteStore(db)
    rec = create_checkpoint(_binding("c"), at=_at(0))
    with pytest.raises(tl.InvalidArgumentError):
        store.create_if_absent(rec.to_dict())  # type: ignore[arg-type]
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    with pytest.raises(tl.InvalidArgumentError):
        store.compare_and_swap(0, t.next.to_dict())  # type: ignore[arg-type]
    assert store.get("ns", "c") == rec
    store.close()


def test_sqlite_cas_rejects_invalid_next_before_writing(store: SQLiteStore) -> None:
    """A hand-made invalid next record is INVALID_CHECKPOINT; nothing is written."""
    import dataclasses

    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    bad = dataclasses.replace(t.next, execution_fence=None)
    with pytest.raises(tl.InvalidCheckpointError):
        store.compare_and_swap(0, bad)
    assert store.get("ns", "c") == rec
    assert len(store.history("ns", "c")) == 1


def test_sqlite_cas_illegal_move_is_invalid_transition(store: SQLiteStore) -> None:
    """A valid next that no transition leads to from the stored status is refused."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    claim = claim_execution(rec, attempt_id="a", at=_at(1)).next
    done = complete_execution(claim, attempt_id="a", at=_at(2), result=1).next
    # Pretend revision 0 -> 1 leads straight to "completed" (skipping the claim).
    import dataclasses

    skip = dataclasses.replace(done, revision=1)
    with pytest.raises(tl.InvalidTransitionError):
        store.compare_and_swap(0, skip)
    assert store.get("ns", "c") == rec


def test_store_record_mutated_after_validation_is_refused_cleanly(store: SQLiteStore) -> None:
    """Mutating a stored record's payload in place cannot leak a raw encoder error."""
    _completed(store, "c", result={"items": [1]})
    rec = store.get("ns", "c")
    assert rec is not None
    assert rec.result is not None
    rec.result.payload["items"].append(float("nan"))  # frozen record, mutable payload
    t = claim_delivery(rec, delivery_id="d", at=_at(3))
    with pytest.raises(tl.InvalidCheckpointError):
        store.compare_and_swap(t.expected_revision, t.next)
    again = store.get("ns", "c")
    assert again is not None
    assert again.result == Result(payload={"items": [1]})


def test_sqlite_uncertain_reason_unicode_round_trips(store: SQLiteStore) -> None:
    """Free-text reasons (controls, non-BMP, quotes) are stored and read back exactly."""
    reason = 'timeout "after" send \\ é😀\x00\u2028'
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    assert store.compare_and_swap(t.expected_revision, t.next)
    t = mark_execution_uncertain(t.next, attempt_id="a", at=_at(2), reason=reason)
    assert store.compare_and_swap(t.expected_revision, t.next)
    got = store.get("ns", "c")
    assert got is not None
    assert got.uncertain_reason == reason
    assert got == t.next


def test_sqlite_unencodable_text_is_invalid_argument(store: SQLiteStore) -> None:
    """A lone surrogate in a key is INVALID_ARGUMENT, never a raw UnicodeEncodeError."""
    with pytest.raises(tl.InvalidArgumentError):
        store.get("ns", "bad\ud800")
    with pytest.raises(tl.InvalidArgumentError):
        store.operation_remove("ns", "bad\ud800")
    assert store.get("ns", "fine") is None


# -- folded statements: the fast paths label rows right, the slow paths apply nothing -----


def _walk(store: SQLiteStore, call_id: str, steps: list[object]) -> None:
    rec = create_checkpoint(_binding(call_id), at=_at(0))
    store.create_if_absent(rec)
    for i, step in enumerate(steps, start=1):
        t = step(rec, _at(i))  # type: ignore[operator]
        assert store.compare_and_swap(t.expected_revision, t.next)
        rec = t.next


def test_sqlite_cas_history_names_every_edge_of_the_transition_table(store: SQLiteStore) -> None:
    """Every legal edge (two lead to completed) is labelled as ``transition_between`` names it."""
    from toolledger.checkpoint.transitions import TRANSITIONS, transition_between

    _walk(
        store,
        "long",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: mark_execution_uncertain(r, attempt_id="a", at=at, reason="timeout"),
            lambda r, at: complete_execution(r, attempt_id="a", at=at, result=1),
            lambda r, at: claim_delivery(r, delivery_id="d", at=at),
            lambda r, at: release_delivery(r, delivery_id="d", at=at),
            lambda r, at: claim_delivery(r, delivery_id="e", at=at),
            lambda r, at: complete_delivery(r, delivery_id="e", at=at),
        ],
    )
    _walk(
        store,
        "short",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: complete_execution(r, attempt_id="a", at=at, result=1),
        ],
    )
    _walk(
        store,
        "released",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: release_execution(r, attempt_id="a", at=at, evidence="journal-empty"),
        ],
    )
    _walk(
        store,
        "settled",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: resolve_completed(
                r, at=at, by="ana", reason="seen", result=1, force=True
            ),
        ],
    )
    _walk(
        store,
        "resettled",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: resolve_not_executed(r, at=at, by="ana", reason="no", force=True),
            lambda r, at: claim_execution(r, attempt_id="b", at=at),
            lambda r, at: mark_execution_uncertain(r, attempt_id="b", at=at, reason="lost"),
            lambda r, at: resolve_completed(r, at=at, by="ana", reason="seen", result=1),
        ],
    )
    _walk(
        store,
        "unsettled",
        [
            lambda r, at: claim_execution(r, attempt_id="a", at=at),
            lambda r, at: mark_execution_uncertain(r, attempt_id="a", at=at, reason="lost"),
            lambda r, at: resolve_not_executed(r, at=at, by="ana", reason="no"),
        ],
    )
    seen = set()
    for call_id in ("long", "short", "released", "settled", "resettled", "unsettled"):
        hist = store.history("ns", call_id)
        for i in range(1, len(hist)):
            before, after = hist[i - 1], hist[i]
            decision = after.record.resolution is not None
            name, action = transition_between(before.status, after.status, decision=decision)
            assert (after.transition, after.action) == (name, action)
            seen.add((before.status, after.status, decision))
    assert seen == {
        (s, rule.target, rule.decision) for rule in TRANSITIONS.values() for s in rule.sources
    }


def _history_rows(db: Path) -> int:
    with _raw(db) as conn:
        return int(conn.execute("SELECT count(*) FROM checkpoint_history").fetchone()[0])


def test_sqlite_lost_cas_writes_no_history_row(store: SQLiteStore, db: Path) -> None:
    """A CAS at a stale revision returns False and leaves the row and its history as they were."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    assert store.compare_and_swap(0, t.next)
    rows = _history_rows(db)
    assert store.compare_and_swap(0, t.next) is False
    assert store.get("ns", "c") == t.next
    assert _history_rows(db) == rows


def test_sqlite_cas_over_damaged_row_writes_no_history_row(store: SQLiteStore, db: Path) -> None:
    """A row whose JSON disagrees with its columns is refused by the slow path, untouched."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    store.create_if_absent(rec)
    with _raw(db) as conn:
        conn.execute("UPDATE checkpoints SET record = json_set(record, '$.revision', 7)")
    rows = _history_rows(db)
    t = claim_execution(rec, attempt_id="a", at=_at(1))
    with pytest.raises(tl.InvalidCheckpointError):
        store.compare_and_swap(0, t.next)
    assert _history_rows(db) == rows


def test_sqlite_create_over_stored_row_returns_it_without_history(
    store: SQLiteStore, db: Path
) -> None:
    """A refused create (the key is held) answers the stored record and writes nothing."""
    rec = create_checkpoint(_binding("c"), at=_at(0))
    assert store.create_if_absent(rec) == (True, rec)
    rows = _history_rows(db)
    again = create_checkpoint(_binding("c"), at=_at(5))
    assert store.create_if_absent(again) == (False, rec)
    assert _history_rows(db) == rows


def _event_row(run_id: str, seq: int) -> EventRow:
    return EventRow(
        run_id=run_id,
        seq=seq,
        event_id=f"e{seq}",
        parent_id=None,
        kind="step",
        name="s",
        status="completed",
        at="2026-01-01T00:00:00.000000+00:00",
        prev_hash=None if seq == 0 else f"h{seq - 1}",
        hash=f"h{seq}",
        data="{}",
    )


def test_sqlite_append_slow_paths_unknown_run_and_empty_rows(store: SQLiteStore) -> None:
    """Unknown run: NOT_FOUND, nothing written; no rows: True only at the current count."""
    with pytest.raises(tl.NotFoundError):
        store.append_events("nope", [_event_row("nope", 0)], expected_count=0)
    assert store.read_events("nope") == []
    store.create_run(
        RunRow(
            run_id="r",
            namespace="ns",
            agent="bot",
            goal="g",
            status="running",
            started_at="2026-01-01T00:00:00.000000+00:00",
            data='{"goal":"g"}',
        )
    )
    assert store.append_events("r", [], expected_count=0) is True
    assert store.append_events("r", [], expected_count=1) is False
    assert store.append_events("r", [_event_row("r", 0)], expected_count=0) is True
    assert store.append_events("r", [_event_row("r", 0)], expected_count=0) is False
    run = store.get_run("r")
    assert run is not None
    assert (run.event_count, run.head_hash) == (1, "h0")
    assert [e.seq for e in store.read_events("r")] == [0]
