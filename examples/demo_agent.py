"""A small offline agent run, journaled: steps, a failed step and its retry, a guarded tool
call asked for twice (it runs once; the second answer is the stored result), a refused
approval, an artifact; then all three exports and a verification. Then the same run two more
ways: as a tracing backend would show it (a tree of the run's real spans, caught by the
OpenTelemetry SDK's in-memory exporter) and replayed locally from the journal (events in
recorded order, the stored results, and what would run again: nothing).

Run it: ``python examples/demo_agent.py`` (no API keys, no network, no server). It writes into
``./demo-out/``: ``demo_agent.db`` (the journal), ``demo_agent.json``, ``.md`` and ``.html``.
It ends with the commands to see the run in Phoenix, open the viewer, or show the run.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import toolledger
from toolledger.checkpoint import Action, decide_checkpoint

OUT = Path("demo-out")
CODE = {
    "gate.py": "def gate(user):\n    return user.is_admin or user.beta  # bug: beta bypasses\n",
    "users.py": "class User:\n    is_admin = False\n    beta = True\n",
}
TRACKER: list[str] = []  # comments actually posted: the guarded tool's irreversible effect


class FlakyIndex:
    """A search index that times out on its first query, like real ones do."""

    def __init__(self) -> None:
        self.calls = 0

    def search(self, query: str) -> list[str]:
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("search index did not answer within 2s")
        return [name for name, text in CODE.items() if query in text]


@toolledger.tool(revision="1")
def post_comment(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
    """Post the findings on the ticket (once: a second identical comment would be noise)."""
    TRACKER.append(input["text"])
    return {"comment_id": f"c-{len(TRACKER)}"}


def in_memory_spans() -> tuple[Any, Any] | None:
    """Return (tracer_provider, exporter) catching the run's spans, or None without the SDK."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def agent(db: Path, tracer_provider: Any) -> toolledger.Run:
    """The recorded run: what the agent did and why."""
    index = FlakyIndex()
    # The demo starts from a fresh file on purpose: no "created a new ledger" warning.
    warnings.simplefilter("ignore", toolledger.NewLedgerWarning)
    with toolledger.run(
        "Explain why beta users can open the admin page",
        agent="demo-agent",
        db=db,
        tracer_provider=tracer_provider,
    ) as run:
        hits: list[str] = []
        for attempt in (1, 2):
            try:
                with run.step(
                    "repo_search",
                    justification="The question names the admin gate; find its code.",
                    query="beta",
                    attempt=attempt,
                ) as step:
                    hits = index.search("beta")
                    step.record_output(hits=hits)
                break
            except TimeoutError as exc:
                run.note(f"search attempt {attempt} failed ({exc}); retrying once")
        with run.step(
            "read_files", justification="Read the matches before answering.", files=hits
        ) as step:
            for name in hits:
                with run.step("read_file", path=name) as read:
                    read.record_output(lines=CODE[name].count("\n"))
            report = OUT / "findings.md"
            report.write_text(
                "# Findings\n\n`gate()` lets any beta user through: `user.is_admin or user.beta`.\n"
            )
            step.add_artifact(report, name="findings", media_type="text/markdown")
        comment = {"ticket": "SEC-42", "text": "gate() admits beta users: `is_admin or beta`."}
        first = run.call(post_comment, call_id="call_post_01", input=comment)
        # The model's connection dropped before it saw the answer; it asks again, same call id.
        again = run.call(post_comment, call_id="call_post_01", input=comment)
        assert not first.replayed
        assert again.replayed
        assert again.payload == first.payload
        # Post the stored result to the model once (a second deliver would post nothing).
        run.deliver("call_post_01", post=lambda payload: payload)
        run.approval(
            "email_findings",
            granted=False,
            by="user",
            reason="Answer locally; do not email anyone.",
        )
        run.finish("gate() admits beta users (`is_admin or beta`); no email was sent.")
    return run


def print_spans(spans: Any) -> set[str]:
    """Print the run as a tracing backend lists it; return the span names printed."""
    print(f"\nthe run as a tracing backend shows it ({len(spans)} spans, real, from the SDK):")
    for line in toolledger.telemetry.render_spans(spans):
        print(f"  {line}")
    return {str(s.name) for s in spans}


