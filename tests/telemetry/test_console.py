"""The console exporter prints each finished run as the demo's tree, without a backend."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolledger
from toolledger.telemetry import ConsoleTreeExporter, configure


@toolledger.tool(revision="1")
def _echo(input: dict[str, str], ctx: toolledger.ExecuteContext) -> dict[str, str]:
    return {"said": input["text"]}


class TestConsoleTreeExporter:
    def test_run_prints_once_as_a_tree_when_its_root_ends(self, tmp_path: Path) -> None:
        """A run's spans are printed in one tree, the run span first, after the run ends."""
        out = io.StringIO()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out)))
        with toolledger.run(goal="say hi", db=tmp_path / "l.db", tracer_provider=provider) as run:
            run.call(_echo, call_id="c1", input={"text": "hi"})
            assert out.getvalue() == ""  # held until the run's root span ends
        lines = out.getvalue().splitlines()
        assert lines[0].startswith("invoke_agent")
        assert any("execute_tool _echo" in line and "call=c1" in line for line in lines)
        assert any("claim_execution" in line for line in lines)
        assert sum(line.startswith("invoke_agent") for line in lines) == 1

    def test_broken_stream_never_reaches_the_call(self, tmp_path: Path) -> None:
        """A closed output stream is reported, and the guarded call still succeeds."""
        out = io.StringIO()
        out.close()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out)))
        with toolledger.run(goal="g", db=tmp_path / "l.db", tracer_provider=provider) as run:
            outcome = run.call(_echo, call_id="c1", input={"text": "hi"})
        assert outcome.payload == {"said": "hi"}

    def test_force_flush_prints_an_unfinished_trace(self) -> None:
        """Spans whose root has not ended are printed by force_flush, not lost."""
        out = io.StringIO()
        provider = TracerProvider()
        exporter = ConsoleTreeExporter(out)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("root"):
            with tracer.start_as_current_span("child"):
                pass
            assert out.getvalue() == ""
            exporter.force_flush()
            assert "child" in out.getvalue()


def test_configure_console_adds_the_printer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """configure(console=True) prints a finished run to stdout."""
    configure(tracer_provider=TracerProvider(), console=True)  # reset by the autouse fixture
    with toolledger.run(goal="g", db=tmp_path / "l.db") as run:
        run.call(_echo, call_id="c1", input={"text": "hi"})
    printed = capsys.readouterr().out
    assert "invoke_agent" in printed
    assert "execute_tool _echo" in printed


def test_otel_traces_exporter_console_prints_without_configure(tmp_path: Path) -> None:
    """OTEL_TRACES_EXPORTER=console alone (no configure, no SDK set up) prints the run."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import toolledger\n"
        "@toolledger.tool(revision='1')\n"
        "def echo(input, ctx):\n"
        "    return {'said': input['text']}\n"
        "with toolledger.run(goal='g', db='l.db') as run:\n"
        "    run.call(echo, call_id='c1', input={'text': 'hi'})\n"
    )
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    assert done.stdout.splitlines()[0].startswith("invoke_agent")
    assert "└─" in done.stdout or "├─" in done.stdout
    assert "execute_tool echo" in done.stdout
