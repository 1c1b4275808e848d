"""``toolledger export-site``: a static, offline site of runs (index + one page per run)."""

from __future__ import annotations

import click

from ..errors import InvalidArgumentError, NotFoundError
from ..export import export_site as write_site
from . import main
from ._common import UsageError, clean, get_store

__all__ = ["export_site"]


@main.command("export-site")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--since", default=None, help="Only runs started within this age (7d, 12h).")
@click.pass_context
def export_site(ctx: click.Context, directory: str, since: str | None) -> None:
    """Write DIRECTORY/index.html (runs, searchable) and one self-contained page per run.

    Every page opens from file:// with no network request.

    Example: toolledger export-site site --since 7d
    """
    store = get_store(ctx)
    try:
        try:
            info = write_site(store, directory, since=since)
        except (InvalidArgumentError, NotFoundError) as exc:
            raise UsageError(exc.message) from exc
    finally:
        store.close()
    click.echo(clean(str(info.index)))
    click.echo(clean(f"wrote {info.runs} run pages and {info.index}"), err=True)
