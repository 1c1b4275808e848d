"""Cost of telemetry per guarded tool call: off (API only), SDK, SDK + metrics, SDK + OTLP.

    .venv/bin/python bench/bench_telemetry.py [--calls N]

Each configuration runs N new guarded tool calls (``run.call``, a fresh ``call_id`` each, a
trivial tool) on SQLite at ``durability="normal"`` and times every whole call. The
telemetry share is the whole-call difference, ``(median_on - median_off) / median_on``
(span endings run on toolledger's telemetry thread, so time inside the hooks would
under-count: on a shared machine that thread competes with the call). Configurations run
interleaved in rounds, so load drift hits each alike; the mean is printed too (span endings
run in batches on the telemetry thread, so a few calls carry more of their cost than the
median shows). The CPU columns add up the CPU time of the calls' thread and of the telemetry
thread per call: their difference to off is what telemetry costs in CPU wherever it runs,
steadier than wall time on a shared machine. Then the shape of one call's telemetry: spans,
events, attributes. A second table times the telemetry hooks alone for one guarded call's
worth of spans (no storage), and the metric recording of one call (``toolledger.tool.calls``
+ ``toolledger.tool.duration``) alone, beside a bare SDK histogram measurement.

Configurations:
- off (API only): no SDK provider anywhere, so ``hooks_for`` returns the no-op hooks (what
  an install with only ``opentelemetry-api`` does).
- SDK (batch, in-memory): ``TracerProvider`` + ``BatchSpanProcessor(InMemorySpanExporter)``,
  what ``configure()`` builds, without the network.
- SDK + metrics: the same and an SDK ``MeterProvider`` (``InMemoryMetricReader``).
- configure(): OTLP + metrics: the provider ``toolledger.configure(endpoint=...)`` builds
  (``BatchSpanProcessor`` + OTLP/HTTP to a real receiver, tests/telemetry/otlp_receiver.py,
  in another process), and metrics.

Targets: the telemetry share of a call at durability normal <= 25 % (SDK + metrics);
metrics add <= 5 us per call. Printed, never asserted.
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


_CPU = [0.0]  # CPU seconds of the calls' thread and the telemetry thread in guarded_calls


def _thread_cpu() -> float:
    """CPU seconds so far of this thread and of toolledger's telemetry thread.

    Other threads (the batch processors' exporters of every configuration, the store's
    checkpointer) are left out: they run whatever configuration is being timed.
    """
    from toolledger.telemetry._ender import ENDER

    total = time.thread_time()
    thread = getattr(ENDER, "_thread", None)
    if thread is not None and thread.ident is not None:
        total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


def guarded_calls(
    db_dir: Path, n: int, provider: Any, exporter: Any = None, meters: Any = None
) -> tuple[list[float], list[float]]:
    """Time ``n`` new guarded calls; return (total, inside telemetry) microseconds per call.

    Also adds the CPU time of the timed calls, on this thread and the telemetry thread
    (flushed at the end), to ``_CPU``.
    """
    from toolledger.telemetry._policy import DEFAULTS

    DEFAULTS.meter_provider = meters
    store = toolledger.SQLiteStore(db_dir / "bench.db", durability="normal")
    tool = toolledger.tool("lookup_order", revision="1", execute=lookup, description="d")
    times: list[float] = []
    inside: list[float] = []
    cpu = 0.0
    with toolledger.run(goal="bench", agent="bench", db=store, tracer_provider=provider) as run:
        for i in range(n + 20):
            if i == 20:
                cpu = _thread_cpu()
            _IN_TELEMETRY[0] = 0
            t0 = time.perf_counter_ns()
            run.call(tool, call_id=f"call-{i}", input={"order": i}, justification="bench")
            if i >= 20:  # warm-up
                times.append((time.perf_counter_ns() - t0) / 1000)
                inside.append(_IN_TELEMETRY[0] / 1000)
            if exporter is not None and i % 100 == 0:
                exporter.clear()  # keep memory flat, like an exporter that ships spans out
        _spans.flush_spans(30)  # the endings of these calls, on the telemetry thread
        _CPU[0] += _thread_cpu() - cpu
    store.close()
    DEFAULTS.meter_provider = None
    return times, inside


def shape(db_dir: Path, provider: Any, exporter: Any, n: int = 100) -> tuple[float, ...]:
    """Spans, events and attributes (the span's and its events') per new guarded call."""
    _spans.flush_spans(30)
    provider.force_flush()  # what the other measurements left in the batch processor
    exporter.clear()
    guarded_calls(db_dir, n - 20, provider)  # its first 20 calls are warm-up: n calls in all
    _spans.flush_spans(30)
    provider.force_flush()
    spans = [s for s in exporter.get_finished_spans() if not s.name.startswith("invoke_agent")]
    events = sum(len(s.events) for s in spans)
    attrs = sum(len(s.attributes) + sum(len(e.attributes) for e in s.events) for s in spans)
    exporter.clear()
    return len(spans) / n, events / n, attrs / n


def metrics_only(n: int, meters: Any) -> list[float]:
    """Time one guarded call's metric recording alone (microseconds)."""
    from toolledger.telemetry._metrics import instruments_for

    ins = instruments_for(meters)
    assert ins is not None
    attrs = {"gen_ai.tool.name": "lookup_order", "toolledger.tool.outcome": "executed"}
    times: list[float] = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        ins.record_tool(attrs, 0.0002)
        if i >= 200:
            times.append((time.perf_counter_ns() - t0) / 1000)
    return times


