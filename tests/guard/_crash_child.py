"""Child process of the crash matrix: one guarded call + delivery, killed at a boundary.

Usage: python _crash_child.py DB DIR first POINT
       python _crash_child.py DB DIR again plain|recover

``first`` installs a crash-point hook that SIGKILLs this process at POINT; ``again`` is the
fresh process that calls the same call again (``recover``: with a recover function and
``redeliver=True``) and prints what happened as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from _child_files import append

import toolledger
from toolledger.testing import CRASH_POINTS, crash_at

#: Installed crash points stay installed until the process ends (or is killed).
CRASHING = contextlib.ExitStack()

CALL_ID = "toolu_matrix_1"


def main() -> None:
    db, folder, mode, arg = sys.argv[1:5]
    effects = Path(folder) / "effects.log"
    posts = Path(folder) / "posts.log"

    def kill_at(name: str) -> None:
        if mode == "first" and name == arg:
            os.kill(os.getpid(), signal.SIGKILL)

    if mode == "first" and arg in CRASH_POINTS:
        CRASHING.enter_context(crash_at(arg))  # SIGKILL there, for the rest of the process

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        order = f"order-{ctx.call_id}"
        ctx.operation.write({"order": order})
        kill_at("in-execute-after-journal")
        append(effects, order)  # the irreversible effect
        kill_at("in-execute-after-effect")
        return {"order": order, "to": input["to"]}

    def recover(ctx: toolledger.RecoverContext) -> Any:
        entry = ctx.operation.read()
        if entry is None:
            return toolledger.NotRecovered("operation journal empty")
        done = effects.exists() and entry["order"] in effects.read_text().split()
        if not done:
            return toolledger.NotRecovered(f"no effect found for {entry['order']}")
        return toolledger.Recovered({"order": entry["order"], "to": "a@example.com"})

    with_recover = mode == "again" and arg == "recover"
    tool = toolledger.tool(
        "send_email", revision="1", execute=execute, recover=recover if with_recover else None
    )
    report: dict[str, Any] = {}
    store = toolledger.SQLiteStore(db, durability="normal")
    with toolledger.run("crash matrix", db=store) as run:
        try:
            out = run.call(tool, call_id=CALL_ID, input={"to": "a@example.com"})
            report["call"] = "replayed" if out.replayed else "recovered" if out.recovered else "new"
        except toolledger.CheckpointError as exc:
            report["call"] = exc.code
        if report["call"] in ("new", "replayed", "recovered"):
            try:
                run.deliver(
                    CALL_ID,
                    lambda payload: append(posts, json.dumps(payload, sort_keys=True)),
                    redeliver=with_recover,
                )
                report["deliver"] = "ok"
            except toolledger.CheckpointError as exc:
                report["deliver"] = exc.code
    store.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
