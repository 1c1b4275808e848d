"""Resolve what users pass as ``db=`` into a ``Store``, and who closes it.

Rules this module keeps: a string with a URL scheme (``name://``) names a backend by that
scheme, and an unknown scheme is refused, never taken for a file name (a mistyped
``postgresq://`` must not quietly become a private SQLite file on each host). A path
without a scheme is a SQLite file.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import unquote

from ..errors import InvalidArgumentError, warn_at_caller
from .base import Store

__all__ = [
    "DEFAULT_DB",
    "NewLedgerWarning",
    "StoreLike",
    "open_store",
    "store_for",
    "using_store",
]

#: What ``db=`` takes: a ``Store``, a path, a ``sqlite:///`` or ``file:///`` URL or a
#: ``postgresql://`` DSN (``None``, where allowed: ``$TOOLLEDGER_DB`` or ``.toolledger.db``).
StoreLike = Store | str | os.PathLike[str]


class NewLedgerWarning(UserWarning):
    """``open_store`` created a new SQLite ledger file (filter it once you expect that).

    A mistyped ``db=`` path quietly made a fresh ledger before, and a call the old ledger
    had completed ran again (to the new file it was a new call): this warning names the
    file, once per file created.
    """


DEFAULT_DB = ".toolledger.db"

#: ``scheme://`` at the start (RFC 3986 scheme characters). One letter is a Windows drive.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+)://")
_POSTGRES = ("postgresql", "postgres")


def open_store(db: StoreLike | None = None, *, readonly: bool = False, **options: Any) -> Store:
    """Return a ``Store`` for ``db``.

    Args:
        db: A ``Store`` (returned as is), a path, a ``sqlite:///path`` or ``file:///path``
            URL, a ``postgresql://`` (or ``postgres://``) DSN, or ``None`` for
            ``$TOOLLEDGER_DB`` or ``.toolledger.db`` in the working directory.
        readonly: Open for reading only: nothing is created or migrated (a missing file
            is ``NOT_FOUND``, another application's SQLite file ``INVALID_ARGUMENT``, an
            older schema ``UNSUPPORTED_SCHEMA``). Ignored for a ``Store`` passed in.
        **options: Passed to the store's constructor (e.g. ``durability="normal"``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for something that is none of these,
            an unknown URL scheme included (``postgresq://``, ``mysql://``).
    """
    if db is None:
        db = os.environ.get("TOOLLEDGER_DB") or DEFAULT_DB
    if is_store(db):
        return db
    if isinstance(db, os.PathLike):
        db = os.fspath(db)
    if not isinstance(db, str) or not db:
        raise InvalidArgumentError(
            message=f"db must be a path, a sqlite:/// or postgresql:// URL, or a Store; got {db!r}"
        )
    if readonly:
        options["readonly"] = True
    match = _SCHEME.match(db)
    scheme = match.group(1).lower() if match else None
    if scheme in _POSTGRES:
        _require_psycopg()
        from .postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]

        # libpq reads the scheme case-sensitively; URL schemes are case-insensitive.
        store: Store = PostgresStore(f"{scheme}{db[len(scheme or '') :]}", **options)
        return store
    if scheme == "sqlite":
        db = db[len("sqlite://") :]
        if db.startswith("/") and not db.startswith("//"):
            db = db[1:] or ":memory:"  # sqlite:///rel.db -> rel.db
        elif db.startswith("//"):
            db = db[1:]  # sqlite:////abs/path.db -> /abs/path.db
    elif scheme == "file":
        db = _file_url_path(db)
    elif scheme is not None:
        raise InvalidArgumentError(
            message=f"unknown database URL scheme {scheme + '://'!r:.60}: use a path, "
            "sqlite:///path, file:///path or postgresql://…",
            details={"argument": "db", "scheme": scheme[:40]},
        )
    from .sqlite import SQLiteStore

    path = Path(db)
    new = not readonly and db != ":memory:" and not db.startswith("file:") and not path.exists()
    opened = SQLiteStore(path, **options)
    if new:
        warn_at_caller(
            NewLedgerWarning(
                f"created a new ledger at {path.resolve()} (no file was there: "
                "check db= or TOOLLEDGER_DB if you meant an existing one)"
            )
        )
    return opened


#: The ``Store`` protocol's methods, for ``is_store``.
_STORE_METHODS = tuple(
    sorted(name for name, value in vars(Store).items() if callable(value) and name[0] != "_")
)


def is_store(db: object) -> TypeGuard[Store]:
    """Whether ``db`` is a store (not a path): it has every ``Store`` method.

    ``isinstance(db, Store)`` alone is not enough on Python 3.12+, which checks a runtime
    protocol with ``inspect.getattr_static``: a wrapper that delegates to a store through
    ``__getattr__`` has the methods, yet fails it.
    """
    if isinstance(db, (str, os.PathLike)):
        return False
    if isinstance(db, Store):
        return True
    return all(callable(getattr(db, name, None)) for name in _STORE_METHODS)


def _require_psycopg() -> None:
    """Name the ``postgres`` extra and its install command when psycopg is missing."""
    try:
        import psycopg  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ModuleNotFoundError as exc:
        raise InvalidArgumentError(
            message=(
                "a postgresql:// database needs the [postgres] extra (psycopg 3): "
                "pip install 'toolledger[postgres]'"
            ),
            details={
                "argument": "db",
                "extra": "postgres",
                "install": "pip install 'toolledger[postgres]'",
            },
        ) from exc


def store_for(db: StoreLike | None, *, readonly: bool = False) -> tuple[Store, bool]:
    """Return ``(store, owned)`` for what a caller passed as ``db=``.

    A ``Store`` comes back as is (``owned`` is ``False``: its owner closes it); a path, URL
    or ``None`` is opened with ``open_store(db, readonly=readonly)`` (``owned`` is
    ``True``: the caller closes it).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for something ``open_store`` refuses.
        NotFoundError: ``NOT_FOUND`` opening a missing file ``readonly``.
    """
    if is_store(db):
        return db, False
    return open_store(db, readonly=readonly), True


@contextlib.contextmanager
def using_store(db: StoreLike | None, *, readonly: bool = False) -> Iterator[Store]:
    """Yield the store for ``db`` (see ``store_for``); close it afterwards if opened here."""
    store, owned = store_for(db, readonly=readonly)
    try:
        yield store
    finally:
        if owned:
            store.close()


def _file_url_path(url: str) -> str:
    """The local path of a ``file:`` URL (``file:///abs`` or ``file://localhost/abs``)."""
    rest = url[len("file://") :]
    host, sep, path = rest.partition("/")
    if host not in ("", "localhost") or not sep or "?" in rest or "#" in rest:
        raise InvalidArgumentError(
            message=f"a file URL names a local absolute path (file:///path); got {url!r:.80}",
            details={"argument": "db", "scheme": "file"},
        )
    return unquote("/" + path)
