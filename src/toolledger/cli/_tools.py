"""``toolledger lint-tools``: readiness diagnostics for tool definitions.

A thin layer over ``toolledger.check_tool``. Diagnostics (the data) go to stdout, one per
line, or as JSON with ``--json``; the summary goes to stderr. Exit 0 when no diagnostic is
an error, 1 when one is (a failed check), 2 on usage errors (a target that cannot be
imported or holds no tools).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import click

from ..errors import CheckpointError
from ..readiness import check_tool, tool_name
from . import main
from ._common import CONTEXT_SETTINGS, UsageError, clean, json_line

__all__ = ["lint_tools", "load_target", "tools_of"]


def load_target(spec: str) -> Any:
    """Import ``module:attribute`` (the attribute may be dotted) from the working directory.

    Raises:
        UsageError: the spec is malformed, or the module or attribute is missing (exit 2).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"expected MODULE:ATTRIBUTE, got {spec!r}")
    if os.getcwd() not in sys.path:  # like `python -m`: modules of the project are found
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's target, not ours
        raise UsageError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError as exc:
            raise UsageError(f"{spec}: no attribute {part!r}") from exc
    return value


def tools_of(value: Any) -> list[Any]:
    """Return the tools a target holds: one tool, a sequence, or an MCP tool listing.

    An MCP ``ListToolsResult`` (``.tools``) or a listing dict (``{"tools": [...]}``) gives
    each of its tools, and so does an MCP server object (its async ``list_tools()``); a
    mapping that is itself a tool gives that tool.
    """
    listed = getattr(value, "tools", None)
    if isinstance(listed, (list, tuple)):
        return list(listed)
    lister = getattr(value, "list_tools", None)
    if inspect.iscoroutinefunction(lister):  # an MCP server object (FastMCP / MCPServer)
        found = asyncio.run(lister())
        return list(getattr(found, "tools", found))
    if isinstance(value, Mapping):
        inner = value.get("tools")
        if isinstance(inner, (list, tuple)) and "name" not in value:
            return list(inner)
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return list(value)
    return [value]


@main.command("lint-tools", context_settings=CONTEXT_SETTINGS)
@click.argument("targets", nargs=-1, required=True, metavar="MODULE:ATTRIBUTE...")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnostics as JSON.")
def lint_tools(targets: tuple[str, ...], as_json: bool) -> None:
    """Check tool definitions for what models misuse or what is unsafe.

    Each MODULE:ATTRIBUTE names a toolledger tool, an Anthropic/OpenAI tool dict, an MCP
    tool, a list/listing of them, or an MCP server object (FastMCP / MCPServer). Prints
    one line per diagnostic (TOOL  SEVERITY  CODE  PATH  MESSAGE); exits 1 when any is an
    error.

    Example: toolledger lint-tools myagent.tools:TOOLS
    """
    rows: list[dict[str, str]] = []
    count = 0
    for spec in targets:
        for tool in tools_of(load_target(spec)):
            count += 1
            try:
                found = check_tool(tool)
            except CheckpointError as exc:
                raise UsageError(f"{spec}: {exc.message}") from exc
            name = tool_name(tool)
            rows.extend(
                {
                    "target": spec,
                    "tool": name,
                    "severity": d.severity,
                    "code": d.code,
                    "path": d.path,
                    "message": d.message,
                }
                for d in found
            )
    if as_json:
        click.echo(json_line(rows, indent=2, sort_keys=False))
    else:
        for row in rows:
            click.echo(
                "\t".join(clean(row[k]) for k in ("tool", "severity", "code", "path", "message"))
            )
    errors = sum(1 for row in rows if row["severity"] == "error")
    warnings = len(rows) - errors
    click.echo(
        f"lint-tools: {count} tool{'s' if count != 1 else ''}, {errors} error"
        f"{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}",
        err=True,
    )
    if errors:
        raise SystemExit(1)
