"""Replay commands: ``replay`` (list a run, or re-drive a command from it), ``fork``, ``diff``.

``toolledger replay RUN -- CMD [ARGS...]`` and ``toolledger fork RUN --at EVENT -- CMD``
run the command with ``TOOLLEDGER_REPLAY_OF`` (and ``TOOLLEDGER_FORK_AT``,
``TOOLLEDGER_ON_DIVERGENCE``, ``TOOLLEDGER_DB``) set, so ``toolledger.run()`` in it
replays; the report is read back from the journal (the new run's ``replay`` event), never
from the command's output. Exit 0: no divergence; 1: diverged, or the command failed or
made no replayed run; 2: usage (an unknown run or event, no command).
"""

from __future__ import annotations

import difflib
import html
import json
import os
import subprocess
from datetime import datetime, timezone
from typing import Any

import click

from ..errors import CheckpointError, InvalidArgumentError, NotFoundError
from . import main
from ._common import RUN, UsageError, clean, fail_check, get_store, json_line
from ._table import Column, print_table, status_color

__all__ = ["diff", "fork", "replay"]


_LISTING = (
    Column("seq", "seq", right=True),
    Column("event", "event_id"),
    Column("parent", "parent_id"),
    Column("kind", "kind"),
    Column("name", "name", cap=40),
    Column("status", "status", color=status_color),
)


def _listing(
    ctx: click.Context, run_id: str, from_event: str | None, other: str | None, fmt: str
) -> None:
    """The run's events in recorded order (a table, or JSON lines), or the first divergence."""
    from ..replay import Replayer

    store = get_store(ctx)
    try:
        replayer = Replayer(store)
        try:
            if other is not None:
                div = replayer.diff(run_id, other)
                if div is None:
                    click.echo(clean(f"no divergence between {run_id} and {other}"))
                    return
                click.echo(
                    json_line(
                        {
                            "index": div.index,
                            "field": div.field,
                            "reason": div.reason,
                            "a": div.a,
                            "b": div.b,
                        }
                    )
                )
                fail_check(f"runs diverge: {div.reason}")
                return
            keys = ("seq", "event_id", "parent_id", "kind", "name", "status")
            rows = []
            for item in replayer.replay(run_id, from_event=from_event):
                ev = item.event
                if fmt == "json":
                    fields = (*keys, "inputs", "outputs", "error")
                    click.echo(json_line({k: ev.get(k) for k in fields}))
                else:
                    rows.append({k: ev.get(k) for k in keys})
            if fmt != "json":
                print_table(_LISTING, rows, fmt=fmt)
        except (NotFoundError, InvalidArgumentError) as exc:
            raise UsageError(exc.message) from exc
    finally:
        store.close()


def _source_checked(ctx: click.Context, run_id: str, at: str | None) -> None:
    """Check the source run (and event) exist."""
    from ..journal import load_run

    store = get_store(ctx)
    try:
        view = load_run(store, run_id)
        if at is not None and not any(e.event_id == at for e in view.events):
            raise UsageError(f"run {run_id} has no event {at!r}")
    except NotFoundError as exc:
        raise UsageError(exc.message) from exc
    finally:
        store.close()


def _reports(ctx: click.Context, source: str, since: datetime) -> list[dict[str, Any]]:
    """The replay reports of the runs started since the command was, from ``source``."""
    from ..journal import list_runs, load_run

    store = get_store(ctx)
    try:
        found = []
        for view in reversed(list_runs(store, since=since, limit=100_000)):
            for ev in load_run(store, view.run_id).events:
                out = ev.outputs
                if (
                    ev.kind == "replay"
                    and isinstance(out, dict)
                    and out.get("source_run_id") == source
                ):
                    found.append({"run_id": view.run_id, **out})
        return found
    finally:
        store.close()


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str).split("\n")


def _calls(count: Any, kind: str) -> str:
    """``1 tool call``, ``2 tool calls``."""
    return f"{count} {kind} call{'' if count == 1 else 's'}"


