"""Child process of the effect-key process tests: one re-plannable call, in a fresh process.

Usage: python _effect_key_child.py DB DIR CALL_ID MODE

DB is a SQLite path or a PostgreSQL DSN (schema from ``TOOLLEDGER_TEST_PG_SCHEMA``). The
tool ``send_email`` has the effect key ``to:<recipient>``: every call id sends the same
email. Its effect is a line in DIR/effects.log. MODE:

- ``race``: call (no recover), stopping just before the claim commits until DIR/go
  exists (after announcing DIR/ready-CALL_ID): every racer has read the key as free, so
  the store's claim decides;
- ``kill:<point>``: SIGKILL this process at a guard crash point, or at
  ``in-execute-after-effect`` (the effect happened, nothing recorded it);
- ``plain`` / ``recover``: call, without or with a recover function (it proves the
  holder's effect from its operation-journal entry and the effects log).

Prints ``{"call": new|replayed|recovered|<error code>, "deduplicated_from", "holder"}``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from _child_files import append, wait_for

import toolledger
from toolledger.testing import CRASH_POINTS, crash_at

#: Installed crash points stay installed until the process ends (or is killed).
CRASHING = contextlib.ExitStack()


def main() -> None:
    db, folder, call_id, mode = sys.argv[1:5]
    root = Path(folder)
    effects = root / "effects.log"
    point = mode.partition(":")[2] if mode.startswith("kill:") else None

    def kill_at(name: str) -> None:
        if name == point:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "race" and name == "before-claim" and not (root / "go").exists():
            (root / f"ready-{call_id}").touch()
            wait_for(root / "go")

    for name in CRASH_POINTS:
        CRASHING.enter_context(crash_at(name, functools.partial(kill_at, name)))

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        order = f"order-{ctx.call_id}"
        ctx.operation.write({"order": order})
        append(effects, order)  # the irreversible effect
        kill_at("in-execute-after-effect")
        return {"order": order, "to": input["to"]}

    def recover(ctx: toolledger.RecoverContext) -> Any:
        entry = ctx.operation.read()
        if entry is None:
            return toolledger.NotRecovered("operation journal empty")
        if not (effects.exists() and entry["order"] in effects.read_text().split()):
            return toolledger.NotRecovered(f"no effect found for {entry['order']}")
        return toolledger.Recovered({"order": entry["order"], "to": "ana@example.com"})

    tool = toolledger.tool(
        "send_email",
        revision="1",
        execute=execute,
        recover=recover if mode == "recover" else None,
        effect_key=lambda i: f"to:{i['to']}",
    )
    if db.startswith("postgresql://"):
        from toolledger.store.postgres import PostgresStore

        schema = os.environ.get("TOOLLEDGER_TEST_PG_SCHEMA") or "toolledger"
        store: Any = PostgresStore(db, schema=schema)
    else:
        store = toolledger.SQLiteStore(db, durability="full")
    report: dict[str, Any] = {"deduplicated_from": None, "holder": None}
    with toolledger.run("re-plan", db=store) as run:
        try:
            out = run.call(tool, call_id=call_id, input={"to": "ana@example.com"})
            report["call"] = "replayed" if out.replayed else "recovered" if out.recovered else "new"
            report["deduplicated_from"] = out.deduplicated_from
        except toolledger.CheckpointError as exc:
            report["call"] = exc.code
            report["holder"] = exc.details.get("effect_key_holder")
    store.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
