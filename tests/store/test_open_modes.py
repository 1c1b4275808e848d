"""Opening databases: URL schemes, read-only opens that never create or migrate, read-only
mounts, and schemas written by a newer toolledger."""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

import toolledger as tl
from toolledger.approvals import list_approvals
from toolledger.checkpoint import Binding, create_checkpoint, fingerprint
from toolledger.checkpoint.model import parse_time
from toolledger.store import SQLiteStore, Store, open_store
from toolledger.store.sqlite import LATEST_VERSION


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ledger(path: Path) -> str:
    with tl.run("a goal", db=path) as run, run.step("look"):
        pass
    return run.run_id


class TestSchemes:
    @pytest.mark.parametrize(
        "db",
        [
            "postgresq://app@db/agents",
            "postgress://app@db/agents",
            "mysql://u@h/db",
            "sqlite3:///x.db",
            "http://example.com/x.db",
            "PostgreSQ://app@db/agents",
        ],
    )
    def test_open_store_unknown_scheme_is_invalid_argument_and_creates_nothing(
        self, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        for readonly in (False, True):
            with pytest.raises(tl.InvalidArgumentError) as info:
                open_store(db, readonly=readonly)
            assert info.value.details["argument"] == "db"
        assert list(tmp_path.iterdir()) == []

    def test_run_with_mistyped_dsn_creates_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        with pytest.raises(tl.InvalidArgumentError):
            tl.run("g", db="postgresq://app@db/agents")
        assert list(tmp_path.iterdir()) == []

    def test_file_url_is_a_local_sqlite_path(self, tmp_path: Path) -> None:
        path = tmp_path / "a b.db"
        store = open_store((path).as_uri())
        assert isinstance(store, SQLiteStore)
        assert store.path == path
        store.close()
        with pytest.raises(tl.InvalidArgumentError):
            open_store("file://otherhost/x.db")

    def test_sqlite_scheme_and_windows_like_paths_still_work(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        open_store("sqlite:///rel.db").close()
        assert (tmp_path / "rel.db").exists()


class TestReadonly:
    def test_readonly_missing_file_is_not_found_and_creates_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "sub" / "dir" / "missing.db"
        with pytest.raises(tl.NotFoundError) as info:
            SQLiteStore(path, readonly=True)
        assert info.value.details["reason"] == "missing"
        assert not (tmp_path / "sub").exists()

    def test_readonly_other_apps_sqlite_file_is_refused_untouched(self, tmp_path: Path) -> None:
        path = tmp_path / "app.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.commit()
        conn.close()
        before = _sha(path)
        with pytest.raises(tl.InvalidArgumentError) as info:
            SQLiteStore(path, readonly=True)
        assert info.value.details["reason"] == "not a toolledger database"
        assert _sha(path) == before
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
        conn.close()

    def test_readonly_older_schema_is_unsupported_and_not_migrated(self, tmp_path: Path) -> None:
        path = tmp_path / "old.db"
        SQLiteStore(path).close()
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM toolledger_schema WHERE version = ?", (LATEST_VERSION,))
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION - 1}")
        conn.commit()
        conn.close()
        with pytest.raises(tl.UnsupportedSchemaError) as info:
            SQLiteStore(path, readonly=True)
        assert "toolledger migrate" in info.value.message
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST_VERSION - 1,)
        conn.close()

    def test_readonly_store_reads_and_refuses_writes(self, tmp_path: Path) -> None:
        path = tmp_path / "l.db"
        run_id = _ledger(path)
        store = SQLiteStore(path, readonly=True)
        assert [r.run_id for r in store.list_runs()] == [run_id]
        with pytest.raises(tl.InvalidArgumentError) as info:
            store.create_if_absent(
                create_checkpoint(
                    Binding("ns", "c", "t", "1", fingerprint({})),
                    at=parse_time("2026-01-01T00:00:00Z", "at"),
                )
            )
        assert info.value.details["reason"] == "readonly"
        store.close()

    @pytest.mark.parametrize(
        "read",
        [
            lambda db: tl.verify(db, "nope"),
            lambda db: tl.Replayer(db),
            lambda db: list_approvals(db),
            lambda db: tl.export_json(db, "nope", os.devnull),
        ],
        ids=["verify", "replayer", "list_approvals", "export_json"],
    )
    def test_library_readers_never_create_a_database(self, tmp_path: Path, read) -> None:
        with pytest.raises(tl.NotFoundError):
            read(tmp_path / "nodir" / "none.db")
        assert list(tmp_path.iterdir()) == []

    def test_copy_from_missing_source_is_not_found(self, tmp_path: Path) -> None:
        with pytest.raises(tl.NotFoundError):
            tl.copy_ledger(tmp_path / "missing.db", tmp_path / "dst.db")
        assert list(tmp_path.iterdir()) == []


