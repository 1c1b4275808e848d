"""Test helpers users can rely on: an in-memory store, the store contract suite, crashes.

``MemoryStore`` keeps the same contract as ``SQLiteStore`` within one process (records
are kept as their stored JSON, so nothing a caller mutates leaks in). ``check_store``
runs toolledger's store contract suite against any backend (``STORE_CHECK_GROUPS`` lists
its checks by capability). ``crash_at`` stops a process at a named boundary of a guarded
call (``CRASH_POINTS``), to test what a restart finds there. ``stored_run`` reads a run as
stored (its row, document and merged event dicts), for assertions on exactly what the
journal wrote.

Everything here is API (``__all__``). toolledger's own tests reach internals through their
own ``tests/_internals.py``, not through this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

from .guard import CRASH_POINTS
from .guard import crash_at as _crash_at
from .journal import StoredRun
from .journal import load_stored_run as _load_stored_run
from .store import contract as _store_contract
from .store.base import Store
from .store.memory import MemoryStore

#: The store contract's checks by group: ``"core"``, then one group per capability a
#: store can declare (``toolledger.store.base.Capabilities``); ``check_store`` runs the
#: core group and the groups of the capabilities the store declares.
STORE_CHECK_GROUPS = _store_contract.CHECK_GROUPS

__all__ = [
    "CRASH_POINTS",
    "MemoryStore",
    "STORE_CHECK_GROUPS",
    "check_store",
    "crash_at",
    "stored_run",
]


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def crash_at(point: str, action: Callable[[], Any] | None = None) -> Iterator[None]:
    """Stop at ``point`` each time a guarded call passes it, inside the ``with`` block.

    ``point`` is one of ``CRASH_POINTS``: ``after-approval`` (a decision was stored),
    ``before-claim``, ``after-claim`` (claimed, ``execute`` not called), ``after-execute``
    (``execute`` returned, result not stored), ``after-completion``,
    ``after-delivery-claim`` (``post`` not called) and ``after-post`` (``post`` returned,
    delivery not recorded). The default ``action`` SIGKILLs the process, as a crash does
    (run the code under test in a child process, then look at what it left); pass another
    ``action`` (raise, send a signal) to stop differently.

    Example::

        with toolledger.testing.crash_at("after-execute"):
            run.call(send_email, call_id="toolu_01", input={"to": "ana@example.com"})

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown point.
    """
    with _crash_at(point, action or _sigkill):
        yield


def check_store(factory: Callable[[], Store]) -> None:
    """Run the store contract suite against stores made by ``factory``.

    Args:
        factory: Returns a fresh, empty store each time it is called.

    Raises:
        AssertionError: listing every failed check by name.
    """
    first = factory()
    try:
        checks = _store_contract.checks_for(first)  # the core checks and those of its capabilities
    finally:
        first.close()
    failures = []
    for check in checks:
        store = factory()
        try:
            check(store)
        except Exception as exc:
            failures.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
        finally:
            store.close()
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(checks)} store checks failed:\n" + "\n".join(failures)
        )


def stored_run(db: Any, run_id: str) -> StoredRun:
    """Read run ``run_id`` as stored: its row, document, records and merged event dicts.

    ``toolledger.load_run`` gives the ``RunView`` users read; this gives the raw shape the
    journal merged (``.events`` are dicts, ``.row`` the runs row, ``.doc`` its document,
    ``.facts`` the hashed facts readers display), to assert on exactly what was written.

    Args:
        db: A ``Store``, path or URL.
        run_id: The run.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
    """
    return _load_stored_run(db, run_id)
