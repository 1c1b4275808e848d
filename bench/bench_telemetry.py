"""Cost of telemetry per guarded tool call: off (API only), SDK + in-memory, SDK + OTLP.

    .venv/bin/python bench/bench_telemetry.py [--calls N]

Each configuration runs N new guarded tool calls (``run.call``, a fresh ``call_id`` each, a
trivial tool) on SQLite at ``durability="normal"`` and times every call. The telemetry
share is ``(median_on - median_off) / median_on``. A second table times the telemetry hooks
alone for one guarded call's worth of spans (the tool span, three checkpoint transitions,
one update, the end), which isolates telemetry from storage noise.

Configurations:
- off (API only): no SDK provider anywhere, so ``hooks_for`` returns the no-op hooks (what
  an install with only ``opentelemetry-api`` does; ``tests/telemetry/test_configure.py``
  runs that install with the SDK made unimportable).
- SDK + in-memory: ``TracerProvider`` + ``SimpleSpanProcessor(InMemorySpanExporter)``.
- SDK + OTLP: ``TracerProvider`` + ``BatchSpanProcessor(OTLP/HTTP exporter)`` sending to a
  real OTLP receiver (tests/telemetry/otlp_receiver.py) running in another process.

Targets (issue 4): SDK-on telemetry <= 25% of a guarded call at durability normal; <= 5 us
per call with the API only. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

import toolledger  # noqa: E402
from toolledger.telemetry import NOOP_TELEMETRY, _spans, hooks_for  # noqa: E402

RECEIVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from otlp_receiver import http_receiver
with http_receiver() as r:
    print(r.endpoint, flush=True)
    sys.stdin.read()
"""


def lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"order": input["order"], "status": "shipped"}


_IN_TELEMETRY = [0]