class TestSchemaTooNew:
    def test_user_version_current_with_newer_schema_row_is_too_new(self, tmp_path: Path) -> None:
        """A newer toolledger's migration row is believed even if user_version lags."""
        path = tmp_path / "future.db"
        SQLiteStore(path).close()
        conn = sqlite3.connect(path)
        conn.execute(
            "INSERT INTO toolledger_schema VALUES (?, 'from_the_future', '2030-01-01T00:00:00Z')",
            (LATEST_VERSION + 1,),
        )
        conn.commit()
        conn.close()
        before = _sha(path)
        for readonly in (False, True):
            with pytest.raises(tl.StoreSchemaTooNewError) as info:
                SQLiteStore(path, readonly=readonly)
            assert info.value.code == "STORE_SCHEMA_TOO_NEW"
            assert info.value.details["version"] == LATEST_VERSION + 1
        assert _sha(path) == before


# -- read-only mounts -----------------------------------------------------------------


@contextlib.contextmanager
def _read_only(directory: Path) -> Iterator[None]:
    """Make ``directory`` (and its files) unwritable for this process.

    As a normal user, chmod does it. Root ignores permission bits, so as root the
    directory is bind-mounted read-only onto itself (EROFS, which binds root too); where
    mounting is not allowed either, the test is skipped rather than faked.
    """
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [directory, *directory.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("root without mount(8): cannot make a read-only directory")
    d = str(directory)
    bound = subprocess.run([mount, "--bind", d, d], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"root without mount privileges: {bound.stderr.decode()[:200]}")
    try:
        ro = subprocess.run([mount, "-o", "remount,bind,ro", d], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.decode()[:200]}")
        with pytest.raises(OSError):
            (directory / "probe").write_text("x")
        yield
    finally:
        subprocess.run(["umount", d], check=True)


def _crash_after_writing(path: str) -> None:
    run = tl.run("written, never checkpointed", db=path)
    run.__enter__()
    with run.step("s"):
        pass
    run.flush()  # the step's records are committed (to the WAL)
    os._exit(0)  # no close: the WAL keeps the commits, the main file does not


class TestReadOnlyMount:
    def test_verify_wal_ledger_on_read_only_mount(self, tmp_path: Path) -> None:
        """A cleanly closed WAL ledger on a read-only mount opens for readers (immutable:
        there is no WAL content to skip) and verifies."""
        d = tmp_path / "ro"
        d.mkdir()
        run_id = _ledger(d / "l.db")
        assert sorted(p.name for p in d.iterdir()) == ["l.db"]
        with _read_only(d):
            assert tl.verify(d / "l.db", run_id).ok
            store = open_store(d / "l.db", readonly=True)
            assert [r.run_id for r in store.list_runs()] == [run_id]
            store.close()
            with pytest.raises(tl.StoreError):  # a writer cannot, and says so typed
                tl.SQLiteStore(d / "l.db").create_run(store.list_runs()[0])

    def test_read_only_mount_with_live_wal_reads_the_wal(self, tmp_path: Path) -> None:
        """A writer killed before checkpointing leaves -wal and -shm: mode=ro reads them
        (never immutable, which would silently show an older ledger)."""
        d = tmp_path / "ro"
        d.mkdir()
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=_crash_after_writing, args=(str(d / "l.db"),))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        assert (d / "l.db-wal").stat().st_size > 0
        with _read_only(d):
            store = open_store(d / "l.db", readonly=True)
            (row,) = store.list_runs()
            assert row.goal == "written, never checkpointed"
            assert tl.verify(store, row.run_id).ok
            store.close()

    def test_read_only_mount_wal_without_shm_is_refused(self, tmp_path: Path) -> None:
        """WAL content whose -shm is gone cannot be read on a read-only mount: a typed
        refusal, never a silently stale view."""
        d = tmp_path / "ro"
        d.mkdir()
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=_crash_after_writing, args=(str(d / "l.db"),))
        p.start()
        p.join(60)
        (d / "l.db-shm").unlink()
        with _read_only(d), pytest.raises(tl.StoreUnavailableError) as info:
            open_store(d / "l.db", readonly=True)
        assert info.value.details["reason"] == "wal on read-only mount"


