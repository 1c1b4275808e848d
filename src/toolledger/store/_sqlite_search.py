"""SQLite's full-text index over journal events (FTS5), and search on it.

Rules this module keeps:

- Appended records are indexed in batches, off the callers' commits: a trigger on the
  run's count (``runs.event_count``, which every append moves in its transaction) marks
  the run in ``search_pending`` once per append, not per record (``INSERT OR IGNORE``: no
  page written while the mark stands), and ``index_pending`` indexes every marked run's
  records past its watermark ``search_runs.indexed`` (all ``seq`` below it are indexed)
  in one write transaction, then clears the marks. The store runs it before a search,
  before retention rewrites records, and at ``close``; a read-only search indexes the
  pending records into a connection-local ``temp`` table instead, so a search always sees
  every committed record. Run goals are indexed in the transaction that stores them.
- A batch is one ``INSERT … SELECT``: each statement writing an FTS5 table opens a
  statement savepoint, at which FTS5 flushes its pending terms into a new segment, so a
  statement per record (``executemany``) writes a segment per record and merges them
  again (twice the cost of the batch). The text is built in SQL (``json_tree``): parsing
  the records again in Python costs more than that. The batch reads each record's JSON
  once, without the ``json_valid`` guard (a second parse): where json_tree reads no JSON5
  it fails on exactly the records the guard turns away, and then the batch runs again with
  the guard (SQLite undoes the failed statement alone, inside the transaction).
- ``events_fts`` holds one row per record: its name and every string and number under its
  ``content``, folded and split by ``_search.tokens`` (the SQL function
  ``toolledger_index_text``, ``_search.index_text``, registered on every connection:
  ``register``) before FTS5 sees it, so FTS5's own Unicode tables (older than Python's,
  and folding less) decide nothing; ``unicode61`` then splits on the spaces between the
  tokens (its ``categories`` count letters, digits and code points it does not know as
  token characters). Since version 10 (``reindex_own_tokens``); before, FTS5 indexed the
  raw text and missed words the query folded differently. Its rowid is
  ``rid << 32 | seq``, where ``rid`` is the run's number in ``search_runs`` (an
  ``INTEGER PRIMARY KEY``, so ``VACUUM`` keeps it); ``runs_fts`` holds each run's goal
  under ``rid``. A record whose JSON is damaged is indexed by its name.
- A build without FTS5 creates no index, and a process without FTS5 writes none: search
  then scans and warns (``SearchWarning``).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import warn_at_caller
from ._search import (
    OPEN_END,
    EventQuery,
    broad_runs_where,
    fts5_expression,
    index_text,
    newest_runs_first,
    run_goal,
    scan_search,
    search_sql,
)
from ._search import SearchWarning as _SearchWarning

__all__ = [
    "create_search_index",
    "fts5_available",
    "has_search_index",
    "create_search_queue",
    "has_pending",
    "index_pending",
    "index_run",
    "mark_per_append",
    "register",
    "reindex_events",
    "reindex_own_tokens",
    "reindex_run",
    "search_events",
    "stage_pending",
]

# The tables as version 5 created them (FTS5 split and folded the raw text).
_TOKENIZE_V5 = "tokenize = 'unicode61 remove_diacritics 0'"
# Since version 10: the text is toolledger's tokens; FTS5 splits it at the spaces (``Cn``:
# a letter FTS5's tables do not know yet is still part of its token).
_TOKENIZE = "tokenize = \"unicode61 remove_diacritics 0 categories 'L* N* Co Cn'\""
_SEQ_BITS = 32
#: The SQL function folding text as ``_search.tokens`` does (``register``).
FOLD = "toolledger_index_text"


def register(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the ``toolledger_index_text`` function the index's SQL calls."""
    conn.create_function(FOLD, 1, _fold, deterministic=True)


def _fold(data: bytes | str | None) -> str:
    # The text comes as a BLOB: a damaged record's bytes that are not UTF-8 are replaced,
    # where decoding them as text would fail the whole batch.
    if data is None:
        return ""
    return index_text(data.decode("utf-8", "replace") if isinstance(data, bytes) else data)


