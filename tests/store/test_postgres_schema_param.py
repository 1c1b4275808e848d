"""The schema a PostgresStore uses: never a system schema, one ``?schema=`` only.

Each refusal happens before any connection, so these run without a server, except the
one that opens ``public`` in a scratch database of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

import toolledger as tl

psycopg = pytest.importorskip("psycopg")

from psycopg import sql  # noqa: E402 (after the importorskip)

from toolledger.cli import main  # noqa: E402
from toolledger.store import open_store  # noqa: E402
from toolledger.store.postgres import PostgresStore  # noqa: E402

from .._pg_dsn import pg_dsn_or_skip  # noqa: E402

#: No server listens here: a refusal must come before any connection attempt.
NOWHERE = "postgresql://nobody@127.0.0.1:9/none"

SYSTEM = ["information_schema", "pg_catalog", "pg_toast", "pg_temp_3", "pg_anything"]


class TestSystemSchemas:
    @pytest.mark.parametrize("schema", SYSTEM)
    @pytest.mark.parametrize("readonly", [False, True])
    def test_url_naming_a_system_schema_is_invalid_argument(
        self, schema: str, readonly: bool
    ) -> None:
        with pytest.raises(tl.InvalidArgumentError) as info:
            open_store(f"{NOWHERE}?schema={schema}", readonly=readonly)
        assert info.value.details["reason"] == "system schema"
        assert f"schema {schema!r} is a PostgreSQL system schema" in info.value.message

    @pytest.mark.parametrize("schema", SYSTEM)
    def test_schema_argument_naming_a_system_schema_is_invalid_argument(self, schema: str) -> None:
        with pytest.raises(tl.InvalidArgumentError, match="system schema"):
            PostgresStore(NOWHERE, schema=schema)

    @pytest.mark.parametrize("schema", ["", "x" * 64, "é" * 32, "a\0b", "\ud800"])
    def test_a_name_postgresql_would_refuse_or_truncate_is_invalid_argument(
        self, schema: str
    ) -> None:
        for way in (
            lambda: PostgresStore(NOWHERE, schema=schema),
            lambda: PostgresStore(f"{NOWHERE}?schema={schema}"),
        ):
            with pytest.raises(tl.InvalidArgumentError) as info:
                way()
            assert info.value.details == {"argument": "schema"}

    @pytest.mark.parametrize(
        "query",
        ["schema=a&schema=b", "schema=a&schema=a", "schema=a&sslmode=disable&sch%65ma=b"],
    )
    def test_two_schema_parameters_are_invalid_argument(self, query: str) -> None:
        with pytest.raises(tl.InvalidArgumentError) as info:
            open_store(f"{NOWHERE}?{query}")
        assert info.value.details["reason"] == "duplicate schema parameter"
        assert "give ?schema= once" in info.value.message

    @pytest.mark.parametrize("command", [["migrate"], ["runs"]])
    def test_cli_on_a_system_schema_or_two_schemas_exits_2_in_one_line(
        self, command: list[str]
    ) -> None:
        for query, words in (
            ("schema=information_schema", "system schema"),
            ("schema=a&schema=b", "give ?schema= once"),
        ):
            result = CliRunner().invoke(main, ["--db", f"{NOWHERE}?{query}", *command])
            assert result.exit_code == 2, result.output
            (line,) = result.stderr.splitlines()
            assert words in line


@pytest.fixture
def scratch_dsn() -> Iterator[str]:
    """A database of its own, so tables in its ``public`` schema touch nobody else's."""
    dsn = pg_dsn_or_skip()
    name = f"tl_public_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        # template0 takes no connections: another session on template1 cannot fail this.
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["dbname"] = name
    host, port = info.get("host", "127.0.0.1"), info.get("port", "5432")
    user = info.get("user", "postgres")
    try:
        yield f"postgresql://{user}@{host}:{port}/{name}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.mark.postgres
def test_migrate_into_public_as_asked_says_so_once_on_stderr(scratch_dsn: str) -> None:
    result = CliRunner().invoke(main, ["--db", f"{scratch_dsn}?schema=public", "migrate"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "schema 'public'" in line]
    assert len(notes) == 1
    assert notes[0].startswith("note: ")
    assert result.stdout.splitlines()  # the applied migrations
    with psycopg.connect(scratch_dsn) as conn:
        (where,) = conn.execute("SELECT to_regclass('public.toolledger_schema')").fetchone()
    assert where is not None
    # The default schema, asked for or not, gets no note.
    result = CliRunner().invoke(main, ["--db", scratch_dsn, "migrate"])
    assert result.exit_code == 0
    assert "note:" not in result.stderr
