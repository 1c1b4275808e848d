"""A small offline agent run, journaled: steps, a failed step and its retry, a refused
approval, an artifact; then all three exports and a verification.

Run it: ``python examples/demo_agent.py`` (no API keys, no network). It writes into
``./demo-out/``: ``demo_agent.db`` (the journal), ``demo_agent.json``, ``.md`` and ``.html``.
Open the HTML file in a browser; or try ``toolledger --db demo-out/demo_agent.db runs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import toolledger

OUT = Path("demo-out")
CODE = {
    "gate.py": "def gate(user):\n    return user.is_admin or user.beta  # bug: beta bypasses\n",
    "users.py": "class User:\n    is_admin = False\n    beta = True\n",
}


class FlakyIndex:
    """A search index that times out on its first query, like real ones do."""

    def __init__(self) -> None:
        self.calls = 0

    def search(self, query: str) -> list[str]:
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("search index did not answer within 2s")
        return [name for name, text in CODE.items() if query in text]


def main() -> int:
    OUT.mkdir(exist_ok=True)
    db = OUT / "demo_agent.db"
    index = FlakyIndex()
    with toolledger.run(
        "Explain why beta users can open the admin page", agent="demo-agent", db=db
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
        run.approval(
            "email_findings",
            granted=False,
            by="user",
            reason="Answer locally; do not email anyone.",
        )
        run.finish("gate() admits beta users (`is_admin or beta`); no email was sent.")

    exports = [
        toolledger.export_json(db, run.run_id, OUT / "demo_agent.json"),
        toolledger.export_markdown(db, run.run_id, OUT / "demo_agent.md"),
        toolledger.export_html(db, run.run_id, OUT / "demo_agent.html"),
    ]
    report_ok = toolledger.verify(
        db, run.run_id, expected_head=exports[0].head_hash, expected_count=exports[0].event_count
    )
    print(f"run {run.run_id}: {run.status}, {exports[0].event_count} journal records")
    for info in exports:
        print(f"  wrote {info.path} ({info.size} bytes)")
    print(f"verify: {'OK' if report_ok.ok else 'FAILED: ' + str(report_ok.reason)}")
    print(f"head hash {report_ok.head_hash}")
    print(f"next: toolledger --db {db} show {run.run_id}")
    return 0 if report_ok.ok and toolledger.verify_export(exports[0].path).ok else 1


if __name__ == "__main__":
    sys.exit(main())
