"""Run the store contract suite against every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolledger._contract import CHECKS
from toolledger.store import SQLiteStore, Store
from toolledger.testing import MemoryStore, check_store


def _memory(_: Path) -> Store:
    return MemoryStore()


def _sqlite(tmp: Path) -> Store:
    return SQLiteStore(tmp / "contract.db")


FACTORIES: dict[str, Callable[[Path], Store]] = {"memory": _memory, "sqlite": _sqlite}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = FACTORIES[request.param](tmp_path)
    yield s
    s.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_store_contract(store: Store, check: Callable[[Store], None]) -> None:
    check(store)


def test_check_store_passes_for_memory_store() -> None:
    check_store(MemoryStore)


def test_check_store_reports_every_failure() -> None:
    class Broken(MemoryStore):
        def compare_and_swap(self, expected_revision, next, *, durable=True):  # type: ignore[no-untyped-def]
            return True

    with pytest.raises(AssertionError, match="store checks failed") as info:
        check_store(Broken)
    assert "check_cas_wins_once" in str(info.value)
