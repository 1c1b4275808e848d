"""A child process for the resume crash test: one agent life under a fixed run id.

argv: db, run_id, life (1 or 2), effects file, requests file. Life 1 is killed (SIGKILL)
right after the tool's effect is committed; life 2 resumes the run. Each life's model
answers carry its own tool-call id (``toolu_life<N>``), so a re-planned turn would ask for
a new call id, and the tool would run again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import toolledger
from toolledger.integrations.anthropic import journaled

from ._agent import Wire


def main() -> None:
    db, run_id, life, effects_path, requests_path = sys.argv[1:6]
    effects = Path(effects_path)
    wire = Wire(tool_id=f"toolu_life{life}")

    def send(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        with effects.open("a") as f:
            f.write(json.dumps(input) + "\n")
        return {"sent_to": input["to"]}

    tool = toolledger.tool("send_email", revision="1", execute=send)
    with toolledger.run("resume", db=db, run_id=run_id) as run:
        claude = journaled(wire.anthropic(), run)
        messages: list[Any] = [{"role": "user", "content": "Mail a@b.c please."}]
        first = claude.messages.create(model="claude-x-1", max_tokens=64, messages=messages)
        (use,) = [b for b in first.content if b.type == "tool_use"]
        outcome = run.call(tool, call_id=use.id, input=use.input)
        if life == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        messages += [
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "ok"}],
            },
        ]
        claude.messages.create(model="claude-x-1", max_tokens=64, messages=messages)
        report = run.replay_report
    with open(requests_path, "a") as f:
        f.write(
            json.dumps(
                {
                    "life": life,
                    "requests": len(wire.requests),
                    "call_id": use.id,
                    "replayed": outcome.replayed,
                    "served": None if report is None else report.served_model_calls,
                }
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