def _timed(cls: Any, name: str) -> None:
    """Wrap a hook method so the time spent inside telemetry is added up per call."""
    inner = getattr(cls, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            _IN_TELEMETRY[0] += time.perf_counter_ns() - t0

    setattr(cls, name, wrapper)


for _name in ("transition", "update", "end"):
    _timed(_spans.OTelSpan, _name)
for _name in ("run_started", "event_started"):
    _timed(_spans.OTelTelemetry, _name)


def guarded_calls(
    db_dir: Path, n: int, provider: Any, exporter: Any = None
) -> tuple[list[float], list[float]]:
    """Time ``n`` new guarded calls; return (total, inside telemetry) microseconds per call."""
    store = toolledger.SQLiteStore(db_dir / "bench.db", durability="normal")
    tool = toolledger.tool("lookup_order", revision="1", execute=lookup, description="d")
    times: list[float] = []
    inside: list[float] = []
    with toolledger.run(goal="bench", agent="bench", db=store, tracer_provider=provider) as run:
        for i in range(n + 20):
            _IN_TELEMETRY[0] = 0
            t0 = time.perf_counter_ns()
            run.call(tool, call_id=f"call-{i}", input={"order": i}, justification="bench")
            if i >= 20:  # warm-up
                times.append((time.perf_counter_ns() - t0) / 1000)
                inside.append(_IN_TELEMETRY[0] / 1000)
            if exporter is not None and i % 100 == 0:
                exporter.clear()  # keep memory flat, like an exporter that ships spans out
    store.close()
    return times, inside


def hooks_only(n: int, provider: Any) -> list[float]:
    """Time one guarded call's telemetry hook calls, without storage (microseconds)."""
    hooks = hooks_for(tracer_provider=provider) if provider is not None else NOOP_TELEMETRY
    run = hooks.run_started({"run_id": "r", "agent": "bench", "goal": "bench"})
    event = {
        "run_id": "r",
        "event_id": "e",
        "kind": "tool_call",
        "name": "lookup_order",
        "justification": "bench",
        "justification_source": "developer",
        "inputs": {"order": 1},
        "checkpoint": {"namespace": "default", "call_id": "c", "revision": None},
    }
    final = {**event, "status": "completed", "outputs": {"result": {"ok": 1}, "is_error": False}}
    steps = (
        ("create_checkpoint", None, "ready", -1, 0),
        ("claim_execution", "ready", "executing", 0, 1),
        ("complete_execution", "executing", "completed", 1, 2),
    )
    facts = {"checkpoint.status": "completed", "checkpoint.revision": 2, "replayed": False}
    times: list[float] = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        span = hooks.event_started(event, run)
        for name, src, dst, exp, rev in steps:
            span.transition(
                name=name,
                status_from=src,
                status_to=dst,
                expected_revision=exp,
                revision=rev,
                won=True,
            )
        span.update(facts)
        span.end(final)
        if i >= 200:
            times.append((time.perf_counter_ns() - t0) / 1000)
    run.end({})
    return times


def sdk_floor(n: int, provider: Any) -> list[float]:
    """Time the same four spans made directly with the SDK (no toolledger), microseconds."""
    from opentelemetry import trace

    tracer = provider.get_tracer("floor")
    tool_attrs = {f"attr.{i}": "value" for i in range(14)}
    transition_attrs = {f"attr.{i}": i for i in range(6)}
    times: list[float] = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        span = tracer.start_span("execute_tool lookup_order", attributes=tool_attrs)
        ctx = trace.set_span_in_context(span)
        for _ in range(3):
            tracer.start_span("checkpoint claim_execution", ctx, attributes=transition_attrs).end()
        span.end()
        if i >= 200:
            times.append((time.perf_counter_ns() - t0) / 1000)
    return times


def providers(endpoint: str | None) -> dict[str, tuple[Any, Any]]:
    """``label -> (provider, in-memory exporter or None)``."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = TracerProvider(shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    memory.add_span_processor(SimpleSpanProcessor(exporter))
    out: dict[str, tuple[Any, Any]] = {
        "off (API only)": (None, None),
        "SDK + in-memory": (memory, exporter),
    }
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        otlp = TracerProvider(shutdown_on_exit=False)
        otlp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        out["SDK + OTLP/HTTP (local)"] = (otlp, None)
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        del os.environ[name]
    receiver = subprocess.Popen(
        [sys.executable, "-c", RECEIVER, str(ROOT / "tests" / "telemetry")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        endpoint = receiver.stdout.readline().strip() + "/v1/traces"
        configs = providers(endpoint)
        rounds = 10  # interleaved, so load drift on a shared machine hits every config alike
        per_round = max(1, args.calls // rounds)
        calls: dict[str, list[float]] = {label: [] for label in configs}
        inside: dict[str, list[float]] = {label: [] for label in configs}
        hooks: dict[str, list[float]] = {label: [] for label in configs}
        floor: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(rounds):
                for i, (label, (provider, exporter)) in enumerate(configs.items()):
                    db_dir = Path(tmp) / f"{r}-{i}"
                    db_dir.mkdir()
                    total, tel = guarded_calls(db_dir, per_round, provider, exporter)
                    calls[label] += total
                    inside[label] += tel
                    hooks[label] += hooks_only(per_round * 2, provider)
                    if label == "SDK + in-memory":
                        floor += sdk_floor(per_round * 2, provider)
                    if exporter is not None:
                        exporter.clear()
        n = per_round * rounds
        print(f"guarded tool calls: {n} new calls per config, SQLite durability=normal")
        print("(telemetry us: median time spent inside the telemetry hooks during each call)\n")
        head = f"{'telemetry':<26}{'call median':>12}{'p99':>10}{'telemetry us':>14}{'share':>8}"
        print(head + f"{'call - off':>12}")
        base = statistics.median(calls["off (API only)"])
        for label, times in calls.items():
            med = statistics.median(times)
            tel = statistics.median(inside[label])
            print(
                f"{label:<26}{med:>12.1f}{pct(times, 0.99):>10.1f}{tel:>14.2f}"
                f"{tel / med:>8.1%}{med - base:>12.1f}"
            )
        print("\ntelemetry hooks alone, one guarded call's worth (tool span + 3 transitions +")
        print(f"update + end), no storage\n\n{'telemetry':<26}{'median us':>11}{'p99 us':>10}")
        for label, times in hooks.items():
            print(f"{label:<26}{statistics.median(times):>11.2f}{pct(times, 0.99):>10.2f}")
        label = "bare SDK, same 4 spans"
        print(f"{label:<26}{statistics.median(floor):>11.2f}{pct(floor, 0.99):>10.2f}")
        for provider, _ in configs.values():
            if provider is not None:
                provider.shutdown()
    finally:
        if receiver.stdin:
            receiver.stdin.close()
        receiver.wait(10)


if __name__ == "__main__":
    main()
