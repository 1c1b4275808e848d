"""The agent loop as a command, for ``toolledger replay/fork RUN -- CMD``.

argv: the prompt; ``AGENT_WIRE=failing`` refuses every request (a replay must send none).
The run's database and replay source come from the environment the CLI sets.
"""

from __future__ import annotations

import os
import sys

import toolledger

from ._agent import Effects, Wire, agent


def main() -> None:
    wire = Wire(failing=os.environ.get("AGENT_WIRE") == "failing")
    effects = Effects()
    with toolledger.run("mail ana") as run:
        seen = agent(run, wire, effects, sys.argv[1])
    print(f"answer={seen['answer']} requests={len(wire.requests)} sent={len(effects.sent)}")


if __name__ == "__main__":
    main()
