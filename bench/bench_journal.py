"""Benchmark: the execution journal on disk (SQLite) at 20,000 steps.

Reports, in one table:

- per-step overhead as the agent sees it (``with run.step(...)`` + ``record_output``:
  one record hashed into the chain, as a step that ends while its start record is still
  buffered is stored; a start and an end record before), median and p99, over 20,000 steps on
  a SQLite file with the default store settings (the steps that write a 512-record batch
  are included); and the wall time per step including the final flush when the run's
  ``with`` block exits;
- the same loop with no journaling at all (the floor of the harness itself);
- ``verify`` time; JSON and HTML export time and size; the HTML/JSON size ratio;
- ``Replayer.replay`` time over the run with a handler on every step;
- bytes per step on disk: the database file after a truncating WAL checkpoint, divided by
  the steps, and the share of it in the ``events`` table, its ``event_id`` index and the
  full-text index (SQLite's ``dbstat``, when compiled in).

Targets on the 2-core machines: <= 20 us per step (median), <= 800 bytes per step on disk,
HTML export <= 1 s and <= 2x the JSON.
Run: ``.venv/bin/python bench/bench_journal.py [--steps N]``. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import toolledger

__all__ = ["main"]


def _percentile(sorted_ns: list[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(len(sorted_ns) * q))] / 1000.0


def bench_steps(db: Path, steps: int) -> tuple[str, list[int], float, float]:
    lat: list[int] = []
    clock = time.perf_counter_ns
    cpu = time.process_time()
    started = time.perf_counter()
    with toolledger.run("benchmark", agent="bench", db=db) as run:
        for i in range(steps):
            t0 = clock()
            with run.step("tool", justification="benchmark step", i=i) as step:
                step.record_output(ok=True, n=i)
            lat.append(clock() - t0)
    wall = (time.perf_counter() - started) / steps * 1e6
    cpu_per_step = (time.process_time() - cpu) / steps * 1e6
    lat.sort()
    return run.run_id, lat, wall, cpu_per_step


def bytes_per_step(db: Path, steps: int) -> tuple[float, dict[str, float]]:
    """The file's size per step after a truncating checkpoint, and per-table shares."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(db)
        parts: dict[str, float] = {}
        try:
            rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        except sqlite3.Error:  # SQLite built without dbstat
            rows = []
        for name, pages in rows:
            group = "events_fts" if str(name).startswith("events_fts") else str(name)
            if group in ("events", "events_event_id", "events_fts"):
                parts[group] = parts.get(group, 0.0) + pages / steps
        return size / steps, parts
    finally:
        conn.close()


def bench_floor(steps: int) -> list[int]:
    lat: list[int] = []
    clock = time.perf_counter_ns
    for i in range(steps):
        t0 = clock()
        out = {"ok": True, "n": i}
        lat.append(clock() - t0 + 0 * len(out))
    lat.sort()
    return lat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = root / "journal.db"
        floor = bench_floor(args.steps)
        run_id, lat, wall, cpu = bench_steps(db, args.steps)
        per_step, parts = bytes_per_step(db, args.steps)

        t0 = time.perf_counter()
        report = toolledger.verify(db, run_id)
        verify_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        js = toolledger.export_json(db, run_id, root / "run.json")
        json_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        html = toolledger.export_html(db, run_id, root / "run.html")
        html_s, html_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        md = toolledger.export_markdown(db, run_id, root / "run.md")
        md_s = time.perf_counter() - t0

        replayer = toolledger.Replayer(db)
        replayer.register("tool", lambda event: event["outputs"])
        t0 = time.perf_counter()
        replayed = sum(1 for item in replayer.replay(run_id) if not item.skipped)
        replay_s = time.perf_counter() - t0
        replayer.close()

    n = args.steps
    rows = [
        ("steps", f"{n:,}", ""),
        ("per step, median", f"{_percentile(lat, 0.5):.1f} us", "target <= 20 us"),
        ("per step, p99", f"{_percentile(lat, 0.99):.1f} us", ""),
        ("per step, mean", f"{statistics.fmean(lat) / 1000:.1f} us", ""),
        ("per step, wall incl. final flush", f"{wall:.1f} us", "all batch commits included"),
        ("per step, CPU time of the process", f"{cpu:.1f} us", "load-independent view"),
        ("harness floor, median", f"{_percentile(floor, 0.5):.2f} us", "no journaling"),
        ("bytes per step on disk", f"{per_step:,.0f} B", "target <= 800 B"),
        *(
            (f"  of which {name}", f"{value:,.0f} B", "dbstat pages")
            for name, value in sorted(parts.items())
        ),
        ("verify", f"{verify_s:.2f} s", f"ok={report.ok}, {report.event_count:,} records"),
        ("export JSON", f"{json_s:.2f} s", f"{js.size / 1e6:.1f} MB"),
        ("export HTML", f"{html_s:.2f} s", f"{html.size / 1e6:.1f} MB, target <= 1 s"),
        ("export HTML, CPU time", f"{html_cpu:.2f} s", ""),
        ("HTML / JSON size", f"{html.size / js.size:.2f}x", "target <= 2x"),
        ("export Markdown", f"{md_s:.2f} s", f"{md.size / 1e6:.1f} MB"),
        ("replay", f"{replay_s:.2f} s", f"{replayed:,} events handled"),
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows.append(("load average (1 min) at the end", f"{load:.2f}", f"{os.cpu_count()} CPUs"))
    width = max(len(r[0]) for r in rows)
    print(f"{'journal benchmark (SQLite on disk)':<{width}}  value")
    print("-" * (width + 40))
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>12}  {note}")


if __name__ == "__main__":
    main()
