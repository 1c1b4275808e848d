"""Benchmark: reading the journal back: search (SQLite, PostgreSQL), load_run, index cost, site.

Reports, in one table:

- ``toolledger.search`` over 100,000 events in 1,000 runs (100 steps each, every 10th
  with an order id, every 25th a refused approval): p50 and p99 of a rare word (one run),
  a phrase, a word in 1% of events, a word in every event (limit 100, alone and with an
  agent), filters without text (kind + status; none at all: the newest 100), text plus
  filters, the goal of one run, and a word in every run's goal (and every step) with a
  filter few or no events pass (``--status failed``, ``--kind approval``, ``--name``).
  With ``$TOOLLEDGER_PG_DSN`` set, the same database copied into a fresh PostgreSQL
  schema (``copy_ledger``, then ``ANALYZE``; dropped after) answers each query too,
  alternating with SQLite repetition by repetition;
- ``load_run`` of one run of 20,000 steps (20,000 events, 40,000 records): median wall
  time, p99, median CPU time of the process (the load-independent view);
- the full-text index's cost per journal step: a run of 5,000 steps (``with run.step(...)``
  + ``record_output``) into a store with the index and one into a store without it (created
  as if FTS5 were missing), alternating, same process. Appends only mark their run pending;
  the index is written in a batch later (before a search, at ``close``), so the cost is
  shown twice: on the step itself (CPU per step, with minus without) and in total, the
  step plus its share of the deferred batch (the honest number); the batch's own CPU per
  step (median and p99 of the repetitions), and one step's wall time with and without the
  index (p50 and p99 over every step);
- ``toolledger export-site`` of the 1,000 runs (when the site exporter is present).

Targets on the 2-core machines: search p50 <= 20 ms, load_run(20,000) <= 0.4 s, index
<= 10 us per step (incl. its batch). Run: ``.venv/bin/python bench/bench_search.py [--runs N]
[--steps N] [--parts search,site,load,index] [--only LABEL]``. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolledger
from toolledger.store import SQLiteStore, _sqlite_search

__all__ = ["main"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def build(db: Path, runs: int, steps: int) -> list[str]:
    store = SQLiteStore(db, durability="normal")
    ids = []
    try:
        for r in range(runs):
            # "account" is in every goal and every step (a goal word that is common).
            goal = f"Handle ticket T-{r:05d} for customer {r % 97}: check the account"
            with toolledger.run(goal, agent=f"agent-{r % 5}", db=store) as run:
                for i in range(steps):
                    order = {"order": f"ORD-{r:05d}-{i}"} if i % 10 == 0 else {}
                    rare = " escalation" if i == 50 and r % 100 == 0 else ""
                    with run.step(
                        "lookup" if i % 2 else "fetch",
                        justification=f"benchmark step {i} checks the account{rare}",
                        **order,
                    ) as step:
                        step.record_output(ok=True, n=i, note="all good")
                    if i % 25 == 24:
                        run.approval("refund", granted=False, by="bob", reason="over limit")
            ids.append(run.run_id)
    finally:
        store.close()
    return ids


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("rare word (1 run)", {"text": "ORD-00421-30"}),
    ("phrase", {"text": '"checks the account escalation"'}),
    ("word in 1% of events", {"text": "escalation"}),
    ("word in every event, limit 100", {"text": "benchmark"}),
    ("word in every event + agent", {"text": "account", "agent": "agent-3"}),
    ("no text: kind + status", {"kind": "approval", "status": "refused"}),
    ("no text: newest 100 of all", {}),
    ("text + kind + agent + since", {"text": "ORD-00421*", "kind": "step",
                                     "agent": "agent-1", "since": "1d"}),
    ("goal of one run", {"text": "T-00777"}),
    # A word in every run's goal (and every step) with a filter few or no events pass.
    ("goal word + status failed (none)", {"text": "account", "status": "failed"}),
    ("goal word + kind approval", {"text": "account", "kind": "approval"}),
    ("goal word + name nosuch (none)", {"text": "account", "name": "nosuch"}),
]  # fmt: skip


def time_queries(
    stores: dict[str, Any], repeat: int, only: str = ""
) -> list[tuple[str, dict[str, tuple[float, float, int]]]]:
    """p50, p99 (ms) and hits of each query (whose label holds ``only``) on each store,
    the stores alternating."""
    out = []
    for label, kw in QUERIES:
        if only not in label:
            continue
        times: dict[str, list[float]] = {name: [] for name in stores}
        found: dict[str, int] = {}
        for _ in range(repeat):
            for name, store in stores.items():
                t0 = time.perf_counter()
                found[name] = len(toolledger.search(store, **kw))
                times[name].append((time.perf_counter() - t0) * 1000)
        out.append(
            (
                label,
                {
                    name: (statistics.median(t), _pct(t, 0.99), found[name])
                    for name, t in times.items()
                },
            )
        )
    return out


def postgres_copy(db: Path) -> tuple[Any, Callable[[], None]] | None:
    """A PostgreSQL copy of ``db`` in a fresh schema (``$TOOLLEDGER_PG_DSN``), analyzed."""
    dsn = os.environ.get("TOOLLEDGER_PG_DSN")
    if not dsn:
        return None
    import psycopg
    from psycopg import sql

    from toolledger.store.postgres import PostgresStore

    schema = f"tl_bench_search_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(dsn, schema=schema)
    report = toolledger.copy_ledger(str(db), store)
    if not report.ok:
        raise RuntimeError(f"copying to PostgreSQL failed: {report.problems[:3]}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "events")))
        for table in ("runs", "event_search", "run_search"):
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))

    def drop() -> None:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    return store, drop


def time_load(db: Path, steps: int, repeat: int) -> tuple[float, float, float, int]:
    """Median wall and CPU seconds of ``load_run`` of a long run, and its p99 wall."""
    with toolledger.run("one long run", db=db) as run:
        for i in range(steps):
            with run.step("work", justification="long run", i=i) as step:
                step.record_output(n=i)
    times, cpu = [], []
    n = 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        n = len(toolledger.load_run(db, run.run_id).events)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu), _pct(times, 0.99), n


def _steps(store: SQLiteStore, steps: int) -> tuple[list[float], float, float]:
    """One run of ``steps`` steps: each step's wall time (us), then the CPU per step (us)
    of the steps alone and of the deferred index batch that follows them."""
    walls: list[float] = []
    clock = time.perf_counter
    t0 = time.process_time()
    with toolledger.run("index cost", db=store) as run:
        for i in range(steps):
            s0 = clock()
            with run.step("tool", justification="benchmark step", i=i) as step:
                step.record_output(ok=True, n=i)
            walls.append((clock() - s0) * 1e6)
    t1 = time.process_time()
    store._index_pending()  # what a search (or close) does first
    t2 = time.process_time()
    return walls, (t1 - t0) / steps * 1e6, (t2 - t1) / steps * 1e6


@dataclass(frozen=True)
class IndexCost:
    """What the full-text index adds to a journal step (us of CPU), per repetition.

    Each repetition is a run into the store without the index, then one into the store
    with it; ``on_step`` is their difference per step, ``total`` adds the deferred batch's
    CPU per step (what the index really costs a step).
    """

    steps: int
    cpu_with: list[float]  # CPU per step with the index (the steps alone)
    cpu_without: list[float]
    batch: list[float]  # CPU of the deferred batch, per step
    wall_with: list[float]  # one step's wall time (us), every step
    wall_without: list[float]

    @property
    def on_step(self) -> list[float]:
        return [a - b for a, b in zip(self.cpu_with, self.cpu_without, strict=True)]

    @property
    def total(self) -> list[float]:
        return [a + b for a, b in zip(self.on_step, self.batch, strict=True)]


def index_cost(tmp: Path, steps: int, repeat: int) -> IndexCost:
    """Steps into a store with the index and into one without (created as if FTS5 were
    missing), alternating, same process."""
    indexed = SQLiteStore(tmp / "indexed.db")
    real: Callable[[Any], bool] = _sqlite_search.fts5_available
    _sqlite_search.fts5_available = lambda conn: False  # type: ignore[assignment]
    try:
        plain = SQLiteStore(tmp / "plain.db")
    finally:
        _sqlite_search.fts5_available = real  # type: ignore[assignment]
    cost = IndexCost(steps, [], [], [], [], [])
    try:
        for _ in range(repeat):
            walls, cpu, _ = _steps(plain, steps)
            cost.wall_without.extend(walls)
            cost.cpu_without.append(cpu)
            walls, cpu, deferred = _steps(indexed, steps)
            cost.wall_with.extend(walls)
            cost.cpu_with.append(cpu)
            cost.batch.append(deferred)
    finally:
        indexed.close()
        plain.close()
    return cost


def print_index_cost(cost: IndexCost) -> None:
    """The index's cost per step, on the step and incl. its deferred batch: p50 and p99."""
    med = statistics.median

    def line(label: str, values: list[float]) -> None:
        print(f"{label:<42} {med(values):>7.1f} us (p99 {_pct(values, 0.99):.1f} us)")

    print(f"journal step, CPU per step, {len(cost.batch)} repetitions of {cost.steps} steps:")
    line("  without index", cost.cpu_without)
    line("  with index, the step alone", cost.cpu_with)
    line("  deferred index batch, per step", cost.batch)
    line("index cost per step, on the step", cost.on_step)
    line("index cost per step, incl. deferred batch", cost.total)
    line("journal step wall, with index", cost.wall_with)
    line("journal step wall, without index", cost.wall_without)


