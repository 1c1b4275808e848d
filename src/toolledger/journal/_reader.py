"""The public read API: ``load_run``, ``list_runs`` and ``search``.

Rules this module keeps:

- Readers only read: ``db`` is a ``Store`` (used, not closed), or a path or DSN opened for
  this call and closed again.
- What a reader shows of a run comes from the hashed run document (its header and goal),
  not from the ``runs`` table's free columns, which ``verify`` does not cover.
- Times are aware datetimes or ages (``"7d"``, parsed by ``parse_age``, as ``gc`` does); a bad
  one is ``INVALID_ARGUMENT``. An unknown run id is ``NOT_FOUND``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from ..checkpoint.model import format_time, parse_age
from ..errors import CheckpointError, InvalidArgumentError
from ..store import EventQuery, Store, StoreLike, parse_query, store_for, using_store
from ._facts import find_end, run_facts
from ._merge import merge_events, record_tuples
from ._read import (
    RecordRows,
    StoredRun,
    collector_paused,
    get_run_row,
    is_live,
    read_records,
    run_document,
    run_goal,
    stored_run_head,
)
from ._records import parse_many
from ._view import Event, RunView, parse_event_time

__all__ = [
    "checkpoint_status",
    "event_text",
    "events_of",
    "list_runs",
    "load_run",
    "run_view",
    "search",
    "snippet",
    "to_time",
]

_RUN_STATUSES = ("running", "completed", "failed", "interrupted")


def to_time(value: Any, name: str, *, now: datetime | None = None) -> str | None:
    """Return the stored (ISO-8601 UTC) form of a datetime or an age before ``now``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for anything else (a naive datetime
            included).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(
                message=f"{name} must be an aware datetime (with a timezone)",
                details={"argument": name},
            )
        return format_time(value)
    if isinstance(value, timedelta):
        age = value
    elif isinstance(value, str):
        try:
            age = parse_age(value)
        except OverflowError as exc:
            raise InvalidArgumentError(
                message=f"{name}: the age {value!r:.60} is too large", details={"argument": name}
            ) from exc
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(
                message=f"{name}: {exc.message}", details={"argument": name}
            ) from exc
    else:
        raise InvalidArgumentError(
            message=f"{name} must be a datetime or an age such as '7d'; got {value!r:.60}",
            details={"argument": name},
        )
    try:
        return format_time((now or datetime.now(timezone.utc)) - age)
    except OverflowError as exc:
        raise InvalidArgumentError(
            message=f"{name}: the age {value!r:.60} reaches before year 1",
            details={"argument": name},
        ) from exc


def _run_fields(stored: StoredRun) -> dict[str, Any]:
    """The run's displayed fields: its hashed facts (``journal._facts``), never the columns.

    The error of a run recorded before run ends were chained comes from its document.
    """
    facts = stored.facts
    end = _section(stored.doc, "end")
    return {
        "namespace": str(facts.namespace or stored.row.namespace),
        "agent": facts.agent,
        "goal": facts.goal,
        "started_at": facts.started_at,
        "ended_at": facts.ended_at,
        "error": facts.error if facts.end_hashed else end.get("error"),
    }


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def run_view(
    stored: StoredRun,
    events: Iterable[Event] = (),
    *,
    head_hash: str | None = None,
    event_count: int | None = None,
) -> RunView:
    """Return the ``RunView`` of a stored run and its events.

    The chain's head and record count are ``stored.rows``' unless given (read without
    them); a run without records shows its row's.
    """
    fields = _run_fields(stored)
    if stored.rows:
        head_hash, event_count = stored.rows[-1].hash, len(stored.rows)
    return RunView(
        run_id=stored.row.run_id,
        namespace=fields["namespace"],
        agent=fields["agent"],
        goal=fields["goal"],
        status=stored.status,
        started_at=parse_event_time(fields["started_at"]),
        ended_at=parse_event_time(fields["ended_at"]),
        head_hash=head_hash if event_count else stored.row.head_hash,
        event_count=event_count if event_count else stored.row.event_count,
        error=fields["error"],
        source=stored.facts.source,
        events=tuple(events),
    )


