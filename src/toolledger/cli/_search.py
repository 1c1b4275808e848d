"""``toolledger search``: find events across runs (full text and filters).

Data goes to stdout (a table, or JSON lines with ``--json``); a warning (no full-text
index) goes to stderr as one line. Bad arguments exit 2.
"""

from __future__ import annotations

import warnings

import click

from ..errors import InvalidArgumentError, NotFoundError
from ..journal import search as search_events
from ..journal import snippet
from ..store import SearchWarning, Store
from . import main
from ._common import LIMIT, RUN, UsageError, get_store, json_line
from ._table import Column, format_option, iso, print_table, status_color

__all__ = ["KINDS", "STATUSES", "search"]

#: Event kinds (``--kind``): the journal's and the guard's (``llm_call``, ``replay``).
KINDS = (
    "step",
    "tool_call",
    "llm_call",
    "approval",
    "artifact",
    "note",
    "finish",
    "resolution",
    "replay",
)
#: Event statuses (``--status``); ``interrupted`` is a ``running`` event whose run died.
STATUSES = (
    "running",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "pending",
    "granted",
    "refused",
    "replayed",
    "diverged",
)

_COLUMNS = (
    Column("time", "time"),
    Column("run", "run"),
    Column("kind", "kind"),
    Column("name", "name", cap=24),
    Column("status", "status", color=status_color),
    Column("snippet", "snippet"),
)


@main.command()
@click.argument("text", required=False)
@click.option(
    "--kind", "kinds", multiple=True, type=click.Choice(KINDS), help="Event kind (repeatable)."
)
@click.option("--name", default=None, help="Exact event name (e.g. a tool name).")
@click.option("--status", default=None, type=click.Choice(STATUSES), help="Event status.")
@click.option("--agent", default=None, help="Only runs of this agent.")
@click.option("--namespace", default=None, help="Only runs of this namespace.")
@click.option(
    "--run", "run_id", type=RUN, default=None, help="Only this run (an id, a prefix, latest)."
)
@click.option("--since", default=None, help="Started within this age (7d, 12h) or after.")
@click.option("--until", default=None, help="Started before this age.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="At most this many.")
@format_option()
@click.pass_context
def search(
    ctx: click.Context,
    text: str | None,
    kinds: tuple[str, ...],
    name: str | None,
    status: str | None,
    agent: str | None,
    namespace: str | None,
    run_id: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    fmt: str,
) -> None:
    """Search events across runs, newest first: time, run, kind, name, status, snippet.

    TEXT is words and "quoted phrases" (a trailing * matches a prefix); every one must
    appear in the event (name, justification, inputs, outputs, approval, error, note) or
    its run's goal.

    Example: toolledger search "A-1001" --kind tool_call --status failed --since 7d
    """
    store = get_store(ctx)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SearchWarning)
            try:
                events = search_events(
                    store,
                    text,
                    kind=kinds or None,
                    name=name,
                    status=status,
                    agent=agent,
                    namespace=namespace,
                    run_id=run_id,
                    since=since,
                    until=until,
                    limit=min(max(limit, 1), 100_000),
                )[:limit]
            except (InvalidArgumentError, NotFoundError) as exc:
                raise UsageError(exc.message) from exc
        # A hit may match only its run's goal: the snippet then shows the goal.
        goals = {} if fmt == "json" else _goals(store, {ev.run_id for ev in events})
    finally:
        store.close()
    for warning in caught:
        if issubclass(warning.category, SearchWarning):
            click.echo(f"warning: {warning.message}", err=True)
    if fmt == "json":
        for ev in events:
            click.echo(json_line(ev.to_dict()))
        return
    rows = [
        {
            "time": iso(ev.started_at),
            "run": ev.run_id,
            "kind": ev.kind,
            "name": ev.name,
            "status": ev.status,
            "snippet": snippet(ev, text, goal=goals.get(ev.run_id)),
        }
        for ev in events
    ]
    print_table(_COLUMNS, rows, fmt=fmt)


def _goals(store: Store, run_ids: set[str]) -> dict[str, str | None]:
    """Each run's goal, by id (``None`` for a run not found)."""
    rows = {run_id: store.get_run(run_id) for run_id in run_ids}
    return {run_id: row.goal if row is not None else None for run_id, row in rows.items()}
