"""Every example runs standalone: ``python examples/<name>.py`` in a scratch directory.

The ``make demo`` examples also fit one screen each, and the demo's span tree and replay
summary come from the real run (the spans the SDK caught, the journal's replay).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ._adk import adk_env, adk_python_or_skip

ROOT = Path(__file__).resolve().parents[1]
# A leading underscore marks a helper module the examples would import, not an example.
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
MAKE_DEMO = ("quickstart.py", "demo_agent.py")
SCREEN_LINES = 50
#: Examples run with the Google ADK's own interpreter (tests/_adk.py).
ADK_EXAMPLES = {"framework_google_adk.py"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_and_exits_zero(example: Path, tmp_path: Path) -> None:
    """The example exits 0 when run with the venv's python from an empty directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLLEDGER_DB")}
    python = sys.executable
    if example.name in ADK_EXAMPLES:  # google-adk lives in its own virtualenv
        python = adk_python_or_skip()
        env = {k: v for k, v in adk_env().items() if not k.startswith("TOOLLEDGER_DB")}
    proc = subprocess.run(
        [python, str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def test_quickstart_tool_runs_once_and_result_is_redelivered(tmp_path: Path) -> None:
    """The quickstart's story: one execution, a failed post, deliver after reconnecting."""
    example = next(p for p in EXAMPLES if p.name == "quickstart.py")
    for attempt in range(2):  # a second run starts the story afresh
        proc = subprocess.run(
            [sys.executable, str(example)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "decide -> execute" in out
        assert "posting the result failed" in out
        assert "decide -> deliver" in out
        assert "send_email ran 1 time(s)" in out
        assert "the tool ran exactly once" in out
        assert (tmp_path / "demo-out" / "quickstart.db").exists(), attempt
        assert len((tmp_path / "demo-out" / "outbox.log").read_text().splitlines()) == 1


def _run(example: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLLEDGER_DB")}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("example", MAKE_DEMO)
def test_make_demo_example_output_fits_one_screen(example: str, tmp_path: Path) -> None:
    """Each example ``make demo`` runs prints one screen at most (50 lines), nothing on stderr."""
    proc = _run(example, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert 10 < len(lines) <= SCREEN_LINES, proc.stdout
    assert proc.stderr == ""


def _load_demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    spec = importlib.util.spec_from_file_location(
        "demo_agent_under_test", ROOT / "examples" / "demo_agent.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree_names(lines: list[str]) -> list[str]:
    """Return the span names of tree lines: the text before the two-space column, glyphs off."""
    names = []
    for line in lines:
        bare = re.sub(r"^[│├└─|`\- ]+", "", line)
        names.append(re.split(r"\s{2,}", bare, maxsplit=1)[0])
    return names


def _printed_tree(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith("the run as a tracing backend")
    )
    tree = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        tree.append(line)
    return tree


def _demo_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, list[Any]]:
    """Run the demo in this process with a test-owned exporter; return its stdout and spans."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    demo = _load_demo(monkeypatch)
    monkeypatch.setattr(demo, "in_memory_spans", lambda: (provider, exporter))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLLEDGER_DB", raising=False)
    assert demo.main() == 0
    return capsys.readouterr().out, list(exporter.get_finished_spans())


def test_demo_prints_the_real_spans_as_a_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One tree line per span the SDK caught, each named as that span, children under parents."""
    out, spans = _demo_output(monkeypatch, tmp_path, capsys)
    lines = _printed_tree(out)
    kinds = [
        line.split(name, 1)[1].split()[0]
        for name, line in zip(_tree_names(lines), lines, strict=True)
    ]
    tree = [line for line, kind in zip(lines, kinds, strict=True) if kind != "event"]
    events = [line for line, kind in zip(lines, kinds, strict=True) if kind == "event"]
    assert len(tree) == len(spans) > 0
    assert sorted(_tree_names(tree)) == sorted(s.name for s in spans)
    assert sorted(_tree_names(events)) == sorted(e.name for s in spans for e in s.events)
    (root,) = [s for s in spans if s.parent is None]
    assert tree[0].strip().startswith(root.name)
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: Any) -> int:
        parent = by_id.get(span.parent.span_id) if span.parent else None
        return 0 if parent is None else depth(parent) + 1

    def line_depth(line: str) -> int:
        return (len(line) - len(re.sub(r"^[│├└─|`\- ]+", "", line)) - 2) // 3

    def backend_kind(span: Any) -> str:
        oi = next((v for k, v in (span.attributes or {}).items() if k.endswith("span.kind")), None)
        return span.kind.name.lower() + (f"/{oi}" if oi else "")

    expected = sorted((s.name, depth(s), backend_kind(s)) for s in spans)
    shown = []
    for name, line in zip(_tree_names(tree), tree, strict=True):
        kind = line.split(name, 1)[1].split()[0]
        shown.append((name, line_depth(line), kind))
    assert sorted(shown) == expected
    # A span's events sit one level under it.
    expected_events = sorted((e.name, depth(s) + 1) for s in spans for e in s.events)
    assert sorted(
        (n, line_depth(line)) for n, line in zip(_tree_names(events), events, strict=True)
    ) == (expected_events)

    # Attribute keys matched by their last part, as the printer does (names may move).
    def attr(span: Any, *suffix: str) -> Any:
        return next((v for k, v in (span.attributes or {}).items() if k.endswith(suffix)), None)

    tools = [s for s in spans if attr(s, "call.id", "call_id") == "call_post_01"]
    assert len(tools) == 2, "the demo's guarded call is asked for twice"
    tool_lines = [line for line in tree if "call=call_post_01" in line]
    assert len(tool_lines) == len(tools)

    def is_replay(span: Any) -> bool:
        marks = ("replay" in span.name, attr(span, ".replayed") is True)
        return any(marks) or attr(span, ".outcome") == "replayed"

    # One execution, one replay; the printed line says which is which.
    assert sorted(is_replay(s) for s in tools) == [False, True]
    assert sorted("replay" in line for line in tool_lines) == [False, True]
    for span in spans:
        outcome = attr(span, ".outcome")
        if outcome is not None:
            assert any(span.name in line and f"outcome={outcome}" in line for line in tree)


def test_demo_replay_serves_stored_results_and_reruns_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay lists the journal's events in recorded order and says nothing would run again."""
    import toolledger

    out, _ = _demo_output(monkeypatch, tmp_path, capsys)
    (run,) = toolledger.list_runs(tmp_path / "demo-out" / "demo_agent.db")
    view = toolledger.load_run(tmp_path / "demo-out" / "demo_agent.db", run.run_id)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("replayed from the journal"))
    rows = lines[start + 1 : start + 1 + len(view.events)]
    assert [row.split()[1:3] for row in rows] == [[e.kind, e.name] for e in view.events]
    for row, event in zip(rows, view.events, strict=True):
        if event.kind == "tool_call":
            assert "stored result {'comment_id': 'c-1'}" in row
            assert "not run again" in row
    assert lines[start + 1 + len(view.events)] == (
        "replay: 2 tool calls answered from stored results; would run again: 0 (nothing)"
    )
    nxt = lines.index("next:")
    tail = lines[nxt + 1 :]
    assert len(tail) == 3
    assert "pip install arize-phoenix" in tail[0]
    assert "phoenix serve" in tail[0]
    assert f"export-otlp {run.run_id} --endpoint http://127.0.0.1:6006" in tail[0]
    assert "demo-out/demo_agent.html" in tail[1]
    assert (tmp_path / "demo-out" / "demo_agent.html").exists()
    assert tail[2].endswith(f"--db demo-out/demo_agent.db show {run.run_id}")


def test_readme_demo_tree_excerpt_names_spans_the_demo_prints(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every span name in the README's excerpt of the demo tree is a span the demo prints today."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- demo-tree -->") : text.index("<!-- /demo-tree -->")]
    (excerpt,) = re.findall(r"```text\n(.*?)```", block, re.S)
    wanted = set(_tree_names(excerpt.splitlines()))
    assert len(wanted) >= 5
    out, _ = _demo_output(monkeypatch, tmp_path, capsys)
    printed = set(_tree_names(_printed_tree(out)))
    assert wanted <= printed, f"README names spans the demo no longer prints: {wanted - printed}"


def test_demo_phoenix_line_shows_the_same_spans_in_phoenix() -> None:
    """The export command the demo prints, run word for word, puts the tree's spans in Phoenix."""
    # The same probes as tests/telemetry/test_phoenix.py (its module name depends on the run).
    venv = Path(os.environ.get("TOOLLEDGER_PHOENIX") or ROOT / ".venv-phoenix")
    binary = venv / "bin" / "phoenix"
    reason = None
    if not binary.is_file():
        reason = "no Phoenix virtualenv (set TOOLLEDGER_PHOENIX or run .ci/run)"
    elif shutil.which("unshare") is None or shutil.which("ip") is None:
        reason = "cannot make a network namespace (no unshare or ip)"
    elif subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False).returncode:
        reason = "cannot make a network namespace (unshare --net needs root)"
    if reason is not None:
        if os.environ.get("TOOLLEDGER_REQUIRE_PHOENIX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLLEDGER_DB", "OTEL_"))}
    proc = subprocess.run(
        [
            "unshare",
            "--net",
            sys.executable,
            str(ROOT / "scripts" / "demo_phoenix.py"),
            str(binary),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert f"export-otlp {doc['run_id']} --endpoint http://127.0.0.1:6006" in doc["command"]
    assert f"{len(doc['printed'])} spans" in doc["export_stdout"]
    assert sorted(doc["printed"]) == doc["phoenix"]
