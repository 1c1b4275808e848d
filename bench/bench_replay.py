"""Benchmark: replaying a 200-turn run, and the journal's bytes per model turn.

A recorded run makes N model turns through a journaled Anthropic client over a mock
transport (the same wire the tests use; each turn's request carries the conversation so
far, up to a window of 8 messages), and a guarded tool call per turn. The bench then
replays it (``replay_of=``) with a transport that fails on any request, and reports, in
the same process and on the same machine:

- per model call µs: live (recording, mock transport) vs. served from the record, and the
  ratio served / live;
- the journal's stored bytes per model turn (the ``llm_call`` event's records) with
  content (the default) and with ``journal_content=False``.

Run: ``.venv/bin/python bench/bench_replay.py [--turns 200]``. Prints a table; nothing
here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
from tests.integrations._llm_wire import anthropic_handler, httpx2  # noqa: E402

import toolledger  # noqa: E402
from toolledger.integrations.anthropic import journaled  # noqa: E402
from toolledger.testing import stored_run  # noqa: E402

__all__ = ["main"]


def _client(failing: bool) -> Any:
    answer = anthropic_handler()

    def handle(request: httpx2.Request) -> httpx2.Response:
        if failing:
            raise AssertionError("replay reached the network")
        return answer(request)

    return anthropic.Anthropic(
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
    )


def _loop(run: toolledger.Run, turns: int, failing: bool) -> tuple[float, int]:
    """Drive the turns; return the seconds spent in model calls and the tool executions."""
    claude = journaled(_client(failing), run)
    executed = []
    tool = toolledger.tool(
        "send_email", revision="1", execute=lambda i, c: executed.append(i) or {"ok": True}
    )
    history: list[Any] = []
    spent = 0.0
    for turn in range(turns):
        history.append({"role": "user", "content": f"turn {turn}: mail a@b.c please"})
        t = time.perf_counter()
        msg = claude.messages.create(model="claude-x-1", max_tokens=256, messages=history[-8:])
        spent += time.perf_counter() - t
        history.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
        )
        (use,) = [b for b in msg.content if b.type == "tool_use"]
        run.call(tool, call_id=f"{use.id}-{turn}", input=use.input)
    return spent, len(executed)


def _turn_bytes(db: Path, run_id: str) -> float:
    stored = stored_run(db, run_id)
    calls = {e["event_id"] for e in stored.events if e["kind"] == "llm_call"}
    size = sum(len(r.data) for r in stored.rows if r.event_id in calls)
    return size / max(1, len(calls))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        store = toolledger.SQLiteStore(db, durability="normal")
        with toolledger.run("bench", db=store) as run:
            live, executed = _loop(run, args.turns, failing=False)
        with toolledger.run("bench", db=store, replay_of=run.run_id) as again:
            served, re_executed = _loop(again, args.turns, failing=True)
        with toolledger.run("bench", db=store, journal_content=False) as bare:
            _loop(bare, args.turns, failing=False)
        store.close()
        report = again.replay_report
        assert report is not None
        assert report.served_model_calls == args.turns
        assert (executed, re_executed) == (args.turns, 0)
        with_content = _turn_bytes(db, run.run_id)
        without = _turn_bytes(db, bare.run_id)
    n = args.turns
    print(f"{n} turns, Anthropic SDK over a mock transport, SQLite durability=normal")
    print("| measure | value |")
    print("|---|---|")
    print(f"| live model call (recorded), µs | {live / n * 1e6:,.0f} |")
    print(f"| served model call (replay), µs | {served / n * 1e6:,.0f} |")
    print(f"| served / live | {served / live:.2f}x |")
    print(f"| tool executions live / replay | {executed} / {re_executed} |")
    print(f"| journal bytes per model turn, with content | {with_content:,.0f} |")
    print(f"| journal bytes per model turn, journal_content=False | {without:,.0f} |")


if __name__ == "__main__":
    main()