# A damaged record (JSON that json_valid rejects) is indexed by its name: json_tree reads
# ``{}`` instead.
_BODY = (
    "coalesce({name}, '') || ' ' || coalesce((SELECT group_concat(value, ' ') FROM "
    "json_tree(CASE WHEN json_valid({data}) THEN {data} ELSE '{{}}' END, '$.content') "
    "WHERE type IN ('text', 'integer', 'real')), '')"
)
# The same text of every record json_valid accepts, parsing it once instead of twice;
# json_tree raises on any other record (where it reads no JSON5, ``_json_tree_is_strict``).
_BODY_UNGUARDED = (
    "coalesce({name}, '') || ' ' || coalesce((SELECT group_concat(value, ' ') FROM "
    "json_tree({data}, '$.content') WHERE type IN ('text', 'integer', 'real')), '')"
)
_GOAL = (
    "coalesce(CASE WHEN json_valid({data}) AND json_type({data}, '$.content.goal') = 'text' "
    "THEN json_extract({data}, '$.content.goal') END, '')"
)


def _folded(text_sql: str) -> str:
    return f"{FOLD}(CAST(({text_sql}) AS BLOB))"


_INSERT_EVENT = (
    "INSERT INTO events_fts (rowid, body) VALUES "
    f"(?1, {_folded(_BODY.format(name='?2', data='?3'))})"
)
_INSERT_GOAL = (
    f"INSERT INTO runs_fts (rowid, goal) VALUES (:rid, {_folded(_GOAL.format(data=':data'))})"
)

# Version 5's migration (never edited: it runs before version 10 rebuilds the tables).
_DDL = [
    f"CREATE VIRTUAL TABLE events_fts USING fts5(body, {_TOKENIZE_V5}, columnsize = 0)",
    f"CREATE VIRTUAL TABLE runs_fts USING fts5(goal, {_TOKENIZE_V5}, columnsize = 0)",
    "CREATE TABLE search_runs (rid INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE)",
    # Existing rows (a database written before the index existed).
    "INSERT INTO search_runs (run_id) SELECT run_id FROM runs ORDER BY started_at, run_id",
    "INSERT INTO runs_fts (rowid, goal) SELECT k.rid, "
    f"{_GOAL.format(data='r.data')} FROM runs r JOIN search_runs k ON k.run_id = r.run_id",
    f"INSERT INTO events_fts (rowid, body) SELECT (k.rid << {_SEQ_BITS}) | e.seq, "
    f"{_BODY.format(name='e.name', data='e.data')} "
    "FROM events e JOIN search_runs k ON k.run_id = e.run_id",
]


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite build has FTS5."""
    try:
        row = conn.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


def create_search_index(conn: sqlite3.Connection) -> None:
    """Create the index and index existing rows (a migration step); nothing without FTS5."""
    if not fts5_available(conn):
        return
    for statement in _DDL:
        conn.execute(statement)


_QUEUE_DDL = [
    "ALTER TABLE search_runs ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0",
    # Everything stored so far was indexed in its own transaction.
    "UPDATE search_runs SET indexed = coalesce((SELECT max(e.seq) + 1 FROM events e "
    "WHERE e.run_id = search_runs.run_id), 0)",
    "CREATE TABLE search_pending (run_id TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TRIGGER events_search_pending AFTER INSERT ON events BEGIN "
    "INSERT OR IGNORE INTO search_pending (run_id) VALUES (new.run_id); END",
]


def create_search_queue(conn: sqlite3.Connection) -> None:
    """Index appends in batches from now on (a migration step); nothing without the index."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events_fts'"
    ).fetchone()
    if row is None:
        return
    for statement in _QUEUE_DDL:
        conn.execute(statement)


_MARK_PER_APPEND_DDL = [
    "DROP TRIGGER IF EXISTS events_search_pending",
    # Every append moves the run's count in its transaction (the count CAS): one mark per
    # append instead of one per record.
    "CREATE TRIGGER runs_search_pending AFTER UPDATE OF event_count ON runs BEGIN "
    "INSERT OR IGNORE INTO search_pending (run_id) VALUES (new.run_id); END",
]


