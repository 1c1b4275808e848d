"""PostgreSQL's full-text index over journal events (tsvector + GIN), and search on it.

Rules this module keeps:

- ``event_search`` holds one ``tsvector`` per record: the tokens ``_search.search_body``
  returns (names and content values, folded and split by ``_search.tokens``) stored as a
  literal (``_search.tsvector_text``), never through PostgreSQL's parser or dictionaries,
  which split and fold their own way; ``run_search`` one per run (its goal). Both carry
  GIN indexes. A query is a ``tsquery`` literal of the same tokens.
- The store's own write paths write them in the same statement or transaction as the rows
  they index: an append is one statement (the index rows in a CTE of the events'
  ``INSERT``, ``_pg_ops``; in ``apply_ops``, the same op), so the records are never stored
  without their index. The migration that creates them indexes the rows already there;
  the one that moved to the literals (version 8) indexes every row again.
- The text is computed in Python, not by a SQL function: a damaged record (not JSON) is
  indexed by its name instead of failing the write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg import sql

from ._search import (
    OPEN_END,
    EventQuery,
    broad_runs_where,
    newest_runs_first,
    run_goal,
    search_body,
    search_sql,
    tsquery_text,
    tsvector_text,
)
from ._sqlcommon import EVENT_COLUMNS, event_row
from .base import EventRow

__all__ = [
    "MIGRATION",
    "TEMPLATES",
    "backfill",
    "event_index_params",
    "run_index_params",
    "search_records",
    "search_select",
]

#: Statements of the migration that adds the index (``{s}`` is the schema).
MIGRATION = [
    """CREATE TABLE {s}.event_search (
        run_id TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        event_id TEXT NOT NULL,
        tsv TSVECTOR NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    "CREATE INDEX event_search_tsv ON {s}.event_search USING GIN (tsv)",
    """CREATE TABLE {s}.run_search (
        run_id TEXT COLLATE "C" PRIMARY KEY,
        tsv TSVECTOR NOT NULL
    )""",
    "CREATE INDEX run_search_tsv ON {s}.run_search USING GIN (tsv)",
]

#: Statements the store runs (rendered per schema by ``_pg_ops.Queries``).
TEMPLATES = {
    "index_events": "INSERT INTO {s}.event_search (run_id, seq, event_id, tsv) "
    "SELECT u.r, u.s, u.e, u.t::tsvector FROM unnest(%s::text[], %s::bigint[], "
    "%s::text[], %s::text[]) AS u(r, s, e, t) "
    "ON CONFLICT (run_id, seq) DO UPDATE SET tsv = EXCLUDED.tsv, event_id = EXCLUDED.event_id",
    "index_run": "INSERT INTO {s}.run_search (run_id, tsv) VALUES (%s, %s::tsvector) "
    "ON CONFLICT (run_id) DO UPDATE SET tsv = EXCLUDED.tsv",
    "event_names": "SELECT seq, event_id, name FROM {s}.events WHERE run_id = %s AND seq = ANY(%s)",
    "backfill_events": "SELECT run_id, seq, event_id, name, data FROM {s}.events "
    "WHERE (run_id, seq) > (%s, %s) ORDER BY run_id, seq LIMIT 2000",
    "backfill_runs": "SELECT run_id, data FROM {s}.runs",
    # The records of many events at once (the keys as two arrays), for search.
    "search_records": f"SELECT {', '.join('e.' + c for c in EVENT_COLUMNS.split(', '))} "
    "FROM {s}.events e JOIN unnest(%s::text[], %s::text[]) AS k(run_id, event_id) "
    "ON e.run_id = k.run_id AND e.event_id = k.event_id ORDER BY e.run_id, e.seq",
}


def event_index_params(
    items: Iterable[tuple[str, int, str, str | None, str]],
) -> tuple[list[Any], ...]:
    """Return the ``index_events`` parameters of ``(run_id, seq, event_id, name, data)``."""
    runs: list[Any] = []
    seqs: list[Any] = []
    ids: list[Any] = []
    texts: list[Any] = []
    for run_id, seq, event_id, name, data in items:
        runs.append(run_id)
        seqs.append(seq)
        ids.append(event_id)
        texts.append(tsvector_text(search_body(name, data)))
    return runs, seqs, ids, texts


def run_index_params(run_id: str, data: str) -> tuple[str, str]:
    """Return the ``index_run`` parameters of a run."""
    return run_id, tsvector_text(run_goal(data))


def backfill(cur: Any, q: Any) -> None:
    """Index every run and record already stored (inside the migration's transaction)."""
    cur.execute(q["backfill_runs"])
    for run_id, data in cur.fetchall():
        cur.execute(q["index_run"], run_index_params(run_id, data))
    after: tuple[str, int] = ("", -1)
    while True:
        cur.execute(q["backfill_events"], after)
        batch = cur.fetchall()
        if not batch:
            return
        cur.execute(q["index_events"], event_index_params(batch))
        after = (batch[-1][0], batch[-1][1])


