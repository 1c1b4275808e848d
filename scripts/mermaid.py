#!/usr/bin/env python3
"""Render the checkpoint transition table as a Mermaid state diagram (and a Markdown table).

The diagram in ``docs/checkpoint.md`` is generated from ``toolledger.checkpoint.TRANSITIONS``
and ``DECISIONS``; ``tests/checkpoint/test_checkpoint_docs.py`` fails when it no longer matches.

Usage::

    python scripts/mermaid.py                 # print the diagram
    python scripts/mermaid.py --write docs/checkpoint.md   # refresh the generated blocks
    python scripts/mermaid.py --check docs/checkpoint.md   # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from toolledger.checkpoint import DECISIONS, TRANSITIONS, Status

__all__ = ["BLOCKS", "main", "render_decisions", "render_diagram", "render_table", "update"]


def render_diagram() -> str:
    """Return the Mermaid ``stateDiagram-v2`` for the transition table."""
    order = list(Status)
    lines = ["```mermaid", "stateDiagram-v2", "    [*] --> ready: create_checkpoint"]
    for name, rule in TRANSITIONS.items():
        for source in sorted(rule.sources, key=order.index):
            lines.append(f"    {source.value} --> {rule.target.value}: {name}")
    lines.append("    delivered --> [*]")
    lines.append("```")
    return "\n".join(lines)


def render_table() -> str:
    """Return the Markdown table of transitions: from, to, action, and the fenced status."""
    order = list(Status)
    rows = [
        "| transition | from | to | returns action | on the held fence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, rule in TRANSITIONS.items():
        sources = ", ".join(f"`{s.value}`" for s in sorted(rule.sources, key=order.index))
        fenced = f"`{rule.fenced.value}`: `FENCE_CONFLICT`" if rule.fenced else ""
        rows.append(
            f"| `{name}` | {sources} | `{rule.target.value}` | `{rule.action.value}` | {fenced} |"
        )
    return "\n".join(rows)


def render_decisions() -> str:
    """Return the Markdown table of what ``decide_checkpoint`` answers per status."""
    rows = ["| status | `decide_checkpoint` action |", "| --- | --- |"]
    rows += [f"| `{status.value}` | `{action.value}` |" for status, action in DECISIONS.items()]
    return "\n".join(rows)


#: Generated blocks: marker name -> renderer.
BLOCKS = {"diagram": render_diagram, "table": render_table, "decisions": render_decisions}


def update(text: str) -> str:
    """Return ``text`` with every generated block replaced by a fresh rendering."""
    for name, render in BLOCKS.items():
        pattern = re.compile(
            rf"(<!-- generated:{name} .*?-->\n).*?(\n<!-- /generated:{name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise ValueError(f"no <!-- generated:{name} --> block")
        text = pattern.sub(lambda m, r=render: m.group(1) + r() + m.group(2), text)  # type: ignore[misc]
    return text


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the generated blocks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="FILE", help="refresh FILE in place")
    group.add_argument("--check", type=Path, metavar="FILE", help="exit 1 if FILE is stale")
    args = parser.parse_args(argv)
    if args.write:
        args.write.write_text(update(args.write.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if args.check:
        text = args.check.read_text(encoding="utf-8")
        if update(text) != text:
            print(f"{args.check} is stale: run python scripts/mermaid.py --write {args.check}")
            return 1
        return 0
    print(render_diagram())
    return 0


if __name__ == "__main__":
    sys.exit(main())