def mark_per_append(conn: sqlite3.Connection) -> None:
    """Mark a run pending once per append, not per record (a migration step)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_pending'"
    ).fetchone()
    if row is None:
        return
    for statement in _MARK_PER_APPEND_DDL:
        conn.execute(statement)


_REINDEX = [
    "DROP TABLE events_fts",
    "DROP TABLE runs_fts",
    f"CREATE VIRTUAL TABLE events_fts USING fts5(body, {_TOKENIZE}, columnsize = 0)",
    f"CREATE VIRTUAL TABLE runs_fts USING fts5(goal, {_TOKENIZE}, columnsize = 0)",
    "INSERT OR IGNORE INTO search_runs (run_id) SELECT run_id FROM runs "
    "ORDER BY started_at, run_id",
    "INSERT INTO runs_fts (rowid, goal) SELECT k.rid, "
    f"{_folded(_GOAL.format(data='r.data'))} FROM runs r JOIN search_runs k "
    "ON k.run_id = r.run_id",
]
# Every record, pending ones included (the marks are cleared after).
_INDEX_ALL = (
    f"INSERT INTO events_fts (rowid, body) SELECT (k.rid << {_SEQ_BITS}) | e.seq, "
    "{body} FROM search_runs k CROSS JOIN events e ON e.run_id = k.run_id"
)


def reindex_own_tokens(conn: sqlite3.Connection) -> None:
    """Index every run and record again as toolledger's tokens (a migration step).

    Nothing without the index; a process without FTS5 leaves the tables (it cannot drop
    them) and this version recorded, and such a process searches by scanning anyway.
    """
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events_fts'"
    ).fetchone()
    if row is None or not fts5_available(conn):
        return
    for statement in _REINDEX:
        conn.execute(statement)
    _insert_bodies(conn, _INDEX_ALL)
    conn.execute(
        "UPDATE search_runs SET indexed = coalesce((SELECT max(e.seq) + 1 FROM events e "
        "WHERE e.run_id = search_runs.run_id), 0)"
    )
    conn.execute("DELETE FROM search_pending")


def has_search_index(conn: sqlite3.Connection) -> bool:
    """Whether the database holds the index and this build can write it."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events_fts'"
    ).fetchone()
    return row is not None and fts5_available(conn)


