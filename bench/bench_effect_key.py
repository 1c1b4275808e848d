"""Benchmark: what an effect key costs a guarded call, and what a deduplicated call costs.

Cases, each measured per call through a real ``toolledger.run`` on one SQLite file, at
durability ``full`` and ``normal``, interleaved batch by batch in the same run:

- ``new, no key``: a new call of a tool without an effect key (the baseline).
- ``new, key "input"``: a new call of a tool with ``effect_key="input"`` (one extra read of
  the key before the claim, one extra op in the claim transaction).
- ``new, key fn``: the same with a function key (``lambda i: i["to"]``).
- ``re-planned (dedup)``: a new call id whose key a completed call holds: the stored result
  is copied to the new id (one relaxed commit), the tool is not run.
- ``replay, keyed``: a keyed call again under its own id (a plain replay).

Columns: median and p99 in microseconds, commits and fsync-ed commits per call, and the
ratio to ``new, no key`` in the same run. Nothing here is asserted by the test suite.

Run: ``.venv/bin/python bench/bench_effect_key.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import RESULT, CountingStore, percentile

import toolledger as tl

__all__ = ["main"]

BATCH = 20


def run_config(tmp: Path, durability: str, n: int) -> list[tuple[str, list[float], float, float]]:
    store = CountingStore(tmp / f"ek-{durability}.db", durability=durability)  # type: ignore[arg-type]
    plain = tl.tool("send", revision="1", execute=lambda i, c: RESULT)
    by_input = tl.tool("send_in", revision="1", execute=lambda i, c: RESULT, effect_key="input")
    by_fn = tl.tool(
        "send_fn", revision="1", execute=lambda i, c: RESULT, effect_key=lambda i: i["to"]
    )
    samples: dict[str, list[float]] = {}
    counts: dict[str, tuple[int, int]] = {}
    with tl.run("bench effect key", agent="bench", db=store) as run:
        cases: list[tuple[str, Callable[[int], Any]]] = [
            ("new, no key", lambda i: run.call(plain, call_id=f"p{i}", input={"to": f"u{i}"})),
            (
                'new, key "input"',
                lambda i: run.call(by_input, call_id=f"k{i}", input={"to": f"u{i}"}),
            ),
            ("new, key fn", lambda i: run.call(by_fn, call_id=f"f{i}", input={"to": f"u{i}"})),
            (
                "re-planned (dedup)",
                lambda i: run.call(by_input, call_id=f"d{i}", input={"to": f"u{i}"}),
            ),
            ("replay, keyed", lambda i: run.call(by_input, call_id=f"k{i}", input={"to": f"u{i}"})),
        ]
        for start in range(0, n, BATCH):
            for name, fn in cases:
                before = (store.commits, store.fsyncs)
                got = samples.setdefault(name, [])
                for i in range(start, min(n, start + BATCH)):
                    t0 = time.perf_counter()
                    fn(i)
                    got.append((time.perf_counter() - t0) * 1e6)
                c, f = counts.get(name, (0, 0))
                counts[name] = (c + store.commits - before[0], f + store.fsyncs - before[1])
            run.flush()
    store.close()
    return [(name, samples[name], counts[name][0] / n, counts[name][1] / n) for name, _ in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for durability in ("normal", "full"):
            rows = run_config(Path(tmp), durability, args.calls)
            base = statistics.median(rows[0][1])
            print(f"\ndurability={durability}, {args.calls} calls per case")
            head = ("case", "median us", "p99 us", "commits", "fsyncs", "ratio")
            print(f"{head[0]:<22} " + " ".join(f"{h:>9}" for h in head[1:]))
            for name, values, commits, fsyncs in rows:
                med = statistics.median(values)
                print(
                    f"{name:<22} {med:>9.0f} {percentile(values, 0.99):>9.0f} "
                    f"{commits:>9.2f} {fsyncs:>9.2f} {med / base:>9.2f}"
                )


if __name__ == "__main__":
    main()
