"""Run every ``bench/bench_*.py`` in turn (each prints its own table); exit 1 if one fails.

Usage: ``.venv/bin/python bench/run_all.py [NAME_SUBSTRING ...]`` runs all benchmarks, or
only those whose file name contains one of the given substrings.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main"]

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks one after another; return 1 if any failed."""
    wanted = sys.argv[1:] if argv is None else argv
    scripts = sorted(HERE.glob("bench_*.py"))
    if wanted:
        scripts = [s for s in scripts if any(w in s.name for w in wanted)]
    failed = []
    for script in scripts:
        print(f"=== {script.name} ===", flush=True)
        started = time.monotonic()
        code = subprocess.run([sys.executable, str(script)], check=False).returncode
        print(f"--- {script.name}: exit {code} in {time.monotonic() - started:.1f}s\n", flush=True)
        if code != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
