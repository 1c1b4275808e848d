"""SQLite connections for ``SQLiteStore``: opening, pragmas, transactions, driver errors.

The twin of ``_pg_conn.py`` for the embedded store. Rules:

- Pragmas are set once per connection at open (``connect``): ``busy_timeout``, WAL,
  ``synchronous = NORMAL`` and, when the store runs its own checkpoint rounds, SQLite's
  auto-checkpoint only as a far backstop. A file written by a newer toolledger is refused
  before anything (even the journal mode) touches it. ``connect_readonly`` opens
  ``mode=ro``, and ``immutable`` on a read-only mount only when that skips no WAL content.
- Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` (``SQLiteStore._write``, which
  knows each connection's ``synchronous``); any exception rolls it back and is re-raised,
  mapped here when it is the driver's.
- Driver errors never leak (``map_error``): locked/busy is ``STORE_BUSY``, anything else
  ``STORE_UNAVAILABLE``, raised ``from`` the ``sqlite3`` error; a text that is not UTF-8
  is a damaged file, a lone surrogate in an argument ``INVALID_ARGUMENT``.
- Which thread or process holds which connection, and the write gate, are the store's
  (``SQLiteStore._conn``, ``_write``); nothing here keeps state.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import (
    CheckpointError,
    InvalidArgumentError,
    StoreBusyError,
    StoreSchemaTooNewError,
    StoreUnavailableError,
)
from . import _sqlite_search
from ._sqlite_checkpointer import BACKSTOP_PAGES
from ._sqlite_schema import LATEST_VERSION

__all__ = [
    "connect",
    "connect_readonly",
    "is_busy",
    "map_error",
    "not_utf8",
    "refuse_special_files",
    "retry_locked",
    "too_new",
    "unencodable",
]

T = TypeVar("T")

_BUSY_MARKERS = ("locked", "busy")


def connect(path: Path, busy_timeout: float, *, backstop: bool) -> sqlite3.Connection:
    """Open a read-write connection to ``path`` with the store's pragmas.

    ``backstop``: the store runs its own checkpoint rounds; SQLite's auto-checkpoint is
    set to ``BACKSTOP_PAGES``.

    Raises:
        StoreSchemaTooNewError: the file was written by a newer toolledger.
        StoreBusyError, StoreUnavailableError: it cannot be opened.
    """
    try:
        conn = sqlite3.connect(
            str(path),
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise map_error(exc, f"cannot open {path}") from exc
    try:
        _sqlite_search.register(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # Refuse a newer file before anything (even the journal mode) touches it.
        (version,) = retry_locked(
            lambda: conn.execute("PRAGMA user_version").fetchone(), path, busy_timeout
        )
        if version > LATEST_VERSION:
            raise too_new(path, version)
        retry_locked(lambda: _set_wal(conn), path, busy_timeout)
        conn.execute("PRAGMA synchronous = NORMAL")
        if backstop:
            conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        if isinstance(exc, sqlite3.Error):
            raise map_error(exc, f"opening {path}") from exc
        if isinstance(exc, UnicodeDecodeError):
            raise not_utf8(path, "opening") from exc
        raise
    return conn


def connect_readonly(
    path: Path, busy_timeout: float, *, immutable: bool
) -> tuple[sqlite3.Connection, bool]:
    """Open ``path`` ``mode=ro``; on a read-only mount, ``immutable`` if that loses nothing.

    Returns the connection and whether it (and so the next one) is ``immutable``.

    Raises:
        StoreSchemaTooNewError: the file was written by a newer toolledger.
        StoreBusyError, StoreUnavailableError: it cannot be opened.
    """
    while True:
        query = "mode=ro&immutable=1" if immutable else "mode=ro"
        try:
            conn = sqlite3.connect(
                f"{path.absolute().as_uri()}?{query}",
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise map_error(exc, f"opening {path} read-only") from exc
        try:
            _sqlite_search.register(conn)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > LATEST_VERSION:
                raise too_new(path, version)
            # The first page read: a WAL file needs its -shm (created if missing).
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            if (
                isinstance(exc, sqlite3.OperationalError)
                and not immutable
                and _may_open_immutable(path)
            ):
                immutable = True
                continue
            if isinstance(exc, sqlite3.Error):
                raise map_error(exc, f"opening {path} read-only") from exc
            if isinstance(exc, UnicodeDecodeError):
                raise not_utf8(path, "opening") from exc
            raise
        return conn, immutable


def _may_open_immutable(path: Path) -> bool:
    """Whether ``mode=ro`` failed only because the directory is not writable.

    ``immutable`` skips the WAL, so it is used only when there is none to skip; a WAL
    with content and no shared memory file on a read-only mount cannot be read.
    """
    if os.access(path.parent, os.W_OK):
        return False
    wal = Path(f"{path}-wal")
    try:
        size = wal.stat().st_size
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if size == 0:
        return True
    raise StoreUnavailableError(
        message=f"{path} has un-checkpointed WAL content ({wal}) and its directory "
        "is read-only, so SQLite cannot build the shared memory index to read it; open "
        "it once where it is writable (any toolledger command that writes), or copy the "
        "three files to a writable place",
        details={"path": str(path), "reason": "wal on read-only mount"},
    )


def retry_locked(fn: Callable[[], T], path: Path, busy_timeout: float) -> T:
    """Run ``fn``, retrying 'database is locked' up to the busy timeout.

    Some operations (switching to WAL on a brand-new file) return SQLITE_BUSY without
    consulting the busy handler, so concurrent first opens need this.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise map_error(exc, f"opening {path}") from exc
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.05)


