"""A database path that is not a regular file (FIFO, socket, device, directory) is refused
with ``INVALID_ARGUMENT`` before SQLite opens it: a FIFO would block ``open()`` forever."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.store import SQLiteStore, open_store

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo (POSIX)")

#: Every way the API opens a SQLite file, each against the FIFO; one line of JSON each.
_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import toolledger as tl
    from toolledger.store import SQLiteStore, open_store

    fifo, wal_db = sys.argv[1], sys.argv[2]
    ways = {
        "open_store": lambda: open_store(fifo),
        "open_store readonly": lambda: open_store(fifo, readonly=True),
        "sqlite:/// url": lambda: open_store("sqlite:///" + fifo),
        "SQLiteStore": lambda: SQLiteStore(fifo),
        "run(db=)": lambda: tl.run("a goal", db=fifo),
        "verify(db)": lambda: tl.verify(fifo, "r1"),
        "a FIFO as the -wal, readonly": lambda: open_store(wal_db, readonly=True),
        "a FIFO as the -wal, writer": lambda: open_store(wal_db),
    }
    for name, way in ways.items():
        try:
            way()
            print(json.dumps([name, None, ""]), flush=True)
        except tl.CheckpointError as exc:
            print(json.dumps([name, exc.code, exc.message]), flush=True)
    """
)


def test_every_open_of_a_fifo_is_invalid_argument_at_once(tmp_path: Path) -> None:
    """In a real process (a hang would otherwise hang the suite): each way is refused."""
    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    wal_db = tmp_path / "good.db"
    with tl.run("a goal", db=wal_db):
        pass
    os.mkfifo(f"{wal_db}-wal")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(fifo), str(wal_db)],
        capture_output=True,
        text=True,
        timeout=60,  # only a regression gets near it: each open is refused before open()
    )
    assert proc.returncode == 0, proc.stderr
    seen = {
        name: (code, message)
        for name, code, message in map(json.loads, proc.stdout.split("\n")[:-1])
    }
    assert len(seen) == 8, proc.stdout
    for name, (code, message) in seen.items():
        assert code == "INVALID_ARGUMENT", (name, code, message)
        assert "FIFO" in message, (name, message)
    assert "good.db-wal" in seen["a FIFO as the -wal, readonly"][1]


@pytest.mark.parametrize("readonly", [False, True])
def test_socket_device_and_directory_are_invalid_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readonly: bool
) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name: AF_UNIX paths are limited to ~100
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("s.sock")
    (tmp_path / "dir.db").mkdir()
    try:
        for path, what in (
            ("s.sock", "a socket"),
            (os.devnull, "a device"),
            ("dir.db", "a directory"),
        ):
            with pytest.raises(tl.InvalidArgumentError) as info:
                open_store(path, readonly=readonly)
            assert f"is {what}, not a database file" in info.value.message
            assert info.value.details == {"path": path, "reason": "not a regular file"}
    finally:
        server.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.db", "s.sock"]  # nothing created


def test_a_symlink_to_a_regular_database_still_opens(tmp_path: Path) -> None:
    real = tmp_path / "real.db"
    with tl.run("a goal", db=real) as run:
        pass
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with SQLiteStore(link, readonly=True) as store:
        assert store.get_run(run.run_id) is not None


def test_a_symlink_to_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.db"
    link.symlink_to(fifo)
    for readonly in (False, True):
        with pytest.raises(tl.InvalidArgumentError, match="FIFO"):
            SQLiteStore(link, readonly=readonly)
