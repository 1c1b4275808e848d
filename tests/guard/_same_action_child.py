"""Child process of the same-action process tests: one call of ``pay``, in a fresh process.

Usage: python _same_action_child.py DB DIR CALL_ID MODE

DB is a SQLite path or a PostgreSQL DSN (schema from ``TOOLLEDGER_TEST_PG_SCHEMA``). The
tool ``pay`` (no effect key: the guard's default rules apply) appends a line to
DIR/effects.log, its irreversible effect. Every child runs in the conversation ``conv-1``.
MODE:

- ``race``: stop just before the claim commits until DIR/go exists (after announcing
  DIR/ready-CALL_ID), then call: the store's claim decides between the racers;
- ``hold``: call; the tool announces DIR/holding and waits for DIR/release before its
  effect (a live attempt holding the claim);
- ``kill``: the tool writes its operation journal, makes its effect, then SIGKILLs the
  process (a dead attempt holding the claim);
- ``plain``: call.

Prints ``{"call": new|replayed|<error code>, "deduplicated_from", "same_action_as",
"live", "message"}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from _child_files import append, wait_for

import toolledger
from toolledger.testing import crash_at


def main() -> None:
    db, folder, call_id, mode = sys.argv[1:5]
    root = Path(folder)

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        ctx.operation.write({"payment": ctx.call_id})
        if mode == "hold":
            (root / "holding").touch()
            wait_for(root / "release")
        append(root / "effects.log", ctx.call_id)
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"paid": input["amount"], "by": ctx.call_id}

    tool = toolledger.tool("pay", revision="1", execute=execute)
    store: Any = db
    schema = os.environ.get("TOOLLEDGER_TEST_PG_SCHEMA")
    if schema:
        from toolledger.store.postgres import PostgresStore

        store = PostgresStore(db, schema=schema)
    with contextlib.ExitStack() as stack:
        if mode == "race":

            def wait_go() -> None:
                (root / f"ready-{call_id}").touch()
                wait_for(root / "go")

            stack.enter_context(crash_at("before-claim", wait_go))
        report: dict[str, Any]
        with toolledger.run("pay", db=store, conversation_id="conv-1") as run:
            try:
                out = run.call(tool, call_id=call_id, input={"to": "ana", "amount": 5})
                report = {
                    "call": "replayed" if out.replayed else "new",
                    "deduplicated_from": out.deduplicated_from,
                }
            except toolledger.CheckpointError as exc:
                report = {
                    "call": exc.code,
                    "same_action_as": exc.details.get("same_action_as"),
                    "live": exc.details.get("live_attempt"),
                    "message": exc.message,
                }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
