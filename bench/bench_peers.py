"""Benchmark: toolledger's guarded call beside its durable peers and the raw floors, in one run.

Peers (each in its own durable-step shape, on a SQLite file in a temporary folder):

- **DBOS** (``dbos``): a ``@DBOS.workflow`` running one ``@DBOS.step``; a replay runs the
  workflow again under the same workflow id (the recorded result comes back).
- **LangGraph** (``langgraph`` + ``langgraph-checkpoint-sqlite``): a one-node graph invoked
  with ``durability="sync"`` on a ``SqliteSaver`` (one superstep); a replay invokes the
  finished thread again with ``None``.
- **execution-journal** (from its sdist): one ``journal.step`` with an input and an output,
  the connection at ``synchronous=NORMAL``.
- **opentelemetry-util-genai**: one ``execute_tool`` span through ``TelemetryHandler.tool``
  with the SDK and an in-memory exporter, beside a bare SDK span.

Floors (``_common.py``): two raw commits (create+claim, complete) at FULL and NORMAL, a
primary-key read + ``json.loads`` for a replay.

Cases are interleaved batch by batch (every case runs ``BATCH`` operations, then the next
case, for ``--reps`` rounds), so all see the same machine. The table gives medians and p99
in microseconds and each case's ratio to the floor of its group. Nothing is asserted.

This script makes its own virtualenv beside the repository (``../.toolledger-bench-peers``,
or ``--venv DIR``), installs the peers and toolledger (editable) into it, then runs itself
there with ``--inner``. Run: ``python bench/bench_peers.py [--calls N] [--reps R]``.
Not part of the test suite; see ``bench/README.md``.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS = [
    "dbos>=3",
    "langgraph>=1",
    "langgraph-checkpoint-sqlite>=3",
    "opentelemetry-util-genai",
    "opentelemetry-sdk",
]
# execution-journal is built from its sdist, as its README asks.
SDIST_PEERS = ["execution-journal"]
BATCH = 20
INPUT = {"to": "a@example.com", "subject": "hello"}


# --------------------------------------------------------------------------- the venv
def ensure_venv(venv: Path) -> Path:
    """Create ``venv`` with the peers and toolledger installed; return its python."""
    python = venv / "bin" / "python"
    stamp = venv / ".peers-installed"
    if stamp.exists():
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *PEERS, "-e", f"{REPO}[otlp]"], check=True)
    subprocess.run([*pip, "--no-binary", ",".join(SDIST_PEERS), *SDIST_PEERS], check=True)
    stamp.write_text("ok\n")
    return python


# --------------------------------------------------------------------------- the cases
Op = Callable[[int], Any]


def toolledger_cases(tmp: Path) -> dict[str, Op]:
    import toolledger as tl
    from toolledger.store import SQLiteStore

    @tl.tool(revision="1")
    def send(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"sent_to": input["to"]}

    cases: dict[str, Op] = {}
    for durability in ("full", "normal"):
        store = SQLiteStore(tmp / f"tl-{durability}.db", durability=durability)  # type: ignore[arg-type]
        run = tl.run("bench", agent="bench", db=store, namespace=f"bench-{durability}")
        run.__enter__()

        def new(i: int, run: Any = run) -> Any:
            return run.call(send, call_id=f"n-{i}", input={**INPUT, "ref": f"n-{i}"})

        cases[f"toolledger new call ({durability})"] = new
        if durability == "normal":

            def replay(i: int, run: Any = run) -> Any:
                return run.call(send, call_id="n-0", input={**INPUT, "ref": "n-0"})

            def step(i: int, run: Any = run) -> Any:
                with run.step("lookup", justification="bench", q=i) as s:
                    s.record_output(n=i)

            cases["toolledger replayed call"] = replay
            cases["toolledger journal step"] = step
    return cases


def floor_cases(tmp: Path) -> dict[str, Op]:
    sys.path.insert(0, str(HERE))
    from _common import raw_connect, raw_two_commits

    from toolledger.store import SQLiteStore

    cases: dict[str, Op] = {}
    for durability in ("full", "normal"):
        SQLiteStore(tmp / f"floor-{durability}.db").close()  # the store's own schema
        conn = raw_connect(tmp / f"floor-{durability}.db", durability)
        raw_two_commits(conn, "prep", "0")

        def two(i: int, conn: Any = conn) -> None:
            raw_two_commits(conn, "bench", f"f-{i}")

        cases[f"floor: 2 raw commits ({durability})"] = two
    conn = raw_connect(tmp / "floor-normal.db", "normal")
    sql = "SELECT record FROM checkpoints WHERE namespace = ? AND call_id = ?"

    def read(i: int, conn: Any = conn) -> Any:
        return json.loads(conn.execute(sql, ("prep", "0")).fetchone()[0])

    cases["floor: PK read + json.loads"] = read
    return cases


def langgraph_cases(tmp: Path) -> dict[str, Op]:
    import sqlite3
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        to: str
        sent_to: str

    def tool(state: State) -> State:
        return {"sent_to": state["to"]}

    conn = sqlite3.connect(str(tmp / "langgraph.db"), check_same_thread=False)
    graph_builder = StateGraph(State)
    graph_builder.add_node("tool", tool)
    graph_builder.add_edge(START, "tool")
    graph_builder.add_edge("tool", END)
    graph = graph_builder.compile(checkpointer=SqliteSaver(conn))

    def new(i: int) -> Any:
        cfg = {"configurable": {"thread_id": f"t-{i}"}}
        return graph.invoke({"to": "a@example.com"}, cfg, durability="sync")

    new(-1)

    def replay(i: int) -> Any:
        return graph.invoke(None, {"configurable": {"thread_id": "t--1"}}, durability="sync")

    return {"LangGraph superstep (sync)": new, "LangGraph replay": replay}


def dbos_cases(tmp: Path) -> dict[str, Op]:
    from dbos import DBOS, SetWorkflowID

    url = f"sqlite:///{tmp / 'dbos.db'}"
    DBOS(config={"name": "bench", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def send(to: str) -> dict[str, str]:
        return {"sent_to": to}

    @DBOS.workflow()
    def flow(to: str) -> dict[str, str]:
        return send(to)

    DBOS.launch()

    def new(i: int) -> Any:
        with SetWorkflowID(f"w-{i}"):
            return flow("a@example.com")

    new(-1)

    def replay(i: int) -> Any:
        with SetWorkflowID("w--1"):
            return flow("a@example.com")

    return {"DBOS workflow + step": new, "DBOS replay": replay}


def journal_peer_cases(tmp: Path) -> dict[str, Op]:
    from execution_journal import Journal

    journal = Journal(goal="bench", db_path=str(tmp / "ej.db"))
    # Its store has no durability option; set NORMAL on its connection, as we compare at normal.
    journal._store.conn.execute("PRAGMA synchronous = NORMAL")

    def step(i: int) -> None:
        with journal.step("lookup", justification="bench", q=i) as s:
            s.record_output(n=i)

    return {"execution-journal step (NORMAL)": step}


def span_cases() -> dict[str, Op]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util.genai.handler import TelemetryHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = TelemetryHandler(tracer_provider=provider)
    tracer = provider.get_tracer("bench")

    def genai(i: int) -> None:
        with handler.tool("send_email", tool_call_id=f"c-{i}"):
            pass
        if i % BATCH == 0:
            exporter.clear()

    def bare(i: int) -> None:
        with tracer.start_as_current_span("execute_tool send_email"):
            pass
        if i % BATCH == 0:
            exporter.clear()

    return {"util-genai execute_tool span": genai, "floor: bare SDK span": bare}


GROUPS = [
    (
        "new call, full",
        "floor: 2 raw commits (full)",
        ["toolledger new call (full)", "LangGraph superstep (sync)", "DBOS workflow + step"],
    ),
    ("new call, normal", "floor: 2 raw commits (normal)", ["toolledger new call (normal)"]),
    (
        "replay",
        "floor: PK read + json.loads",
        ["toolledger replayed call", "LangGraph replay", "DBOS replay"],
    ),
    ("journal step", None, ["toolledger journal step", "execution-journal step (NORMAL)"]),
    ("one span", "floor: bare SDK span", ["util-genai execute_tool span"]),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def inner(calls: int, reps: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cases: dict[str, Op] = {}
        for make in (
            floor_cases,
            toolledger_cases,
            langgraph_cases,
            dbos_cases,
            journal_peer_cases,
        ):
            cases.update(make(tmp))
        cases.update(span_cases())
        times: dict[str, list[float]] = {name: [] for name in cases}
        counters = dict.fromkeys(cases, 0)
        clock = time.perf_counter_ns
        for _ in range(reps):
            for start in range(0, calls, BATCH):
                for name, op in cases.items():
                    for _ in range(min(BATCH, calls - start)):
                        i = counters[name]
                        counters[name] = i + 1
                        t0 = clock()
                        op(i)
                        times[name].append((clock() - t0) / 1000)
        print(f"bench_peers: {calls} ops x {reps} reps per case, interleaved by {BATCH}; us")
        print(f"{'group':<18} {'case':<36} {'median':>9} {'p99':>9} {'ratio':>7}")
        for group, floor, names in GROUPS:
            base = statistics.median(times[floor]) if floor else None
            for name in ([floor] if floor else []) + names:
                med = statistics.median(times[name])
                ratio = f"{med / base:.2f}" if base and name != floor else ""
                p99 = percentile(times[name], 0.99)
                print(f"{group:<18} {name:<36} {med:>9.1f} {p99:>9.1f} {ratio:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="operations per case per rep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=REPO.parent / ".toolledger-bench-peers")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.calls, args.reps)
        return
    python = ensure_venv(args.venv)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [str(python), __file__, "--inner", "--calls", str(args.calls), "--reps", str(args.reps)]
    sys.exit(subprocess.run(cmd, env=env).returncode)


if __name__ == "__main__":
    main()
