"""Test helpers users can rely on: an in-memory store, the store contract suite, crashes.

``MemoryStore`` keeps the same contract as ``SQLiteStore`` within one process (records
are kept as their stored JSON, so nothing a caller mutates leaks in). ``check_store``
runs toolledger's store contract suite against any backend. ``crash_at`` stops a process
at a named boundary of a guarded call, to test what a restart finds there.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

from .guard._seams import CRASH_POINTS
from .guard._seams import crash_at as _crash_at
from .store.base import Store
from .store.memory import MemoryStore

__all__ = ["CRASH_POINTS", "MemoryStore", "check_store", "crash_at"]


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
    from .store._contract import CHECKS

    failures = []
    for check in CHECKS:
        store = factory()
        try:
            check(store)
        except Exception as exc:
            failures.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
        finally:
            store.close()
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(CHECKS)} store checks failed:\n" + "\n".join(failures)
        )
