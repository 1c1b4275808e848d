"""Full-text search over journal events, the parts every backend shares. No I/O here.

Rules this module keeps:

- One tokenizer for all backends, applied to the indexed text and to the query alike:
  the text is normalised (NFKC) and case-folded (``str.casefold``), then a token is a run
  of Unicode letters and digits; everything else separates tokens (``tokens``). No backend
  splits or folds text its own way: SQLite's FTS5 indexes the folded tokens
  (``index_text``; ASCII text, which folds and splits the same in FTS5's ``unicode61``, is
  passed as it is), PostgreSQL stores them as a ``tsvector`` literal (``tsvector_text``,
  no parser or dictionary) and queries them as a ``tsquery`` literal, and ``MemoryStore``
  (and the scan used where a SQLite build lacks FTS5) match them with ``event_matches``.
- A record too large for PostgreSQL's ``tsvector`` (1 MB of distinct words, a 2 KB word)
  is indexed in part: its words up to that size, in order; a longer word is left out.
- What is indexed for a record: its ``name`` and every string and number under its
  ``content`` (inputs, outputs, justification, approval, error, note text, artifacts, meta),
  in document order; for a run, its goal. Erased records keep only their name.
- A query is parsed here, never handed to a search engine as syntax: words and
  ``"quoted phrases"`` (an unbalanced quote closes at the end), a trailing ``*`` for a
  prefix. Every term must match the event (any of its records) or its run's goal.
- ``EventQuery`` is what ``Store.search_events`` answers; its SQL is built here once for
  both SQL backends, which differ only in placeholders and the match expressions.
"""

from __future__ import annotations

import json
import json.scanner
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidArgumentError

__all__ = [
    "MAX_TERMS",
    "OPEN_END",
    "TSVECTOR_BYTES",
    "TSVECTOR_WORD_BYTES",
    "FALLBACK_AFTER_RUNS",
    "EventQuery",
    "SearchTerm",
    "SearchWarning",
    "broad_runs_where",
    "event_matches",
    "fts5_expression",
    "index_text",
    "newest_runs_first",
    "parse_query",
    "run_goal",
    "scan_search",
    "search_body",
    "search_sql",
    "select_in_memory",
    "tokens",
    "tsquery_text",
    "tsvector_text",
]

_TOKEN = re.compile(r"[^\W_]+")
#: The most words and phrases one query may hold (each is a subquery).
MAX_TERMS = 32
_QUERY = re.compile(r'"([^"]*)("?)(\*?)|(\S+)')


class SearchWarning(UserWarning):
    """Search ran without its full-text index (a slower scan): the build lacks FTS5."""


def tokens(text: str) -> list[str]:
    """Return the search tokens of ``text``: letters and digits, NFKC and case-folded."""
    if text.isascii():  # NFKC leaves ASCII alone; its case folding is lower()
        return _TOKEN.findall(text.lower())
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def index_text(text: str | None) -> str:
    """Return what FTS5 indexes of ``text``: its ``tokens``, or ASCII text as it is.

    FTS5's ``unicode61`` splits and folds ASCII as ``tokens`` does; any other text is
    folded here, so the index never depends on FTS5's own Unicode tables.
    """
    if text is None:
        return ""
    if text.isascii():
        return text
    return " ".join(tokens(text))


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """One term of a query: a phrase of tokens (one word is a phrase of one)."""

    tokens: tuple[str, ...]
    prefix: bool = False