def _rid(conn: sqlite3.Connection, run_id: str) -> int:
    row = conn.execute("SELECT rid FROM search_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None:
        return int(row[0])
    cur = conn.execute("INSERT INTO search_runs (run_id) VALUES (?)", (run_id,))
    return int(cur.lastrowid or 0)


def index_run(conn: sqlite3.Connection, run_id: str, data: str) -> None:
    """Index a new run's goal."""
    conn.execute(_INSERT_GOAL, {"rid": _rid(conn, run_id), "data": data})


def reindex_run(conn: sqlite3.Connection, run_id: str, data: str) -> None:
    """Index a run's goal again after its document changed."""
    rid = _rid(conn, run_id)
    conn.execute("DELETE FROM runs_fts WHERE rowid = ?", (rid,))
    conn.execute(_INSERT_GOAL, {"rid": rid, "data": data})


def has_pending(conn: sqlite3.Connection) -> bool:
    """Whether some appended records wait to be indexed."""
    return conn.execute("SELECT 1 FROM search_pending LIMIT 1").fetchone() is not None


# CROSS JOIN keeps this order (the marks drive; each run's new records are a range of the
# events key), where the planner would otherwise scan every record.
_INDEX_MARKED = (
    f"INSERT INTO events_fts (rowid, body) SELECT (k.rid << {_SEQ_BITS}) | e.seq, "
    "{body} FROM search_pending p CROSS JOIN search_runs k ON k.run_id = p.run_id "
    "CROSS JOIN events e ON e.run_id = p.run_id AND e.seq >= k.indexed"
)
_MARK_INDEXED = (
    "UPDATE search_runs SET indexed = coalesce((SELECT max(e.seq) + 1 FROM events e "
    "WHERE e.run_id = search_runs.run_id), indexed) "
    "WHERE run_id IN (SELECT run_id FROM search_pending)"
)


@functools.cache
def _json_tree_is_strict() -> bool:
    """Whether json_tree rejects what json_valid rejects (this SQLite reads no JSON5)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("SELECT count(*) FROM json_tree('[NaN, 0x1f, .5]')").fetchone()
    except sqlite3.Error:
        return True
    finally:
        conn.close()
    return False


def _insert_bodies(conn: sqlite3.Connection, sql: str) -> int:
    """Run ``sql`` (an ``INSERT … SELECT`` of records' ``{body}``); return its row count.

    It runs without the JSON guard first, then with it if a damaged record made it fail:
    SQLite undoes the failed statement alone (FTS5's pending terms included), within the
    caller's transaction.
    """
    body = {"name": "e.name", "data": "e.data"}
    if _json_tree_is_strict():
        in_transaction = conn.in_transaction
        try:
            return conn.execute(sql.format(body=_folded(_BODY_UNGUARDED.format(**body)))).rowcount
        except sqlite3.OperationalError:
            if conn.in_transaction != in_transaction:
                raise  # it ended the transaction: no damaged record but a failing database
    return conn.execute(sql.format(body=_folded(_BODY.format(**body)))).rowcount


def index_pending(conn: sqlite3.Connection) -> int:
    """Index every record appended since the last call (inside a write); return how many."""
    unknown = conn.execute(
        "SELECT p.run_id FROM search_pending p LEFT JOIN search_runs k ON k.run_id = p.run_id "
        "WHERE k.rid IS NULL"
    ).fetchall()
    for (run_id,) in unknown:  # a run stored by a process that wrote no index: its goal too
        rid = _rid(conn, run_id)
        row = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is not None:
            conn.execute(_INSERT_GOAL, {"rid": rid, "data": row[0]})
    count = _insert_bodies(conn, _INDEX_MARKED)
    conn.execute(_MARK_INDEXED)
    conn.execute("DELETE FROM search_pending")
    return max(count, 0)


def reindex_events(
    conn: sqlite3.Connection, run_id: str, items: Iterable[tuple[int, str | None, str]]
) -> None:
    """Index rewritten records again: ``(seq, name, data)`` each (erased content leaves)."""
    index_pending(conn)  # the rewritten records are indexed (once) before replacing them
    base = _rid(conn, run_id) << _SEQ_BITS
    items = list(items)
    conn.executemany("DELETE FROM events_fts WHERE rowid = ?", [(base | s,) for s, _, _ in items])
    conn.executemany(_INSERT_EVENT, [(base | s, n, d) for s, n, d in items])


_EVENT_HITS = (
    "SELECT k.run_id AS run_id, e.event_id AS event_id FROM events_fts f "
    f"JOIN search_runs k ON k.rid = (f.rowid >> {_SEQ_BITS}) "
    f"JOIN events e ON e.run_id = k.run_id AND e.seq = (f.rowid & {(1 << _SEQ_BITS) - 1}) "
    "WHERE events_fts MATCH ?"
)
# A read-only connection's pending records, in a table of its own (``stage_pending``).
_STAGED_HITS = (
    "SELECT t.run_id AS run_id, e.event_id AS event_id FROM temp.staged_fts t "
    "JOIN events e ON e.run_id = t.run_id AND e.seq = t.seq WHERE staged_fts MATCH ?"
)
_STAGE = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.staged_fts USING "
    f"fts5(body, run_id UNINDEXED, seq UNINDEXED, {_TOKENIZE}, columnsize = 0)",
    "DELETE FROM temp.staged_fts",
]
_STAGE_PENDING = (
    "INSERT INTO temp.staged_fts (body, run_id, seq) SELECT {body}, e.run_id, e.seq "
    "FROM search_pending p LEFT JOIN search_runs k ON k.run_id = p.run_id "
    "CROSS JOIN events e ON e.run_id = p.run_id AND e.seq >= coalesce(k.indexed, 0)"
)


def stage_pending(conn: sqlite3.Connection) -> bool:
    """Index pending records in this connection's ``temp`` table; return whether any.

    A reader writes no index: its search reads these beside the stored index.
    """
    if not has_pending(conn):
        return False
    for statement in _STAGE:
        conn.execute(statement)
    _insert_bodies(conn, _STAGE_PENDING)
    return True


_EVENTS_BY_ID = "events e INDEXED BY events_event_id"
_GOAL_HITS = (
    "SELECT k.run_id AS run_id FROM runs_fts JOIN search_runs k ON k.rid = runs_fts.rowid "
    "WHERE runs_fts MATCH ?"
)


def search_events(
    query: EventQuery,
    *,
    read: Callable[[str, Sequence[Any]], list[Any]],
    records: Callable[[str, str], tuple[Any, ...]],
    many: Callable[[Sequence[tuple[str, str]]], list[tuple[Any, ...]]],
    indexed: bool,
    staged: bool = False,
) -> list[tuple[Any, ...]]:
    """Answer ``Store.search_events`` on SQLite (``read(sql, params)`` runs a query).

    ``staged``: records not yet in the index are in ``stage_pending``'s table (a reader's
    search; the hits of both are searched, without the run-by-run plan).
    """

    def select(q: EventQuery) -> list[tuple[str, str]]:
        sql, params = search_sql(
            q,
            ph="?",
            events="events",
            runs="runs",
            event_hits=f"{_EVENT_HITS} UNION ALL {_STAGED_HITS}" if staged else _EVENT_HITS,
            goal_hits=_GOAL_HITS,
            match_value=fts5_expression,
            events_by_id=_EVENTS_BY_ID,
            hit_params=2 if staged else 1,
        )
        return [(str(a), str(b)) for a, b in read(sql, params)]

    if indexed and not staged and query.run_id is None and not _few_hits(query, read):
        return many(_newest_runs_first(query, read, select if query.terms else None))
    if query.terms and not indexed:
        warn_at_caller(
            _SearchWarning(
                "this database has no full-text index (the SQLite build lacks FTS5): search "
                "scans the events instead"
            )
        )

        def goal(run_id: str) -> list[str]:
            rows = read("SELECT data FROM runs WHERE run_id = ?", (run_id,))
            return run_goal(rows[0][0]).split() if rows else []

        return scan_search(query, select=select, records=records, goal=goal)
    return many(select(query))


#: Below this many index hits for the first term, one query over all hits is cheapest.
FEW_HITS = 2000
#: ... and below this many runs whose goal holds it (each stands for all its events).
FEW_GOAL_RUNS = 20


def _few_hits(query: EventQuery, read: Callable[[str, Sequence[Any]], list[Any]]) -> bool:
    if not query.terms:
        return False  # a filter alone would visit every record
    match = fts5_expression(query.terms[0])
    goals = read(
        "SELECT count(*) FROM (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ? LIMIT ?)",
        (match, FEW_GOAL_RUNS),
    )
    if int(goals[0][0]) >= FEW_GOAL_RUNS:
        return False
    rows = read(
        "SELECT count(*) FROM (SELECT rowid FROM events_fts WHERE events_fts MATCH ? LIMIT ?)",
        (match, FEW_HITS),
    )
    return int(rows[0][0]) < FEW_HITS


def _newest_runs_first(
    query: EventQuery,
    read: Callable[[str, Sequence[Any]], list[Any]],
    fallback: Callable[[EventQuery], list[tuple[str, str]]] | None,
) -> list[tuple[str, str]]:
    """Answer a broad query run by run (``_search.newest_runs_first``).

    Each run's hits come from the index by rowid range (``rid << 32``), never a scan, and
    its goal's by its rowid: a run's statement never reaches another run's events.
    """
    where, params = broad_runs_where(query, ph="?")
    runs = read(
        "SELECT r.run_id, k.rid, CASE WHEN r.status = 'running' OR r.ended_at IS NULL "
        f"THEN '{OPEN_END}' ELSE r.ended_at END FROM runs r JOIN search_runs k "
        f"ON k.run_id = r.run_id {where} ORDER BY r.started_at DESC, r.run_id DESC",
        params,
    )

    def run_events(run_id: Any, rid: Any, q: EventQuery) -> list[Any]:
        low, high = int(rid) << _SEQ_BITS, ((int(rid) + 1) << _SEQ_BITS) - 1
        sql, args = search_sql(
            q,
            ph="?",
            events="events",
            runs="runs",
            event_hits=f"{_EVENT_HITS} AND f.rowid BETWEEN {low} AND {high}",
            goal_hits=f"{_GOAL_HITS} AND runs_fts.rowid = {int(rid)}",
            match_value=fts5_expression,
            events_by_id=_EVENTS_BY_ID,
            columns="e.at, e.run_id, e.seq, e.event_id",
        )
        return read(sql, args)

    return newest_runs_first(query, runs, run_events, fallback)
