"""The guarded call on PostgreSQL: round trips, latency, client CPU, throughput beside SQLite.

Four tables, each from one run with its cases interleaved:

1. Wire: round trips per new call, deliver and replay, counted by a loopback proxy in front
   of the server (a round trip is the client sending after the server answered), and the
   statements (``Bind``/``Query`` messages) and explicit commits they carry.
2. Floors: a claim-like transaction (insert checkpoint + history, advance the run's count,
   insert one event and its search row) in plain psycopg, sent five ways: statement by
   statement (``BEGIN`` … ``COMMIT``); one pipeline then ``COMMIT`` (what the store does); one
   pipeline with the ``COMMIT`` in it; one PL/pgSQL function call; one statement of
   data-modifying CTEs (the last three are one round trip each).
3. Latency and client CPU (``time.process_time`` of this process) of ``run.call`` (new),
   ``run.deliver`` and a replayed ``run.call``, on PostgreSQL and on SQLite, batches
   alternating (the CPU ratio is what a loaded machine leaves comparable); on PostgreSQL
   also the server side: its backends' CPU per call (``/proc``, a local server) and the
   WAL bytes per call (the server's: exact only when nothing else writes).
4. Throughput: new guarded calls (call + deliver) per second with 1 and 4 processes on
   PostgreSQL and on SQLite, alternating sides each repetition.

Durability is the stores' setting (``--durability``, default full) and, for the floors,
``synchronous_commit`` on (full) or off (normal). The server's settings are printed: they
decide what a durable commit costs.

Usage: .venv/bin/python bench/bench_postgres.py [--calls 300] [--procs 1,4] [--reps 3]
       [--durability full|normal] [--only wire,floors,latency,throughput]
Needs TOOLLEDGER_PG_DSN (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import socket
import statistics
import struct
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["main"]

_UNTYPED = {80877103, 80877104}  # SSLRequest, GSSENCRequest


class WireCounter:
    """A loopback proxy that counts round trips and messages of every connection through it.

    A round trip is counted when the client sends after the server last sent on that
    connection (so pipelined statements count once, and a slow pipeline flush counts more,
    never less).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.target = (host, port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self.trips = 0
        self.kinds: dict[str, int] = {}
        self.commits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def take(self) -> tuple[int, dict[str, int], int]:
        """Return (round trips, message kinds, COMMIT statements) since the last take."""
        time.sleep(0.02)  # let the forwarding threads catch up
        with self._lock:
            out = (self.trips, self.kinds, self.commits)
            self.trips, self.kinds, self.commits = 0, {}, 0
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            state = {"server_spoke": True}
            threading.Thread(target=self._up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(client, upstream, state), daemon=True).start()

    @staticmethod
    def _read(s: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def _up(self, client: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:  # untyped: requests, then the startup message
                head = self._read(client, 8)
                length, code = struct.unpack("!II", head)
                upstream.sendall(head + self._read(client, length - 8))
                if code not in _UNTYPED:
                    break
            while True:
                head = self._read(client, 5)
                body = self._read(client, struct.unpack("!I", head[1:])[0] - 4)
                kind = head[:1].decode()
                with self._lock:
                    if state["server_spoke"]:
                        self.trips += 1
                        state["server_spoke"] = False
                    self.kinds[kind] = self.kinds.get(kind, 0) + 1
                upstream.sendall(head + body)

    def _down(self, client: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        buf = b""
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                with self._lock:
                    state["server_spoke"] = True
                client.sendall(data)
                buf += data
                while len(buf) >= 5:  # count the COMMITs the server completes
                    end = 1 + struct.unpack("!I", buf[1:5])[0]
                    if len(buf) < end:
                        break
                    if buf[:1] == b"C" and buf[5:11] == b"COMMIT":
                        with self._lock:
                            self.commits += 1
                    buf = buf[end:]


def _pg(url: str, durability: str, name: str = "bench", schema: str | None = None) -> Any:
    from toolledger.store.postgres import PostgresStore

    options: dict[str, Any] = {} if schema is None else {"schema": schema}
    return PostgresStore(url, application_name=name, max_size=2, durability=durability, **options)


def _tool() -> Any:
    import toolledger as tl

    return tl.tool("bench_noop", revision="1", execute=lambda inp, ctx: {"ok": inp["id"]})


def _noop_post(payload: Any) -> None:
    return None


# -- 1. wire -----------------------------------------------------------------------------


def _wire(dsn: str, durability: str, schema: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    import toolledger as tl

    info = conninfo_to_dict(dsn)
    proxy = WireCounter(str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432))
    proxied = make_conninfo(dsn, host="127.0.0.1", port=proxy.port, sslmode="disable")
    store = _pg(proxied, durability, schema=schema)
    tool = _tool()
    rows: dict[str, list[tuple[int, int, int]]] = {"new call": [], "deliver": [], "replay": []}
    with tl.run("bench-wire", db=store, namespace="wire") as run:
        for i in range(8):  # past psycopg's prepare threshold, as a long-lived process is
            # each call its own input: the same input under another id is the same action
            run.call(tool, call_id=f"warm-{i}", input={"id": f"warm-{i}"})
            run.deliver(f"warm-{i}", _noop_post)
        proxy.take()
        for i in range(10):
            cid = f"c-{i}"
            for label in rows:
                if label == "deliver":
                    run.deliver(cid, _noop_post)
                else:
                    run.call(tool, call_id=cid, input={"id": cid})
                trips, kinds, commits = proxy.take()
                rows[label].append((trips, kinds.get("B", 0) + kinds.get("Q", 0), commits))
    store.close()
    proxy.close()
    print(f"{'wire':<10} {'round trips':>11} {'statements':>10} {'COMMITs':>8}")
    for label, got in rows.items():
        trips, stmts, commits = (statistics.median(c) for c in zip(*got, strict=True))
        print(f"{label:<10} {trips:>11.0f} {stmts:>10.0f} {commits:>8.0f}")
    print()


# -- 2. floors ---------------------------------------------------------------------------

_FLOOR_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.floor_cp (ns TEXT, cid TEXT, rev BIGINT, record TEXT,
    PRIMARY KEY (ns, cid));
CREATE TABLE IF NOT EXISTS {s}.floor_hist (ns TEXT, cid TEXT, rev BIGINT, record TEXT,
    PRIMARY KEY (ns, cid, rev));
CREATE TABLE IF NOT EXISTS {s}.floor_run (run_id TEXT PRIMARY KEY, n BIGINT);
CREATE TABLE IF NOT EXISTS {s}.floor_ev (run_id TEXT, seq BIGINT, data TEXT,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS {s}.floor_fts (run_id TEXT, seq BIGINT, tsv TSVECTOR,
    PRIMARY KEY (run_id, seq));
CREATE OR REPLACE FUNCTION {s}.floor_claim(p_ns TEXT, p_cid TEXT, p_rec TEXT, p_run TEXT,
    p_seq BIGINT, p_data TEXT, p_text TEXT) RETURNS INT LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.floor_cp VALUES (p_ns, p_cid, 1, p_rec);
    INSERT INTO {s}.floor_hist VALUES (p_ns, p_cid, 1, p_rec);
    UPDATE {s}.floor_run SET n = p_seq + 1 WHERE run_id = p_run AND n = p_seq;
    IF NOT FOUND THEN RAISE EXCEPTION 'count moved'; END IF;
    INSERT INTO {s}.floor_ev VALUES (p_run, p_seq, p_data);
    INSERT INTO {s}.floor_fts VALUES (p_run, p_seq, to_tsvector('simple', p_text));
    RETURN 1;
END $$;
"""

_FLOOR_STATEMENTS = [
    ("INSERT INTO {s}.floor_cp VALUES (%(ns)s, %(cid)s, 1, %(rec)s)"),
    ("INSERT INTO {s}.floor_hist VALUES (%(ns)s, %(cid)s, 1, %(rec)s)"),
    ("UPDATE {s}.floor_run SET n = %(seq)s + 1 WHERE run_id = %(run)s AND n = %(seq)s"),
    ("INSERT INTO {s}.floor_ev VALUES (%(run)s, %(seq)s, %(data)s)"),
    ("INSERT INTO {s}.floor_fts VALUES (%(run)s, %(seq)s, to_tsvector('simple', %(text)s))"),
]

_FLOOR_CTE = """
WITH cp AS (INSERT INTO {s}.floor_cp VALUES (%(ns)s, %(cid)s, 1, %(rec)s) RETURNING 1),
h AS (INSERT INTO {s}.floor_hist SELECT %(ns)s, %(cid)s, 1, %(rec)s FROM cp RETURNING 1),
r AS (UPDATE {s}.floor_run SET n = %(seq)s + 1 WHERE run_id = %(run)s AND n = %(seq)s
    RETURNING 1),
e AS (INSERT INTO {s}.floor_ev SELECT %(run)s, %(seq)s, %(data)s FROM r RETURNING 1),
f AS (INSERT INTO {s}.floor_fts SELECT %(run)s, %(seq)s, to_tsvector('simple', %(text)s)
    FROM r RETURNING 1)
SELECT 1 / ((SELECT count(*) FROM h) * (SELECT count(*) FROM e))::int
"""


def _floors(dsn: str, schema: str, calls: int, reps: int) -> None:
    import psycopg
    from psycopg import sql

    from toolledger.checkpoint._json import compact_json

    def q(text: str) -> str:
        return sql.SQL(text).format(s=sql.Identifier(schema)).as_string(None)

    stmts = [q(t) for t in _FLOOR_STATEMENTS]
    cte = q(_FLOOR_CTE)
    func = q(
        "SELECT {s}.floor_claim(%(ns)s, %(cid)s, %(rec)s, %(run)s, %(seq)s, %(data)s, %(text)s)"
    )
    record = compact_json({"status": "executing", "revision": 1, "binding": {"x": "y" * 120}})
    data = compact_json({"kind": "tool_call", "name": "bench_noop", "input": {"i": 1}})
    seqs: dict[str, int] = {}

    def params(run: str) -> dict[str, Any]:
        n = seqs[run] = seqs.get(run, -1) + 1
        return {
            "ns": "floor",
            "cid": f"{run}-{n}",
            "rec": record,
            "run": run,
            "seq": n,
            "data": data,
            "text": "tool_call bench_noop 1",
        }

    def sequential(conn: Any, p: dict[str, Any]) -> None:
        conn.execute("BEGIN")
        for s in stmts:
            conn.execute(s, p)
        conn.execute("COMMIT")

    def pipeline_then_commit(conn: Any, p: dict[str, Any]) -> None:
        with conn.pipeline():
            conn.execute("BEGIN")
            for s in stmts:
                conn.execute(s, p)
        conn.execute("COMMIT")

    def one_pipeline(conn: Any, p: dict[str, Any]) -> None:
        with conn.pipeline():
            conn.execute("BEGIN")
            for s in stmts:
                conn.execute(s, p)
            conn.execute("COMMIT")

    def function(conn: Any, p: dict[str, Any]) -> None:
        conn.execute(func, p).fetchone()

    def one_statement(conn: Any, p: dict[str, Any]) -> None:
        conn.execute(cte, p).fetchone()

    def function_in_transaction(conn: Any, p: dict[str, Any]) -> None:
        conn.execute("BEGIN")
        conn.execute(func, p).fetchone()
        conn.execute("COMMIT")

    def function_pipeline_then_commit(conn: Any, p: dict[str, Any]) -> None:
        with conn.pipeline():
            conn.execute("BEGIN")
            cur = conn.execute(func, p)
        cur.fetchone()
        conn.execute("COMMIT")

    def function_simple_then_commit(conn: Any, p: dict[str, Any]) -> None:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN; " + func, p)
        cur.nextset()
        cur.fetchone()
        conn.execute("COMMIT")

    cases: list[tuple[str, int, Callable[[Any, dict[str, Any]], None]]] = [
        ("BEGIN, 5 statements, COMMIT", 7, sequential),
        ("pipeline, then COMMIT", 2, pipeline_then_commit),
        ("pipeline with COMMIT", 1, one_pipeline),
        ("PL/pgSQL function", 1, function),
        ("one CTE statement", 1, one_statement),
        ("BEGIN, function, COMMIT", 3, function_in_transaction),
        ("pipeline(function), COMMIT", 2, function_pipeline_then_commit),
        ("'BEGIN; function', COMMIT", 2, function_simple_then_commit),
    ]
    print(f"floor: a claim-like transaction, {calls} per case and setting, {reps} batches")
    print(f"{'case':<28} {'trips':>5} {'sync':>4} {'p50 us':>8} {'p99 us':>8} {'cpu us':>7}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(q(_FLOOR_TABLES))
    for sync in ("on", "off"):
        conns = {}
        for name, _, _fn in cases:
            conns[name] = psycopg.connect(
                dsn, autocommit=True, options=f"-c synchronous_commit={sync}"
            )
            conns[name].execute(q("INSERT INTO {s}.floor_run VALUES (%s, 0)"), (name + sync,))
            for _ in range(8):  # prepared, warm
                _fn(conns[name], params(name + sync))
        lat: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        cpu: dict[str, float] = dict.fromkeys(lat, 0.0)
        for _ in range(reps):
            for name, _, fn in cases:
                conn = conns[name]
                c0 = time.process_time()
                for _ in range(calls // reps):
                    p = params(name + sync)
                    t0 = time.perf_counter()
                    fn(conn, p)
                    lat[name].append(time.perf_counter() - t0)
                cpu[name] += time.process_time() - c0
        for name, trips, _ in cases:
            xs = sorted(lat[name])
            print(
                f"{name:<28} {trips:>5} {sync:>4} {statistics.median(xs) * 1e6:>8.0f} "
                f"{_p99(xs) * 1e6:>8.0f} {cpu[name] / len(xs) * 1e6:>7.0f}"
            )
        for conn in conns.values():
            conn.close()
    print()


# -- 3. latency and client CPU -----------------------------------------------------------


class ServerMeter:
    """The CPU time of one store's server backends and the WAL the server wrote.

    CPU comes from ``/proc`` (a server on this machine, readable by this user; else
    ``None``), summed over the backends whose ``application_name`` is the store's. The
    WAL position is the server's, so other sessions' writes count too: exact only on an
    otherwise idle server.
    """

    def __init__(self, dsn: str, application_name: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.name = application_name
        self.tick = os.sysconf("SC_CLK_TCK")

    def read(self) -> tuple[float | None, int]:
        """Return (backend CPU seconds or None, WAL insert position in bytes)."""
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.name,)
        ).fetchall()
        cpu: float | None = 0.0
        for (pid,) in rows:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                cpu = None
                break
            cpu = (cpu or 0.0) + (int(fields[11]) + int(fields[12])) / self.tick
        wal = self.conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
        return (cpu if rows else None), int(wal[0]) if wal else 0

    def close(self) -> None:
        self.conn.close()


def _latency(dsn: str, pg_url: str, durability: str, calls: int, reps: int) -> None:
    import toolledger as tl

    names = ("new call", "deliver", "replay")
    meter = ServerMeter(dsn, "bench-latency")
    server: dict[str, list[float]] = {n: [0.0, 0.0] for n in names}  # CPU s, WAL bytes
    server_cpu = True
    with tempfile.TemporaryDirectory() as tmp:
        stores = {
            "postgres": _pg(pg_url, durability, "bench-latency"),
            "sqlite": tl.open_store(f"sqlite:///{tmp}/latency.db", durability=durability),
        }
        tool = _tool()
        lat: dict[tuple[str, str], list[float]] = {(s, n): [] for s in stores for n in names}
        cpu: dict[tuple[str, str], float] = dict.fromkeys(lat, 0.0)
        runs = {s: tl.run("bench-latency", db=st, namespace="latency") for s, st in stores.items()}
        for run in runs.values():
            run.__enter__()
            for i in range(8):
                run.call(tool, call_id=f"warm-{i}", input={"id": f"warm-{i}"})
                run.deliver(f"warm-{i}", _noop_post)
        for rep in range(reps):  # the stores alternate batch by batch
            ids = [f"l-{rep}-{i}" for i in range(calls // reps)]
            for name in names:
                for side, run in runs.items():
                    if side == "postgres":
                        s0, w0 = meter.read()
                    c0 = time.process_time()
                    for cid in ids:
                        t0 = time.perf_counter()
                        if name == "deliver":
                            run.deliver(cid, _noop_post)
                        else:
                            run.call(tool, call_id=cid, input={"id": cid})
                        lat[side, name].append(time.perf_counter() - t0)
                    cpu[side, name] += time.process_time() - c0
                    if side == "postgres":
                        s1, w1 = meter.read()
                        if s0 is None or s1 is None:
                            server_cpu = False
                        else:
                            server[name][0] += s1 - s0
                        server[name][1] += w1 - w0
        for run in runs.values():
            run.__exit__(None, None, None)
        for st in stores.values():
            st.close()
    meter.close()
    print(
        f"latency and client CPU (this process), durability {durability}, {calls} calls per "
        f"case in {reps} batches, stores alternating; PostgreSQL's backend CPU (srv, from "
        "/proc) and the server's WAL bytes per call"
    )
    print(
        f"{'case':<10} {'store':<9} {'p50 us':>8} {'p99 us':>8} {'cpu us':>7} {'cpu/sqlite':>10} "
        f"{'srv us':>7} {'WAL B':>6}"
    )
    for name in names:
        for side in stores:
            xs = sorted(lat[side, name])
            per = cpu[side, name] / len(xs)
            ratio = cpu[side, name] / max(cpu["sqlite", name], 1e-9)
            srv = wal = "-"
            if side == "postgres":
                srv = f"{server[name][0] / len(xs) * 1e6:.0f}" if server_cpu else "n/a"
                wal = f"{server[name][1] / len(xs):.0f}"
            print(
                f"{name:<10} {side:<9} {statistics.median(xs) * 1e6:>8.0f} "
                f"{_p99(xs) * 1e6:>8.0f} {per * 1e6:>7.0f} {ratio:>9.2f}x {srv:>7} {wal:>6}"
            )
    print()


# -- 4. throughput -----------------------------------------------------------------------


def _worker(db: str, durability: str, index: int, calls: int, barrier: Any, out: Any) -> None:
    warnings.simplefilter("ignore")
    import toolledger as tl

    store = (
        tl.open_store(db, durability=durability)
        if not db.startswith("postgres")
        else _pg(db, durability, f"bench-p{index}")
    )
    tool = _tool()
    latencies: list[float] = []
    tag = uuid.uuid4().hex[:6]
    with tl.run("bench", db=store, namespace="bench", agent=f"p{index}") as run:
        for i in range(8):  # warm up connections, caches, prepared statements
            run.call(tool, call_id=f"warm-{index}-{i}-{tag}", input={"id": f"w{index}-{i}-{tag}"})
        barrier.wait()
        start = time.perf_counter()
        for i in range(calls):
            call_id = f"c-{index}-{i}-{tag}"
            t0 = time.perf_counter()
            run.call(tool, call_id=call_id, input={"id": call_id})
            run.deliver(call_id, _noop_post)
            latencies.append(time.perf_counter() - t0)
        end = time.perf_counter()
    store.close()
    out.put((start, end, latencies))


def _measure(db: str, durability: str, procs: int, calls: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(db, durability, i, calls, barrier, out))
        for i in range(procs)
    ]
    for p in workers:
        p.start()
    results: list[Any] = []
    while len(results) < procs:
        try:
            results.append(out.get(timeout=1.0))
        except queue.Empty:
            failed = [p.exitcode for p in workers if p.exitcode not in (None, 0)]
            if failed:  # e.g. the server restarted under it: say so, do not hang
                for p in workers:
                    p.kill()
                raise RuntimeError(f"a worker failed (exit codes {failed})") from None
    for p in workers:
        p.join(60)
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    return {"per_s": len(lat) / (end - start), "p50": statistics.median(lat), "p99": _p99(lat)}


def _throughput(pg_url: str, durability: str, procs_list: list[int], calls: int, reps: int) -> None:
    print(
        f"throughput: new guarded calls (call + deliver) per second, {calls} per process, "
        f"{reps} repetitions, sides alternating"
    )
    print(
        f"{'procs':>5} {'pg /s':>7} {'sqlite /s':>9} {'pg/sqlite':>9} "
        f"{'pg p50 ms':>9} {'pg p99 ms':>9} {'sq p50 ms':>9} {'sq p99 ms':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for procs in procs_list:
            got: dict[str, list[dict[str, float]]] = {"pg": [], "sqlite": []}
            for rep in range(reps):
                sides = [("pg", pg_url), ("sqlite", f"sqlite:///{tmp}/bench-{procs}-{rep}.db")]
                for name, db in sides if rep % 2 == 0 else sides[::-1]:
                    got[name].append(_measure(db, durability, procs, calls))
            med = {
                side: {k: statistics.median(r[k] for r in rs) for k in ("per_s", "p50", "p99")}
                for side, rs in got.items()
            }
            ratio = statistics.median(
                p["per_s"] / s["per_s"] for p, s in zip(got["pg"], got["sqlite"], strict=True)
            )
            pg, sq = med["pg"], med["sqlite"]
            print(
                f"{procs:>5} {pg['per_s']:>7.0f} {sq['per_s']:>9.0f} {ratio:>8.2f}x "
                f"{pg['p50'] * 1e3:>9.2f} {pg['p99'] * 1e3:>9.2f} "
                f"{sq['p50'] * 1e3:>9.2f} {sq['p99'] * 1e3:>9.2f}",
                flush=True,
            )
    print()


# -- main --------------------------------------------------------------------------------


def _p99(xs: list[float]) -> float:
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def _settings(dsn: str) -> list[tuple[str, str]]:
    import psycopg

    names = ["server_version", "synchronous_commit", "fsync", "shared_buffers", "max_connections"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(n, str(conn.execute(f"SHOW {n}").fetchone()[0])) for n in names]  # type: ignore[index]


@contextlib.contextmanager
def _schema(dsn: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"tl_bench_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def main() -> None:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per case / process")
    parser.add_argument("--procs", default="1,4", help="process counts, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="batches / repetitions")
    parser.add_argument(
        "--durability", default="full", choices=["full", "normal"], help="both stores' setting"
    )
    parser.add_argument("--only", default="wire,floors,latency,throughput", help="tables to run")
    args = parser.parse_args()
    only = set(args.only.split(","))
    dsn = os.environ.get("TOOLLEDGER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    print("PostgreSQL settings:")
    for name, value in _settings(dsn):
        print(f"  {name} = {value}")
    print(f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    print()
    with _schema(dsn) as schema:
        pg_url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
        _pg(pg_url, args.durability).close()  # migrate before timing
        if "wire" in only:
            _wire(dsn, args.durability, schema)
        if "floors" in only:
            _floors(dsn, schema, args.calls, args.reps)
        if "latency" in only:
            _latency(dsn, pg_url, args.durability, args.calls, args.reps)
        if "throughput" in only:
            procs = [int(p) for p in args.procs.split(",")]
            _throughput(pg_url, args.durability, procs, args.calls, args.reps)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
