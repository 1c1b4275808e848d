"""The crash matrix: SIGKILL a guarded call at each boundary, then call again in a new process.

In every cell: the effect happened at most once (exactly once where it happened), the
tool never ran twice, and the end state is the documented one. The table is printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolledger

CHILD = Path(__file__).with_name("_crash_child.py")
CALL_ID = "toolu_matrix_1"

# point -> variant -> (second call, second deliver, effects, posts, end status)
EXPECTED: dict[str, dict[str, tuple[str, str | None, int, int, str]]] = {
    "before-claim": {
        "plain": ("new", "ok", 1, 1, "delivered"),
        "recover": ("new", "ok", 1, 1, "delivered"),
    },
    "after-claim": {
        "plain": ("OUTCOME_UNKNOWN", None, 0, 0, "uncertain"),
        "recover": ("OUTCOME_UNKNOWN", None, 0, 0, "uncertain"),
    },
    "in-execute-after-journal": {
        "plain": ("OUTCOME_UNKNOWN", None, 0, 0, "uncertain"),
        "recover": ("OUTCOME_UNKNOWN", None, 0, 0, "uncertain"),
    },
    "in-execute-after-effect": {
        "plain": ("OUTCOME_UNKNOWN", None, 1, 0, "uncertain"),
        "recover": ("recovered", "ok", 1, 1, "delivered"),
    },
    "after-execute": {
        "plain": ("OUTCOME_UNKNOWN", None, 1, 0, "uncertain"),
        "recover": ("recovered", "ok", 1, 1, "delivered"),
    },
    "after-completion": {
        "plain": ("replayed", "ok", 1, 1, "delivered"),
        "recover": ("replayed", "ok", 1, 1, "delivered"),
    },
    "after-delivery-claim": {
        "plain": ("replayed", "DELIVERY_UNCERTAIN", 1, 0, "delivering"),
        "recover": ("replayed", "ok", 1, 1, "delivered"),
    },
    "after-post": {
        "plain": ("replayed", "DELIVERY_UNCERTAIN", 1, 1, "delivering"),
        "recover": ("replayed", "ok", 1, 2, "delivered"),  # redeliver: at-least-once
    },
}


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, str(CHILD), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _cell(tmp: Path, point: str, variant: str) -> dict[str, Any]:
    tmp.mkdir()
    db = str(tmp / "ledger.db")
    first = _child(db, str(tmp), "first", point)
    assert first.returncode == -signal.SIGKILL, first.stderr
    effects_before = len(_lines(tmp / "effects.log"))
    second = _child(db, str(tmp), "again", variant)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout.strip().splitlines()[-1])
    store = toolledger.SQLiteStore(db)
    rec = store.get("default", CALL_ID)
    store.close()
    return {
        "call": report["call"],
        "deliver": report.get("deliver"),
        "effects_after_crash": effects_before,
        "effects": _lines(tmp / "effects.log"),
        "posts": _lines(tmp / "posts.log"),
        "status": rec.status.value if rec else "absent",
    }


@pytest.mark.slow
def test_crash_matrix_every_boundary_executes_at_most_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kill at each boundary, call again (with and without recover): the documented end."""
    rows = []
    failures = []
    for point, variants in EXPECTED.items():
        for variant, want in variants.items():
            got = _cell(tmp_path / f"{point}-{variant}", point, variant)
            effects = got["effects"]
            assert len(effects) <= 1, (point, variant, effects)  # never executed twice
            assert len(set(effects)) == len(effects)
            have = (got["call"], got["deliver"], len(effects), len(got["posts"]), got["status"])
            if got["posts"]:
                assert len(set(got["posts"])) == 1, "every post carries the same stored bytes"
            rows.append((point, variant, *have))
            if have != want:
                failures.append((point, variant, have, want))
    with capsys.disabled():
        head = ("killed at", "2nd process", "call", "deliver", "effects", "posts", "end state")
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        print()
        for r in [head, *rows]:
            print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))
    assert failures == []