#: Below this many index hits for the first term, one statement over all hits is cheapest.
FEW_HITS = 2000
#: ... and below this many runs whose goal holds it (each stands for all its events).
FEW_GOAL_RUNS = 20


def search_select(
    schema_sql: Callable[[str], str], read: Callable[..., list[Any]]
) -> Callable[[EventQuery], list[tuple[str, str]]]:
    """Return the ``(run_id, event_id)`` selector for a schema (``schema_sql`` qualifies).

    A selective query (a run, or fewer than ``FEW_HITS`` index hits and ``FEW_GOAL_RUNS``
    goal hits for its first term) is one statement driven by the GIN index's hits. A broad
    one (no text, or a common first term) visits runs newest start first
    (``_search.newest_runs_first``), each run's hits by ``run_id`` (the key of
    ``event_search`` and ``events``): ordering every hit of the database to keep the newest
    ``limit`` would cost as much as the database is large. A text query whose matches are
    rare there goes back to the one statement after ``FALLBACK_AFTER_RUNS`` runs.

    ``read(sql, params, prepare=...)`` runs a statement. One that holds a ``tsquery`` is
    never prepared: a prepared statement's generic plan cannot tell a rare word from a
    common one (the hit count scanned the whole index for a rare word once prepared).
    """
    events, runs = schema_sql("{s}.events"), schema_sql("{s}.runs")
    event_hits = schema_sql(
        "SELECT run_id, event_id FROM {s}.event_search WHERE tsv @@ %s::tsquery"
    )
    goal_hits = schema_sql("SELECT run_id FROM {s}.run_search WHERE tsv @@ %s::tsquery")
    count_hits = schema_sql(
        "SELECT count(*) FROM (SELECT 1 FROM {s}.event_search "
        "WHERE tsv @@ %s::tsquery LIMIT %s) AS hits"
    )
    count_goals = schema_sql(
        "SELECT count(*) FROM (SELECT 1 FROM {s}.run_search "
        "WHERE tsv @@ %s::tsquery LIMIT %s) AS hits"
    )

    def statement(query: EventQuery, columns: str) -> tuple[str, list[Any]]:
        hits, goals = event_hits, goal_hits
        if query.run_id is not None:  # the hits of that run only (the keys' first column)
            run = sql.Literal(query.run_id).as_string(None)
            hits, goals = f"{hits} AND run_id = {run}", f"{goals} AND run_id = {run}"
        return search_sql(
            query,
            ph="%s",
            events=events,
            runs=runs,
            event_hits=hits,
            goal_hits=goals,
            match_value=tsquery_text,
            columns=columns,
        )

    def run_events(run_id: Any, key: Any, q: EventQuery) -> list[Any]:
        return read(*statement(q, "e.at, e.run_id, e.seq, e.event_id"), prepare=_prepare(q))

    def one_statement(query: EventQuery) -> list[tuple[str, str]]:
        rows = read(*statement(query, "e.run_id, e.event_id"), prepare=_prepare(query))
        return [(str(a), str(b)) for a, b in rows]

    def select(query: EventQuery) -> list[tuple[str, str]]:
        if query.run_id is None and not few_hits(query):
            where, params = broad_runs_where(query, ph="%s")
            found = read(
                f"SELECT r.run_id, r.run_id, CASE WHEN r.status = 'running' OR r.ended_at "
                f"IS NULL THEN '{OPEN_END}' ELSE r.ended_at END FROM {runs} r {where} "
                "ORDER BY r.started_at DESC, r.run_id DESC",
                params,
            )
            fallback = one_statement if query.terms else None
            return newest_runs_first(query, found, run_events, fallback)
        return one_statement(query)

    def few_hits(query: EventQuery) -> bool:
        if not query.terms:
            return False  # a filter alone would visit every record
        match = tsquery_text(query.terms[0])
        if int(read(count_goals, (match, FEW_GOAL_RUNS), prepare=False)[0][0]) >= FEW_GOAL_RUNS:
            return False
        rows = read(count_hits, (match, FEW_HITS), prepare=False)
        return int(rows[0][0]) < FEW_HITS

    return select


def _prepare(query: EventQuery) -> bool | None:
    """``False`` for a statement holding a ``tsquery`` (never prepared), else the default."""
    return False if query.terms else None


def search_records(
    keys: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]
) -> list[tuple[EventRow, ...]]:
    """Group ``search_records`` rows (``EVENT_COLUMNS``, in ``seq`` order) by event key."""
    grouped: dict[tuple[str, str], list[EventRow]] = {k: [] for k in keys}
    for r in rows:
        row = event_row(r)
        grouped[(row.run_id, row.event_id)].append(row)
    return [tuple(grouped[k]) for k in keys]