def parse_query(text: str) -> tuple[SearchTerm, ...]:
    """Parse user text into terms; never fails on syntax.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``text`` is not a str or holds no
            letters or digits at all.
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(
            message=f"text must be a str; got {type(text).__name__}", details={"argument": "text"}
        )
    terms: list[SearchTerm] = []
    for quoted, _closed, star, word in _QUERY.findall(text):
        raw = word or quoted
        prefix = word.endswith("*") if word else bool(star)
        toks = tuple(tokens(raw))
        if toks:
            terms.append(SearchTerm(toks, prefix))
    if not terms:
        raise InvalidArgumentError(
            message=f"search text has no words to look for: {text!r:.80}",
            details={"argument": "text"},
        )
    if len(terms) > MAX_TERMS:
        raise InvalidArgumentError(
            message=f"search text has {len(terms)} words and phrases; at most {MAX_TERMS}",
            details={"argument": "text"},
        )
    return tuple(terms)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventQuery:
    """What ``Store.search_events`` selects: events (not records) matching every field.

    ``status`` is the event's last recorded status; ``since``/``until`` (stored ISO-8601
    UTC text) bound its first record's time; ``agent``/``namespace`` are its run's.
    """

    terms: tuple[SearchTerm, ...] = ()
    kinds: tuple[str, ...] | None = None
    name: str | None = None
    status: str | None = None
    run_id: str | None = None
    namespace: str | None = None
    agent: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = 100
    offset: int = 0


# -- what is indexed -------------------------------------------------------------------


def _atoms(value: Any, out: list[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        tp = type(item)
        if tp is str:
            out.append(item)
        elif tp is int or tp is float:
            out.append(repr(item))
        elif tp is dict:
            stack.extend(reversed(list(item.values())))
        elif tp is list:
            stack.extend(reversed(item))


# The C scanner json.loads ends in (typeshed types its argument as the scanner class itself).
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)


def _loads(data: str) -> Any:
    """``json.loads(data)``, without its wrapper's cost for the usual record (no padding)."""
    try:
        doc, end = _scan(data, 0)
    except StopIteration:  # leading whitespace, or nothing: json.loads decides
        return json.loads(data)
    if end != len(data):
        return json.loads(data)  # trailing whitespace, or extra data (which raises)
    return doc


def search_body(name: str | None, data: str) -> str:
    """Return the indexed text of a stored record: its name and its content's values."""
    parts = [name or ""]
    try:
        doc = _loads(data) if type(data) is str else json.loads(data)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("content"), dict):
        _atoms(doc["content"], parts)
    return " ".join(tokens(" ".join(parts)))


def run_goal(data: str) -> str:
    """Return the indexed text of a run: its goal (from the stored run document)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return ""
    content = doc.get("content") if isinstance(doc, dict) else None
    goal = content.get("goal") if isinstance(content, dict) else None
    return " ".join(tokens(goal)) if isinstance(goal, str) else ""


# -- matching without an index (MemoryStore, SQLite without FTS5) -----------------------


def _has(term: SearchTerm, toks: Sequence[str]) -> bool:
    n = len(term.tokens)
    last = n - 1
    for i in range(len(toks) - last):
        if all(toks[i + j] == term.tokens[j] for j in range(last)) and (
            toks[i + last] == term.tokens[last]
            or (term.prefix and toks[i + last].startswith(term.tokens[last]))
        ):
            return True
    return False


def event_matches(
    terms: Iterable[SearchTerm], bodies: Sequence[Sequence[str]], goal: Sequence[str]
) -> bool:
    """Whether every term is in one of the event's record bodies (token lists) or the goal."""
    return all(_has(t, goal) or any(_has(t, b) for b in bodies) for t in terms)


# -- SQL (SQLite and PostgreSQL) -------------------------------------------------------


def fts5_expression(term: SearchTerm) -> str:
    """Return the FTS5 MATCH expression of a term (tokens are letters and digits only)."""
    return '"' + " ".join(term.tokens) + '"' + ("*" if term.prefix else "")


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_text(term: SearchTerm) -> str:
    """Return the ``tsquery`` literal of a term: its tokens as lexemes, in a phrase."""
    last = _lexeme(term.tokens[-1]) + (":*" if term.prefix else "")
    return " <-> ".join([*map(_lexeme, term.tokens[:-1]), last])


#: PostgreSQL's limits on a ``tsvector``: the bytes of its lexemes and positions
#: (``MAXSTRPOS``), one lexeme's bytes (``MAXSTRLEN``), positions kept per lexeme.
TSVECTOR_BYTES = (1 << 20) - 1
TSVECTOR_WORD_BYTES = 2047
_TSVECTOR_POSITIONS = 256


