"""Resolve what users pass as ``db=`` into a ``Store``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from .base import Store

__all__ = ["DEFAULT_DB", "open_store"]

DEFAULT_DB = ".toolledger.db"


def open_store(db: Any = None, **options: Any) -> Store:
    """Return a ``Store`` for ``db``.

    Args:
        db: A ``Store`` (returned as is), a path, a ``sqlite:///path`` URL, a
            ``postgresql://`` DSN, or ``None`` for ``$TOOLLEDGER_DB`` or ``.toolledger.db``
            in the working directory.
        **options: Passed to the store's constructor (e.g. ``durability="normal"``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for something that is none of these.
    """
    if db is None:
        db = os.environ.get("TOOLLEDGER_DB") or DEFAULT_DB
    if isinstance(db, Store) and not isinstance(db, (str, os.PathLike)):
        return db
    if isinstance(db, os.PathLike):
        db = os.fspath(db)
    if not isinstance(db, str) or not db:
        raise InvalidArgumentError(
            message=f"db must be a path, a sqlite:/// or postgresql:// URL, or a Store; got {db!r}"
        )
    if db.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]

        store: Store = PostgresStore(db, **options)
        return store
    if db.startswith("sqlite://"):
        db = db[len("sqlite://") :]
        if db.startswith("/") and not db.startswith("//"):
            db = db[1:] or ":memory:"  # sqlite:///rel.db -> rel.db
        elif db.startswith("//"):
            db = db[1:]  # sqlite:////abs/path.db -> /abs/path.db
    from .sqlite import SQLiteStore

    return SQLiteStore(Path(db), **options)