def _print_report(report: dict[str, Any]) -> None:
    click.echo(
        clean(
            f"run {report['run_id']} ({report.get('mode')} of {report.get('source_run_id')}): "
            f"{_calls(report.get('served_model_calls'), 'model')} and "
            f"{_calls(report.get('served_tool_calls'), 'tool')} served from the record"
        )
    )
    if report.get("live_from"):
        click.echo(clean(f"live from event {report['live_from']}"))
    div = report.get("divergence")
    if not div:
        click.echo("no divergence")
        return
    click.echo(
        clean(
            f"diverged at {div.get('kind')} {div.get('index')} ({div.get('name')}): "
            f"{div.get('field')} differs"
        )
    )
    lines = difflib.unified_diff(
        _pretty(div.get("recorded")), _pretty(div.get("now")), "recorded", "now", lineterm=""
    )
    for line in lines:
        click.echo(clean(line))


def _drive(
    ctx: click.Context,
    run_id: str,
    command: tuple[str, ...],
    *,
    at: str | None,
    on_divergence: str | None,
    as_json: bool,
) -> None:
    _source_checked(ctx, run_id, at)
    env = dict(os.environ)
    env["TOOLLEDGER_REPLAY_OF"] = run_id
    env.pop("TOOLLEDGER_FORK_AT", None)
    if at is not None:
        env["TOOLLEDGER_FORK_AT"] = at
    if on_divergence is not None:
        env["TOOLLEDGER_ON_DIVERGENCE"] = on_divergence
    db = (ctx.find_root().obj or {}).get("db")
    if db:
        env["TOOLLEDGER_DB"] = db
    since = datetime.now(timezone.utc)
    try:
        code = subprocess.call(list(command), env=env)
    except OSError as exc:
        raise UsageError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from exc
    reports = _reports(ctx, run_id, since)
    for report in reports:
        if as_json:
            click.echo(json_line({**report, "exit_code": code}))
        else:
            _print_report(report)
    if not reports:
        fail_check(f"the command (exit {code}) made no run replaying {run_id}")
    if any(r.get("divergence") for r in reports):
        raise SystemExit(1)
    if code != 0:
        fail_check(f"the command failed (exit {code})")