def tsvector_text(body: str) -> str:
    """Return the ``tsvector`` literal of ``search_body`` text (tokens and positions).

    Only what PostgreSQL can store is kept: the tokens in order until the lexemes and their
    positions would pass ``TSVECTOR_BYTES`` (the rest of the record is left out of the
    index, the record itself is stored whole), and never a token over
    ``TSVECTOR_WORD_BYTES`` (its position still counts, so no phrase spans it).
    """
    out: list[str] = []
    seen: dict[str, int] = {}
    size = 0
    for position, token in enumerate(body.split(), 1):
        count = seen.get(token)
        if count is None:
            n = len(token.encode())
            if n > TSVECTOR_WORD_BYTES:
                continue
            cost = n + (n & 1) + 4  # the lexeme, its alignment, the count and a position
        elif count >= _TSVECTOR_POSITIONS:
            continue  # PostgreSQL keeps no more positions of it: nothing to add
        else:
            cost = 2
        if size + cost > TSVECTOR_BYTES:
            break
        size += cost
        seen[token] = (count or 0) + 1
        out.append(f"{_lexeme(token)}:{position}")
    return " ".join(out)


def search_sql(
    query: EventQuery,
    *,
    ph: str,
    events: str,
    runs: str,
    event_hits: str,
    goal_hits: str,
    match_value: Callable[[SearchTerm], Any],
    hit_params: int = 1,
    columns: str = "e.run_id, e.event_id",
    events_by_id: str | None = None,
) -> tuple[str, list[Any]]:
    """Return the SQL selecting ``(run_id, event_id)`` of matching events, newest first.

    Args:
        query: The search.
        ph: The placeholder (``?`` or ``%s``).
        events, runs: The (qualified) table names.
        event_hits: SQL selecting ``run_id, event_id`` of records matching one term
            (``hit_params`` placeholders, each the term).
        goal_hits: SQL selecting ``run_id`` of runs whose goal matches one term (one
            placeholder).
        match_value: The parameter bound for a term.
        hit_params: How many placeholders ``event_hits`` holds (1 unless it unions two).
        columns: What is selected of each event's first record ``e``.
        events_by_id: ``events e`` as joined to the candidates by ``(run_id, event_id)``
            (SQLite names its index: its planner, without statistics, walked every record
            of the run per candidate).
    """
    params: list[Any] = []
    ctes: list[str] = []
    term_checks: list[str] = []
    for i, term in enumerate(query.terms):
        ctes.append(f"h{i} AS ({event_hits})")
        ctes.append(f"g{i} AS ({goal_hits})")
        params.extend([match_value(term)] * (hit_params + 1))
        if i == 0:
            continue  # the candidates are its hits (``cand``)
        term_checks.append(
            f"(EXISTS (SELECT 1 FROM h{i} WHERE h{i}.run_id = e.run_id AND "
            f"h{i}.event_id = e.event_id) OR e.run_id IN (SELECT run_id FROM g{i}))"
        )
    where, where_params = _filters(query, ph=ph, events=events)
    if query.terms:
        # Drive from the index hits (small) rather than from every record. A goal hit
        # stands for every event of its run: those are filtered before they are taken
        # (else every event of every run whose goal matches is materialised, per run).
        if query.status is not None:
            # The records with that status that are their event's last (a column check
            # per record, a lookup only for those), rather than a lookup per event.
            run = "" if query.run_id is None else f"x.run_id = {ph} AND "
            expand = (
                f"SELECT x.run_id, x.event_id FROM {events} x WHERE {run}"
                f"x.run_id IN (SELECT run_id FROM g0) AND x.status = {ph} AND NOT EXISTS "
                f"(SELECT 1 FROM {events} l WHERE l.run_id = x.run_id AND "
                "l.event_id = x.event_id AND l.seq > x.seq)"
            )
            params.extend([*([] if query.run_id is None else [query.run_id]), query.status])
        else:
            expand = (
                f"SELECT e.run_id, e.event_id FROM {events} e JOIN {runs} r "
                "ON r.run_id = e.run_id WHERE e.run_id IN (SELECT run_id FROM g0) AND "
                + " AND ".join(where)
            )
            params.extend(where_params)
        ctes.append(f"cand AS (SELECT run_id, event_id FROM h0 UNION {expand})")
        source = (
            f"cand c JOIN {events_by_id or events + ' e'} ON e.run_id = c.run_id "
            "AND e.event_id = c.event_id "
            f"JOIN {runs} r ON r.run_id = e.run_id"
        )
    else:
        source = f"{events} e JOIN {runs} r ON r.run_id = e.run_id"
    where.extend(term_checks)
    sql = (
        ("WITH " + ", ".join(ctes) + " " if ctes else "")
        + f"SELECT {columns} FROM {source} WHERE "
        + " AND ".join(where)
        + f" ORDER BY e.at DESC, e.run_id DESC, e.seq DESC LIMIT {ph} OFFSET {ph}"
    )
    return sql, [*params, *where_params, query.limit, query.offset]