def _set_wal(conn: sqlite3.Connection) -> None:
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() not in ("wal", "memory"):
        raise sqlite3.OperationalError(f"database is locked (journal_mode stayed {mode})")


def is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return any(marker in text for marker in _BUSY_MARKERS)


def map_error(exc: sqlite3.Error, doing: str) -> CheckpointError:
    """Return the toolledger error for a driver error met while ``doing``: ``STORE_BUSY``
    when the database stayed locked, else ``STORE_UNAVAILABLE``."""
    if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
        return StoreBusyError(
            message=f"the database stayed locked while {doing}; retry later ({exc})",
            details={"doing": doing},
        )
    return StoreUnavailableError(
        message=f"SQLite failed while {doing}: {exc}", details={"doing": doing}
    )


def not_utf8(path: Path, doing: str) -> StoreUnavailableError:
    return StoreUnavailableError(
        message=f"{path} is damaged: a stored text is not UTF-8 (while {doing})",
        details={"doing": doing, "reason": "text not UTF-8"},
    )


#: What SQLite opens beside the database file (the WAL, its index, a rollback journal).
_COMPANIONS = ("-wal", "-shm", "-journal")


def refuse_special_files(path: Path) -> None:
    """Refuse a database path (or companion file) that exists and is not a regular file.

    SQLite ``open()``s what it is given: a FIFO blocks it until a writer shows up (forever,
    deaf to Ctrl-C while in C), a device or socket is no database. So each is
    ``INVALID_ARGUMENT`` before SQLite sees it; a directory too. Symlinks are followed (a
    link to a regular file is a database). What cannot be ``stat``-ed is left to SQLite's
    own open, which reports it.
    """
    for name in (str(path), *(f"{path}{suffix}" for suffix in _COMPANIONS)):
        try:
            mode = os.stat(name).st_mode
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(mode):
            continue
        what = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise InvalidArgumentError(
            message=f"{name} is {what}, not a database file: toolledger opens only regular files",
            details={"path": name, "reason": "not a regular file"},
        )


def unencodable(exc: UnicodeEncodeError) -> InvalidArgumentError:
    return InvalidArgumentError(
        message=f"a text argument is not valid Unicode and cannot be stored: {exc}",
        details={"reason": "lone surrogate"},
    )


def too_new(path: Path, version: int) -> StoreSchemaTooNewError:
    return StoreSchemaTooNewError(
        message=f"{path} has schema version {version}; this toolledger knows up to "
        f"{LATEST_VERSION}. Upgrade toolledger to open it.",
        details={"path": str(path), "version": version, "supported": LATEST_VERSION},
    )
