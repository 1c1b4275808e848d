"""One racer of the same-action race: its own process, its own store, one call per round.

Each round every racer calls a payment under its own call id (``w<i>-r<round>``: the model
asked again). ``mode``:

- ``same``: the round's payment, the same input for every racer (one new action a round);
- ``different``: each racer's own payee (two actions a round);
- ``repeat``: the same payment every round; once both have decided, each racer delivers
  what it got (the model saw it) and the racers meet again before the next round, so
  every round's claim takes the action over from a seen call (the store's
  compare-and-swap on the action's holder).

The racers meet at a barrier just before their claim commits (the guard's ``before-claim``
point, first time per round), so each has read the ledger before either wrote: the
store's claim transaction decides. The tool appends ``<round> <call id>`` to
``effects.log`` (the world). The outcomes go to ``w<i>.json``: one ``[round, "new" |
"replayed" | <error code>, same_action_as or deduplicated_from]`` per round.
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
    db: str, schema: str | None, folder: str, me: int, rounds: int, mode: str, barrier: Any
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
        _append(effects, f"{current.round} {ctx.call_id}")
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
                input: dict[str, Any] = {"to": f"payee-{me}" if mode == "different" else "ana"}
                if mode != "repeat":
                    input["round"] = r
                try:
                    out = run.call(pay, call_id=f"w{me}-r{r}", input=input)
                except toolledger.CheckpointError as exc:
                    outcomes.append([r, exc.code, exc.details.get("same_action_as")])
                else:
                    kind = "replayed" if out.replayed else "new"
                    outcomes.append([r, kind, out.deduplicated_from])
                if mode == "repeat":
                    # Deliver only once every racer has decided: a result seen earlier
                    # would make the other's call a legitimate repetition.
                    barrier.wait(timeout=60)
                    if outcomes[-1][1] in ("new", "replayed"):
                        run.deliver(f"w{me}-r{r}", post=lambda _payload: None)
                    barrier.wait(timeout=60)  # every result of the round was seen
    finally:
        store.close()
        (root / f"w{me}.json").write_text(json.dumps(outcomes))
