"""The one look of every listing: an aligned table with a header, CSV, colour on a TTY only.

Rules this module keeps:

- Every cell passes through ``clean`` (the terminal sanitiser): a table, a CSV row or a
  tree line never carries a control character from stored text.
- Colour only on a terminal (``click.echo`` strips it from pipes and files) and never when
  ``NO_COLOR`` is set (https://no-color.org). The only escape sequences written are SGR
  colours.
- Columns are aligned by display width (wide characters count two); a cell longer than
  its column's cap is cut with ``…`` (``...`` when stdout cannot encode it).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

import click

from ._common import clean

__all__ = [
    "Column",
    "color_enabled",
    "echo_lines",
    "ellipsis",
    "fit",
    "format_option",
    "iso",
    "print_table",
    "status_color",
    "style",
    "unicode_ok",
    "width",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, the row key it shows, its alignment and cap."""

    header: str
    key: str
    right: bool = False
    #: Cells wider than this are cut with an ellipsis (``None``: never).
    cap: int | None = None
    #: The colour of a cell's value (``None``: plain).
    color: Callable[[str], str | None] | None = None


def format_option(*, csv: bool = True) -> Callable[[F], F]:
    """Add ``--json`` (and ``--csv`` for tables) as one ``fmt`` parameter.

    ``fmt`` is ``"json"``, ``"csv"`` or ``"table"`` (neither flag given).
    """

    def decorate(fn: F) -> F:
        if csv:
            fn = click.option(
                "--csv",
                "fmt",
                flag_value="csv",
                callback=_table_by_default,
                help="CSV with a header row (control characters escaped as in the table).",
            )(fn)
        return click.option(
            "--json",
            "fmt",
            flag_value="json",
            callback=_table_by_default,
            help="JSON (one object per line).",
        )(fn)

    return decorate


def _table_by_default(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    return value or "table"


def color_enabled() -> bool:
    """Whether to style output: not when ``NO_COLOR`` is set (click strips it off a TTY)."""
    return not os.environ.get("NO_COLOR")


def style(text: str, fg: str | None, *, bold: bool = False) -> str:
    """``text`` in colour ``fg`` when colour is enabled, else unchanged."""
    if (fg is None and not bold) or not color_enabled():
        return text
    return click.style(text, fg=fg, bold=bold or None)


def status_color(status: str) -> str | None:
    """The colour of a status: green done, red refused or failed, yellow waiting."""
    if status in ("completed", "granted", "replayed", "approved", "delivered", "ok"):
        return "green"
    if status in ("failed", "refused", "cancelled", "denied", "diverged", "expired"):
        return "red"
    if status in ("-", ""):
        return None
    return "yellow"


def unicode_ok(stream: Any = None) -> bool:
    """Whether ``stream`` (stdout) can encode the tree and ellipsis characters."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "ascii"
    try:
        "├─│└…".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def ellipsis() -> str:
    return "…" if unicode_ok() else "..."


def width(text: str) -> int:
    """Display width: East Asian wide and full-width characters count two, combining zero."""
    if text.isascii():
        return len(text)
    total = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def fit(text: str, cap: int | None) -> str:
    """``text`` cut to at most ``cap`` columns, the cut marked with an ellipsis."""
    if cap is None or width(text) <= cap:
        return text
    mark = ellipsis()
    room = max(cap - len(mark), 1)
    out, used = [], 0
    for ch in text:
        w = width(ch)
        if used + w > room:
            break
        out.append(ch)
        used += w
    return "".join(out) + mark


def _pad(text: str, size: int, right: bool) -> str:
    gap = " " * max(size - width(text), 0)
    return gap + text if right else text + gap


def iso(value: datetime | None) -> str:
    """An ISO-8601 time with its offset, to the second (``-`` when unknown)."""
    if value is None:
        return "-"
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat(timespec="seconds")


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else clean(" ".join(str(value).split()))


def table_lines(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The table as lines: a header and one aligned line per row, cells sanitised."""
    cells = [[_cell(row.get(c.key)) for c in columns] for row in rows]
    last = len(columns) - 1
    tail_cap = columns[last].cap
    if sys.stdout.isatty():  # the free last column stops at the terminal's edge
        used = sum(
            min(max([width(col.header)] + [width(r[i]) for r in cells]), col.cap or 10**9) + 2
            for i, col in enumerate(columns[:last])
        )
        room = max(shutil.get_terminal_size().columns - used, 20)
        tail_cap = room if tail_cap is None else min(tail_cap, room)
    caps = [c.cap for c in columns[:last]] + [tail_cap]
    cells = [[fit(text, caps[i]) for i, text in enumerate(r)] for r in cells]
    widths = [max([width(c.header)] + [width(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [
        style(
            "  ".join(
                _pad(c.header, widths[i], c.right) if i < last else c.header
                for i, c in enumerate(columns)
            ).rstrip(),
            None,
            bold=True,
        )
    ]
    for r in cells:
        parts = []
        for i, (col, text) in enumerate(zip(columns, r, strict=True)):
            padded = _pad(text, widths[i], col.right) if i < last else text
            fg = col.color(text) if col.color is not None else None
            parts.append(style(padded, fg) if fg else padded)
        lines.append("  ".join(parts).rstrip())
    return lines


def csv_text(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> str:
    """The table as CSV (a header row first), every cell sanitised, uncut."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.header for c in columns])
    for row in rows:
        writer.writerow([_cell(row.get(c.key)) for c in columns])
    return out.getvalue()


def print_table(
    columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], *, fmt: str = "table"
) -> None:
    """Print ``rows`` as an aligned table (``fmt="table"``) or CSV (``fmt="csv"``)."""
    if fmt == "csv":
        click.echo(csv_text(columns, rows), nl=False)
        return
    for line in table_lines(columns, rows):
        click.echo(line)


def echo_lines(lines: Sequence[str], *, pager: bool) -> None:
    """Print ``lines``; through the pager when ``pager`` and they overflow the terminal."""
    if pager and sys.stdout.isatty() and len(lines) > shutil.get_terminal_size().lines - 1:
        click.echo_via_pager("\n".join(lines) + "\n")
        return
    for line in lines:
        click.echo(line)