def checkpoint_status(store: Store, link: Mapping[str, Any]) -> str:
    """Return the linked checkpoint's status now (``erased``, ``missing``, ``invalid``)."""
    ns, cid = link.get("namespace"), link.get("call_id")
    if not isinstance(ns, str) or not isinstance(cid, str):
        return "missing"
    try:
        record = store.get(ns, cid)
        if record is not None:
            return record.status.value
        return "erased" if store.tombstone(ns, cid) is not None else "missing"
    except CheckpointError:
        return "invalid"


def _statuses(
    store: Store, cache: dict[tuple[Any, Any], str]
) -> Callable[[Mapping[str, Any]], str | None]:
    """``checkpoint_status`` of a merged event's link, each checkpoint read once."""

    def status(link: Mapping[str, Any]) -> str | None:
        if not isinstance(link, dict):
            return None
        key = (link.get("namespace"), link.get("call_id"))
        found = cache.get(key)
        if found is None:
            found = cache[key] = checkpoint_status(store, link)
        return found

    return status


def events_of(store: Store, stored: StoredRun) -> list[Event]:
    """Return the stored run's merged events as ``Event`` values."""
    fields = _run_fields(stored)
    rows = stored.rows
    docs = stored.docs if len(stored.docs) == len(rows) else parse_many([r.data for r in rows])
    return merge_events(
        record_tuples(rows),
        docs,
        run_id=stored.row.run_id,
        goal=run_goal(stored.doc, stored.facts.goal),
        live=stored.live,
        agent=fields["agent"],
        namespace=fields["namespace"],
        checkpoint_status=_statuses(store, {}),
    )


def load_run(db: StoreLike | None, run_id: str) -> RunView:
    """Read a run and its merged events.

    Args:
        db: A ``Store`` (left open), a SQLite path, ``sqlite:///`` URL or PostgreSQL DSN.
        run_id: The run.

    Returns:
        A ``RunView``; ``view.events`` in recorded order, ``view.roots()`` /
        ``view.children(event_id)`` walk the tree, ``view.to_dict()`` is the JSON form.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a malformed ``db`` or run id.
        StoreError: the store cannot be read.
    """
    with collector_paused(), using_store(db, readonly=True) as store:
        row = get_run_row(store, run_id)
        # The records' columns the view shows, read in one statement (no EventRow built).
        records = read_records(store, row.run_id)
        doc = run_document(row)
        facts = run_facts(row, doc, find_end(RecordRows(row.run_id, records)))
        stored = StoredRun(
            row=row, doc=doc, rows=[], events=[], live=is_live(row, doc, facts), facts=facts
        )
        fields = _run_fields(stored)
        events = merge_events(
            records,
            parse_many([r[8] for r in records]),
            run_id=row.run_id,
            goal=run_goal(doc, facts.goal),
            live=stored.live,
            agent=fields["agent"],
            namespace=fields["namespace"],
            checkpoint_status=_statuses(store, {}),
        )
        head_hash, count = (records[-1][7] if records else None), len(records)
        # Freed before the collector runs again: its first pass walks what is still alive.
        del records
        return run_view(stored, events, head_hash=head_hash, event_count=count)


