"""Child process for the live-worker tests: one guarded call, coordinated through files.

Usage: python _worker_child.py DB DIR NAME [--hold]

DB is a SQLite path or a PostgreSQL DSN (schema from ``TOOLLEDGER_TEST_PG_SCHEMA``).

Waits for DIR/go, then calls ``send`` under call id ``shared``; the tool appends its
effect to DIR/effects.log. With ``--hold`` the tool announces DIR/started and waits for
DIR/release before its effect (a slow, live worker). Prints the outcome as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from _child_files import append, wait_for

import toolledger


def main() -> None:
    db, folder, name = sys.argv[1:4]
    hold = "--hold" in sys.argv
    root = Path(folder)

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        if hold:
            (root / "started").touch()
            wait_for(root / "release", seconds=30.0)
        ctx.operation.write({"order": "o-1"})
        append(root / "effects.log", name)
        return {"by": name}

    tool = toolledger.tool("send", revision="1", execute=execute)
    wait_for(root / "go", seconds=30.0)
    schema = os.environ.get("TOOLLEDGER_TEST_PG_SCHEMA")
    if db.startswith("postgresql://"):
        from toolledger.store.postgres import PostgresStore

        store: Any = PostgresStore(db, schema=schema or "toolledger")
    else:
        store = toolledger.SQLiteStore(db, durability="normal")
    with toolledger.run("worker", db=store) as run:
        try:
            out = run.call(tool, call_id="shared", input={"to": "x"})
            result = {"outcome": "replayed" if out.replayed else "new", "payload": out.payload}
        except toolledger.CheckpointError as exc:
            result = {"outcome": exc.code}
    store.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
