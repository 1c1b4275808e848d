"""``toolledger search``: find events across runs (full text and filters).

Data goes to stdout (a table, or JSON lines with ``--json``); a warning (no full-text
index) goes to stderr as one line. Bad arguments exit 2.
"""

from __future__ import annotations

import warnings

import click

from ..errors import InvalidArgumentError, NotFoundError
from ..journal import search as search_events
from ..journal._reader import snippet
from ..store._search import SearchWarning
from . import main
from ._common import LIMIT, UsageError, clean, get_store, json_line

__all__ = ["search"]


@main.command()
@click.argument("text", required=False)
@click.option("--kind", "kinds", multiple=True, help="Event kind (step, tool_call, approval…).")
@click.option("--name", default=None, help="Exact event name (e.g. a tool name).")
@click.option("--status", default=None, help="completed, failed, refused, interrupted, …")
@click.option("--agent", default=None, help="Only runs of this agent.")
@click.option("--namespace", default=None, help="Only runs of this namespace.")
@click.option("--run", "run_id", default=None, help="Only this run.")
@click.option("--since", default=None, help="Started within this age (7d, 12h) or after.")
@click.option("--until", default=None, help="Started before this age.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="One merged event (JSON) per line.")
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
    as_json: bool,
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
    finally:
        store.close()
    for warning in caught:
        if issubclass(warning.category, SearchWarning):
            click.echo(f"warning: {warning.message}", err=True)
    if as_json:
        for ev in events:
            click.echo(json_line(ev.to_dict()))
        return
    click.echo(f"{'time':<19}  {'run':<12}  {'kind':<10} {'name':<20} {'status':<11} snippet")
    for ev in events:
        when = ev.started_at.strftime("%Y-%m-%d %H:%M:%S") if ev.started_at else "-"
        click.echo(
            f"{when:<19}  {ev.run_id[:12]:<12}  {clean(ev.kind)[:10]:<10} "
            f"{clean(ev.name or '-')[:20]:<20} {clean(ev.status or '-')[:11]:<11} "
            f"{clean(snippet(ev, text))}"
        )
