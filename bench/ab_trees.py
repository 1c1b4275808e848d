"""Two source trees side by side: the same guarded calls, the trees taking turns batch by batch.

A change is measured against the tree before it in one run: each tree runs in its own
process (``PYTHONPATH=<tree>/src``), and the parent hands both the same case in turn, batch
by batch (which side goes first alternates), so both see the same moments of a shared,
noisy machine. Cases: a new call and a replayed call at durability ``normal``, a new call
plus ``run.deliver`` at ``normal`` and ``full``, a new call at ``full``; each a real
``toolledger.run`` on its own SQLite file, trivial tool. Columns: medians, the new/old
ratio of the medians, p99 of each side, and the load average over the run.

Run: ``.venv/bin/python bench/ab_trees.py OLD_SRC NEW_SRC [--rounds N]``, e.g. with a
``git worktree add /tmp/old <commit>`` for ``OLD_SRC=/tmp/old/src``. Not a ``bench_*.py``
(``run_all.py`` runs those without arguments); nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

RESULT = {"ok": True, "message_id": "msg-0001", "recipients": ["a@example.com"]}
INPUT = {"to": "a@example.com", "subject": "hello"}
CASES = [
    ("new, normal", 25),
    ("replayed, normal", 25),
    ("new + deliver, normal", 25),
    ("new, full", 5),
    ("new + deliver, full", 5),
]


def child() -> None:
    """Answer ``<case> <n>`` lines on stdin with the JSON list of ``n`` call times."""
    import toolledger as tl
    from toolledger.store import SQLiteStore

    tmp = Path(tempfile.mkdtemp(prefix="toolledger-ab-"))
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: RESULT)
    runs: dict[str, Any] = {}
    for durability in ("normal", "full"):
        store = SQLiteStore(tmp / f"{durability}.db", durability=durability)  # type: ignore[arg-type]
        run = tl.run("ab trees", agent="bench", db=store)
        run.__enter__()
        for i in range(100):  # warm up
            run.call(tool, call_id=f"warm-{i}", input={**INPUT, "ref": f"warm-{i}"})
        runs[durability] = run
    count = 0
    for line in sys.stdin:
        case, size = line.rstrip("\n").rsplit(" ", 1)
        if case == "quit":
            break
        name, durability = case.split(", ")
        run = runs[durability]
        out = []
        for _ in range(int(size)):
            count += 1
            cid = f"c-{count}"
            given = {**INPUT, "ref": cid}  # each id its own action (the same one is served)
            if name == "replayed":
                run.call(tool, call_id=cid, input=given)
                run.flush()
            t0 = time.perf_counter()
            run.call(tool, call_id=cid, input=given)
            if name == "new + deliver":
                run.deliver(cid, lambda payload: None)
            out.append(time.perf_counter() - t0)
        run.flush()  # a replay's buffered record: written outside the timed calls
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    for run in runs.values():
        run.__exit__(None, None, None)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description="two source trees, taking turns")
    parser.add_argument("old", help="the old tree's src directory")
    parser.add_argument("new", help="the new tree's src directory")
    parser.add_argument("--rounds", type=int, default=40, help="batches of every case per side")
    args = parser.parse_args()
    sides = {"old": args.old, "new": args.new}
    kids = {
        side: subprocess.Popen(
            [sys.executable, __file__, "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": src},
        )
        for side, src in sides.items()
    }
    samples: dict[tuple[str, str], list[float]] = {(s, c): [] for s in sides for c, _ in CASES}
    loads = []
    for rnd in range(args.rounds):
        for case, size in CASES:
            for side in ("old", "new") if rnd % 2 == 0 else ("new", "old"):
                kid = kids[side]
                assert kid.stdin is not None
                assert kid.stdout is not None
                kid.stdin.write(f"{case} {size}\n")
                kid.stdin.flush()
                samples[(side, case)].extend(json.loads(kid.stdout.readline()))
        loads.append(os.getloadavg()[0])
    for kid in kids.values():
        assert kid.stdin is not None
        kid.stdin.write("quit 0\n")
        kid.stdin.flush()
        kid.wait()
    print(
        f"{'case':<24} {'old median':>10} {'new median':>10} {'new/old':>8} "
        f"{'old p99':>9} {'new p99':>9} {'calls':>6}"
    )
    for case, _ in CASES:
        old, new = samples[("old", case)], samples[("new", case)]
        mo, mn = statistics.median(old), statistics.median(new)
        print(
            f"{case:<24} {mo * 1e6:>10.1f} {mn * 1e6:>10.1f} {mn / mo:>8.2f} "
            f"{_p99(old) * 1e6:>9.1f} {_p99(new) * 1e6:>9.1f} {len(old):>6}"
        )
    print(
        f"\nmicroseconds per call; load average over the run: min {min(loads):.2f}, median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}; {os.cpu_count()} CPUs."
    )


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        main()
