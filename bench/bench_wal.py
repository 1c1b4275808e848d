"""Benchmark: where SQLite's WAL checkpoints run, and what that does to a new call's p99.

Cases, each a new guarded call (``run.call``, trivial tool) at durability ``normal`` on its
own SQLite file, interleaved batch by batch in one run so all see the same machine:

- ``autocheckpoint 1000 (SQLite)``: SQLite's default: the commit that takes the WAL past
  1000 pages copies it back into the database file, on the caller's path.
- ``autocheckpoint 10000``: the same, tuned: stalls ten times rarer, each ten times longer.
- ``rounds every N``: the store's design (``_sqlite_checkpointer``): writers only count
  commits; every ``N`` commits a thread of the store's runs passive checkpoint rounds
  until it has caught up, the last one under the writers' gate, so the next writer
  restarts the WAL (once per ``N`` commits). The default is 512 (64 at ``full``); backstop
  16,384 pages. The files are flushed just before the gated round (``sync_file``); ``every
  512, gated round unflushed`` leaves that round to sync all the pages the ones before it
  copied, under the gate.
- ``every 16, no gate, backstop 1000``: the thread as it was before the gate: a round
  every 16 commits, which never catches up while a writer keeps appending, so the WAL
  grows to SQLite's 1,000-page auto-checkpoint and the commit crossing it checkpoints; in
  idle moments a round does catch up, and the next writer restarts the WAL (and syncs its
  header) every few calls.

``--gap-us N`` waits N microseconds after each call (a tool's own I/O): idle moments in
which a round catches up, and the next writer restarts the WAL and syncs its header.

Columns: median, mean, p99 and p99.9 in microseconds, the largest sample, and the WAL file's
size at the end (the checkpoints keep it from growing). Durability semantics are the same in
every case: only where the copy back into the database runs changes.

Run: ``.venv/bin/python bench/bench_wal.py [--calls N] [--durability normal|full]``. Prints
a table; nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import RESULT, percentile

import toolledger as tl
from toolledger.store import SQLiteStore

__all__ = ["main"]

INPUT = {"to": "a@example.com", "subject": "hello"}
BATCH = 20


class _Tuned(SQLiteStore):
    """SQLite's auto-checkpoint at ``pages``, no checkpoint thread."""

    _checkpoint_every = None
    pages = 1000

    def _connect(self) -> Any:
        conn = super()._connect()
        conn.execute(f"PRAGMA wal_autocheckpoint = {self.pages}")
        return conn


class _Ungated(SQLiteStore):
    """The checkpoint thread without the gate, SQLite's 1000-page backstop (the old default)."""

    def _connect(self) -> Any:
        conn = super()._connect()
        conn.execute("PRAGMA wal_autocheckpoint = 1000")
        return conn

    def _start_checkpointer(self) -> Any:
        ckpt = super()._start_checkpointer()
        if ckpt is not None:
            ckpt.gate = None
        return ckpt


class _Passive(SQLiteStore):
    """The store's checkpoint thread, every ``_checkpoint_every`` commits whatever the
    durability (the store caps it at 64 at ``full``)."""

    presync = True

    def _round_every(self) -> int | None:
        return self._checkpoint_every

    def _start_checkpointer(self) -> Any:
        ckpt = super()._start_checkpointer()
        if ckpt is not None:
            ckpt.presync = self.presync
        return ckpt


def _store(path: Path, durability: str, kind: str, value: int) -> SQLiteStore:
    if kind == "auto":
        cls = type("Auto", (_Tuned,), {"pages": value})
        return cls(path, durability=durability)  # type: ignore[no-any-return]
    if kind == "ungated":
        cls = type("Ungated", (_Ungated,), {"_checkpoint_every": value})
        return cls(path, durability=durability)  # type: ignore[no-any-return]
    presync = kind != "no-presync"
    cls = type("Passive", (_Passive,), {"_checkpoint_every": value, "presync": presync})
    return cls(path, durability=durability)  # type: ignore[no-any-return]


CASES = [
    ("autocheckpoint 1000 (SQLite)", "auto", 1000),
    ("autocheckpoint 10000", "auto", 10000),
    ("every 16, no gate, backstop 1000", "ungated", 16),
    ("rounds every 16", "passive", 16),
    ("rounds every 64 (default at full)", "passive", 64),
    ("rounds every 128", "passive", 128),
    ("rounds every 512 (default)", "passive", 512),
    ("every 512, gated round unflushed", "no-presync", 512),
    ("rounds every 1024", "passive", 1024),
]


def main() -> None:
    parser = argparse.ArgumentParser(description="WAL checkpoint placement benchmark")
    parser.add_argument("--calls", type=int, default=3000, help="new calls per case")
    parser.add_argument("--durability", default="normal", choices=["normal", "full"])
    parser.add_argument("--batch", type=int, default=BATCH, help="calls per case in turn")
    parser.add_argument(
        "--gap-us", type=float, default=0.0, help="a tool's own wait after each call (I/O)"
    )
    args = parser.parse_args()
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
    samples: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {
            name: _store(Path(tmp) / f"{i}.db", args.durability, kind, value)
            for i, (name, kind, value) in enumerate(CASES)
        }
        runs = {name: tl.run("bench wal", agent="bench", db=s) for name, s in stores.items()}
        for r in runs.values():
            r.__enter__()
        for r in runs.values():
            for i in range(50):  # warm up
                r.call(tool, call_id=f"warm-{i}", input={**INPUT, "ref": f"warm-{i}"})
        for start in range(0, args.calls, args.batch):
            for name, r in runs.items():
                for i in range(start, min(args.calls, start + args.batch)):
                    t0 = time.perf_counter()
                    r.call(tool, call_id=f"c-{i}", input={**INPUT, "ref": f"c-{i}"})
                    samples[name].append(time.perf_counter() - t0)
                    if args.gap_us:
                        time.sleep(args.gap_us / 1e6)
        wal = {name: Path(f"{s.path}-wal").stat().st_size for name, s in stores.items()}
        for r in runs.values():
            r.__exit__(None, None, None)
        for s in stores.values():
            s.close()
    print(
        f"{'case (' + args.durability + ')':<34} {'median':>8} {'mean':>8} {'p99':>8} "
        f"{'p99.9':>8} {'max':>8} {'WAL KiB':>8}"
    )
    for name, values in samples.items():
        print(
            f"{name:<34} {statistics.median(values) * 1e6:>8.1f} "
            f"{statistics.fmean(values) * 1e6:>8.1f} {percentile(values, 0.99) * 1e6:>8.1f} "
            f"{percentile(values, 0.999) * 1e6:>8.1f} {max(values) * 1e6:>8.1f} "
            f"{wal[name] / 1024:>8.0f}"
        )
    print(
        f"\nmicroseconds per new call, {args.calls} per case, batches of {args.batch} interleaved; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs."
    )


if __name__ == "__main__":
    main()
