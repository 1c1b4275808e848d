"""SQLiteStore's WAL checkpoints on a thread of the store's, off the callers' commits."""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.checkpoint import Binding, create_checkpoint, fingerprint
from toolledger.store import SQLiteStore

from .._internals import (
    BACKSTOP_PAGES,
    CHECKPOINT_EVERY,
    CHECKPOINT_EVERY_FULL,
    PRESYNC_FRAMES,
    sync_file,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
WAIT = 60.0  # seconds: a bound for a hung thread, never a synchronisation


class _Every4(SQLiteStore):
    _checkpoint_every = 4


class _NoThread(SQLiteStore):
    _checkpoint_every = None


class _Every8(SQLiteStore):
    _checkpoint_every = 8


class _EveryRarely(SQLiteStore):
    _checkpoint_every = 1 << 20


def _wal_frames_and_restarts(path: Path) -> tuple[int, int]:
    """The WAL file's length in frames and its header's checkpoint sequence (restarts)."""
    wal = Path(f"{path}-wal")
    data = wal.read_bytes()
    (page_size,) = struct.unpack(">I", data[8:12])
    (sequence,) = struct.unpack(">I", data[12:16])
    return (len(data) - 32) // (page_size + 24), sequence


def _create(store: SQLiteStore, n: int, prefix: str = "c") -> None:
    for i in range(n):
        b = Binding("ns", f"{prefix}{i}", "send_email", "1", fingerprint({"i": i}))
        store.create_if_absent(create_checkpoint(b, at=T0))


def _rows_in_database_file(path: Path) -> int:
    """Rows the main database file holds, reading past the WAL (``immutable`` skips it)."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?immutable=1", uri=True)
    try:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE name = 'checkpoints'")
        if tables.fetchone() is None:  # even the schema is still only in the WAL
            return 0
        return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])
    finally:
        conn.close()


def _checkpointer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("toolledger-checkpoint")]


class TestCheckpointer:
    def test_commits_reach_the_database_file_without_a_caller_checkpoint(
        self, tmp_path: Path
    ) -> None:
        """The thread copies committed pages back; the writers' own threshold is not reached."""
        store = _Every4(tmp_path / "db.sqlite", durability="normal")
        try:
            _create(store, 12)
            ckpt = store._checkpointer
            assert ckpt is not None
            assert ckpt.run_now(WAIT)
            assert ckpt.checkpoints >= 1
            assert _rows_in_database_file(store.path) == 12
            (pages,) = store._conn().execute("PRAGMA wal_autocheckpoint").fetchone()
            assert pages == BACKSTOP_PAGES
        finally:
            store.close()

    @pytest.mark.parametrize(
        ("durability", "store_class", "every"),
        [
            ("normal", SQLiteStore, CHECKPOINT_EVERY),
            ("full", SQLiteStore, CHECKPOINT_EVERY_FULL),
            ("full", _Every4, 4),
        ],
    )
    def test_rounds_come_more_often_at_full_durability(
        self, tmp_path: Path, durability: str, store_class: type[SQLiteStore], every: int
    ) -> None:
        """At ``full`` a round comes every 64 commits at most; a smaller setting is kept."""
        store = store_class(tmp_path / "db.sqlite", durability=durability)  # type: ignore[arg-type]
        try:
            _create(store, 1)
            assert store._checkpointer is not None
            assert store._checkpointer.every == every
        finally:
            store.close()

    def test_without_the_thread_commits_stay_in_the_wal(self, tmp_path: Path) -> None:
        """The control: with SQLite's own auto-checkpoint only, small commits stay in the WAL."""
        store = _NoThread(tmp_path / "db.sqlite", durability="normal")
        try:
            _create(store, 12)
            assert store._checkpointer is None
            assert _rows_in_database_file(store.path) == 0
            assert store.get("ns", "c11") is not None
        finally:
            store.close()

    def test_close_stops_the_thread_and_is_idempotent(self, tmp_path: Path) -> None:
        """Closing the store stops its checkpoint thread; a second close does nothing."""
        store = _Every4(tmp_path / "db.sqlite")
        _create(store, 2)
        ckpt = store._checkpointer
        assert ckpt is not None
        thread = ckpt._thread
        assert thread.is_alive()
        store.close()
        assert not thread.is_alive()
        store.close()
        assert ckpt.run_now(WAIT)  # a stopped checkpointer answers at once

    def test_readonly_store_starts_no_thread(self, tmp_path: Path) -> None:
        """A reader never writes, so it never checkpoints."""
        path = tmp_path / "db.sqlite"
        SQLiteStore(path).close()
        before = len(_checkpointer_threads())
        reader = SQLiteStore(path, readonly=True)
        try:
            assert reader.list() == []
            assert reader._checkpointer is None
            assert len(_checkpointer_threads()) == before
        finally:
            reader.close()

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
    def test_forked_child_starts_its_own_thread(self, tmp_path: Path) -> None:
        """After fork the child never uses the parent's thread; its writes get one of its own."""
        store = _Every4(tmp_path / "db.sqlite", durability="normal")
        try:
            _create(store, 4, "parent")
            parent = store._checkpointer
            assert parent is not None
            # Let the parent's thread finish the round its commits woke, so it cannot run a
            # checkpoint beside the child's (SQLite answers the second one busy, copying nothing).
            assert parent.run_now(WAIT)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report, then leave without running pytest's teardown
                code = 1
                try:
                    _create(store, 8, "child")
                    child = store._checkpointer
                    ok = (
                        child is not None
                        and child is not parent
                        and child._thread.is_alive()
                        and child.run_now(WAIT)
                        and _rows_in_database_file(store.path) == 12
                    )
                    store.close()
                    code = 0 if ok and not child._thread.is_alive() else 1  # type: ignore[union-attr]
                finally:
                    os.write(write, bytes([code]))
                    os._exit(code)
            os.close(write)
            _, status = os.waitpid(pid, 0)
            assert os.read(read, 1) == b"\x00"
            os.close(read)
            assert os.WEXITSTATUS(status) == 0
            assert store._checkpointer is parent
            assert parent._thread.is_alive()
            _create(store, 4, "after")
            assert parent.run_now(WAIT)
            assert _rows_in_database_file(store.path) == 16
        finally:
            store.close()


HAS_PROC_FDS = Path("/proc/self/fd").is_dir()


def _open_fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not HAS_PROC_FDS, reason="needs /proc/self/fd (Linux)")
class TestSyncFile:
    def test_sync_file_flushes_through_the_descriptor_sqlite_holds(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """It syncs through SQLite's own descriptor; it opens (so closes) none of its own."""
        store = _NoThread(tmp_path / "db.sqlite")
        try:
            _create(store, 3)
            synced: list[int] = []
            real_sync = os.fdatasync

            def no_open(*args: object, **kwargs: object) -> None:
                raise AssertionError("sync_file opened a descriptor")

            def record(fd: int) -> None:
                synced.append(fd)
                real_sync(fd)

            monkeypatch.setattr(os, "open", no_open)
            monkeypatch.setattr("builtins.open", no_open)
            monkeypatch.setattr(os, "fdatasync", record)
            before = _open_fds()
            assert sync_file(store.path)
            assert sync_file(Path(f"{store.path}-wal"))
            monkeypatch.undo()
            assert _open_fds() == before
            assert [os.stat(f"/proc/self/fd/{fd}").st_ino for fd in synced] == [
                os.stat(store.path).st_ino,
                os.stat(f"{store.path}-wal").st_ino,
            ]
        finally:
            store.close()

    @pytest.mark.parametrize(
        ("creates", "presyncs"),
        [(PRESYNC_FRAMES // 2, 2), (4, 0)],  # a create writes four pages or more
        ids=["long chase: flushed first", "short chase: the gated round syncs"],
    )
    def test_the_files_are_flushed_before_the_gated_round_after_a_long_chase(
        self, tmp_path: Path, creates: int, presyncs: int
    ) -> None:
        """After a long chase the database and WAL are flushed before the gated round."""
        store = _EveryRarely(tmp_path / "db.sqlite", durability="normal")
        try:
            _create(store, creates)
            ckpt = store._checkpointer
            assert ckpt is not None
            assert ckpt.checkpoints == 0
            assert ckpt.run_now(WAIT)
            assert (ckpt.gated, ckpt.presyncs) == (1, presyncs)
        finally:
            store.close()

    def test_sync_file_of_a_file_nobody_holds_open_is_false(self, tmp_path: Path) -> None:
        """A file this process has no descriptor of, or no file at all: nothing synced."""
        path = tmp_path / "plain.txt"
        path.write_text("x")
        assert not sync_file(path)
        assert not sync_file(tmp_path / "missing")


class TestWalRestart:
    def test_a_long_wal_restarts_while_a_writer_keeps_writing(self, tmp_path: Path) -> None:
        """Back-to-back commits never leave the thread a gap: its gated round makes one.

        Without a restart the WAL file would hold every frame written: a create writes four
        b-trees (the row, its index, the history row and its index), so 2,400 or more for
        600 creates (3,980 seen); with a round every 8 commits ending in a restart it stays
        below that (usually 600-1,000 frames; up to 1,730 seen on a loaded machine, where
        the thread falls behind the writer now and then), and its header counts the restarts.
        """
        store = _Every8(tmp_path / "db.sqlite", durability="normal")
        try:
            _create(store, 600)
            ckpt = store._checkpointer
            assert ckpt is not None
            assert ckpt.run_now(WAIT)
            frames, restarts = _wal_frames_and_restarts(store.path)
            assert ckpt.gated >= 2
            assert restarts >= 2
            assert frames < 2400
            assert _rows_in_database_file(store.path) >= 500  # the rounds copied them back
            assert len(store.list()) == 600
        finally:
            store.close()

    def test_a_writer_waits_for_the_gate_no_longer_than_its_busy_timeout(
        self, tmp_path: Path
    ) -> None:
        """A held gate is a busy database: ``STORE_BUSY`` after the timeout, nothing written."""
        store = _Every4(tmp_path / "db.sqlite", busy_timeout=0.05)
        try:
            _create(store, 1)
            errors: list[BaseException] = []
            with store._gate:
                worker = threading.Thread(target=lambda: _capture(errors, store))
                worker.start()
                worker.join(WAIT)
            assert not worker.is_alive()
            assert len(errors) == 1
            assert isinstance(errors[0], tl.CheckpointError)
            assert errors[0].code == "STORE_BUSY"
            assert [r.binding.call_id for r in store.list()] == ["c0"]
            _create(store, 2, "after")  # the gate is free again
            assert len(store.list()) == 3
        finally:
            store.close()

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
    def test_a_child_forked_while_the_gate_is_held_writes(self, tmp_path: Path) -> None:
        """A parent's held gate is not the child's: the child's first write makes its own."""
        store = _Every4(tmp_path / "db.sqlite", busy_timeout=WAIT)
        try:
            _create(store, 1, "parent")
            read, write = os.pipe()
            with store._gate:
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        _create(store, 2, "child")
                        code = 0 if len(store.list()) == 3 else 1
                        store.close()
                    finally:
                        os.write(write, bytes([code]))
                        os._exit(code)
                os.close(write)
                assert os.read(read, 1) == b"\x00"  # written while the parent holds its gate
                os.close(read)
                _, status = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(status) == 0
            assert len(store.list()) == 3
        finally:
            store.close()


def _capture(errors: list[BaseException], store: SQLiteStore) -> None:
    try:
        _create(store, 1, "blocked")
    except BaseException as exc:  # the test reads it
        errors.append(exc)
