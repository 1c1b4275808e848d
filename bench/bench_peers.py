"""Benchmark: toolledger's guarded call beside its durable peers and the raw floors, in one run.

Peers (each in its own durable-step shape, on a SQLite file in a temporary folder):

- **DBOS** (``dbos``), two shapes. Whole invocation: a new ``@DBOS.workflow`` (its own id)
  running one ``@DBOS.step``. Per step: one ``@DBOS.step`` inside a workflow that is already
  running (a workflow on a thread of its own loops over steps handed to it; the step's own
  time is taken inside the workflow, around the step call, so the hand-off is not counted).
  A replay runs the first workflow again under its id (the recorded result comes back).
- **LangGraph** (``langgraph`` + ``langgraph-checkpoint-sqlite``), two shapes, both with
  ``durability="sync"`` on a ``SqliteSaver`` (it sets WAL; the connection's default
  ``synchronous=FULL``, so every commit is fdatasync-ed). Whole invocation: a one-node
  graph invoked on a new thread (input, the node's superstep, the end: several synced
  commits). Per step: one superstep of a graph
  that is already running (a node looping back to itself, streamed; each ``next()`` on the
  stream is one superstep). Its two fsyncs per superstep (checkpoint, writes) run on
  LangGraph's background threads: ``next()`` waits for the previous superstep's checkpoint
  but not for its own writes, so that case leaves an fsync off the caller's clock. The
  ``durable`` case also waits until the superstep's writes (and the checkpoint before them)
  are stored, which is what toolledger's call waits for; each case has its own thread. A
  replay invokes the finished thread with ``None``. The equal work was checked: with a
  3 ms sleep added inside each of the saver connection's commits (under the saver's lock,
  where an fsync happens), every ``durable`` superstep took at least 7.5 ms, so both
  commits are on its clock, as toolledger's two are on a call's; ``strace -f -T -y`` shows
  each commit ending in one ``fdatasync`` of the WAL on both sides (its connection: WAL,
  ``synchronous=FULL``), no file extended on a synced path once the WALs have cycled. What
  is not equal is what each fsync pushes: about 12 WAL pages per toolledger commit, 3 per
  LangGraph commit (the ``KiB`` column), and on a loaded VM the fsync's latency grows with
  it and swings with the other processes' I/O more than any code moves the ratios (0.87 at
  load 1.5, 0.5 at load 4-9; once 0.09-0.23 at load 9-13, not reproduced). So a third shape
  runs the same ``durable`` superstep on a connection
  at ``synchronous=NORMAL`` (WAL, no fsync per commit), in the ``new call, normal`` group
  beside toolledger's call at ``normal``: the work above the disk, compared without it.
- **execution-journal** (from its sdist): one ``journal.step`` with an input and an output,
  the connection at ``synchronous=NORMAL``.
- **opentelemetry-util-genai**: one ``execute_tool`` span through ``TelemetryHandler.tool``
  with the SDK and an in-memory exporter, beside a bare SDK span.

Floors (``_common.py``): two raw commits (create+claim, complete) at FULL and NORMAL, a
primary-key read + ``json.loads`` for a replay. Bounds, in the groups of those floors: what
any Python implementation of toolledger's writes pays, with no validation and no objects:
its new call's 16 statements on its schema at NORMAL (``StatementFloor``), the storage
redesign's 9 (``LogDesignFloor``), and a replay's binding check (the input's canonical
JSON and SHA-256) plus the read. A target ratio below a bound's ratio cannot be met by
code above the same writes and checks.

Fsyncs per unit (``--fsyncs``, needs ``strace``): each case runs ``--fsync-units`` units in
a process of its own under ``strace -f -c -e trace=fsync,fdatasync``, and a process that
sets every case up but runs none gives the baseline; (calls - baseline) / units is the
column. Counted at the system call, so it holds whatever journal mode a peer uses. The same
process gives the ``KiB`` column: bytes its units passed to write system calls per unit
(``wchar``), what those fsyncs push to the disk.

Cases are interleaved batch by batch (every case runs ``BATCH`` operations, then the next
case, for ``--reps`` rounds), so all see the same machine. The table gives medians and p99
in microseconds (over all repetitions) and each case's ratio to the floor of its group as
the median of the per-repetition ratios (with their range); a second table gives
toolledger's new call at full against each peer as the peer's median over toolledger's
(above 1: toolledger is faster). The load average is printed with each table. Nothing is
asserted.

This script makes its own virtualenv beside the repository (``../.toolledger-bench-peers``,
or ``--venv DIR``), installs the peers and toolledger (editable) into it, then runs itself
there with ``--inner``. Run: ``python bench/bench_peers.py [--calls N] [--reps R]``.
Not part of the test suite; see ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
    from _common import LogDesignFloor, StatementFloor, raw_connect, raw_two_commits

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

    # Bounds: what any Python implementation of toolledger's writes and checks pays.
    statements = StatementFloor(raw_connect(tmp / "floor-normal.db", "normal"), "bound")
    log = LogDesignFloor(raw_connect(tmp / "bound-log.db", "normal"), "bound")

    def by_statements(i: int, floor: Any = statements) -> Any:
        return floor.call(f"s-{i}", {"to": "a@example.com", "ref": i}, _sent)

    def by_log(i: int, floor: Any = log) -> Any:
        return floor.call(f"l-{i}", {"to": "a@example.com", "ref": i}, _sent)

    given = {"to": "a@example.com", "subject": "hello"}

    def checked_read(i: int, conn: Any = conn) -> Any:
        # A replay must check the binding: the input's canonical JSON and SHA-256, then read.
        text = json.dumps(given, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        hashlib.sha256(text.encode()).hexdigest()
        return json.loads(conn.execute(sql, ("prep", "0")).fetchone()[0])

    cases[BOUND_STATEMENTS] = by_statements
    cases[BOUND_LOG] = by_log
    cases[BOUND_REPLAY] = checked_read
    return cases


def _sent(input: Any) -> dict[str, Any]:
    return {"ok": True, "to": input["to"]}


def langgraph_cases(tmp: Path) -> dict[str, Op]:
    import sqlite3
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        to: str
        sent_to: str
        n: int

    def tool(state: State) -> State:
        return {"sent_to": state["to"], "n": state.get("n", 0) + 1}

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

    class Saver(SqliteSaver):
        """Counts the checkpoints and write batches stored (on LangGraph's threads)."""

        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self.stored = threading.Condition()
            self.puts = self.writes = 0

        def put(self, *args: Any, **kw: Any) -> Any:
            out = super().put(*args, **kw)
            with self.stored:
                self.puts += 1
                self.stored.notify_all()
            return out

        def put_writes(self, *args: Any, **kw: Any) -> None:
            super().put_writes(*args, **kw)
            with self.stored:
                self.writes += 1
                self.stored.notify_all()

    # Running graphs: the node loops back to itself; each superstep is one next() on the
    # stream. With durability="sync" a next() waits for the previous superstep's
    # checkpoint, not for its own writes (stored on a background thread meanwhile): the
    # "durable" case waits for them too (this superstep's writes and the checkpoint
    # before it stored, each commit fdatasync-ed), what toolledger's call waits for.
    # The same superstep on a connection at synchronous=NORMAL (WAL: no fsync per commit),
    # beside toolledger's new call at durability normal: the work above the disk, compared
    # without the disk's fsync latency (which swings with the machine's I/O load).
    relaxed = sqlite3.connect(str(tmp / "langgraph-normal.db"), check_same_thread=False)
    SqliteSaver(relaxed).setup()  # WAL, as the synced file
    relaxed.execute("PRAGMA synchronous = NORMAL")

    def running(thread: str, conn: sqlite3.Connection = conn) -> Callable[[int], Any]:
        saver = Saver(conn)
        loop_builder = StateGraph(State)
        loop_builder.add_node("tool", tool)
        loop_builder.add_edge(START, "tool")
        loop_builder.add_edge("tool", "tool")
        looping = loop_builder.compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": thread}, "recursion_limit": 10**9}
        stream = looping.stream({"to": "a@example.com"}, cfg, durability="sync")
        for _ in range(3):
            next(stream)

        def durable(i: int) -> Any:
            # next() returns with the checkpoint before this superstep stored (counted in
            # ``puts``) and this superstep's writes under way; settled, the counts stand
            # at writes == puts - 1 (the input's checkpoint has no writes of its own).
            out = next(stream)
            with saver.stored:
                saver.stored.wait_for(lambda: saver.writes + 1 >= saver.puts)
            return out

        return durable if thread.endswith("durable") else lambda i: next(stream)

    return {
        "LangGraph invoke, new thread": new,
        "LangGraph superstep, running graph": running("running"),
        "LangGraph superstep, durable": running("running durable"),
        "LangGraph superstep, durable (NORMAL)": running("normal durable", relaxed),
        "LangGraph replay": replay,
    }


class Timed(float):
    """An op's own measured time in microseconds (the driver uses it instead of its clock)."""


def dbos_cases(tmp: Path) -> dict[str, Op]:
    import queue
    import threading

    from dbos import DBOS, SetWorkflowID

    url = f"sqlite:///{tmp / 'dbos.db'}"
    DBOS(config={"name": "bench", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def send(to: str) -> dict[str, str]:
        return {"sent_to": to}

    @DBOS.workflow()
    def flow(to: str) -> dict[str, str]:
        return send(to)

    inbox: queue.Queue[int] = queue.Queue()
    outbox: queue.Queue[float] = queue.Queue()

    @DBOS.workflow()
    def running() -> None:
        while inbox.get() >= 0:
            t0 = time.perf_counter_ns()
            send("a@example.com")
            outbox.put((time.perf_counter_ns() - t0) / 1000)

    DBOS.launch()

    def new(i: int) -> Any:
        with SetWorkflowID(f"w-{i}"):
            return flow("a@example.com")

    new(-1)

    def replay(i: int) -> Any:
        with SetWorkflowID("w--1"):
            return flow("a@example.com")

    def worker() -> None:
        with SetWorkflowID("running"):
            running()

    threading.Thread(target=worker, daemon=True).start()
    for _ in range(3):
        inbox.put(0)
        outbox.get()

    def step(i: int) -> Timed:
        inbox.put(i)
        return Timed(outbox.get())

    return {
        "DBOS new workflow, 1 step": new,
        "DBOS step, running workflow": step,
        "DBOS replay": replay,
    }


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


#: The bounds' case names (``floor_cases``): the least Python sending toolledger's new
#: call's statements on its schema (``_common.StatementFloor``), the storage redesign's
#: (``_common.LogDesignFloor``), and a replay's binding check plus the read.
BOUND_STATEMENTS = "bound: its 16 statements, least Python"
BOUND_LOG = "bound: log design (9), least Python"
BOUND_REPLAY = "bound: fingerprint + PK read + loads"

GROUPS = [
    (
        "new call, full: per step",
        "floor: 2 raw commits (full)",
        [
            "toolledger new call (full)",
            "LangGraph superstep, running graph",
            "LangGraph superstep, durable",
            "DBOS step, running workflow",
        ],
    ),
    (
        "new call, full: whole invocation",
        "floor: 2 raw commits (full)",
        ["toolledger new call (full)", "LangGraph invoke, new thread", "DBOS new workflow, 1 step"],
    ),
    (
        "new call, normal",
        "floor: 2 raw commits (normal)",
        [
            "toolledger new call (normal)",
            "LangGraph superstep, durable (NORMAL)",
            BOUND_STATEMENTS,
            BOUND_LOG,
        ],
    ),
    (
        "replay",
        "floor: PK read + json.loads",
        ["toolledger replayed call", "LangGraph replay", "DBOS replay", BOUND_REPLAY],
    ),
    ("journal step", None, ["toolledger journal step", "execution-journal step (NORMAL)"]),
    ("one span", "floor: bare SDK span", ["util-genai execute_tool span"]),
]
PEER_STEPS = [
    "LangGraph superstep, running graph",
    "LangGraph superstep, durable",
    "DBOS step, running workflow",
    "LangGraph invoke, new thread",
    "DBOS new workflow, 1 step",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_cases(tmp: Path) -> dict[str, Op]:
    cases: dict[str, Op] = {}
    for make in (floor_cases, toolledger_cases, langgraph_cases, dbos_cases, journal_peer_cases):
        cases.update(make(tmp))
    cases.update(span_cases())
    return cases


def _ratio(times: dict[str, list[list[float]]], name: str, base: str, reps: int) -> str:
    """The median of the per-repetition ratios of medians, and their range."""
    per = [
        statistics.median(times[name][r]) / statistics.median(times[base][r]) for r in range(reps)
    ]
    return f"{statistics.median(per):>7.2f} {min(per):>6.2f}-{max(per):<6.2f}"


def inner(calls: int, reps: int, fsyncs: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        cases = make_cases(Path(d))
        times: dict[str, list[list[float]]] = {name: [[] for _ in range(reps)] for name in cases}
        counters = dict.fromkeys(cases, 0)
        clock = time.perf_counter_ns
        loads = []
        for rep in range(reps):
            loads.append(os.getloadavg()[0])
            for start in range(0, calls, BATCH):
                for name, op in cases.items():
                    for _ in range(min(BATCH, calls - start)):
                        i = counters[name]
                        counters[name] = i + 1
                        t0 = clock()
                        out = op(i)
                        spent = (clock() - t0) / 1000
                        times[name][rep].append(out if isinstance(out, Timed) else spent)
        loads.append(os.getloadavg()[0])
    load = f"load average (1 min) at each repetition's start and the end: {loads}"
    print(f"bench_peers: {calls} ops x {reps} reps per case, interleaved by {BATCH}; us")
    print(load)
    print(
        f"{'group':<33} {'case':<36} {'median':>9} {'p99':>9} {'ratio':>7} {'range':<13}"
        f" {'fsyncs':>6} {'KiB':>6}"
    )
    flat = {name: [t for rep in per for t in rep] for name, per in times.items()}
    for group, floor, names in GROUPS:
        for name in ([floor] if floor else []) + names:
            med = statistics.median(flat[name])
            ratio = _ratio(times, name, floor, reps) if floor and name != floor else ""
            p99 = percentile(flat[name], 0.99)
            counted = fsyncs.get(name)
            fs = f"{counted[0]:>6.2f} {counted[1]:>6.1f}" if counted else ""
            print(f"{group:<33} {name:<36} {med:>9.1f} {p99:>9.1f} {ratio:<21} {fs}")
    print("\ntoolledger new call (full) against each peer: peer median / toolledger median")
    print(load)
    print(f"{'peer':<36} {'x faster':>8} {'range':<13}")
    for name in PEER_STEPS:
        print(f"{name:<36} {_ratio(times, name, 'toolledger new call (full)', reps)}")
    print("\ntoolledger new call (normal), no fsync on either side: peer median / toolledger")
    name = "LangGraph superstep, durable (NORMAL)"
    print(f"{name:<36} {_ratio(times, name, 'toolledger new call (normal)', reps)}")


def count_fsyncs(python: str, units: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Per unit of each case: fsync/fdatasync calls (``strace -f -c``) and KiB written.

    The bytes are the units' own (``wchar`` around them, in the same process): what the
    fsyncs push to the disk, whose latency grows with it when the disk is busy.
    """

    def calls(only: str) -> tuple[int, int]:
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
            cmd = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name]
            cmd += [python, __file__, "--one", only, "--calls", str(units)]
            done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
            total = 0
            for line in out.read().splitlines():
                fields = line.split()
                if fields and fields[-1] in ("fsync", "fdatasync"):
                    total += int(fields[3])
            return total, int(done.stdout.split()[-1])

    base, _ = calls("")
    names = sorted({n for _, floor, names in GROUPS for n in ([floor] if floor else []) + names})
    counted = {name: calls(name) for name in names}
    return {name: [(n - base) / units, b / units / 1024] for name, (n, b) in counted.items()}


def _written() -> int:
    """Bytes this process has passed to write system calls (``wchar`` in /proc/self/io)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def one(name: str, units: int) -> None:
    """Set every case up, then run ``units`` units of ``name`` (none when empty)."""
    d = tempfile.mkdtemp(prefix="bench-peers-")
    cases = make_cases(Path(d))
    before = _written()
    for i in range(units if name else 0):
        cases[name](i)
    print(_written() - before, flush=True)  # bytes the units wrote (every file, every thread)
    shutil.rmtree(d)
    os._exit(0)  # no teardown writes (DBOS, journals) in the count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="operations per case per rep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--fsyncs", action="store_true", help="count fsyncs per unit (strace)")
    parser.add_argument("--fsync-units", type=int, default=100)
    parser.add_argument("--venv", type=Path, default=REPO.parent / ".toolledger-bench-peers")
    parser.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one(args.one, args.calls)
        return
    if args.inner:
        fsyncs = json.loads(args.inner.read_text()) if args.inner.stat().st_size else {}
        inner(args.calls, args.reps, fsyncs)
        return
    python = str(ensure_venv(args.venv))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    fsyncs = count_fsyncs(python, args.fsync_units, env) if args.fsyncs else {}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(json.dumps(fsyncs))
        f.flush()
        cmd = [python, __file__, "--inner", f.name, "--calls", str(args.calls)]
        sys.exit(subprocess.run([*cmd, "--reps", str(args.reps)], env=env).returncode)


if __name__ == "__main__":
    main()
