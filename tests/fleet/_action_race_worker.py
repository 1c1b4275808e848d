"""One racer of the same-action race: its own process, its own store, one call per round.

Each round every racer calls the round's payment under its own call id (``w<i>-r<round>``:
the model asked again), with the same input (``same=True``: one action) or its own input
(``same=False``: two actions). The racers meet at a barrier just before their claim
commits (the guard's ``before-claim`` point, first time per round), so each has read the
ledger before either wrote: the store's claim transaction decides. The tool appends
``<round> <call id>`` to ``effects.log`` (the world). The outcomes go to ``w<i>.json``:
one ``[round, "new" | "replayed" | <error code>, same_action_as or deduplicated_from]`` per
round.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["race"]


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _open(db: str, schema: str | None) -> Any:
    import toolledger

    if schema is not None:
        from toolledger.store.postgres import PostgresStore

        return PostgresStore(db, schema=schema)
    return toolledger.SQLiteStore(db, durability="normal")


def race(
    db: str, schema: str | None, folder: str, me: int, rounds: int, same: bool, barrier: Any
) -> None:
    """Race ``rounds`` rounds (run in a spawned process; ``barrier`` is shared)."""
    import toolledger
    from toolledger.testing import crash_at

    root = Path(folder)
    effects = root / "effects.log"
    met: set[int] = set()
    current = threading.local()

    def meet() -> None:
        r = current.round
        if r not in met:  # a re-decided claim passes the point again: meet once per round
            met.add(r)
            barrier.wait(timeout=60)

    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        ctx.operation.write({"ref": f"p-{ctx.call_id}"})  # just before the effect
        _append(effects, f"{input['round']} {ctx.call_id}")
        return {"ref": f"p-{ctx.call_id}", **input}

    pay = toolledger.tool("pay", revision="1", execute=execute)
    outcomes: list[list[Any]] = []
    store = _open(db, schema)
    try:
        with (
            crash_at("before-claim", meet),
            toolledger.run("race", db=store, conversation_id="conv-race") as run,
        ):
            for r in range(rounds):
                current.round = r
                input = {"round": r, "to": "ana" if same else f"payee-{me}", "cents": 500}
                try:
                    out = run.call(pay, call_id=f"w{me}-r{r}", input=input)
                except toolledger.CheckpointError as exc:
                    outcomes.append([r, exc.code, exc.details.get("same_action_as")])
                else:
                    kind = "replayed" if out.replayed else "new"
                    outcomes.append([r, kind, out.deduplicated_from])
    finally:
        store.close()
        (root / f"w{me}.json").write_text(json.dumps(outcomes))
