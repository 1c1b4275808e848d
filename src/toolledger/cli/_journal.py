"""Journal commands: runs, show, export, verify (``replay``: ``_replay``).

Data goes to stdout, diagnostics to stderr. An unknown run id is a usage error (exit 2);
a failed verification or a divergent replay exits 1.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..errors import InvalidArgumentError, NotFoundError
from . import main
from ._common import LIMIT, RUN, UsageError, clean, fail_check, get_store, json_line
from ._table import Column, echo_lines, format_option, iso, print_table, status_color

__all__ = ["export", "import_", "runs", "show", "verify"]

#: Exports of at least this many records show a progress bar (when stderr is a TTY).
PROGRESS_MIN_RECORDS = 2000


@contextmanager
def _mapped() -> Iterator[None]:
    """Turn unknown ids and bad arguments into exit 2."""
    try:
        yield
    except NotFoundError as exc:
        raise UsageError(exc.message) from exc
    except InvalidArgumentError as exc:
        raise UsageError(exc.message) from exc


def _dumps(value: Any) -> str:
    return json_line(value)


_RUN_STATUSES = ("running", "completed", "failed", "interrupted")

_RUN_COLUMNS = (
    Column("run", "run_id"),
    Column("status", "status", color=status_color),
    Column("events", "events", right=True),
    Column("failed", "failed", right=True),
    Column("refused", "refused", right=True),
    Column("started", "started"),
    Column("goal", "goal", cap=80),
)


@main.command()
@click.option(
    "--status", type=click.Choice(_RUN_STATUSES), default=None, help="Only runs in this status."
)
@click.option("--agent", default=None, help="Only runs of this agent.")
@click.option("--namespace", default=None, help="Only runs of this namespace.")
@click.option("--since", default=None, metavar="AGE", help="Started within this age (7d, 12h).")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="At most this many.")
@format_option()
@click.pass_context
def runs(
    ctx: click.Context,
    status: str | None,
    agent: str | None,
    namespace: str | None,
    since: str | None,
    limit: int,
    fmt: str,
) -> None:
    """List runs, newest first: id, status, event counts, start, goal.

    Counts are events (a step's start and end records are one event): all, failed,
    refused (approvals), and still running or interrupted. When more runs match than
    --limit shows, stderr says how many more.

    Example: toolledger runs --status failed --since 7d --limit 10
    """
    from ..journal import iter_rows, list_runs

    store = get_store(ctx)
    try:
        with _mapped():
            ask = min(max(limit, 1), 100_000)
            filters: dict[str, Any] = {"status": status, "agent": agent, "since": since}
            views = list_runs(store, namespace=namespace, limit=min(ask + 1, 100_000), **filters)
            more = _more_runs(store, namespace, filters, len(views), limit)
        views = views[:limit]
        rows = []
        for view in views:
            counts = _counts(iter_rows(store, view.run_id))
            if fmt == "json":
                click.echo(
                    _dumps({**view.summary(), "records": view.event_count, "counts": counts})
                )
                continue
            rows.append(
                {
                    "run_id": _cell(view.run_id),
                    "status": _cell(view.status),
                    **counts,
                    "started": iso(view.started_at),
                    "goal": view.goal,
                }
            )
    finally:
        store.close()
    if fmt != "json":
        print_table(_RUN_COLUMNS, rows, fmt=fmt)
    if more:
        click.echo(f"{more} more: use --limit {limit + more} to list them", err=True)


def _more_runs(
    store: Any, namespace: str | None, filters: dict[str, Any], got: int, limit: int
) -> int:
    """How many matching runs ``--limit`` leaves out (0 when none)."""
    from ..journal import list_runs

    if got <= limit:
        return 0
    if not any(v is not None for v in filters.values()):  # one cheap count of the rows
        return max(len(store.list_runs(namespace=namespace)) - limit, 0)
    return max(len(list_runs(store, namespace=namespace, limit=100_000, **filters)) - limit, 0)


def _cell(value: Any) -> str:
    """A table cell: a damaged row's missing value prints as ``-``."""
    return "-" if value is None else str(value)


def _counts(rows: Iterable[Any]) -> dict[str, int]:
    """Count events from the indexed columns alone (no JSON parsing)."""
    last: dict[str, str | None] = {}
    for r in rows:
        last[r.event_id] = r.status
    statuses = list(last.values())
    return {
        "events": len(statuses),
        "failed": statuses.count("failed"),
        "refused": statuses.count("refused"),
        "running": statuses.count("running"),
    }


@main.command()
@click.argument("run_id", metavar="RUN", type=RUN)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the run and its merged events as JSON."
)
@click.option("--no-pager", is_flag=True, help="Never page (default: page long output on a TTY).")
@click.pass_context
def show(ctx: click.Context, run_id: str, as_json: bool, no_pager: bool) -> None:
    """Show a run as a tree: kind, name, status, times, input and output, and why.

    RUN is a run id, a unique prefix of one, or `latest`. Times are relative to the
    run's start, printed once with its zone. A completed tool call whose result was
    never delivered is marked `undelivered`. Long output is paged on a terminal.

    Example: toolledger show latest   |   toolledger show 3f2a
    """
    from ..journal import load_run as load_public
    from ._tree import tree_lines

    store = get_store(ctx)
    try:
        with _mapped():
            view = load_public(store, run_id)
    finally:
        store.close()
    if as_json:  # the merged view, as load_run gives it (one JSON document)
        click.echo(_dumps(view.to_dict()))
        return
    echo_lines(tree_lines(view), pager=not no_pager)