def histogram_floor(n: int, meters: Any) -> list[float]:
    """Time one bare SDK histogram measurement with the same two attributes (us)."""
    histogram = meters.get_meter("floor").create_histogram("floor.duration", unit="s")
    attrs = {"gen_ai.tool.name": "lookup_order", "toolledger.tool.outcome": "executed"}
    times: list[float] = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        histogram.record(0.0002, attrs)
        if i >= 200:
            times.append((time.perf_counter_ns() - t0) / 1000)
    return times


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
    """Time the same span and 3 events made directly with the SDK (no toolledger), us."""
    tracer = provider.get_tracer("floor")
    tool_attrs = {f"attr.{i}": "value" for i in range(14)}
    transition_attrs = {f"attr.{i}": i for i in range(6)}
    times: list[float] = []
    for i in range(n + 200):
        t0 = time.perf_counter_ns()
        span = tracer.start_span("execute_tool lookup_order", attributes=tool_attrs)
        for _ in range(3):
            span.add_event("checkpoint claim_execution", transition_attrs)
        span.end()
        if i >= 200:
            times.append((time.perf_counter_ns() - t0) / 1000)
    return times


def providers(endpoint: str | None) -> dict[str, tuple[Any, Any, Any]]:
    """``label -> (tracer provider, in-memory exporter or None, meter provider or None)``."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    def batch() -> tuple[Any, Any]:
        provider = TracerProvider(shutdown_on_exit=False)
        exporter = InMemorySpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return provider, exporter

    plain, plain_exp = batch()
    with_metrics, metrics_exp = batch()
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    out: dict[str, tuple[Any, Any, Any]] = {
        "off (API only)": (None, None, None),
        "SDK (batch, in-memory)": (plain, plain_exp, None),
        "SDK + metrics": (with_metrics, metrics_exp, meters),
    }
    if endpoint:
        # What users run: the provider configure() builds (batch OTLP/HTTP), with metrics.
        # Built here as configure() builds it, because configure() would also install it
        # as the global provider (and "off" would no longer be off).
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        otlp = TracerProvider(shutdown_on_exit=False)
        otlp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        otlp_meters = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
        out["configure(): OTLP + metrics"] = (otlp, None, otlp_meters)
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
        cpu: dict[str, float] = dict.fromkeys(configs, 0.0)
        inside: dict[str, list[float]] = {label: [] for label in configs}
        hooks: dict[str, list[float]] = {label: [] for label in configs}
        floor: list[float] = []
        recording: list[float] = []
        histogram: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(rounds):
                for i, (label, (provider, exporter, meters)) in enumerate(configs.items()):
                    db_dir = Path(tmp) / f"{r}-{i}"
                    db_dir.mkdir()
                    _CPU[0] = 0.0
                    total, tel = guarded_calls(db_dir, per_round, provider, exporter, meters)
                    cpu[label] += _CPU[0]
                    calls[label] += total
                    inside[label] += tel
                    hooks[label] += hooks_only(per_round * 2, provider)
                    if label == "SDK (batch, in-memory)":
                        floor += sdk_floor(per_round * 2, provider)
                    if label == "SDK + metrics":
                        recording += metrics_only(per_round * 2, meters)
                        histogram += histogram_floor(per_round * 2, meters)
                    _spans.flush_spans(30)
                    if exporter is not None:
                        exporter.clear()
        n = per_round * rounds
        print(f"guarded tool calls: {n} new calls per config, SQLite durability=normal")
        print("(share: the whole-call difference; in hooks: time in the hooks on the call's")
        print("thread; cpu: CPU per call of the calls' thread and the telemetry thread)\n")
        head = f"{'telemetry':<26}{'call median':>12}{'p99':>10}{'call - off':>12}"
        print(
            head + f"{'share':>8}{'mean':>9}{'mean share':>12}{'in hooks us':>13}{'cpu us':>9}"
            f"{'cpu - off':>11}"
        )
        base_cpu = cpu["off (API only)"] / n * 1e6
        base = statistics.median(calls["off (API only)"])
        base_mean = statistics.fmean(calls["off (API only)"])
        for label, times in calls.items():
            med = statistics.median(times)
            mean = statistics.fmean(times)
            tel = statistics.median(inside[label])
            print(
                f"{label:<26}{med:>12.1f}{pct(times, 0.99):>10.1f}{med - base:>12.1f}"
                f"{(med - base) / med:>8.1%}{mean:>9.1f}{(mean - base_mean) / mean:>12.1%}"
                f"{tel:>13.2f}{cpu[label] / n * 1e6:>9.1f}{cpu[label] / n * 1e6 - base_cpu:>11.1f}"
            )
        provider, exporter, _ = configs["SDK (batch, in-memory)"]
        with tempfile.TemporaryDirectory() as tmp:
            spans, events, attrs = shape(Path(tmp), provider, exporter)
        print(
            f"\nper new guarded call: {spans:.0f} span, {events:.0f} events, "
            f"{attrs:.0f} attributes (span's and events', OpenInference keys included)"
        )
        extra = statistics.median(calls["SDK + metrics"]) - statistics.median(
            calls["SDK (batch, in-memory)"]
        )
        print(f"\nmetrics, whole-call difference (SDK + metrics - SDK): {extra:.1f} us")
        extra_cpu = (cpu["SDK + metrics"] - cpu["SDK (batch, in-memory)"]) / n * 1e6
        print(f"metrics, CPU difference per call (SDK + metrics - SDK): {extra_cpu:.1f} us")
        print(
            f"metrics recording alone, one call (on the telemetry thread): "
            f"median {statistics.median(recording):.2f} us, p99 {pct(recording, 0.99):.2f} us"
        )
        print(
            f"bare SDK histogram.record, 2 attributes: "
            f"median {statistics.median(histogram):.2f} us, p99 {pct(histogram, 0.99):.2f} us"
        )
        print("\ntelemetry hooks alone, one guarded call's worth (tool span + 3 transitions +")
        print("update + end; the ending itself runs on the telemetry thread), no storage")
        print(f"\n{'telemetry':<26}{'median us':>11}{'p99 us':>10}")
        for label, times in hooks.items():
            print(f"{label:<26}{statistics.median(times):>11.2f}{pct(times, 0.99):>10.2f}")
        label = "bare SDK, span + 3 events"
        print(f"{label:<26}{statistics.median(floor):>11.2f}{pct(floor, 0.99):>10.2f}")
        for provider, _, meters in configs.values():
            if provider is not None:
                provider.shutdown()
            if meters is not None:
                meters.shutdown()
    finally:
        if receiver.stdin:
            receiver.stdin.close()
        receiver.wait(10)


if __name__ == "__main__":
    main()