class TestPostgresReadonly:
    def test_postgres_readonly_creates_no_schema_and_refuses_writes(self) -> None:
        import uuid

        import psycopg

        from .._pg_dsn import pg_dsn_or_skip

        dsn = pg_dsn_or_skip()
        schema = f"tl_ro_{uuid.uuid4().hex[:10]}"
        url = f"{dsn}?schema={schema}"

        def exists() -> bool:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                    (schema,),
                ).fetchone()
            return row is not None

        with pytest.raises(tl.NotFoundError):
            open_store(url, readonly=True)
        assert not exists()
        try:
            with tl.run("g", db=url):
                pass
            reader = open_store(url, readonly=True)
            (row,) = reader.list_runs()
            with pytest.raises(tl.StoreError):
                reader.create_run(row)
            reader.close()
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class _Delegating:
    """A store wrapper that forwards every attribute (a metrics or logging wrapper)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class TestWrappedStores:
    def test_a_delegating_wrapper_is_taken_as_the_store_it_wraps(self, tmp_path: Path) -> None:
        """``db=`` a ``__getattr__`` wrapper runs on it (Python 3.12+'s protocol check
        alone refuses one), and ``open_store`` hands it back unopened."""
        inner = tl.SQLiteStore(tmp_path / "l.db")
        wrapped = cast(Store, _Delegating(inner))
        try:
            assert tl.open_store(wrapped) is wrapped
            with tl.run("g", db=wrapped) as run:
                run.note("through the wrapper")
            assert inner.get_run(run.run_id) is not None
        finally:
            inner.close()

    def test_an_object_missing_a_store_method_is_refused(self) -> None:
        """Something with only some of the methods is not a store: ``INVALID_ARGUMENT``."""

        class Half:
            def get(self, namespace: str, call_id: str) -> None:
                return None

        with pytest.raises(tl.InvalidArgumentError, match="db must be a path"):
            tl.open_store(cast(Store, Half()))


class TestRefusedFilesLeaveNoConnection:
    """A file the store refuses (another application's, or a newer toolledger's) raises,
    and every connection opened to look at it is closed: the caller never gets a store to
    close (Python 3.13's sqlite3 reports such a leak as a ``ResourceWarning``)."""

    @pytest.fixture
    def opened(self, monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
        made: list[sqlite3.Connection] = []
        real = sqlite3.connect

        def tracking(*args: object, **kwargs: object) -> sqlite3.Connection:
            conn = real(*args, **kwargs)  # type: ignore[call-overload]
            made.append(conn)
            return conn

        monkeypatch.setattr(sqlite3, "connect", tracking)
        return made

    @staticmethod
    def _closed(conn: sqlite3.Connection) -> bool:
        try:
            conn.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            return True
        return False

    def test_another_applications_file_opened_readonly(
        self, tmp_path: Path, opened: list[sqlite3.Connection]
    ) -> None:
        path = tmp_path / "app.db"
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE orders (id INTEGER)")
            conn.commit()
        opened.clear()
        with pytest.raises(tl.CheckpointError):
            SQLiteStore(path, readonly=True)
        assert opened, "the store looked at the file"
        assert all(self._closed(conn) for conn in opened)

    def test_a_newer_toolledgers_file(
        self, tmp_path: Path, opened: list[sqlite3.Connection]
    ) -> None:
        path = tmp_path / "new.db"
        SQLiteStore(path).close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
        opened.clear()
        for readonly in (True, False):
            with pytest.raises(tl.StoreSchemaTooNewError):
                SQLiteStore(path, readonly=readonly)
        assert len(opened) >= 2
        assert all(self._closed(conn) for conn in opened)
