"""The ``toolledger`` command: a thin layer over the public API.

Data goes to stdout, diagnostics to stderr. Exit 0 on success, 1 on a failed check, 2 on
usage errors (an unknown run id, a database that is missing, damaged or unreachable), 3 on
an internal error; every error is one line, never a traceback (``_common.Group``).
Commands live in one module per area and register themselves on ``main``.
"""

from __future__ import annotations

import click

from .._version import __version__
from ._common import CONTEXT_SETTINGS, Group, db_option

__all__ = ["main"]


@click.group(cls=Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="toolledger")
@db_option
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    """Inspect, export, verify and replay toolledger runs and checkpoints.

    Example: toolledger --db .toolledger.db runs
    """
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


def _register() -> None:
    # Each area module adds its commands to ``main`` when imported.
    from . import _admin, _approvals, _journal, _otlp, _replay, _search, _settle, _site, _tools  # noqa: F401


_register()
