"""Guarded calls per second on PostgreSQL with 1, 4 and 8 processes, beside SQLite.

Each process opens its own store (its own connections: a "host"), then runs new guarded
calls: ``run.call`` (create + claim durable, execute a no-op tool, complete durable) and
``run.deliver`` (delivery claim and completion, relaxed), each call one journal event.
The latency of one call is call + deliver. Both stores use their default, full
durability. The server's settings are printed: they decide what a durable commit costs.

Usage: .venv/bin/python bench/bench_postgres.py [--calls 300] [--procs 1,4,8]
       [--durability full|normal]
Needs TOOLLEDGER_PG_DSN (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
import warnings
from typing import Any

__all__ = ["main"]


def _worker(db: str, durability: str, index: int, calls: int, barrier: Any, out: Any) -> None:
    warnings.simplefilter("ignore")
    import toolledger as tl

    store = (
        tl.open_store(db, durability=durability)
        if not db.startswith("postgres")
        else _pg(db, index, durability)
    )
    tool = tl.tool("bench_noop", revision="1", execute=lambda inp, ctx: {"ok": inp["i"]})
    latencies: list[float] = []
    with tl.run("bench", db=store, namespace="bench", agent=f"p{index}") as run:
        for i in range(5):  # warm up connections and caches
            run.call(tool, call_id=f"warm-{index}-{i}-{uuid.uuid4().hex[:6]}", input={"i": i})
        barrier.wait()
        start = time.perf_counter()
        for i in range(calls):
            call_id = f"c-{index}-{i}-{uuid.uuid4().hex[:8]}"
            t0 = time.perf_counter()
            run.call(tool, call_id=call_id, input={"i": i})
            run.deliver(call_id, lambda payload: None)
            latencies.append(time.perf_counter() - t0)
        end = time.perf_counter()
    store.close()
    out.put((start, end, latencies))


def _pg(url: str, index: int, durability: str) -> Any:
    from toolledger.store.postgres import PostgresStore

    return PostgresStore(url, application_name=f"bench-p{index}", max_size=2, durability=durability)


def _measure(db: str, durability: str, procs: int, calls: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(db, durability, i, calls, barrier, out))
        for i in range(procs)
    ]
    for p in workers:
        p.start()
    results = [out.get(timeout=600) for _ in workers]
    for p in workers:
        p.join(60)
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    return {
        "calls": float(len(lat)),
        "per_s": len(lat) / (end - start),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
    }


def _settings(dsn: str) -> list[tuple[str, str]]:
    import psycopg

    names = ["server_version", "synchronous_commit", "fsync", "shared_buffers", "max_connections"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(n, str(conn.execute(f"SHOW {n}").fetchone()[0])) for n in names]  # type: ignore[index]


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per process")
    parser.add_argument("--procs", default="1,4,8", help="process counts, comma-separated")
    parser.add_argument(
        "--durability", default="full", choices=["full", "normal"], help="both stores' setting"
    )
    args = parser.parse_args()
    dsn = os.environ.get("TOOLLEDGER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"tl_bench_{uuid.uuid4().hex[:8]}"
    pg_url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    from toolledger.store.postgres import PostgresStore

    PostgresStore(pg_url).close()  # migrate before timing
    print("PostgreSQL settings:")
    for name, value in _settings(dsn):
        print(f"  {name} = {value}")
    print(
        f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; durability "
        f"{args.durability}; {args.calls} new guarded calls (call + deliver) per process"
    )
    print()
    print(f"{'store':<10} {'procs':>5} {'calls':>7} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for procs in (int(p) for p in args.procs.split(",")):
                for name, db in (
                    ("postgres", pg_url),
                    ("sqlite", f"sqlite:///{tmp}/bench-{procs}.db"),
                ):
                    r = _measure(db, args.durability, procs, args.calls)
                    print(
                        f"{name:<10} {procs:>5} {int(r['calls']):>7} {r['per_s']:>9.0f} "
                        f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}",
                        flush=True,
                    )
    finally:
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