def _filters(query: EventQuery, *, ph: str, events: str) -> tuple[list[str], list[Any]]:
    """Return the conditions (and their parameters) on an event's first record ``e`` and
    its run ``r`` that every field of ``query`` but its terms sets: the column checks
    first, the lookups after them."""
    where: list[str] = []
    params: list[Any] = []
    if query.kinds is not None:
        where.append(f"e.kind IN ({', '.join([ph] * len(query.kinds))})")
        params.extend(query.kinds)
    for column, value in (
        ("e.name", query.name),
        ("e.run_id", query.run_id),
        ("r.namespace", query.namespace),
        ("r.agent", query.agent),
    ):
        if value is not None:
            where.append(f"{column} = {ph}")
            params.append(value)
    if query.since is not None:
        where.append(f"e.at >= {ph}")
        params.append(query.since)
    if query.until is not None:
        where.append(f"e.at < {ph}")
        params.append(query.until)
    where.append(
        f"NOT EXISTS (SELECT 1 FROM {events} p WHERE p.run_id = e.run_id AND "
        "p.event_id = e.event_id AND p.seq < e.seq)"
    )
    if query.status is not None:
        # The last record by its key: max(seq) from the (run_id, event_id) index, then
        # that record (ordering the run's records by seq walks all of them per event).
        where.append(
            f"(SELECT l.status FROM {events} l WHERE l.run_id = e.run_id AND l.seq = "
            f"(SELECT max(m.seq) FROM {events} m WHERE m.run_id = e.run_id AND "
            f"m.event_id = e.event_id)) = {ph}"
        )
        params.append(query.status)
    return where, params


#: Sorts after every stored time: the end of a run that may still be written.
OPEN_END = "~"


def broad_runs_where(query: EventQuery, *, ph: str) -> tuple[str, list[Any]]:
    """Return ``("WHERE …" or "", params)`` over runs ``r`` that a broad query may reach.

    Its namespace and agent, and a start before ``until`` (a run started later holds no
    earlier event).
    """
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("r.namespace", query.namespace), ("r.agent", query.agent)):
        if value is not None:
            where.append(f"{column} = {ph}")
            params.append(value)
    if query.until is not None:
        where.append(f"r.started_at < {ph}")
        params.append(query.until)
    return ("WHERE " + " AND ".join(where) if where else ""), params


#: A text query visits at most this many runs one by one before it asks ``fallback``.
FALLBACK_AFTER_RUNS = 32