@main.command()
@click.argument("run_id", metavar="RUN", type=RUN)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "md", "html"]),
    default="json",
    show_default=True,
    help="Export format.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="File to write (default RUN_ID.json|md|html; - for standard output).",
)
@click.pass_context
def export(ctx: click.Context, run_id: str, fmt: str, output: str | None) -> None:
    """Export a run as JSON (re-importable), Markdown or a self-contained HTML page.

    Example: toolledger export 3f2a… --format html -o run.html
    """
    from ..export import export_html, export_json, export_markdown

    exporters: dict[str, Callable[..., Any]] = {
        "json": export_json,
        "md": export_markdown,
        "html": export_html,
    }
    fn = exporters[fmt]
    to_stdout = output == "-"
    store = get_store(ctx)
    try:
        with _mapped(), contextlib.ExitStack() as scratch:
            row = store.get_run(run_id)
            if row is None:
                raise NotFoundError(message=f"no run {run_id!r} in this database")
            path = output or f"{run_id}.{fmt}"
            if to_stdout:  # the exporter writes a scratch file, copied out whole
                folder = scratch.enter_context(tempfile.TemporaryDirectory())
                path = str(Path(folder, f"export.{fmt}"))
            with _progress(row.event_count) as progress:
                info = fn(store, run_id, path, progress=progress)
            if to_stdout:
                sys.stdout.flush()
                out = sys.stdout.buffer
                with Path(path).open("rb") as exported:
                    while chunk := exported.read(1 << 16):
                        out.write(chunk)
    finally:
        store.close()
    if not to_stdout:
        click.echo(clean(info.path))
    where = "standard output" if to_stdout else info.path
    click.echo(
        clean(
            f"wrote {where} ({info.event_count} records, {info.size} bytes, head {info.head_hash})"
        ),
        err=True,
    )


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def import_(ctx: click.Context, file: str) -> None:
    """Import a JSON export (`export RUN`) into this database as the run it holds.

    The file is verified first: one that fails is refused (exit 1, naming the first bad
    record); a run id the database holds already is exit 2. Prints the run id.

    Example: toolledger --db archive.db import 3f2a….json
    """
    from ..journal import import_json, verify_export

    with _mapped():
        report = verify_export(file)
        if not report.ok:
            fail_check(f"FAILED export {file}: {report.reason}; nothing imported")
        store = get_store(ctx, write=True)
        try:
            if store.get_run(report.run_id) is not None:
                raise UsageError(f"run {report.run_id} is in this database already")
            run_id = import_json(file, store)
        finally:
            store.close()
    click.echo(clean(run_id))
    click.echo(
        clean(f"imported {run_id} ({report.event_count} records, head {report.head_hash})"),
        err=True,
    )


@contextmanager
def _progress(total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for long exports, only when stderr is a terminal."""
    stream: Any = sys.stderr
    if total < PROGRESS_MIN_RECORDS or not stream.isatty():
        yield None
        return
    with click.progressbar(length=total, label="exporting", file=stream) as bar:
        seen = [0]

        def update(done: int, _total: int) -> None:
            step = min(done, total) - seen[0]
            if step > 0:
                bar.update(step)
                seen[0] += step

        yield update


@main.command()
@click.argument("run_id", metavar="[RUN]", type=RUN, required=False)
@click.option(
    "--expect-head",
    "--expected-head",
    "expected_head",
    default=None,
    metavar="DIGEST",
    help="Fail unless the run's head is DIGEST (printed earlier by --head, kept elsewhere).",
)
@click.option("--expected-count", type=int, default=None, help="Record count from an export.")
@click.option(
    "--export",
    "export_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Verify this JSON export file (on its own, and RUN_ID record by record against it).",
)
@click.option(
    "--head", "print_head", is_flag=True, help="Print only the verified head digest (to anchor)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(
    ctx: click.Context,
    run_id: str | None,
    expected_head: str | None,
    expected_count: int | None,
    export_file: str | None,
    print_head: bool,
    as_json: bool,
) -> None:
    """Verify a run's hash chain (exit 1 names the first bad record and why).

    A keyed run (TOOLLEDGER_JOURNAL_KEY) is verified with the key from the environment.
    Anchor a run's head outside the database: `--head` prints it, `--expect-head`
    checks it later.

    Example: toolledger verify 3f2a…   |   toolledger verify --export run.json
    """
    from ..journal import VerifyReport, verify_export
    from ..journal import verify as verify_run

    if run_id is None and export_file is None:
        raise UsageError("give a RUN_ID, or --export FILE")
    reports: list[VerifyReport] = []
    with _mapped():
        if export_file is not None:
            reports.append(verify_export(export_file))
        if run_id is not None:
            store = get_store(ctx)
            try:
                reports.append(
                    verify_run(
                        store,
                        run_id,
                        expected_head=expected_head,
                        expected_count=expected_count,
                        export=export_file,
                    )
                )
            finally:
                store.close()
    for report in reports:
        if as_json:
            click.echo(_dumps(report.as_dict()))
        elif print_head:
            if report.ok and report is reports[-1]:
                click.echo(str(report.head_hash))
        elif report.ok:
            erased = f", {report.content_erased} erased" if report.content_erased else ""
            legacy = (
                ""
                if report.end_hashed
                else " (recorded before run ends were chained: its status and end time "
                "are not covered)"
            )
            click.echo(
                clean(
                    f"OK {report.source} {report.run_id}: {report.event_count} records{erased}, "
                    f"head {report.head_hash}{legacy}"
                )
            )
    failed = [r for r in reports if not r.ok]
    if failed:
        bad = failed[0]
        where = f" (record {bad.first_bad_seq}, event {bad.first_bad_event_id})"
        fail_check(
            f"FAILED {bad.source} {bad.run_id}: {bad.reason}"
            + (where if bad.first_bad_seq is not None else "")
        )
