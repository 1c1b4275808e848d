"""The search index is written with the records it indexes, from toolledger's own tokens."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import toolledger
from toolledger.errors import StoreError
from toolledger.store import SQLiteStore
from toolledger.store import sqlite as sqlite_module
from toolledger.store.base import EventRow, RunRow

from .._internals import sqlite_search
from .._internals import store_search as search_module
from .._pg_dsn import pg_dsn_or_skip

# Words whose old index (FTS5's or to_tsvector's own folding of the raw text) missed them.
WORDS = {"cafe\u0301": "café", "ᏣᎳᎩ": "ꮳꮃꭹ", "ᲥᲐᲠᲗᲣᲚᲘ": "ქართული", "½": "½"}


def _old_tokens(text: str) -> str:
    """The text the index was given before version 10 / 8: lower-cased, not folded."""
    return " ".join(t.lower() for t in re.findall(r"[^\W_]+", text))


class TestTokens:
    def test_tokens_fold_case_and_compatibility_forms(self) -> None:
        """Text is NFKC-normalised and case-folded before it is split."""
        assert search_module.tokens("Straße \uff21\uff22\uff23 cafe\u0301 A-1001") == [
            "strasse",
            "abc",
            "café",
            "a",
            "1001",
        ]
        assert search_module.tokens("½ ﬁle ᏣᎳᎩ") == ["1", "2", "file", "ᏣᎳᎩ"]

    def test_tsvector_text_keeps_what_postgresql_can_store_in_order(self) -> None:
        """Past the byte budget the rest is left out; a too-long word is skipped."""
        long_word = "x" * (search_module.TSVECTOR_WORD_BYTES + 1)
        assert search_module.tsvector_text(f"a {long_word} b a") == "'a':1 'b':3 'a':4"
        words = " ".join(f"w{i:07d}" for i in range(100_000))  # 12 bytes each in a tsvector
        kept = search_module.tsvector_text(words).split()
        assert len(kept) == search_module.TSVECTOR_BYTES // 12
        assert kept[0] == "'w0000000':1"


class TestSQLiteMigration:
    def test_file_of_version_9_is_indexed_again_with_folded_tokens(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file the previous schema indexed (FTS5 folding the raw text) finds every word
        after the migration, pending records included, each record indexed once."""
        db = tmp_path / "v9.db"
        names = [name for _, name, _ in sqlite_module.MIGRATIONS]
        before = sqlite_module.MIGRATIONS[: names.index("search_own_tokens")]
        monkeypatch.setattr(sqlite_module, "MIGRATIONS", before)
        monkeypatch.setattr(sqlite_module, "LATEST_VERSION", before[-1][0])
        # The previous writer handed FTS5 the raw text.
        monkeypatch.setattr(sqlite_search, "index_text", lambda text: text)
        with toolledger.run("Trip to Zu\u0308rich", db=db) as run:
            for word in WORDS:
                run.note(f"the word {word} is stored")
        pending = SQLiteStore(db)  # left open: its last run stays pending
        with toolledger.run("Second trip", db=pending) as second:
            second.note("ᏣᎳᎩ again")
        old = sqlite3_rows(db, "SELECT count(*) FROM events_fts WHERE events_fts MATCH ?", "café")
        assert old == 0  # the old index missed it
        monkeypatch.undo()
        store = SQLiteStore(db)
        try:
            assert (10, "search_own_tokens") in store.applied_migrations()
            for query in WORDS.values():
                found = toolledger.search(store, query)
                assert run.run_id in {e.run_id for e in found}, query
            assert {e.run_id for e in toolledger.search(store, "ꮳꮃꭹ")} == {
                run.run_id,
                second.run_id,
            }
            assert {e.run_id for e in toolledger.search(store, "zürich")} == {run.run_id}
            records = len(store.read_events(run.run_id)) + len(store.read_events(second.run_id))
            assert store._read("SELECT count(*) FROM events_fts")[0][0] == records
        finally:
            store.close()
            pending.close()


def sqlite3_rows(db: Path, query: str, arg: str) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(query, (arg,)).fetchone()[0])
    finally:
        conn.close()


# -- PostgreSQL -------------------------------------------------------------------------


