"""Shared CLI pieces: option stacks, store opening, error mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import CheckpointError, NotFoundError
from ..store import Store, open_store

__all__ = ["CONTEXT_SETTINGS", "UsageError", "db_option", "fail_check", "get_store"]

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def db_option(fn: F) -> F:
    """Add ``--db`` (env ``TOOLLEDGER_DB``; default ``.toolledger.db``)."""
    return click.option(
        "--db",
        envvar="TOOLLEDGER_DB",
        default=None,
        metavar="PATH|URL",
        help="Database: a SQLite path, sqlite:///path or postgresql:// DSN "
        "(env TOOLLEDGER_DB; default .toolledger.db).",
    )(fn)


class UsageError(click.UsageError):
    """Exit 2 with a message on stderr."""


def get_store(ctx: click.Context) -> Store:
    """Open the store named by ``--db``, mapping failures to a usage error (exit 2)."""
    root = ctx.find_root()
    db = (root.obj or {}).get("db")
    try:
        return open_store(db)
    except CheckpointError as exc:
        raise UsageError(f"cannot open {db or '.toolledger.db'}: {exc.message}") from exc


def not_found(exc: NotFoundError) -> UsageError:
    """Turn an unknown id into exit 2."""
    return UsageError(exc.message)


def fail_check(message: str) -> None:
    """Print ``message`` to stderr and exit 1 (a failed check)."""
    click.echo(message, err=True)
    raise SystemExit(1)
