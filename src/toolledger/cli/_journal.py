"""Journal commands: runs, show, export, verify (``replay``: ``_replay``).

Data goes to stdout, diagnostics to stderr. An unknown run id is a usage error (exit 2);
a failed verification or a divergent replay exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..errors import InvalidArgumentError, NotFoundError
from . import main
from ._common import LIMIT, UsageError, clean, fail_check, get_store, json_line

__all__ = ["export", "runs", "show", "verify"]

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


@main.command()
@click.option("--namespace", default=None, help="Only runs of this namespace.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def runs(ctx: click.Context, namespace: str | None, limit: int, as_json: bool) -> None:
    """List runs, newest first: id, status, event counts, start, goal.

    Counts are events (a step's start and end records are one event): all, failed,
    refused (approvals), and still running or interrupted.

    Example: toolledger runs --limit 10
    """
    from ..journal import list_runs
    from ..journal._read import iter_rows

    store = get_store(ctx)
    try:
        if not as_json:
            click.echo(
                f"{'run':<32}  {'status':<11} {'events':>6} {'failed':>6} {'refused':>7}  "
                f"{'started':<19}  goal"
            )
        with _mapped():
            views = list_runs(store, namespace=namespace, limit=min(max(limit, 1), 100_000))
        views = views[:limit]
        for view in views:
            counts = _counts(iter_rows(store, view.run_id))
            if as_json:
                click.echo(
                    _dumps({**view.summary(), "records": view.event_count, "counts": counts})
                )
            else:
                goal = " ".join((view.goal or "").split())
                started = view.started_at.isoformat()[:19] if view.started_at else "-"
                click.echo(
                    clean(
                        f"{_cell(view.run_id):<32}  {_cell(view.status):<11} {counts['events']:>6} "
                        f"{counts['failed']:>6} {counts['refused']:>7}  {started:<19}  {goal[:80]}"
                    )
                )
    finally:
        store.close()


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
@click.argument("run_id")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the run and its merged events as JSON."
)
@click.pass_context
def show(ctx: click.Context, run_id: str, as_json: bool) -> None:
    """Show a run as a tree: kind, name, status, duration, and why.

    Example: toolledger show 3f2a…
    """
    from ..export._tree import tree_order
    from ..journal import load_run as load_public
    from ..journal._read import load_run

    store = get_store(ctx)
    try:
        with _mapped():
            if as_json:  # the merged view, as load_run gives it (one JSON document)
                click.echo(_dumps(load_public(store, run_id).to_dict()))
                return
            view = load_run(store, run_id)
    finally:
        store.close()
    row, facts = view.row, view.facts  # hashed values only, never the runs columns
    click.echo(clean(f"run {row.run_id}  {view.status}  agent={facts.agent or '-'}"))
    click.echo(clean(f"goal: {facts.goal if facts.goal is not None else '(erased)'}"))
    color = sys.stdout.isatty()
    for index, depth in tree_order(view.events):
        ev = view.events[index]
        status = clean("interrupted" if ev.get("interrupted") else ev.get("status"))
        indent = "  " * min(depth, 30) + (f"[{depth}] " if depth > 30 else "")
        dur = ev.get("duration_ms")
        timing = f" {dur:.1f}ms" if isinstance(dur, (int, float)) and dur else ""
        styled = click.style(status, fg=_status_color(status)) if color else status
        name = clean(" ".join(str(ev.get("name") or "").split()))
        click.echo(f"{indent}- {clean(ev.get('kind'))} {name} [{styled}]{timing}")
        extra = _detail_line(ev)
        if extra:
            click.echo(f"{indent}    {clean(extra)}")


def _status_color(status: str) -> str:
    if status in ("completed", "granted", "replayed"):
        return "green"
    if status in ("failed", "refused", "cancelled"):
        return "red"
    return "yellow"


def _detail_line(ev: dict[str, Any]) -> str:
    if ev.get("erased"):
        return "(content erased)"
    approval = ev.get("approval")
    if isinstance(approval, dict):
        if approval.get("granted") is None:  # requested, not decided yet
            ticket = approval.get("ticket")
            return "pending" + (f" (ticket {ticket})" if ticket else "")
        verdict = "granted" if approval.get("granted") else "refused"
        return f"{verdict} by {approval.get('by')}: {approval.get('reason') or ''}".strip()
    if ev.get("error"):
        err = ev["error"]
        return f"error {err.get('type')}: {' '.join(str(err.get('message')).split())[:200]}"
    if ev.get("justification"):
        return "why: " + " ".join(str(ev["justification"]).split())[:200]
    if ev.get("justification_missing"):
        return "why: (missing)"
    if ev.get("text"):
        return " ".join(str(ev["text"]).split())[:200]
    return ""


@main.command()
@click.argument("run_id")
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
    help="File to write (default RUN_ID.json|md|html).",
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
    path = output or f"{run_id}.{fmt}"
    store = get_store(ctx)
    try:
        with _mapped():
            row = store.get_run(run_id)
            if row is None:
                raise NotFoundError(message=f"no run {run_id!r} in this database")
            with _progress(row.event_count) as progress:
                info = fn(store, run_id, path, progress=progress)
    finally:
        store.close()
    click.echo(clean(info.path))
    click.echo(
        clean(
            f"wrote {info.path} ({info.event_count} records, {info.size} bytes, "
            f"head {info.head_hash})"
        ),
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
@click.argument("run_id", required=False)
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
    from ..journal._verify import VerifyReport, verify_export
    from ..journal._verify import verify as verify_run

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