def pg_index_cost(steps: int, repeat: int) -> dict[str, list[float]] | None:
    """PostgreSQL's index cost per step (``$TOOLLEDGER_PG_DSN``): written in the append's
    own transaction, so there is no deferred batch. Runs into a fresh schema with the index
    and into one whose appends index nothing (``event_index_params`` giving an empty
    tsvector per record for those runs), alternating; the client's CPU and the wall time per
    step (the server's work is in the wall time)."""
    dsn = os.environ.get("TOOLLEDGER_PG_DSN")
    if not dsn:
        return None
    import psycopg
    from psycopg import sql

    from toolledger.store import _pg_batch, _pg_ops
    from toolledger.store.postgres import PostgresStore

    real = _pg_batch.event_index_params  # type: ignore[attr-defined]

    def use(index: Any) -> None:
        for module in (_pg_batch, _pg_ops):
            setattr(module, "event_index_params", index)  # noqa: B010

    def nothing(items: Any) -> tuple[list[Any], ...]:
        keys = [(r, s, e) for r, s, e, _, _ in items]
        runs, seqs, ids = ([k[i] for k in keys] for i in range(3))
        return runs, seqs, ids, [""] * len(keys)  # an empty tsvector per record

    stores = {
        k: PostgresStore(dsn, schema=f"tl_bench_index_{k}_{uuid.uuid4().hex[:8]}")
        for k in ("with", "without")
    }
    out: dict[str, list[float]] = {"cpu": [], "wall": []}
    try:
        for _ in range(repeat):
            measured = {}
            for name, store in stores.items():
                use(real if name == "with" else nothing)
                t0, c0 = time.perf_counter(), time.process_time()
                with toolledger.run("index cost", db=store) as run:
                    for i in range(steps):
                        with run.step("tool", justification="benchmark step", i=i) as step:
                            step.record_output(ok=True, n=i)
                measured[name] = (
                    (time.process_time() - c0) / steps * 1e6,
                    (time.perf_counter() - t0) / steps * 1e6,
                )
            out["cpu"].append(measured["with"][0] - measured["without"][0])
            out["wall"].append(measured["with"][1] - measured["without"][1])
    finally:
        use(real)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for store in stores.values():
                store.close()
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(store.schema))
                )
    return out


