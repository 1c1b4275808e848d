"""Passive WAL checkpoints on a thread of their own, off the callers' commits.

Rules this module keeps:

- SQLite's auto-checkpoint runs inside the commit that crosses its threshold, so one call
  in a few dozen pays for copying the whole WAL back (milliseconds). Here the store's
  writers only count their commits (``next(commits)``: no I/O, no lock, no Python frame)
  and ``wake`` the thread every ``every`` commits; it runs
  ``PRAGMA wal_checkpoint(PASSIVE)`` rounds on its own connection. A passive checkpoint
  never takes the write lock and never waits on a busy handler, so it never holds a claim
  and never blocks a writer (only the last round of each wake-up, under the gate below,
  makes this store's own writers wait); whatever it cannot copy now (a reader on an older
  snapshot, another checkpoint running) waits for the next round.
- SQLite restarts the WAL from its first frame only when a writer begins with every frame
  copied, and that writer then syncs the new WAL header (SQLite's rule): a stall of an
  fsync on the caller's path, once per restart. Back-to-back writers never leave a
  passive round that moment (it copies what it saw at its start), so the WAL would grow to
  the backstop; a round in an idle moment leaves it every time, so the WAL would restart,
  and the next caller sync, every few calls. So rounds are rare (``every`` is 512
  commits, 64 for a store at ``durability="full"``: the WAL restarts once per ``every``
  commits, whatever the writers' pace), each chases
  the writers until it has caught up, then takes the store's ``gate`` (the lock its
  writers hold from ``BEGIN`` to ``COMMIT``) for one more passive round, the residue since
  the last one: the next writer restarts the WAL. Two short waits per round
  (``bench/bench_wal.py`` compares the alternatives). That round syncs the database file
  (SQLite syncs it only after a round that copied every frame, so it holds every page the
  rounds before copied) and the WAL; both are flushed first, outside the gate, through
  descriptors SQLite holds open in this process (``sync_file``), after a chase that copied
  ``PRESYNC_FRAMES`` or more, so the writers wait for the residue only (a 512-commit round
  at ``normal``: 3.3 -> 1.3 ms under the gate).
- The writers keep an auto-checkpoint as a backstop (``BACKSTOP_PAGES``), so the WAL stays
  bounded if this thread falls behind or is gone.
- Fork-safe: ``fork`` waits for a running checkpoint to finish (a child must not inherit a
  connection mid-call); a child never uses the parent's thread or connection, the store
  starts a new checkpointer there when it first writes.
- ``close`` stops the thread and closes its connection; it is idempotent.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
import weakref
from pathlib import Path

__all__ = [
    "BACKSTOP_PAGES",
    "CHECKPOINT_EVERY",
    "CHECKPOINT_EVERY_FULL",
    "MAX_ROUNDS",
    "PRESYNC_FRAMES",
    "Checkpointer",
    "sync_file",
]

#: Commits between two checkpoint rounds, each ending in a WAL restart (a new call commits
#: twice; a new call's ~26 pages make the WAL about 26 MiB at most).
CHECKPOINT_EVERY = 512
#: The same for a store at ``durability="full"``: there every commit syncs the WAL, and a
#: sync of a WAL still growing costs about twice one written over old frames (a 512-commit
#: WAL grows to ~23 MB first); the restart's own header sync is one more in 64.
CHECKPOINT_EVERY_FULL = 64
#: Frames a wake-up's rounds copy before its gated round is worth flushing the files for
#: (a sync of fewer pages is about as quick as the flush that would precede it).
PRESYNC_FRAMES = 1024
#: Passive rounds per wake-up at most (each copies what the writers added meanwhile).
MAX_ROUNDS = 8
#: The writers' ``wal_autocheckpoint`` (64 MiB of 4 KiB pages): reached only when the
#: thread falls far behind, or 512 commits average over 32 pages (a new call's are 13).
BACKSTOP_PAGES = 16384

_LIVE: weakref.WeakSet[Checkpointer] = weakref.WeakSet()
# Stores open in one thread while a fork lists the checkpointers in another: a WeakSet
# listed during an add raises "Set changed size during iteration".
_live_lock = threading.Lock()
_FDS = Path("/proc/self/fd")


def sync_file(path: Path) -> bool:
    """``fdatasync`` the file at ``path`` through a descriptor this process holds open on
    it already (SQLite's own); ``False`` when none is found (or no ``/proc``).

    Never through a descriptor of its own: closing any descriptor of a file drops every
    POSIX lock this process holds on that file, SQLite's included. A descriptor closed and
    reused meanwhile at worst syncs another file, which changes nothing stored.
    """
    try:
        want = os.stat(path)
        names = os.listdir(_FDS)
    except OSError:
        return False
    sync = getattr(os, "fdatasync", None) or os.fsync  # a /proc without fdatasync
    for name in names:
        try:
            fd = int(name)
            got = os.fstat(fd)
            if got.st_ino == want.st_ino and got.st_dev == want.st_dev:
                sync(fd)
                return True
        except (OSError, ValueError):
            continue
    return False


class Checkpointer:
    """Run passive checkpoints of ``path`` on a daemon thread, every ``every`` commits.

    ``gate``: the lock the store's writers hold from ``BEGIN`` to ``COMMIT``; ``None``
    never finishes a round under it (the WAL then restarts only when the thread wins).
    """

    #: Flush the database file and the WAL before the round under the gate (benches
    #: compare it off).
    presync = True

    def __init__(
        self, path: Path, *, every: int = CHECKPOINT_EVERY, gate: threading.Lock | None = None
    ) -> None:
        self.path = path
        self.every = max(1, int(every))
        self.gate = gate
        self.checkpoints = 0  # passive rounds run (tests and benches read it)
        self.gated = 0  # rounds finished under the gate
        self.presyncs = 0  # files flushed before a gated round (``sync_file``)
        #: The writers' commit counter: a writer whose ``next(commits)`` is a multiple of
        #: ``every`` calls ``wake``.
        self.commits = itertools.count(1)
        self._wake = threading.Event()
        self._rounds = threading.Condition()
        self._requested = 0  # ``run_now`` calls made, and the last one a round began after
        self._served = 0
        self._busy = threading.Lock()  # held while the thread is inside SQLite
        self._stopped = False
        self._forking = False
        self._pid = os.getpid()
        self._thread = threading.Thread(
            target=self._loop, name=f"toolledger-checkpoint {path.name}", daemon=True
        )
        with _live_lock:
            _LIVE.add(self)
        self._thread.start()

    def wake(self) -> None:
        """Wake the thread for a round (a writer's ``every``-th commit)."""
        self._wake.set()

    def run_now(self, timeout: float) -> bool:
        """Wake the thread and wait until it has handled that wake-up; False on timeout."""
        with self._rounds:
            self._requested += 1
            target = self._requested
            self._wake.set()
            return self._rounds.wait_for(lambda: self._served >= target or self._stopped, timeout)

    def close(self) -> None:
        """Stop the thread (after a checkpoint in progress) and close its connection."""
        self._stopped = True
        self._wake.set()
        mine = os.getpid() == self._pid and threading.current_thread() is not self._thread
        if mine and self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopped:
                    return
                with self._rounds:
                    serving = self._requested  # the requests this round began after
                with self._busy:
                    if self._stopped:
                        return
                    try:
                        if conn is None:
                            conn = sqlite3.connect(
                                str(self.path),
                                timeout=0,
                                isolation_level=None,
                                check_same_thread=False,
                            )
                            conn.execute("PRAGMA busy_timeout = 0")
                        self._catch_up(conn)
                    except sqlite3.Error:
                        # Never breaks a caller: the writers' backstop keeps the WAL bounded.
                        if conn is not None:
                            with contextlib.suppress(sqlite3.Error):
                                conn.close()
                        conn = None
                with self._rounds:
                    self._served = serving
                    self._rounds.notify_all()
        finally:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            with self._rounds:
                self._rounds.notify_all()

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        # Writers append while a round copies: chase until caught up (each round copies
        # what the last one's writers added, far less), a few rounds at most.
        for _ in range(MAX_ROUNDS):
            busy, frames, copied = self._round(conn)
            if busy or self._stopped or frames <= 0:
                return
            if copied >= frames:
                break
        else:
            return
        # The round under the gate syncs the database file (all the pages the rounds
        # before it copied: SQLite syncs it only after a round that copied every frame)
        # and the WAL: after a long chase, flush both first, so that the writers wait
        # only for the residue (after a short one the flush would cost what it saves).
        if self.presync and copied >= PRESYNC_FRAMES:
            self.presyncs += sum(sync_file(p) for p in (self.path, Path(f"{self.path}-wal")))
        if self.gate is not None:
            with self.gate:  # no writer of this store appends: this round copies the rest
                if not self._stopped:
                    self._round(conn)
                    self.gated += 1

    def _round(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self.checkpoints += 1
        return int(busy), int(frames), int(copied)

    # -- fork --------------------------------------------------------------------------

    def _before_fork(self) -> None:
        self._busy.acquire()

    def _after_fork_parent(self) -> None:
        self._busy.release()

    def _after_fork_child(self) -> None:
        # The thread does not exist here; its connection belongs to the parent.
        self._stopped = True
        self._busy.release()


def _live() -> list[Checkpointer]:
    with _live_lock:
        return list(_LIVE)


def _before_fork() -> None:
    for c in _live():
        if c._pid == os.getpid() and not c._stopped:
            c._before_fork()
            c._forking = True


def _after_fork(child: bool) -> None:
    global _live_lock
    if child:  # another thread of the parent may have held it at the fork: it never returns
        _live_lock = threading.Lock()
    for c in _live():
        if c._forking:
            c._forking = False
            if child:
                c._after_fork_child()
            else:
                c._after_fork_parent()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=lambda: _after_fork(False),
        after_in_child=lambda: _after_fork(True),
    )
