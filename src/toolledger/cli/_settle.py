"""Settling commands: ``checkpoints`` (the queue), ``resolve`` (a person), ``reconcile`` (tools).

A thin layer over ``toolledger.settle``. Data goes to stdout (``--json``: one object a
line), diagnostics to stderr. Exit codes: 0 done (listed, settled, reconciled or a dry
run), 1 refused (``resolve``: the call is not executing/uncertain, or is executing without
``--force``: a live attempt may hold it), 2 usage errors (bad options, an unknown call, a
``--tools`` that does not import, a store that cannot be opened).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import click

from ..checkpoint.model import CheckpointRecord, Status
from ..errors import CheckpointError, FenceConflictError, InvalidTransitionError
from ..settle import ReconcileItem, reconcile, resolve
from ..tools import Tool
from . import main
from ._common import LIMIT, UsageError, clean, fail_check, get_store, json_line
from ._table import Column, format_option, print_table, status_color

__all__ = ["checkpoints", "reconcile_command", "resolve_command"]

_QUEUE = ["executing", "uncertain", "completed", "delivering"]


@main.command()
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["ready", "executing", "uncertain", "completed", "delivering", "delivered"]),
    help="Statuses to list (repeatable; default: the reconcile queue: executing, uncertain, "
    "completed, delivering).",
)
@click.option("--namespace", default=None, help="Only this namespace.")
@click.option("--limit", type=LIMIT, default=100, show_default=True, help="At most this many.")
@format_option()
@click.pass_context
def checkpoints(
    ctx: click.Context, statuses: tuple[str, ...], namespace: str | None, limit: int, fmt: str
) -> None:
    """List checkpoints waiting for reconciliation or delivery, oldest first.

    Each line says why the call is where it is (reason), how long (age), and what it
    blocks: the same action (tool, revision, input fingerprint) asked under another call id
    is not executed until this call is settled (toolledger resolve / reconcile).

    Example: toolledger checkpoints --status uncertain
    """
    store = get_store(ctx)
    now = datetime.now(timezone.utc)
    try:
        try:
            records = store.list(status=list(statuses) or _QUEUE, namespace=namespace, limit=limit)
        except CheckpointError as exc:
            raise UsageError(exc.message) from exc
        rows = [_row(rec, now) for rec in records]
    finally:
        store.close()
    if fmt == "json":
        for row in rows:
            click.echo(json_line(row))
    else:
        print_table(_COLUMNS, [_cells(row) for row in rows], fmt=fmt)


def _row(rec: CheckpointRecord, now: datetime) -> dict[str, Any]:
    ns, call_id = rec.key
    age = (now - rec.updated_at).total_seconds()
    row: dict[str, Any] = {
        "namespace": ns,
        "call_id": call_id,
        "tool": rec.binding.tool_name,
        "status": rec.status.value,
        "revision": rec.revision,
        "updated_at": rec.updated_at.isoformat(),
        "age_seconds": round(age, 3),
        "reason": _reason(rec, now),
        "blocks": None,
    }
    if rec.status in (Status.EXECUTING, Status.UNCERTAIN):
        # Calls refused with same_action_as are not stored: name the action they share.
        row["blocks"] = {
            "same_action": {
                "tool": rec.binding.tool_name,
                "revision": rec.binding.tool_revision,
                "input_fingerprint": rec.binding.input_fingerprint,
            },
            "call_ids": None,
        }
    if rec.resolution is not None:
        row["resolution"] = rec.resolution.to_dict()
    return row


def _reason(rec: CheckpointRecord, now: datetime) -> str:
    if rec.status is Status.UNCERTAIN:
        return rec.uncertain_reason or "outcome unknown"
    if rec.status is Status.EXECUTING:
        since = rec.execution_claimed_at or rec.updated_at
        return (
            f"executing since {since.isoformat()} ({_age((now - since).total_seconds())}) "
            f"under attempt {rec.execution_fence}: a live attempt may hold it, or its "
            "process died"
        )
    if rec.status is Status.COMPLETED:
        how = " (resolved by a person)" if rec.resolution is not None else ""
        return f"result stored{how}, not yet delivered"
    if rec.status is Status.DELIVERING:
        return f"delivery claimed (attempt {rec.delivery_attempts}); the post may have landed"
    if rec.status is Status.READY:
        return "created or released; the next call executes"
    return "delivered"


_COLUMNS = (
    Column("call", "call", cap=40),
    Column("tool", "tool", cap=24),
    Column("status", "status", color=status_color),
    Column("rev", "revision", right=True),
    Column("age", "age", right=True),
    Column("blocks (same action)", "blocks"),
    Column("reason", "reason"),
)


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    """A table row: the call, its age, and the action it blocks as ``TOOL@REV sha256:…``."""
    blocks = row["blocks"]
    same = blocks["same_action"] if blocks is not None else None
    return {
        **row,
        "call": f"{row['namespace']}/{row['call_id']}",
        "age": _age(row["age_seconds"]),
        "blocks": f"{same['tool']}@{same['revision']} {same['input_fingerprint'][:19]}"
        if same
        else None,
    }


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


@main.command("resolve")
@click.argument("call_id")
@click.option("--not-executed", "not_executed", is_flag=True, help="It never took effect.")
@click.option("--result", "result_json", metavar="JSON", help="It completed with this result.")
@click.option("--error", "error_text", metavar="TEXT", help="It failed: the error the model gets.")
@click.option("--by", required=True, help="Who decides (recorded).")
@click.option("--reason", required=True, help="Why (recorded).")
@click.option("--namespace", default="default", show_default=True, help="The call's namespace.")
@click.option(
    "--force", is_flag=True, help="Settle an executing call (a live attempt may hold it)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the settlement as JSON.")
@click.pass_context
def resolve_command(
    ctx: click.Context,
    call_id: str,
    not_executed: bool,
    result_json: str | None,
    error_text: str | None,
    by: str,
    reason: str,
    namespace: str,
    force: bool,
    as_json: bool,
) -> None:
    """Settle a stuck (executing or uncertain) call by a person's decision.

    Exactly one of --not-executed (the claim is released: the next call executes),
    --result JSON (stored and delivered like any result) or --error TEXT (an is_error
    result). Recorded with who and why in the checkpoint history and the run's journal.

    Example: toolledger resolve toolu_01 --not-executed --by ana --reason "no charge at the bank"
    """
    chosen = [n for n, v in (("--not-executed", not_executed), ("--result", result_json),
                             ("--error", error_text)) if v not in (None, False)]  # fmt: skip
    if len(chosen) != 1:
        raise UsageError("give exactly one of --not-executed, --result JSON, --error TEXT")
    result: Any = None
    if result_json is not None:
        try:
            result = json.loads(result_json)
        except ValueError as exc:
            raise UsageError(f"--result is not JSON: {exc}") from exc
    outcome = "not_executed" if not_executed else "completed" if result_json else "failed"
    store = get_store(ctx, write=True)
    try:
        settled = resolve(
            store, call_id, namespace=namespace, outcome=outcome, result=result,
            error=error_text, by=by, reason=reason, force=force,
        )  # fmt: skip
    except (InvalidTransitionError, FenceConflictError) as exc:
        fail_check(f"{exc.code}: {exc.message}")
    finally:
        store.close()
    if as_json:
        click.echo(json_line({k: getattr(settled, k) for k in settled.__slots__}))
        return
    where = f"journal: run {settled.run_id}" if settled.run_id else "journal: no run holds it"
    if settled.journal_error:
        where = f"journal: not recorded ({settled.journal_error})"
    click.echo(
        clean(
            f"{settled.namespace}/{settled.call_id}  {settled.tool_name}  {outcome} -> "
            f"{settled.status}  rev {settled.revision}  by {settled.by}  {where}"
        )
    )


@main.command("reconcile")
@click.option(
    "--tools",
    "tools_spec",
    required=True,
    metavar="MODULE:ATTR",
    help="The tools to reconcile: a Tool, or a list/dict of them (e.g. myapp.tools:TOOLS).",
)
@click.option("--apply", "do_apply", is_flag=True, help="Act on the proofs (default: dry run).")
@click.option("--force", is_flag=True, help="Also executing calls (no process runs them).")
@click.option("--by", default="toolledger reconcile", show_default=True, help="Recorded as who.")
@click.option("--namespace", default=None, help="Only this namespace.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def reconcile_command(
    ctx: click.Context,
    tools_spec: str,
    do_apply: bool,
    force: bool,
    by: str,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Run each tool's own recover over its executing/uncertain calls.

    A dry run prints what it would do. With --apply: a proof (Recovered) completes the
    call; not proven with an empty operation journal (proven pre-effect) releases it;
    anything else is kept for a person (toolledger resolve).

    Example: toolledger reconcile --tools myapp.tools:TOOLS --apply
    """
    tools = list(_load_tools(tools_spec))
    store = get_store(ctx, write=do_apply)
    try:
        items = reconcile(store, tools, namespace=namespace, apply=do_apply, force=force, by=by)
    finally:
        store.close()
    for item in items:
        click.echo(json_line(_item(item)) if as_json else clean(_item_line(item, do_apply)))
    if not items:
        click.echo("nothing to reconcile for these tools", err=True)


def _item(item: ReconcileItem) -> dict[str, Any]:
    out = {k: getattr(item, k) for k in item.__slots__ if k != "settled"}
    if item.settled is not None:
        out["revision"] = item.settled.revision
        out["status_after"] = item.settled.status
    return out


def _item_line(item: ReconcileItem, applied: bool) -> str:
    verb = item.action if applied and item.applied else f"would {item.action}"
    if item.action in ("keep", "skip"):
        verb = item.action
    return f"{item.namespace}/{item.call_id}  {item.tool_name}  {item.status}  {verb}: {item.why}"


def _load_tools(spec: str) -> Iterator[Tool]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--tools must be MODULE:ATTR; got {spec!r}")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--tools {spec}: {type(exc).__name__}: {exc}") from exc
    items = value.values() if isinstance(value, dict) else value
    if isinstance(items, Tool):
        items = [items]
    try:
        found = list(items)
    except TypeError as exc:
        raise UsageError(f"--tools {spec} is not a Tool or a list/dict of tools") from exc
    for tool in found:
        if not isinstance(tool, Tool):
            raise UsageError(f"--tools {spec} holds a {type(tool).__name__}, not a Tool")
        yield tool