@pytest.fixture
def pg_schema() -> Iterator[str]:
    dsn = pg_dsn_or_skip()
    name = f"tl_search_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _row(run_id: str, seq: int, text: str) -> EventRow:
    return EventRow(
        run_id=run_id,
        seq=seq,
        event_id=f"e{seq}",
        parent_id=None,
        kind="step",
        name="work",
        status="completed",
        at=f"2026-01-01T00:00:{seq:02d}.000000+00:00",
        prev_hash=None if seq == 0 else f"h{seq - 1}",
        hash=f"h{seq}",
        data=json.dumps({"header": {}, "content": {"outputs": {"text": text}}}),
    )


def _run(run_id: str) -> RunRow:
    return RunRow(
        run_id=run_id,
        namespace="ns",
        agent="a",
        goal="g",
        status="running",
        started_at="2026-01-01T00:00:00.000000+00:00",
        data=json.dumps({"header": {}, "content": {"goal": "g"}}),
    )


class TestPostgres:
    def test_append_killed_while_indexing_stores_nothing(self, pg_schema: str) -> None:
        """The index rides the records' own statement: a connection killed while it is
        written leaves neither (before, the records were stored and never found)."""
        from toolledger.store.postgres import PostgresStore

        dsn = pg_dsn_or_skip()
        store = PostgresStore(dsn, schema=pg_schema, max_size=2)
        try:
            store.create_run(_run("r1"))
            assert store.append_events("r1", [_row("r1", 0, "fine words")], expected_count=0)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    sql.SQL(
                        "CREATE FUNCTION {s}.die() RETURNS trigger LANGUAGE plpgsql AS $$ "
                        "BEGIN IF NEW.tsv @@ 'killme'::tsquery THEN "
                        "PERFORM pg_terminate_backend(pg_backend_pid()); "
                        "PERFORM pg_sleep(5); END IF; RETURN NEW; END $$"
                    ).format(s=sql.Identifier(pg_schema))
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TRIGGER die BEFORE INSERT ON {s}.event_search "
                        "FOR EACH ROW EXECUTE FUNCTION {s}.die()"
                    ).format(s=sql.Identifier(pg_schema))
                )
            with pytest.raises(StoreError) as caught:
                store.append_events("r1", [_row("r1", 1, "killme please")], expected_count=1)
            assert caught.value.details.get("outcome") == "not-committed"
            assert [e.seq for e in store.read_events("r1")] == [0]
            run = store.get_run("r1")
            assert run is not None
            assert run.event_count == 1
            # The run goes on: the next append lands with its index.
            assert store.append_events("r1", [_row("r1", 1, "later words")], expected_count=1)
            found = store.search_events(
                search_module.EventQuery(terms=search_module.parse_query("later"))
            )
            assert [g[0].seq for g in found] == [1]
        finally:
            store.close()

    def test_schema_of_version_7_is_indexed_again_with_folded_tokens(
        self, pg_schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Rows the previous schema indexed with to_tsvector('simple') are indexed again as
        toolledger's tokens by the migration: every word found."""
        from toolledger.store import postgres as postgres_module

        dsn = pg_dsn_or_skip()
        names = [name for _, name, _ in postgres_module.MIGRATIONS]
        before = postgres_module.MIGRATIONS[: names.index("search_own_tokens")]
        monkeypatch.setattr(postgres_module, "MIGRATIONS", before)
        monkeypatch.setattr(postgres_module, "LATEST_VERSION", before[-1][0])
        old = postgres_module.PostgresStore(dsn, schema=pg_schema)
        texts = [f"the word {word} is stored" for word in WORDS]
        try:
            old.create_run(_run("r1"))
            rows = [_row("r1", i, text) for i, text in enumerate(texts)]
            assert old.append_events("r1", rows, expected_count=0)
        finally:
            old.close()
        with psycopg.connect(dsn, autocommit=True) as conn:  # what version 7 stored
            for i, text in enumerate(texts):
                conn.execute(
                    sql.SQL(
                        "UPDATE {}.event_search SET tsv = to_tsvector('simple', %s) "
                        "WHERE run_id = 'r1' AND seq = %s"
                    ).format(sql.Identifier(pg_schema)),
                    (_old_tokens(f"work {text}"), i),
                )
        monkeypatch.undo()
        store = postgres_module.PostgresStore(dsn, schema=pg_schema)
        try:
            assert (8, "search_own_tokens") in store.applied_migrations()
            for seq, query in enumerate(WORDS.values()):
                found = store.search_events(
                    search_module.EventQuery(terms=search_module.parse_query(query))
                )
                assert [g[0].seq for g in found] == [seq], query
        finally:
            store.close()


# -- a common goal word with a filter few events pass ------------------------------------


def _goal_runs(store: object, runs: int) -> None:
    for r in range(runs):
        with toolledger.run(f"Handle ticket {r}", db=store) as run:
            for _ in range(5):
                with run.step("lookup", justification="the ticket is checked"):
                    pass


class TestGoalWordWithAFilter:
    def test_visits_a_bounded_number_of_runs_then_one_statement(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A word in every goal and event with a filter no event passes: a few runs one by
        one, then one statement over every hit (before: one statement per run)."""
        monkeypatch.setattr(search_module, "FALLBACK_AFTER_RUNS", 4)
        monkeypatch.setattr(sqlite_search, "FEW_HITS", 1)  # every word counts as common
        store = SQLiteStore(tmp_path / "goals.db")
        try:
            _goal_runs(store, 20)
            statements: list[str] = []
            store._conn().set_trace_callback(statements.append)
            assert toolledger.search(store, "ticket", status="failed") == []
            searches = [s for s in statements if "cand AS" in s]
            assert 4 <= len(searches) <= 6
            found = toolledger.search(store, "ticket", kind="step", limit=3)
            assert len(found) == 3
        finally:
            store.close()

    def test_postgres_visits_a_bounded_number_of_runs_then_one_statement(
        self, pg_schema: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The same plan on PostgreSQL: a few runs one by one, then one statement."""
        from toolledger.store.postgres import PostgresStore

        monkeypatch.setattr(search_module, "FALLBACK_AFTER_RUNS", 4)
        monkeypatch.setattr("toolledger.store._pg_search.FEW_HITS", 1)
        store = PostgresStore(pg_dsn_or_skip(), schema=pg_schema)
        try:
            _goal_runs(store, 20)
            statements: list[str] = []
            read = store._db.read

            def counting(query: Any, params: Any = (), **kw: Any) -> list[Any]:
                statements.append(str(query))
                return read(query, params, **kw)

            monkeypatch.setattr(store._db, "read", counting)
            assert toolledger.search(store, "ticket", status="failed") == []
            assert 4 <= len([s for s in statements if "cand AS" in s]) <= 6
        finally:
            store.close()

    def test_work_per_run_follows_the_run_not_every_goal_hit(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Run by run, a goal hit expands to that run's events only, filtered first: the
        work of visiting every run grows with the runs, not with their square."""
        monkeypatch.setattr(search_module, "FALLBACK_AFTER_RUNS", 10_000)
        monkeypatch.setattr(sqlite_search, "FEW_HITS", 1)
        steps = {}
        for runs in (10, 40):
            store = SQLiteStore(tmp_path / f"goals{runs}.db")
            try:
                _goal_runs(store, runs)
                toolledger.search(store, "ticket")  # index what is pending first
                count = [0]

                def tick(count: list[int] = count) -> int:
                    count[0] += 1
                    return 0

                store._conn().set_progress_handler(tick, 100)
                assert toolledger.search(store, "ticket", status="failed") == []
                store._conn().set_progress_handler(None, 100)
                steps[runs] = count[0]
            finally:
                store.close()
        assert steps[40] < 8 * steps[10], steps  # 4x the runs: ~4x the work, not ~16x


# -- another process holding the write lock ---------------------------------------------

_HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
"""


class _LockHolder:
    """A second process holding the database's write lock until ``release``."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLD_LOCK, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "released"
        self.proc.stdin.close()
        self.proc.stdout.close()
        assert self.proc.wait(30) == 0


class TestSearchWhileAnotherProcessWrites:
    def test_search_never_waits_for_the_write_lock(self, tmp_path: Path) -> None:
        """A read-write store's search while another process holds the write lock answers
        at once, pending records included (before: it waited the busy timeout, then
        STORE_BUSY); once the lock is free, a search indexes them."""
        db = tmp_path / "locked.db"
        store = SQLiteStore(db, busy_timeout=5)
        holder = None
        try:
            with toolledger.run("Refund A-1001", db=store) as run:
                run.note("the parcel was lost")
            assert store._read("SELECT run_id FROM search_pending")[0][0] == run.run_id
            holder = _LockHolder(db)
            found = toolledger.search(store, "parcel")
            assert [e.run_id for e in found] == [run.run_id]
            assert store._read("SELECT count(*) FROM search_pending")[0][0] == 1
            holder.release()
            holder = None
            assert [e.run_id for e in toolledger.search(store, "parcel")] == [run.run_id]
            assert store._read("SELECT count(*) FROM search_pending")[0][0] == 0
        finally:
            if holder is not None:
                holder.release()
            store.close()

    @pytest.mark.parametrize("owned", [False, True], ids=["store", "path"])
    def test_run_ending_under_another_writers_lock_is_closed_when_it_clears(
        self, tmp_path: Path, owned: bool
    ) -> None:
        """A run that ends while another process holds the write lock (its closing record
        and columns refused: STORE_BUSY) is closed once the lock clears, at the latest
        when its process exits: completed and verified, never ``interrupted`` (a store
        the run opened from a path is closed after that)."""
        db = tmp_path / "closing.db"
        SQLiteStore(db).close()
        agent = subprocess.Popen(
            [sys.executable, "-c", _AGENT, str(db), "path" if owned else "store"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert agent.stdin is not None
        assert agent.stdout is not None
        holder = None
        try:
            run_id = agent.stdout.readline().strip()
            holder = _LockHolder(db)
            agent.stdin.write("end\n")
            agent.stdin.flush()
            errors = agent.stdout.readline().split()
            assert errors[0] == "closed"
            assert int(errors[1]) >= 1  # the close was refused: STORE_BUSY
            holder.release()
            holder = None
            agent.stdin.write("exit\n")
            agent.stdin.flush()
            assert agent.wait(60) == 0
        finally:
            if holder is not None:
                holder.release()
            agent.stdin.close()
            agent.stdout.close()
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        view = toolledger.load_run(db, run_id)
        assert view.status == "completed"
        assert toolledger.verify(db, run_id).ok
        assert [e.run_id for e in toolledger.search(db, "parcel")] == [run_id]


# The agent of the test above: a run that ends when told, stores with a short busy timeout,
# given the store or opening it from the path.
_AGENT = """
import sys
import toolledger
from toolledger.store import SQLiteStore
SQLiteStore.__init__.__kwdefaults__["busy_timeout"] = 0.2
db = sys.argv[1] if sys.argv[2] == "path" else SQLiteStore(sys.argv[1])
run = toolledger.run("Refund A-1001", db=db)
with run:
    run.note("the parcel was lost")
    print(run.run_id, flush=True)
    sys.stdin.readline()
print("closed", len(run.errors), flush=True)
sys.stdin.readline()
"""


def test_record_whose_text_is_not_utf8_is_indexed_by_its_readable_words(tmp_path: Path) -> None:
    """A damaged record (bytes that are not UTF-8 in its text) does not stop the batch:
    its words are indexed, the bad bytes are a separator, the other records are found."""
    import sqlite3

    db = tmp_path / "bytes.db"
    store = SQLiteStore(db)
    try:
        with toolledger.run("Refund A-1001", db=store) as run:
            run.note("hidden words here")
            run.note("other parcel")
        conn = sqlite3.connect(db)
        with conn:
            conn.execute(
                "UPDATE events SET data = CAST(replace(data, 'hidden', 'hid' || "
                "CAST(x'ff' AS TEXT) || 'den') AS TEXT) WHERE run_id = ? AND data LIKE "
                "'%hidden words%'",
                (run.run_id,),
            )
        conn.close()
        found = store.search_events(
            search_module.EventQuery(terms=search_module.parse_query("parcel"))
        )
        assert [g[0].run_id for g in found] == [run.run_id]
        assert store._read("SELECT count(*) FROM search_pending")[0][0] == 0
        for word in ("words", "hid", "den"):  # the bad byte separates; readers refuse it
            match = "SELECT count(*) FROM events_fts WHERE events_fts MATCH ?"
            assert store._read(match, (word,))[0][0] == 1, word
    finally:
        store.close()
