"""Shared CLI pieces: the group class, option stacks, store opening, error mapping, printing.

Rules this module keeps:

- Exit codes: 0 success, 1 a failed check (``fail_check``), 2 an error the user can act on
  (bad option or argument, unknown id, a database that is missing, not toolledger's,
  damaged or unreachable: every ``CheckpointError`` and ``OSError``), 3 an unexpected
  internal error (a bug; ``TOOLLEDGER_DEBUG=1`` shows its traceback). Every error is one
  line on stderr, never a traceback.
- Text that came from a database or a user (goals, justifications, names, tickets,
  reasons, error messages) is printed through ``clean`` (human output) or ``json_line``
  (JSON output): no control character from stored text reaches the terminal.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import CheckpointError, NotFoundError
from ..store import Store, open_store

__all__ = [
    "CONTEXT_SETTINGS",
    "EXIT_INTERNAL",
    "LIMIT",
    "RUN",
    "Group",
    "UsageError",
    "clean",
    "db_option",
    "fail_check",
    "get_store",
    "json_line",
    "not_found",
    "resolve_run",
]

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Exit status of an unexpected internal error (a bug, reported in one line).
EXIT_INTERNAL = 3

# Every C0 control, DEL and every C1 control (ESC starts CSI/OSC/DCS sequences; 0x9b and
# 0x9d are one-character CSI/OSC in 8-bit terminals), plus the characters that reorder
# or break a displayed line (bidirectional overrides and isolates, line/paragraph
# separators). Each is shown as a visible escape, so nothing is lost and nothing acts.
_UNSAFE = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_UNSAFE += [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CLEAN = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _UNSAFE if c >= 0x7F}


def clean(text: object) -> str:
    """Return ``text`` as one printable line: every control character made a visible escape.

    The one sanitiser for human-readable output: ``"\\x1b]52;c;…\\x07"`` prints as
    ``\\x1b]52;c;…\\x07``, inert. Newlines and tabs are escaped too (a field is one line).
    """
    return str(text).translate(_CLEAN)


def json_line(value: Any, **kwargs: Any) -> str:
    """Return ``json.dumps(value)`` (UTF-8 kept) with C1 and reordering characters escaped.

    ``json.dumps`` already escapes C0 controls; with ``ensure_ascii=False`` it would print
    C1 controls and bidirectional overrides raw. The escapes are valid JSON for the same
    string, so a machine reading the line gets exactly the stored text.
    """
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("sort_keys", True)
    return json.dumps(value, **kwargs).translate(_JSON_ESCAPES)


class UsageError(click.ClickException):
    """Exit 2 with one line on stderr (``Error: …``), its text cleaned."""

    exit_code = 2

    def format_message(self) -> str:
        return clean(" ".join(self.message.split()))


def _one_line_error(exc: BaseException) -> str:
    if isinstance(exc, CheckpointError):
        return f"{exc.code}: {exc.message}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return f"{type(exc).__name__}: {exc}"


class Group(click.Group):
    """The ``toolledger`` group: turns any error a command lets escape into one line."""

    def invoke(self, ctx: click.Context) -> Any:
        _escape_unencodable(sys.stdout)
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return result
        except BrokenPipeError:
            # The reader went away (``toolledger show RUN | head -1``): what it wanted
            # was printed. Exit 0 quietly, as ``git log | head`` users expect with
            # ``set -o pipefail`` off or on; later flushes go to /dev/null.
            _silence_stdout()
            ctx.exit(0)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except (CheckpointError, OSError) as exc:
            raise UsageError(_one_line_error(exc)) from exc
        except Exception as exc:
            if os.environ.get("TOOLLEDGER_DEBUG"):
                raise
            message = clean(" ".join(_one_line_error(exc).split()))[:500]
            click.echo(
                f"Error: internal error ({message}); TOOLLEDGER_DEBUG=1 shows the traceback",
                err=True,
            )
            ctx.exit(EXIT_INTERNAL)


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Show a warning as one line on stderr (``warning: …``), not Python's source excerpt."""
    click.echo(f"warning: {clean(' '.join(str(message).split()))}", err=True)


def _escape_unencodable(stream: Any) -> None:
    """On an output that cannot encode all of Unicode (``PYTHONIOENCODING=ascii``), print
    what it cannot as ``\\xe9`` escapes instead of failing with ``UnicodeEncodeError``."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is None or encoding.lower().replace("-", "") in ("utf8", "utf16", "utf32"):
        return
    with contextlib.suppress(ValueError, OSError, io.UnsupportedOperation):
        reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (a test runner's buffer): nothing will flush into a pipe


class _Limit(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A row limit: an integer >= 0; one past any table size means "no limit"."""

    name = "integer"

    #: SQL backends take a signed 64-bit LIMIT; larger asks mean the same thing.
    MAX = 2**63 - 1

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an integer", param, ctx)
        if number < 0:
            self.fail(f"{number} is negative", param, ctx)
        return min(number, self.MAX)


#: The type of every ``--limit`` option.
LIMIT = _Limit()


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


def get_store(ctx: click.Context, *, write: bool = False) -> Store:
    """Open the store named by ``--db``, mapping failures to a usage error (exit 2).

    Read-only unless ``write``: a reading command never creates a missing database (or
    its directory), never migrates one, and never adds tables to another application's
    SQLite file.
    """
    root = ctx.find_root()
    db = (root.obj or {}).get("db")
    try:
        return open_store(db, readonly=not write)
    except CheckpointError as exc:
        raise UsageError(f"cannot open {db or '.toolledger.db'}: {exc.message}") from exc


def not_found(exc: NotFoundError) -> UsageError:
    """Turn an unknown id into exit 2."""
    return UsageError(exc.message)


def fail_check(message: str) -> None:
    """Print ``message`` (cleaned, line by line) to stderr and exit 1 (a failed check)."""
    click.echo("\n".join(clean(line) for line in message.split("\n")), err=True)
    raise SystemExit(1)


#: How many candidates an ambiguous run-id prefix names.
_CANDIDATES = 5


def resolve_run(store: Store, ref: str) -> str:
    """Return the run id ``ref`` names: itself, ``latest``, or a unique prefix.

    An exact id wins (a run named ``latest`` included); ``latest`` is the most recently
    started run; otherwise ``ref`` must be the prefix of exactly one run id. An unknown
    id is returned unchanged (the command reports ``NOT_FOUND``); an ambiguous prefix is
    a usage error (exit 2) naming the candidates.
    """
    if store.get_run(ref) is not None:
        return ref
    if ref == "latest":
        newest = store.list_runs(limit=1)
        if not newest:
            raise UsageError("no run in this database: 'latest' names none")
        return newest[0].run_id
    if not ref:
        return ref
    found = sorted({row.run_id for row in store.list_runs() if row.run_id.startswith(ref)})
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(found[:_CANDIDATES])
        more = f" and {len(found) - _CANDIDATES} more" if len(found) > _CANDIDATES else ""
        raise UsageError(
            f"run id prefix {ref!r} is ambiguous: {len(found)} runs match "
            f"({shown}{more}); give more characters"
        )
    return ref


class _Run(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A run id, ``latest``, or a unique prefix of one (resolved against ``--db``)."""

    name = "run"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if ctx is None or ctx.resilient_parsing:  # shell completion: never open the db
            return text
        store = get_store(ctx)
        try:
            return resolve_run(store, text)
        except CheckpointError as exc:
            raise UsageError(_one_line_error(exc)) from exc
        finally:
            store.close()


#: The type of every argument or option naming a run: ``latest`` or a unique prefix works.
RUN = _Run()