_DIVERGENCE = click.Choice(["raise", "live"])


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("run_id", type=RUN)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--from", "from_event", default=None, help="List from this event id.")
@click.option(
    "--diff", "other", type=RUN, default=None, help="Name the first divergence from this run."
)
@click.option(
    "--on-divergence", type=_DIVERGENCE, default=None, help="With a command: raise or go live."
)
@click.option(
    "--json", "as_json", is_flag=True, help="The listing as JSON lines; with a command: the report."
)
@click.option("--csv", "as_csv", is_flag=True, help="The listing as CSV.")
@click.pass_context
def replay(
    ctx: click.Context,
    run_id: str,
    command: tuple[str, ...],
    from_event: str | None,
    other: str | None,
    on_divergence: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """List a run's events (a table; --json: JSON lines), or re-run a command from its record.

    With a command (after --), it runs with TOOLLEDGER_REPLAY_OF=RUN_ID: model calls
    through journaled clients are answered from the record, tool calls by their
    checkpoints. Prints the report; exit 0 no divergence, 1 diverged or the command
    failed, 2 usage.

    Example: toolledger replay 3f2a… -- python agent.py
    """
    if not command:
        _listing(
            ctx, run_id, from_event, other, "json" if as_json else "csv" if as_csv else "table"
        )
        return
    _drive(ctx, run_id, command, at=None, on_divergence=on_divergence, as_json=as_json)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("run_id", type=RUN)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option("--at", "at", required=True, help="The source event where the run goes live.")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.pass_context
def fork(ctx: click.Context, run_id: str, command: tuple[str, ...], at: str, as_json: bool) -> None:
    """Re-run a command from a run's record up to an event, live from there.

    Example: toolledger fork 3f2a… --at 01a2… -- python agent.py
    """
    _drive(ctx, run_id, command, at=at, on_divergence=None, as_json=as_json)


def _cell(ev: dict[str, Any] | None) -> str:
    if ev is None:
        return '<td class="none">(no event)</td>'
    body = {k: ev.get(k) for k in ("status", "text", "inputs", "outputs", "error") if ev.get(k)}
    text = json.dumps(body, indent=1, ensure_ascii=False, default=str)
    return (
        f"<td><b>{html.escape(str(ev.get('kind')))}</b> {html.escape(str(ev.get('name')))}"
        f"<pre>{html.escape(text)}</pre></td>"
    )


_STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#1f2328}
table{border-collapse:collapse;width:100%;table-layout:fixed}
td,th{border:1px solid #d0d7de;padding:.4em;vertical-align:top;text-align:left}
th{background:#f6f8fa}pre{white-space:pre-wrap;word-break:break-all;font-size:12px;margin:.3em 0}
tr.same td{color:#57606a}tr.diverged td{background:#fff1e5;border-color:#bc4c00}
.badge{background:#bc4c00;color:#fff;border-radius:1em;padding:0 .6em;font-size:12px;
white-space:nowrap}
td.none{color:#8c959f;font-style:italic}"""


def _diff_html(
    a: str, b: str, ea: list[dict[str, Any]], eb: list[dict[str, Any]], at: int | None
) -> str:
    rows = []
    for i in range(max(len(ea), len(eb))):
        x = ea[i] if i < len(ea) else None
        y = eb[i] if i < len(eb) else None
        cls = "diverged" if i == at else "same" if at is None or i < at else "after"
        mark = ' <span class="badge">first divergence</span>' if i == at else ""
        anchor = ' id="first-divergence"' if i == at else ""
        rows.append(f'<tr class="{cls}"{anchor}><th>{i}{mark}</th>{_cell(x)}{_cell(y)}</tr>')
    head = (
        "no divergence"
        if at is None
        else f'first divergence at event {at} (<a href="#first-divergence">go</a>)'
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f"<title>toolledger diff {html.escape(a)} {html.escape(b)}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f'<h1>diff</h1><p>{head}</p><table><colgroup><col style="width:11em"><col><col>'
        f"</colgroup><tr><th>#</th><th>{html.escape(a)}</th><th>{html.escape(b)}</th></tr>"
        + "".join(rows)
        + "</table></body></html>\n"
    )


@main.command()
@click.argument("run_a", type=RUN)
@click.argument("run_b", type=RUN)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", "output", default=None, help="Write to this file.")
@click.pass_context
def diff(ctx: click.Context, run_a: str, run_b: str, fmt: str, output: str | None) -> None:
    """Show two runs side by side with their first divergence marked.

    Events are compared in recorded order (kind, name, status, inputs, outputs, error;
    ids and times are ignored). Exit 0 when the runs agree, 1 when they diverge.

    Example: toolledger diff 3f2a… 9c41… --format html -o diff.html
    """
    from ..journal import load_stored_run
    from ..replay import Replayer

    store = get_store(ctx)
    try:
        try:
            div = Replayer(store).diff(run_a, run_b)
            ea = load_stored_run(store, run_a).events
            eb = load_stored_run(store, run_b).events
        except (NotFoundError, InvalidArgumentError) as exc:
            raise UsageError(exc.message) from exc
        except CheckpointError as exc:
            raise UsageError(exc.message) from exc
    finally:
        store.close()
    at = None if div is None else div.index
    if fmt == "html":
        text = _diff_html(run_a, run_b, ea, eb, at)
    elif fmt == "json":
        text = (
            json_line(
                {
                    "a": run_a,
                    "b": run_b,
                    "divergence": None
                    if div is None
                    else {"index": div.index, "field": div.field, "reason": div.reason},
                }
            )
            + "\n"
        )
    else:
        lines = [f"{run_a} vs {run_b}"]
        for i in range(max(len(ea), len(eb))):
            x = ea[i] if i < len(ea) else {}
            y = eb[i] if i < len(eb) else {}
            flag = ">>" if i == at else "  "
            lines.append(
                clean(
                    f"{flag} {i:4d} {x.get('kind')} {x.get('name')} [{x.get('status')}] | "
                    f"{y.get('kind')} {y.get('name')} [{y.get('status')}]"
                )
            )
        lines.append("no divergence" if div is None else clean(f"first divergence: {div.reason}"))
        text = "\n".join(lines) + "\n"
    if output is not None:
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from exc
    else:
        click.echo(text, nl=False)
    if div is not None:
        raise SystemExit(1)
