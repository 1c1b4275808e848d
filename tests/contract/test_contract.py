"""Run the store contract suite against every backend."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolledger.store import SQLiteStore, Store
from toolledger.store.base import OP_TYPES, Capabilities, ReleaseEffectKey
from toolledger.testing import STORE_CHECK_GROUPS, MemoryStore, check_store

from .._internals import OP_TABLES, op_table, store_checks_for
from .._internals import STORE_CHECKS as CHECKS
from .._pg_dsn import pg_dsn_or_skip


def _memory(_: Path) -> Store:
    return MemoryStore()


def _sqlite(tmp: Path) -> Store:
    return SQLiteStore(tmp / "contract.db")


def _postgres(_: Path) -> Store:
    # Each store gets its own schema (dropped by the fixture): runs cannot collide.
    from toolledger.store.postgres import PostgresStore

    return PostgresStore(
        pg_dsn_or_skip(), schema=f"tl_contract_{uuid.uuid4().hex[:12]}", max_size=8
    )


def _drop_schema(store: Store) -> None:
    import psycopg
    from psycopg import sql

    schema = getattr(store, "schema", None)
    if schema is None:
        return
    with psycopg.connect(pg_dsn_or_skip(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


FACTORIES: dict[str, Callable[[Path], Store]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = FACTORIES[request.param](tmp_path)
    yield s
    s.close()
    if request.param == "postgres":
        _drop_schema(s)


def _declared(backend: str) -> Callable[[Callable[[Store], None]], bool]:
    """Whether ``backend``'s class declares the capability group a check belongs to."""
    if backend == "memory":
        from toolledger.testing import MemoryStore as cls
    elif backend == "sqlite":
        cls = SQLiteStore  # type: ignore[assignment]
    else:
        from toolledger.store.postgres import PostgresStore as cls  # type: ignore[assignment]
    caps = cls.capabilities
    declared = {
        c
        for group, checks in STORE_CHECK_GROUPS.items()
        if group == "core" or getattr(caps, group)
        for c in checks
    }
    return declared.__contains__


#: (backend, check) for every check a backend declares: nothing is generated to be skipped.
CELLS = [
    pytest.param(backend, check, id=f"{check.__name__.removeprefix('check_')}-{backend}")
    for backend in sorted(FACTORIES)
    for check in CHECKS
    if _declared(backend)(check)
]


@pytest.mark.parametrize(("backend", "check"), CELLS)
def test_store_contract(backend: str, check: Callable[[Store], None], tmp_path: Path) -> None:
    s = FACTORIES[backend](tmp_path)
    try:
        assert check in store_checks_for(s)  # the class and the instance agree
        check(s)
    finally:
        s.close()
        if backend == "postgres":
            _drop_schema(s)


def test_contract_checks_are_grouped_by_capability_each_once() -> None:
    """Every check is in one group: the core one or a ``Capabilities`` field's."""
    assert list(STORE_CHECK_GROUPS) == [
        "core",
        *(f.name for f in dataclasses.fields(Capabilities)),
    ]
    grouped = [c for checks in STORE_CHECK_GROUPS.values() for c in checks]
    assert sorted(c.__name__ for c in grouped) == sorted(c.__name__ for c in CHECKS)
    assert len(set(grouped)) == len(grouped)
    assert all(STORE_CHECK_GROUPS[f.name] for f in dataclasses.fields(Capabilities))


def test_check_store_runs_only_the_groups_a_store_declares() -> None:
    """A store without effect keys is not held to the effect-key checks; core always runs."""

    class NoKeys(MemoryStore):
        capabilities = dataclasses.replace(MemoryStore.capabilities, effect_keys=False)

    checks = store_checks_for(NoKeys())
    assert not set(STORE_CHECK_GROUPS["effect_keys"]) & set(checks)
    assert set(STORE_CHECK_GROUPS["core"]) <= set(checks)
    assert set(STORE_CHECK_GROUPS["read_with_approval"]) <= set(checks)
    check_store(NoKeys)


def test_builtin_stores_declare_their_capabilities(store: Store) -> None:
    """Each built-in store declares a Capabilities value (nothing is probed)."""
    caps = store.capabilities  # type: ignore[attr-defined]
    assert isinstance(caps, Capabilities)
    assert caps.gated_append
    assert caps.effect_keys
    assert caps.read_with_approval


def test_check_store_passes_for_memory_store() -> None:
    check_store(MemoryStore)


def test_check_store_passes_for_postgres_store() -> None:
    made: list[Store] = []

    def factory() -> Store:
        made.append(_postgres(Path()))
        return made[-1]

    try:
        check_store(factory)
    finally:
        for s in made:
            _drop_schema(s)


def test_check_store_reports_every_failure() -> None:
    class Broken(MemoryStore):
        def compare_and_swap(self, expected_revision, next, *, durable=True):  # type: ignore[no-untyped-def]
            return True

    with pytest.raises(AssertionError, match="store checks failed") as info:
        check_store(Broken)
    assert "check_cas_wins_once" in str(info.value)


class TestOpTables:
    def test_every_backend_has_one_handler_for_every_op(self) -> None:
        """Each op table made (run, prepare, encode, probe) covers exactly the op types."""
        pytest.importorskip("psycopg")
        import toolledger.store.postgres  # noqa: F401 (registers PostgreSQL's tables)

        assert {"memory", "SQLite", "PostgreSQL", "prepare"} <= set(OP_TABLES)
        incomplete = {
            name: sorted(t.__name__ for t in set(OP_TYPES) ^ set(table))
            for name, table in OP_TABLES.items()
            if set(table) != set(OP_TYPES)
        }
        assert incomplete == {}

    def test_a_table_missing_an_op_fails_naming_backend_and_op(self) -> None:
        """A backend that lacks a handler fails loudly when its table is made."""
        handlers = {t: print for t in OP_TYPES if t is not ReleaseEffectKey}
        with pytest.raises(TypeError, match=r"the Acme store's op table has no handler for "):
            op_table("Acme", handlers)
        with pytest.raises(TypeError, match=r"\['ReleaseEffectKey'\]"):
            op_table("Acme", handlers)
        assert "Acme" not in OP_TABLES
