"""The guard's shape: no import circle (type-only imports included), a new call's files."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import toolledger

GUARD = Path(toolledger.__file__).resolve().parent / "guard"


def _guard_imports() -> dict[str, set[str]]:
    """``{module: guard modules it imports}``, every import (``TYPE_CHECKING`` ones too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(GUARD.glob("*.py")):
        name = path.stem
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    graph[name].add(node.module.split(".")[0])
                else:
                    graph[name].update(a.name for a in node.names)
    return graph


def _has_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_guard_has_no_import_circle_even_counting_type_only_imports() -> None:
    """The guard's modules import one way (data flow: call -> flow -> drivers -> run)."""
    graph = _guard_imports()
    assert "_flow" in graph["_drivers"]  # the walk sees the imports
    assert _has_cycle(graph) is None


def test_cycle_finder_reports_a_circle() -> None:
    """The check above can fail."""
    assert _has_cycle({"_a": {"_b"}, "_b": {"_a"}}) == ["_a", "_b", "_a"]


def test_new_call_runs_through_at_most_six_guard_files(tmp_path: Path) -> None:
    """One new ``run.call`` touches at most 6 of the guard's files (bench/bench_frames.py)."""
    tool = toolledger.tool("t", revision="1", execute=lambda input, ctx: {"ok": True})
    files: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and f"{GUARD}" in frame.f_code.co_filename:
            files.add(Path(frame.f_code.co_filename).name)

    with toolledger.run("shape", db=tmp_path / "s.db", capture_content=False) as run:
        run.call(tool, call_id="warm", input={})
        sys.setprofile(profile)
        try:
            run.call(tool, call_id="new", input={})
        finally:
            sys.setprofile(None)
    assert "_flow.py" in files
    assert len(files) <= 6, sorted(files)