def replay(db: Path, run_id: str) -> int:
    """Replay the recorded run from the journal; return how many calls would run again."""
    view = toolledger.load_run(db, run_id)
    store = toolledger.open_store(db, readonly=True)
    would_run: list[str] = []

    def tool_call(event: dict[str, Any]) -> str:
        link = event.get("checkpoint") or {}
        rec = store.get(link.get("namespace", "default"), str(link.get("call_id")))
        if rec is None:
            would_run.append(str(event.get("name")))
            return "WOULD RUN AGAIN (no checkpoint)"
        action = decide_checkpoint(rec, rec.binding).action
        if action is Action.EXECUTE:
            would_run.append(str(event.get("name")))
            return "WOULD RUN AGAIN (decide -> execute)"
        stored = rec.result.payload if rec.result else None
        return f"stored result {stored}: {action.value}, not run again"

    try:
        with toolledger.Replayer(db) as replayer:
            for name in {ev.name for ev in view.events}:
                replayer.register(name, lambda ev: ev.get("outputs") or "")
            for name in {ev.name for ev in view.events if ev.kind == "tool_call"}:
                replayer.register(name, tool_call)
            items = list(replayer.replay(run_id))
    finally:
        store.close()
    print(f"\nreplayed from the journal ({len(items)} events, in recorded order):")
    for i, item in enumerate(items, 1):
        ev = item.event
        what = item.reason if item.skipped else item.result
        print(f"  {i:>2} {ev['kind']:<9} {ev['name']:<15} {ev['status']:<9} {what}".rstrip())
    calls = sum(1 for item in items if item.event["kind"] == "tool_call")
    print(
        f"replay: {calls} tool calls answered from stored results; would run again: "
        f"{len(would_run)} ({', '.join(would_run) or 'nothing'})"
    )
    return len(would_run)


def cli() -> str:
    """Return how to call the CLI from here (the venv's script when this python has one)."""
    script = Path(sys.executable).with_name("toolledger")
    if not script.exists():
        return "toolledger"
    if shutil.which("toolledger") == str(script):
        return "toolledger"
    rel = os.path.relpath(script)
    return rel if not rel.startswith("..") else str(script)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    db = OUT / "demo_agent.db"
    for stale in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        stale.unlink(missing_ok=True)  # every run tells the story from the start
    caught = in_memory_spans()
    run = agent(db, caught[0] if caught else None)

    exports = [
        toolledger.export_json(db, run.run_id, OUT / "demo_agent.json"),
        toolledger.export_markdown(db, run.run_id, OUT / "demo_agent.md"),
        toolledger.export_html(db, run.run_id, OUT / "demo_agent.html"),
    ]
    report_ok = toolledger.verify(
        db, run.run_id, expected_head=exports[0].head_hash, expected_count=exports[0].event_count
    )
    print(f"run {run.run_id}: {run.status}, {exports[0].event_count} journal records")
    print(f"post_comment asked for twice, posted {len(TRACKER)} time(s)")
    for info in exports:
        print(f"  wrote {info.path} ({info.size} bytes)")
    print(f"verify: {'OK' if report_ok.ok else 'FAILED: ' + str(report_ok.reason)}")
    print(f"head hash {report_ok.head_hash}")

    if caught is not None:
        print_spans(caught[1].get_finished_spans())
    else:
        print("\n(no span tree: the OpenTelemetry SDK is missing; pip install 'toolledger[otlp]')")
    would_run = replay(db, run.run_id)

    tl = f"{cli()} --db {db}"
    print("\nnext:")
    print(
        "  Phoenix: pip install arize-phoenix && phoenix serve, then in another shell: "
        f"{tl} export-otlp {run.run_id} --endpoint http://127.0.0.1:6006"
    )
    print(f"  viewer:  open {exports[2].path} in a browser")
    print(f"  show:    {tl} show {run.run_id}")
    ok = report_ok.ok and toolledger.verify_export(exports[0].path).ok
    return 0 if ok and len(TRACKER) == 1 and would_run == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
