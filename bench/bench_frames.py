"""Benchmark: how much code one new guarded call runs through (frames, functions, files).

One new ``run.call`` on SQLite, telemetry off, after a warm-up call (imports, caches and
prepared statements are in place), is traced with ``sys.setprofile``: every Python frame
entered is counted, with its function and file, and the guard files among them. Printed:

- ``frames``: Python frames entered by the one call (C functions not counted);
- ``functions``: distinct functions among them; ``files``: distinct source files;
- ``guard files``: distinct files under ``toolledger/guard/`` (and their names);
- ``guard file switches``: how often the innermost guard file changes between two
  consecutive guard frames;
- ``max depth``: the deepest stack below ``run.call``.

Run: ``.venv/bin/python bench/bench_frames.py [--replayed]``. Nothing here is asserted
by the test suite (a count, not a speed).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import toolledger as tl

__all__ = ["main", "measure"]


def measure(*, replayed: bool = False) -> dict[str, Any]:
    """Trace one new (or replayed) ``run.call``; return the counts."""
    tool = tl.tool("send_email", revision="1", execute=lambda input, ctx: {"ok": True})
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "frames.db")
        with tl.run("frames", db=db, capture_content=False) as run:
            run.call(tool, call_id="warm-up", input={"to": "w@example.com"})
            # Another input: the same action under a new id would be served, not executed.
            call_id = "warm-up" if replayed else "measured"
            given = {"to": "w@example.com" if replayed else "m@example.com"}
            frames: list[tuple[str, str, int]] = []
            depth = 0
            max_depth = 0

            def profile(frame: FrameType, event: str, arg: Any) -> None:
                nonlocal depth, max_depth
                if event == "call":
                    depth += 1
                    max_depth = max(max_depth, depth)
                    code = frame.f_code
                    frames.append((code.co_filename, code.co_qualname, depth))
                elif event == "return":
                    depth -= 1

            sys.setprofile(profile)
            try:
                run.call(tool, call_id=call_id, input=given)
            finally:
                sys.setprofile(None)
    guard = [f for f, _, _ in frames if "/toolledger/guard/" in f]
    switches = sum(1 for a, b in itertools.pairwise(guard) if a != b)
    return {
        "frames": len(frames),
        "functions": len({(f, q) for f, q, _ in frames}),
        "files": len({f for f, _, _ in frames}),
        "guard files": sorted({Path(f).name for f in guard}),
        "guard file switches": switches,
        "max depth": max_depth,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replayed", action="store_true", help="trace a replay instead")
    args = parser.parse_args()
    counts = measure(replayed=args.replayed)
    kind = "replayed" if args.replayed else "new"
    print(f"one {kind} run.call (SQLite, telemetry off)")
    for name, value in counts.items():
        if name == "guard files":
            print(f"  {name:<20} {len(value)}: {', '.join(value)}")
        else:
            print(f"  {name:<20} {value}")


if __name__ == "__main__":
    main()
