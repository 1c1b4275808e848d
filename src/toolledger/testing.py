"""Test helpers users can rely on: an in-memory store and the store contract suite.

``MemoryStore`` keeps the same contract as ``SQLiteStore`` within one process (records
are kept as their stored JSON, so nothing a caller mutates leaks in). ``check_store``
runs toolledger's store contract suite against any backend.
"""

from __future__ import annotations

from collections.abc import Callable

from .store.base import Store
from .store.memory import MemoryStore

__all__ = ["MemoryStore", "check_store"]


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