def time_site(db: Path, out: Path) -> float | None:
    try:
        from toolledger.export import export_site
    except ImportError:  # an older toolledger
        return None
    t0 = time.perf_counter()
    export_site(db, out)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100, help="steps per run")
    parser.add_argument("--long", type=int, default=20_000, help="steps of the load_run run")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", default="", help="time only the searches whose label has this")
    parser.add_argument("--load-repeat", type=int, default=15, help="load_run repetitions")
    parser.add_argument("--index-repeat", type=int, default=15, help="index cost repetitions")
    parser.add_argument(
        "--parts",
        default="search,site,load,index,pg-index",
        help="what to measure, comma-separated: search, site, load, index, pg-index",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        if parts & {"search", "site"}:
            search_and_site(tmp, args, parts)
        if "load" in parts:
            seconds, cpu, p99, n = time_load(tmp / "long.db", args.long, args.load_repeat)
            print(
                f"{f'load_run of {n} events':<42} {seconds:>8.3f} s "
                f"(p99 {p99:.3f} s, CPU {cpu:.3f} s)"
            )
        if "index" in parts:
            print_index_cost(index_cost(tmp, 5000, args.index_repeat))
        pg = pg_index_cost(2000, args.index_repeat) if "pg-index" in parts else None
        if pg is not None:
            for label, key in (("client CPU", "cpu"), ("wall (server incl.)", "wall")):
                values = pg[key]
                print(
                    f"{'PostgreSQL index per step, ' + label:<42} "
                    f"{statistics.median(values):>7.1f} us (p99 {_pct(values, 0.99):.1f} us)"
                )
        print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def search_and_site(tmp: Path, args: argparse.Namespace, parts: set[str]) -> None:
    db = tmp / "search.db"
    t0 = time.perf_counter()
    build(db, args.runs, args.steps)
    built = time.perf_counter() - t0
    events = args.runs * (args.steps + args.steps // 25 + 1)
    print(f"built {args.runs} runs, ~{events} events in {built:.1f} s")
    if "search" in parts:
        stores: dict[str, Any] = {"sqlite": SQLiteStore(db)}
        pg = postgres_copy(db)
        if pg is not None:
            stores["postgres"] = pg[0]
        print(f"{'measure':<42} {'store':>8} {'p50':>10} {'p99':>10} {'found':>6}")
        try:
            for label, by_store in time_queries(stores, args.repeat, args.only):
                for name, (p50, p99, found) in by_store.items():
                    print(
                        f"{'search: ' + label:<42} {name:>8} {p50:>7.2f} ms {p99:>7.2f} ms "
                        f"{found:>6}"
                    )
        finally:
            stores["sqlite"].close()
            if pg is not None:
                pg[1]()
    if "site" in parts:
        site = time_site(db, tmp / "site")
        if site is not None:
            print(f"{'export-site of ' + str(args.runs) + ' runs':<42} {site:>8.2f} s")


if __name__ == "__main__":
    main()