def list_runs(
    db: StoreLike | None,
    *,
    status: str | None = None,
    agent: str | None = None,
    namespace: str | None = None,
    since: datetime | timedelta | str | None = None,
    until: datetime | timedelta | str | None = None,
    limit: int = 100,
) -> list[RunView]:
    """Return runs, newest start first, matching every given filter.

    The views carry the run's fields, head hash and record count; their ``events`` are
    not loaded (``load_run`` reads them).

    Args:
        db: A ``Store``, path or DSN.
        status: ``running``, ``completed``, ``failed`` or ``interrupted``.
        agent, namespace: Exact matches.
        since, until: Runs started at or after ``since`` and before ``until``: aware
            datetimes or ages (``"7d"``: seven days ago).
        limit: At most this many (1 to 100,000).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad filter or limit.
    """
    check_choice(status, _RUN_STATUSES, "status")
    for name, value in (("agent", agent), ("namespace", namespace)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(message=f"{name} must be a str", details={"argument": name})
    low, high = to_time(since, "since"), to_time(until, "until")
    limit = check_limit(limit)
    store, owned = store_for(db, readonly=True)
    out: list[RunView] = []
    try:
        page = min(max(limit * 2, 100), 5000)
        offset = 0
        while len(out) < limit:
            rows = store.list_runs(namespace=namespace, limit=offset + page)[offset:]
            for row in rows:
                view = run_view(stored_run_head(store, row))
                if _run_matches(view, status, agent, namespace, low, high):
                    out.append(view)
                    if len(out) >= limit:
                        break
            if len(rows) < page:
                break
            offset += page
    finally:
        if owned:
            store.close()
    return out


def _run_matches(
    view: RunView,
    status: str | None,
    agent: str | None,
    namespace: str | None,
    low: str | None,
    high: str | None,
) -> bool:
    if status is not None and view.status != status:
        return False
    if agent is not None and view.agent != agent:
        return False
    if namespace is not None and view.namespace != namespace:
        return False
    started = format_time(view.started_at) if view.started_at is not None else None
    if low is not None and (started is None or started < low):
        return False
    return not (high is not None and (started is None or started >= high))


def check_choice(value: Any, choices: Iterable[str], name: str) -> None:
    """Raise ``INVALID_ARGUMENT`` unless ``value`` is ``None`` or one of ``choices``."""
    options = tuple(choices)
    if value is not None and value not in options:
        raise InvalidArgumentError(
            message=f"{name} must be one of {', '.join(options)}; got {value!r:.60}",
            details={"argument": name},
        )


def check_limit(limit: Any) -> int:
    """Return ``limit`` if it is an int from 1 to 100,000, else raise ``INVALID_ARGUMENT``."""
    if type(limit) is not int or not 1 <= limit <= 100_000:
        raise InvalidArgumentError(
            message=f"limit must be an int from 1 to 100000; got {limit!r:.40}",
            details={"argument": "limit"},
        )
    return limit


def search(
    db: StoreLike | None,
    text: str | None = None,
    *,
    kind: str | Iterable[str] | None = None,
    name: str | None = None,
    status: str | None = None,
    agent: str | None = None,
    namespace: str | None = None,
    run_id: str | None = None,
    since: datetime | timedelta | str | None = None,
    until: datetime | timedelta | str | None = None,
    limit: int = 100,
) -> list[Event]:
    """Find events across runs, newest first.

    Args:
        db: A ``Store``, path or DSN.
        text: Full-text: words and ``"quoted phrases"`` (a trailing ``*`` matches a
            prefix), each of which must appear in the event (its name, justification,
            inputs, outputs, approval, error or note text, artifacts) or its run's goal.
            Case-insensitive; punctuation separates words (``A-1001`` is the phrase
            ``a 1001``). Nothing in it is query syntax, so no input is a syntax error.
        kind: An event kind (``step``, ``tool_call``, ``approval``, ``note``, ...) or several.
        name: The event's exact name (e.g. the tool name).
        status: The event's status (``completed``, ``failed``, ``refused``, ``granted``,
            ``running``, ``interrupted``, ...).
        agent, namespace, run_id: The event's run.
        since, until: Events that started at or after ``since`` and before ``until``:
            aware datetimes or ages (``"7d"``: seven days ago).
        limit: At most this many (1 to 100,000).

    Returns:
        ``Event`` values; each knows its run (``run_id``, ``goal``, ``agent``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad argument (a malformed age, a
            naive datetime, text with no words).
        StoreError: the store cannot be read.

    Warns:
        SearchWarning: the SQLite build has no FTS5, so the events were scanned.
    """
    terms = () if text is None else parse_query(text)
    kinds: tuple[str, ...] | None
    if kind is None:
        kinds = None
    elif isinstance(kind, str):
        kinds = (kind,)
    else:
        kinds = tuple(kind)
        if not kinds or not all(isinstance(k, str) for k in kinds):
            raise InvalidArgumentError(
                message="kind must be a str or strings", details={"argument": "kind"}
            )
    for arg, value in (
        ("name", name),
        ("status", status),
        ("agent", agent),
        ("namespace", namespace),
        ("run_id", run_id),
    ):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(message=f"{arg} must be a str", details={"argument": arg})
    limit = check_limit(limit)
    # ``running`` and ``interrupted`` are one stored status; liveness tells them apart.
    stored_status = "running" if status == "interrupted" else status
    query = EventQuery(
        terms=terms,
        kinds=kinds,
        name=name,
        status=stored_status,
        run_id=run_id,
        namespace=namespace,
        agent=agent,
        since=to_time(since, "since"),
        until=to_time(until, "until"),
        limit=limit,
    )
    with using_store(db, readonly=True) as store:
        return _search(store, query, status, limit)


def _search(store: Store, query: EventQuery, status: str | None, limit: int) -> list[Event]:
    runs: dict[str, StoredRun | None] = {}
    statuses = _statuses(store, {})
    out: list[Event] = []
    offset = 0
    while True:
        page = replace(query, offset=offset)
        groups = store.search_events(page)
        for rows in groups:
            if not rows:
                continue
            stored = _run_of(store, runs, rows[0].run_id)
            if stored is None:
                continue
            fields = _run_fields(stored)
            if query.agent is not None and fields["agent"] != query.agent:
                continue
            if query.namespace is not None and fields["namespace"] != query.namespace:
                continue
            merged = merge_events(
                record_tuples(rows),
                parse_many([r.data for r in rows]),
                run_id=rows[0].run_id,
                goal=run_goal(stored.doc, stored.facts.goal),
                live=stored.live,
                agent=fields["agent"],
                namespace=fields["namespace"],
                checkpoint_status=statuses,
            )
            if not merged:
                continue
            event = merged[0]
            if status is not None and event.status != status:
                continue
            out.append(event)
            if len(out) >= limit:
                return out
        if len(groups) < page.limit:
            return out
        offset += page.limit


def _run_of(store: Store, cache: dict[str, StoredRun | None], run_id: str) -> StoredRun | None:
    if run_id not in cache:
        row = store.get_run(run_id)
        if row is None:
            cache[run_id] = None
        else:
            cache[run_id] = stored_run_head(store, row)
    return cache[run_id]


def event_text(ev: Event) -> list[str]:
    """Return the readable text of an event, most telling first (for snippets and views)."""
    parts: list[str] = []
    if ev.justification:
        parts.append(ev.justification)
    if isinstance(ev.error, Mapping):
        parts.append(f"{ev.error.get('type') or 'error'}: {ev.error.get('message') or ''}")
    if isinstance(ev.approval, Mapping):
        granted = ev.approval.get("granted")
        if granted is None:  # requested, not decided yet
            ticket = ev.approval.get("ticket")
            parts.append("pending" + (f" (ticket {ticket})" if ticket else ""))
        else:
            verdict = "granted" if granted else "refused"
            by, reason = ev.approval.get("by"), ev.approval.get("reason") or ""
            parts.append(f"{verdict} by {by}: {reason}")
    if ev.text:
        parts.append(ev.text)
    for label, value in (("in", ev.inputs), ("out", ev.outputs)):
        if value not in (None, {}, []):
            parts.append(f"{label} {_flat_text(value)}")
    if ev.erased is not None:
        parts.append(f"(content erased: {ev.erased.get('reason')})")
    return [" ".join(str(p).split()) for p in parts]


def _flat_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k}={_flat_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return " ".join(_flat_text(v) for v in value)
    return str(value)


def snippet(ev: Event, text: str | None, *, width: int = 60, goal: str | None = None) -> str:
    """Return up to ``width`` characters of the event's text around the first match of ``text``.

    Search matches an event by its own text or by its run's goal. When only the goal holds
    the match (``goal``: the run's, else the event's own, as a finish record carries it), it
    is shown as ``goal: …``. Without a match (or text), the most telling part of the event
    (its justification, error, approval or note) is shown from its start.
    """
    parts = event_text(ev)
    words = [t for term in (parse_query(text) if text else ()) for t in term.tokens]
    for part in parts:
        found = _around(part, words, width)
        if found is not None:
            return found
    goal = goal if goal is not None else ev.goal
    if goal and words:
        found = _around(" ".join(goal.split()), words, width - len("goal: "))
        if found is not None:
            return "goal: " + found
    if not parts:
        return ""
    first = parts[0]
    return first[:width] + ("…" if len(first) > width else "")


def _around(part: str, words: list[str], width: int) -> str | None:
    """Up to ``width`` characters of ``part`` around its first hit of ``words``, or ``None``."""
    low = part.lower()
    hits = [i for i in (low.find(w) for w in words) if i >= 0]
    if not hits:
        return None
    # The window starts a third of its width before the hit, but never past the text's end.
    start = max(0, min(min(hits) - width // 3, len(part) - width))
    piece = part[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(part) else "")
