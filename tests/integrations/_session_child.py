"""Child process of the #1749 process test: one session runner over the fake session API.

Usage: python _session_child.py DB DIR stock|guarded kill|plain

``kill``: the process is SIGKILLed when it posts the tool's result (the tool has run: its
effect is a line in ``DIR/effects.log``). ``plain``: the runner runs until the session ends.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from anthropic import beta_tool
from anthropic.lib.tools._beta_session_runner import SessionToolRunner

import toolledger
from toolledger.integrations.anthropic import guarded_session_tool_runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fake_session import SESSION_ID, FakeSession


def main() -> None:
    db, folder, kind, mode = sys.argv[1:5]
    effects = Path(folder) / "effects.log"

    @beta_tool
    def send_email(to: str) -> str:
        """Send one email."""
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (to + "\n").encode())  # the irreversible effect
        os.close(fd)
        return f"sent to {to}"

    fake = FakeSession(Path(folder) / "session.json", kill_on_post=mode == "kill")

    async def drive() -> None:
        with toolledger.run("session worker", db=db) as run:
            if kind == "stock":
                runner = SessionToolRunner(fake.client(), SESSION_ID, tools=[send_email])
            else:
                runner = guarded_session_tool_runner(
                    run, fake.client(), SESSION_ID, tools=[send_email]
                )
            await runner.until_done()

    asyncio.run(drive())


if __name__ == "__main__":
    main()
