"""SQLite's full-text index over journal events (FTS5), and search on it.

Rules this module keeps:

- The index is written by the store's own write paths (appends, run creation and updates,
  retention's rewrites), in the same transaction as the rows they index. Statements are
  plain ``INSERT … VALUES``: FTS5 flushes its pending terms at every savepoint, so an
  ``INSERT … SELECT`` or a trigger per row costs several times more.
- ``events_fts`` holds one row per record: its name and every string and number under its
  ``content``, tokenized by ``unicode61`` with diacritics kept (``_search.tokens`` mirrors
  it). Its rowid is ``rid << 32 | seq``, where ``rid`` is the run's number in
  ``search_runs`` (an ``INTEGER PRIMARY KEY``, so ``VACUUM`` keeps it); ``runs_fts`` holds
  each run's goal under ``rid``. A record whose JSON is damaged is indexed by its name.
- A build without FTS5 creates no index, and a process without FTS5 writes none: search
  then scans and warns (``SearchWarning``).
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._search import EventQuery, fts5_expression, run_goal, scan_search, search_sql
from ._search import SearchWarning as _SearchWarning

__all__ = [
    "create_search_index",
    "fts5_available",
    "has_search_index",
    "index_events",
    "index_run",
    "reindex_events",
    "reindex_run",
    "search_events",
]

_TOKENIZE = "tokenize = 'unicode61 remove_diacritics 0'"
_SEQ_BITS = 32

_BODY = (
    "coalesce({name}, '') || ' ' || coalesce((SELECT group_concat(value, ' ') FROM "
    "json_tree(CASE WHEN json_valid({data}) THEN {data} ELSE '{{}}' END, '$.content') "
    "WHERE type IN ('text', 'integer', 'real')), '')"
)
_GOAL = (
    "coalesce(CASE WHEN json_valid({data}) AND json_type({data}, '$.content.goal') = 'text' "
    "THEN json_extract({data}, '$.content.goal') END, '')"
)

_INSERT_EVENT = (
    "INSERT INTO events_fts (rowid, body) "
    f"VALUES (:docid, {_BODY.format(name=':name', data=':data')})"
)
_INSERT_GOAL = f"INSERT INTO runs_fts (rowid, goal) VALUES (:rid, {_GOAL.format(data=':data')})"

_DDL = [
    f"CREATE VIRTUAL TABLE events_fts USING fts5(body, {_TOKENIZE}, columnsize = 0)",
    f"CREATE VIRTUAL TABLE runs_fts USING fts5(goal, {_TOKENIZE}, columnsize = 0)",
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


def index_events(conn: sqlite3.Connection, run_id: str, rows: Iterable[Any]) -> None:
    """Index appended records (``EventRow``s of one run)."""
    base = _rid(conn, run_id) << _SEQ_BITS
    conn.executemany(
        _INSERT_EVENT, [{"docid": base | r.seq, "name": r.name, "data": r.data} for r in rows]
    )


def reindex_events(
    conn: sqlite3.Connection, run_id: str, items: Iterable[tuple[int, str | None, str]]
) -> None:
    """Index rewritten records again: ``(seq, name, data)`` each (erased content leaves)."""
    base = _rid(conn, run_id) << _SEQ_BITS
    items = list(items)
    conn.executemany("DELETE FROM events_fts WHERE rowid = ?", [(base | s,) for s, _, _ in items])
    conn.executemany(
        _INSERT_EVENT, [{"docid": base | s, "name": n, "data": d} for s, n, d in items]
    )


_EVENT_HITS = (
    "SELECT k.run_id AS run_id, e.event_id AS event_id FROM events_fts f "
    f"JOIN search_runs k ON k.rid = (f.rowid >> {_SEQ_BITS}) "
    f"JOIN events e ON e.run_id = k.run_id AND e.seq = (f.rowid & {(1 << _SEQ_BITS) - 1}) "
    "WHERE events_fts MATCH ?"
)
_GOAL_HITS = (
    "SELECT k.run_id AS run_id FROM runs_fts JOIN search_runs k ON k.rid = runs_fts.rowid "
    "WHERE runs_fts MATCH ?"
)


def search_events(
    query: EventQuery,
    *,
    read: Callable[[str, Sequence[Any]], list[Any]],
    records: Callable[[str, str], tuple[Any, ...]],
    indexed: bool,
) -> list[tuple[Any, ...]]:
    """Answer ``Store.search_events`` on SQLite (``read(sql, params)`` runs a query)."""

    def select(q: EventQuery) -> list[tuple[str, str]]:
        sql, params = search_sql(
            q,
            ph="?",
            events="events",
            runs="runs",
            event_hits=_EVENT_HITS,
            goal_hits=_GOAL_HITS,
            match_value=fts5_expression,
        )
        return [(str(a), str(b)) for a, b in read(sql, params)]

    if query.terms and not indexed:
        warnings.warn(
            _SearchWarning(
                "this database has no full-text index (the SQLite build lacks FTS5): search "
                "scans the events instead"
            ),
            stacklevel=3,
        )

        def goal(run_id: str) -> list[str]:
            rows = read("SELECT data FROM runs WHERE run_id = ?", (run_id,))
            return run_goal(rows[0][0]).split() if rows else []

        return scan_search(query, select=select, records=records, goal=goal)
    return [records(run_id, event_id) for run_id, event_id in select(query)]
