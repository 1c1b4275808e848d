"""Administration commands: ``gc`` (retention), ``copy`` (between stores), ``migrate``.

Each is a thin layer over the public API (``toolledger.gc``, ``toolledger.copy_ledger``,
opening a store). Data goes to stdout (``--json`` for machines), diagnostics to stderr;
exit 0 on success, 1 when a copy fails verification, 2 on usage errors (a store that
cannot be opened, a bad age).
"""

from __future__ import annotations

import json

import click

from ..copy import copy_ledger
from ..errors import CheckpointError
from ..retention import gc, parse_age
from ..store.base import migrations_of
from . import main
from ._common import CONTEXT_SETTINGS, UsageError, clean, fail_check, get_store

__all__ = ["copy_command", "gc_command", "migrate_command"]


@main.command("gc", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Erase terminal records whose last transition is older than AGE (30d, 12h, 1w2d).",
)
@click.option("--namespace", default=None, help="Only this namespace.")
@click.option(
    "--include-undelivered",
    is_flag=True,
    help="Also erase completed results that were never delivered.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def gc_command(
    ctx: click.Context,
    older_than: str,
    namespace: str | None,
    include_undelivered: bool,
    as_json: bool,
) -> None:
    """Erase old payloads and journal content, keeping tombstones.

    Delivered checkpoints (and, with --include-undelivered, completed ones) are replaced by
    tombstones; runs that ended before the cutoff lose their content but still verify.
    Records in progress are never touched. A tombstoned call raises TOMBSTONED, never runs.

    Example: toolledger --db ledger.db gc --older-than 30d --namespace billing
    """
    try:
        age = parse_age(older_than)
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    store = get_store(ctx, write=True)
    try:
        report = gc(
            store, older_than=age, namespace=namespace, include_undelivered=include_undelivered
        )
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    for key, value in report.to_dict().items():
        click.echo(clean(f"{key}: {value if value is not None else '-'}"))


@main.command("copy", context_settings=CONTEXT_SETTINGS)
@click.option("--from", "src", required=True, metavar="PATH|URL", help="The source store.")
@click.option("--to", "dst", required=True, metavar="PATH|URL", help="The empty destination.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def copy_command(src: str, dst: str, as_json: bool) -> None:
    """Copy a whole ledger to another store and verify it (exit 1 if it differs).

    Moves checkpoints with their history, the operation journal, runs, journal events and
    tombstones. The destination must be empty.

    Example: toolledger copy --from sqlite:///a.db --to postgresql://u@host/db
    """
    try:
        report = copy_ledger(src, dst)
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for key, value in report.to_dict().items():
            if key != "problems":
                click.echo(clean(f"{key}: {value}"))
    if not report.ok:
        fail_check("copy verification failed:\n  " + "\n  ".join(report.problems))


@main.command("migrate", context_settings=CONTEXT_SETTINGS)
@click.pass_context
def migrate_command(ctx: click.Context) -> None:
    """Create or upgrade the database schema and print the applied migrations.

    Opening a store migrates it too; this command does only that, e.g. before a fleet
    starts. Two hosts migrating at once is safe.

    Example: toolledger --db postgresql://u@host/db migrate
    """
    store = get_store(ctx, write=True)
    try:
        rows = migrations_of(store)
        if getattr(store, "schema", None) == "public":
            click.echo(
                "note: toolledger's tables are in schema 'public', as --db asked, beside "
                "any other tables there; ?schema=NAME keeps them in a schema of their own",
                err=True,
            )
    finally:
        store.close()
    for version, name in rows:
        click.echo(f"{version}\t{name}")
