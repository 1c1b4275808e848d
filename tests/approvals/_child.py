"""A child process making one gated call (run by tests/approvals/test_processes.py).

argv: DB CALL_ID EFFECTS_FILE ASKS_FILE ANSWER(approve|pend) [CRASH_POINT] [BARRIER_DIR N]
Prints the outcome's status (or the error code) on stdout. With CRASH_POINT it SIGKILLs
itself at that guard/gate boundary.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import toolledger
from toolledger.testing import crash_at

#: Installed crash points stay installed until the process ends (or is killed).
CRASHING = contextlib.ExitStack()


def main() -> None:
    db, call_id, effects, asks, answer = sys.argv[1:6]
    crash = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else None
    barrier = sys.argv[7:9] if len(sys.argv) > 8 else None

    def approver(request: Any) -> Any:
        with open(asks, "a") as f:
            f.write(f"{os.getpid()} {request.call_id}\n")
        return toolledger.Approved("policy") if answer == "approve" else toolledger.Pending("T")

    def send(input: Any, ctx: Any) -> Any:
        with open(effects, "a") as f:
            f.write(f"{os.getpid()} {input['to']}\n")
        return {"sent_to": input["to"]}

    tool = toolledger.tool(
        "send_email", revision="1", execute=send, approval="always", approver=approver
    )
    if crash is not None:
        CRASHING.enter_context(crash_at(crash))  # SIGKILL there, for the rest of the process
    if barrier is not None:  # every child arrives, then all call at once
        folder, n = Path(barrier[0]), int(barrier[1])
        (folder / str(os.getpid())).touch()
        deadline = time.monotonic() + 20
        while len(list(folder.iterdir())) < n:
            if time.monotonic() > deadline:
                raise SystemExit("barrier timeout")
            time.sleep(0.005)
    with toolledger.run("send the email", db=db) as run:
        try:
            out = run.call(tool, call_id=call_id, input={"to": "ana@example.com"})
            print(out.status, out.replayed)
        except toolledger.CheckpointError as exc:
            print(exc.code)


if __name__ == "__main__":
    main()
