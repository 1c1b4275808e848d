"""What a stored run says about itself, from hashed values only. Pure; no I/O.

The ``runs`` table's columns (``namespace, agent, goal, started_at, status, ended_at``) are
an index for listing runs: nothing hashes them, so anyone with write access can edit them.
The hashed facts of a run are:

- ``run_id, namespace, agent, started_at``: the run header in the run document, whose
  canonical JSON hashes to the run's genesis, the ``prev_hash`` of record 0;
- ``goal``: the run document's content, whose hash is the header's ``content_sha256``;
- the end (``status, ended_at, error``): the run's closing record, the last ``finish``
  record whose header carries ``run_end: true`` (written when the run ends, for runs whose
  header has ``v >= 2``); the finish summary is that event's ``text``;
- ``source``: a replayed or forked run's source, named by the header (``replay_of:
  {run_id}`` or ``forked_from: {run_id, event_id}``), read as ``{"mode": "replay" |
  "fork", "run_id", "event_id"}`` (``event_id`` is ``None`` for a replay).

``run_facts`` returns those values and names every column that differs from them
(``RunFacts.differs``). Readers (``toolledger runs``, ``show``, every export, the Python
read API) display ``RunFacts``, never the columns; ``verify`` fails when ``differs`` is not
empty, after it has proved the hashed values are the ones chained.

A run recorded before run ends were chained (header ``v`` 1) has no closing record: its
``status`` and ``ended_at`` are the columns' (``end_hashed`` is ``False``), and ``verify``
says so instead of vouching for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..store.base import EventRow, RunRow
from ._records import RUN_FORMAT_VERSION, parse_many

__all__ = [
    "RUN_END_KEY",
    "TAIL",
    "EndRecord",
    "RunFacts",
    "describe_source",
    "end_record",
    "find_end",
    "run_facts",
    "run_source",
]

#: The header key marking a run's closing record.
RUN_END_KEY = "run_end"
#: How many trailing records are searched for the closing record before a full scan.
TAIL = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class EndRecord:
    """A run's closing record, as hashed: the run's end."""

    seq: int
    event_id: str
    status: str | None
    at: str | None
    error: Any = None
    summary: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """A run as its hashed values state it (see the module docstring).

    Attributes:
        run_id, namespace, agent, goal, started_at: From the hashed run document.
        goal_erased: The document's goal content is missing (an ``erased`` marker).
        status: ``running``, ``completed`` or ``failed``: from the closing record when the
            run ended, else ``running`` (readers turn a dead writer's run into
            ``interrupted``).
        ended_at, error, summary: From the closing record (``None`` while running).
        end_hashed: Whether ``status``/``ended_at`` come from the chain (``False`` for a
            run recorded before run ends were chained: they are the columns').
        source: The run this one replays or forks (``{"mode", "run_id", "event_id"}``,
            from the hashed header), or ``None``.
        differs: ``(column, column value, hashed value)`` for each ``runs`` column that
            disagrees with the hashed run.
    """

    run_id: str
    namespace: str | None
    agent: str | None
    goal: str | None
    goal_erased: bool
    started_at: str | None
    status: str
    ended_at: str | None
    error: Any
    summary: str | None
    end_hashed: bool
    differs: tuple[tuple[str, Any, Any], ...]
    source: Mapping[str, str | None] | None = None

    def describe_differences(self) -> str:
        """One line naming each column that differs from the hashed run."""
        return "; ".join(
            f"{name} is {column!r} but the hashed run says {hashed!r}"
            for name, column, hashed in self.differs
        )


def end_record(
    seq: int, header: Mapping[str, Any], content: Mapping[str, Any] | None
) -> EndRecord | None:
    """Return the ``EndRecord`` of a record, or ``None`` when it is not a closing record."""
    if header.get("kind") != "finish" or header.get(RUN_END_KEY) is not True:
        return None
    content = content if isinstance(content, Mapping) else {}
    text = content.get("text")
    return EndRecord(
        seq=seq,
        event_id=str(header.get("event_id")),
        status=_str(header.get("status")),
        at=_str(header.get("at")),
        error=content.get("error"),
        summary=text if isinstance(text, str) else None,
    )


def find_end(rows: Sequence[EventRow]) -> EndRecord | None:
    """Return the last closing record among ``rows`` (in ``seq`` order), if any.

    Only ``finish`` rows are parsed; the summary of a run finished with ``run.finish(...)``
    is read from that event's own (earlier) record when it is among ``rows``.
    """
    for i in range(len(rows) - 1, -1, -1):
        row = rows[i]
        if row.kind != "finish":
            continue
        (doc,) = parse_many([row.data])
        header = _header(doc, row)
        end = end_record(row.seq, header, doc.get("content"))
        if end is None:
            continue
        if end.summary is None and header.get("phase") == "end":
            end = _with_summary(end, rows[:i])
        return end
    return None


def _with_summary(end: EndRecord, earlier: Iterable[EventRow]) -> EndRecord:
    for row in reversed(list(earlier)):
        if row.event_id == end.event_id:
            (doc,) = parse_many([row.data])
            text = (doc.get("content") or {}).get("text")
            if isinstance(text, str):
                return EndRecord(
                    seq=end.seq,
                    event_id=end.event_id,
                    status=end.status,
                    at=end.at,
                    error=end.error,
                    summary=text,
                )
            break
    return end


def _header(doc: Mapping[str, Any], row: EventRow) -> dict[str, Any]:
    header = doc.get("header")
    out = dict(header) if isinstance(header, dict) else {}
    out.update(run_id=row.run_id, event_id=row.event_id, kind=row.kind, status=row.status)
    out.update(at=row.at, seq=row.seq, name=row.name, parent_id=row.parent_id)
    return out


def run_facts(row: RunRow, doc: Mapping[str, Any], end: EndRecord | None) -> RunFacts:
    """Return the run's hashed facts and the columns of ``row`` that differ from them.

    Args:
        row: The ``runs`` row (its columns are compared, never trusted).
        doc: The run document (``row.data`` parsed; ``{}`` when unreadable).
        end: The run's last closing record (``find_end``), or ``None``.
    """
    header = doc.get("header") if isinstance(doc.get("header"), dict) else None
    content = doc.get("content")
    differs: list[tuple[str, Any, Any]] = []

    def hashed(name: str, key: str) -> Any:
        if header is None or key not in header:
            differs.append((name, getattr(row, name), None))
            return getattr(row, name)
        value = header[key]
        if getattr(row, name) != value:
            differs.append((name, getattr(row, name), value))
        return value

    namespace = hashed("namespace", "namespace")
    agent = hashed("agent", "agent")
    started_at = hashed("started_at", "started_at")
    goal_erased = not isinstance(content, dict)
    goal = content.get("goal") if isinstance(content, dict) else None
    if isinstance(content, dict) and row.goal != goal:
        differs.append(("goal", row.goal, goal))
    version = header.get("v") if header is not None else None
    end_hashed = type(version) is int and version >= RUN_FORMAT_VERSION
    status, ended_at, error, summary = row.status, row.ended_at, None, None
    if end_hashed:
        status, ended_at, error, summary = _hashed_end(row, doc, end, differs)
    elif end is not None:  # a legacy run resumed by a newer writer: the end it did chain
        error, summary = end.error, end.summary
    return RunFacts(
        run_id=row.run_id,
        namespace=_str(namespace),
        agent=_str(agent),
        goal=_str(goal),
        goal_erased=goal_erased,
        started_at=_str(started_at),
        status=str(status),
        ended_at=_str(ended_at),
        error=error,
        summary=summary,
        end_hashed=end_hashed,
        differs=tuple(differs),
        source=run_source(header),
    )


def run_source(header: Mapping[str, Any] | None) -> dict[str, str | None] | None:
    """The source a run header names (``replay_of`` / ``forked_from``), or ``None``."""
    if header is None:
        return None
    for key, mode in (("forked_from", "fork"), ("replay_of", "replay")):
        value = header.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("run_id"), str):
            event_id = value.get("event_id")
            return {
                "mode": mode,
                "run_id": value["run_id"],
                "event_id": event_id if isinstance(event_id, str) else None,
            }
    return None


def describe_source(source: Mapping[str, Any] | None) -> str | None:
    """``replay of RUN`` or ``fork of RUN at EVENT`` (``None`` without a source)."""
    if not source:
        return None
    if source.get("mode") == "fork":
        return f"fork of {source.get('run_id')} at {source.get('event_id')}"
    return f"replay of {source.get('run_id')}"


def _hashed_end(
    row: RunRow,
    doc: Mapping[str, Any],
    end: EndRecord | None,
    differs: list[tuple[str, Any, Any]],
) -> tuple[str, str | None, Any, str | None]:
    if end is None:
        if row.status != "running":
            differs.append(("status", row.status, "running (no closing record)"))
        return "running", None, None, None
    resumed = doc.get("resumed_at")
    running = row.status == "running" and isinstance(resumed, str) and end.at is not None
    if running and resumed > end.at:  # type: ignore[operator]  # resumed after its end
        return "running", None, None, None
    status = end.status or "running"
    if row.status != status:
        differs.append(("status", row.status, status))
    if row.ended_at != end.at:
        differs.append(("ended_at", row.ended_at, end.at))
    return status, end.at, end.error, end.summary


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
