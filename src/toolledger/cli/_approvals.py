"""Approval commands ``approve``, ``deny``, ``approvals``: a thin layer over ``approvals``.

A gated call that waits (``status="awaiting_approval"``) is decided here, from any process
or host that can open the database; the call proceeds (or is denied) the next time it is
made. Data goes to stdout (``--json`` for machines), diagnostics to stderr. Exit codes:
0 decided (or already decided the same way) / listed; 1 the call was already decided
the other way (a decision is final); 2 usage errors (no such request, a bad age, a store
that cannot be opened).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from ..approvals import decide_approval, list_approvals
from ..errors import CheckpointError, InvalidTransitionError, NotFoundError
from ..retention import parse_age
from ..store import ApprovalRecord
from . import main
from ._common import CONTEXT_SETTINGS, LIMIT, UsageError, clean, fail_check, get_store, json_line
from ._table import Column, format_option, print_table, status_color

__all__ = ["approvals_command", "approve_command", "deny_command"]


def _age(since: datetime, now: datetime) -> str:
    """Return a short age such as ``45s``, ``12m03s``, ``3h05m`` or ``2d04h``."""
    seconds = max(0, int((now - since).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _preview(rec: ApprovalRecord) -> str | None:
    """The input as compact JSON (what the approver authorizes), when it was kept."""
    if rec.input is None:
        return None
    return json.dumps(rec.input, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _as_dict(rec: ApprovalRecord, now: datetime) -> dict[str, Any]:
    out = rec.to_dict()
    out.pop("v", None)
    out["age"] = _age(rec.requested_at, now)
    out["binding_fingerprint"] = rec.binding_fingerprint
    out["expired"] = rec.expired(now)
    return out


def _decide(
    ctx: click.Context,
    call_id: str,
    granted: bool,
    by: str,
    reason: str | None,
    namespace: str,
    expires_in: str | None,
    as_json: bool,
) -> None:
    expires_at = None
    if expires_in is not None:
        try:
            span = parse_age(expires_in)
        except CheckpointError as exc:
            raise UsageError(exc.message) from exc
        if span <= timedelta(0):
            raise UsageError("--expires-in must be longer than 0s")
        expires_at = datetime.now(timezone.utc) + span
    store = get_store(ctx, write=True)
    try:
        rec = decide_approval(store, namespace, call_id, granted, by, reason, expires_at=expires_at)
    except NotFoundError as exc:
        raise UsageError(exc.message) from exc
    except InvalidTransitionError as exc:
        fail_check(exc.message)
        return
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    finally:
        store.close()
    if as_json:
        click.echo(json_line(_as_dict(rec, datetime.now(timezone.utc)), indent=2, sort_keys=False))
        return
    verdict = "approved" if granted else "denied"
    line = f"{namespace}/{call_id} ({rec.binding.tool_name}) {verdict} by {rec.by}"
    if rec.reason:
        line += f": {rec.reason}"
    if rec.expires_at is not None:
        line += f" (expires {rec.expires_at.isoformat(timespec='seconds')})"
    click.echo(clean(line))
    click.echo(clean(f"bound to input {rec.binding.input_fingerprint}"), err=True)


_by = click.option("--by", required=True, help="Who decides (recorded with the decision).")
_reason = click.option("--reason", default=None, help="Why (told to the model on a denial).")
_namespace = click.option(
    "--namespace", default="default", show_default=True, help="The run's namespace."
)
_json = click.option("--json", "as_json", is_flag=True, help="Print the stored record as JSON.")


@main.command("approve", context_settings=CONTEXT_SETTINGS)
@click.argument("call_id")
@_by
@_reason
@_namespace
@click.option(
    "--expires-in",
    default=None,
    metavar="AGE",
    help="The approval stops counting after AGE (30m, 1h, 2d); the call then asks again.",
)
@_json
@click.pass_context
def approve_command(
    ctx: click.Context,
    call_id: str,
    by: str,
    reason: str | None,
    namespace: str,
    expires_in: str | None,
    as_json: bool,
) -> None:
    """Approve a waiting tool call; it runs (once) the next time it is made.

    The approval is bound to the call's tool, revision and input: it never authorizes
    another input. Exit 1 if the call was denied already.

    Example: toolledger --db ledger.db approve toolu_01 --by alice --expires-in 1h
    """
    _decide(ctx, call_id, True, by, reason, namespace, expires_in, as_json)


@main.command("deny", context_settings=CONTEXT_SETTINGS)
@click.argument("call_id")
@_by
@_reason
@_namespace
@_json
@click.pass_context
def deny_command(
    ctx: click.Context,
    call_id: str,
    by: str,
    reason: str | None,
    namespace: str,
    as_json: bool,
) -> None:
    """Deny a waiting tool call; it never runs (the call raises APPROVAL_DENIED).

    Exit 1 if the call was approved already.

    Example: toolledger --db ledger.db deny toolu_01 --by alice --reason "wrong recipient"
    """
    _decide(ctx, call_id, False, by, reason, namespace, None, as_json)


@main.command("approvals", context_settings=CONTEXT_SETTINGS)
@click.option("--pending", is_flag=True, help="Only requests that wait for a decision.")
@click.option("--namespace", default=None, help="Only this namespace.")
@click.option("--limit", type=LIMIT, default=None, help="At most N rows.")
@format_option()
@click.pass_context
def approvals_command(
    ctx: click.Context, pending: bool, namespace: str | None, limit: int | None, fmt: str
) -> None:
    """List approval requests and decisions, oldest request first, with their ages.

    --json prints one JSON array (indented) of the stored records.

    Example: toolledger --db ledger.db approvals --pending
    """
    store = get_store(ctx)
    try:
        rows = list_approvals(
            store, status="pending" if pending else None, namespace=namespace, limit=limit
        )
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    finally:
        store.close()
    now = datetime.now(timezone.utc)
    if fmt == "json":
        click.echo(json_line([_as_dict(r, now) for r in rows], indent=2, sort_keys=False))
        return
    if not rows and fmt == "table":
        click.echo("no pending approvals" if pending else "no approvals", err=True)
        return
    table = []
    for r in rows:
        b = r.binding
        table.append(
            {
                "age": _age(r.requested_at, now),
                "status": "expired" if r.expired(now) else r.status.value,
                "call": f"{b.namespace}/{b.call_id}",
                "tool": f"{b.tool_name}@{b.tool_revision}",
                "by": r.by,
                "ticket": r.ticket,
                "fingerprint": b.input_fingerprint[:19],
                "justification": r.justification,
                "input": _preview(r),
            }
        )
    print_table(_COLUMNS, table, fmt=fmt)


_COLUMNS = (
    Column("age", "age", right=True),
    Column("status", "status", color=status_color),
    Column("call", "call", cap=40),
    Column("tool", "tool", cap=30),
    Column("by", "by", cap=20),
    Column("ticket", "ticket", cap=20),
    Column("fingerprint", "fingerprint"),
    Column("justification", "justification", cap=60),
    Column("input", "input", cap=80),
)