def newest_runs_first(
    query: EventQuery,
    runs: Sequence[Sequence[Any]],
    run_events: Callable[[Any, Any, EventQuery], Iterable[Sequence[Any]]],
    fallback: Callable[[EventQuery], list[tuple[str, str]]] | None = None,
) -> list[tuple[str, str]]:
    """Answer a broad query run by run, newest start first, stopping once exact.

    An event of a run is no later than the run's end (a run still running, or resumed, is
    unbounded: ``OPEN_END``), so once ``offset + limit`` candidates are found and the last
    of them is later than every end of the runs not yet visited, no unvisited event can
    displace it. Its cost follows the limit, not the database.

    When matches are rare (a common word with a filter that few events pass), visiting
    every run would read the word's index hits once per run: after
    ``FALLBACK_AFTER_RUNS`` runs without the answer, ``fallback`` (one statement over
    every hit, filters applied first) answers instead.

    Args:
        query: The search (no ``run_id``).
        runs: ``(run_id, key, end)`` of the runs ``broad_runs_where`` selects, newest
            start first; ``key`` is the backend's own handle on the run.
        run_events: ``run_events(run_id, key, q)`` returns ``(at, run_id, seq, event_id)``
            of the run's events matching ``q`` (``query`` for that run, its ``limit``
            ``offset + limit``, offset 0).
    """
    bound = [""] * (len(runs) + 1)  # bound[i]: the latest end among runs[i:]
    for i in range(len(runs) - 1, -1, -1):
        bound[i] = max(bound[i + 1], str(runs[i][2]))
    want = query.offset + query.limit
    found: list[tuple[str, str, int, str]] = []
    for i, (run_id, key, end) in enumerate(runs):
        if query.since is not None and str(end) < query.since:
            continue  # the run ended before the window opened
        if len(found) >= want and found[want - 1][0] > bound[i]:
            break
        if fallback is not None and i >= FALLBACK_AFTER_RUNS:
            return fallback(query)
        q = replace(query, run_id=str(run_id), limit=want, offset=0)
        found.extend((str(a), str(r), int(s), str(e)) for a, r, s, e in run_events(run_id, key, q))
        found.sort(reverse=True)
        del found[want:]
    return [(r, e) for _, r, _, e in found[query.offset : want]]


def scan_search(
    query: EventQuery,
    *,
    select: Callable[[EventQuery], Sequence[tuple[str, str]]],
    records: Callable[[str, str], tuple[Any, ...]],
    goal: Callable[[str], Sequence[str]],
) -> list[tuple[Any, ...]]:
    """Answer a text query without an index: filter by everything else, then match.

    Args:
        query: The search.
        select: The backend's answer to a query without terms (``(run_id, event_id)``).
        records: The event's records (``EventRow``s in ``seq`` order).
        goal: The run's goal tokens.
    """
    page = replace(query, terms=(), limit=500, offset=0)
    out: list[tuple[Any, ...]] = []
    skip = query.offset
    goals: dict[str, Sequence[str]] = {}
    while True:
        keys = select(page)
        for run_id, event_id in keys:
            recs = records(run_id, event_id)
            if run_id not in goals:
                goals[run_id] = goal(run_id)
            bodies = [search_body(r.name, r.data).split() for r in recs]
            if not event_matches(query.terms, bodies, goals[run_id]):
                continue
            if skip:
                skip -= 1
                continue
            out.append(recs)
            if len(out) >= query.limit:
                return out
        if len(keys) < page.limit:
            return out
        page = replace(page, offset=page.offset + page.limit)


def select_in_memory(
    query: EventQuery, runs: Mapping[str, Any], events: Mapping[str, Sequence[Any]]
) -> list[tuple[str, str]]:
    """Answer a query without terms over in-memory ``RunRow``s and ``EventRow``s.

    The same selection and order as ``search_sql``: events by their first record, newest
    first (``at``, then ``run_id``, then ``seq``, all descending).
    """
    kinds = None if query.kinds is None else set(query.kinds)
    found: list[tuple[str, str, int, str]] = []
    for run_id, rows in events.items():
        run = runs.get(run_id)
        if run is None or query.run_id not in (None, run_id):
            continue
        if query.namespace not in (None, run.namespace) or query.agent not in (None, run.agent):
            continue
        first: dict[str, Any] = {}
        last: dict[str, Any] = {}
        for r in rows:
            first.setdefault(r.event_id, r)
            last[r.event_id] = r
        for event_id, r in first.items():
            if kinds is not None and r.kind not in kinds:
                continue
            if query.name is not None and r.name != query.name:
                continue
            if query.since is not None and not r.at >= query.since:
                continue
            if query.until is not None and not r.at < query.until:
                continue
            if query.status is not None and last[event_id].status != query.status:
                continue
            found.append((r.at, run_id, r.seq, event_id))
    found.sort(reverse=True)
    page = found[query.offset : query.offset + query.limit]
    return [(run_id, event_id) for _, run_id, _, event_id in page]
