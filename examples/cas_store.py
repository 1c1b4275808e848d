"""Two workers race for the same tool call: one executes, the other waits, then replays.

Each worker is its own process on the same SQLite file. Both start the same call (same
call id, same input) at the same moment. The checkpoint's compare-and-swap lets exactly
one claim it and charge the card; the other finds the call executing, is told the outcome
is not known yet (``OUTCOME_UNKNOWN``: it never executes), waits until the owner stores the
result, and gets the stored payload (``replayed=True``). Whoever gets there first delivers;
the other sees it delivered.

Run it:  python examples/cas_store.py [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import toolledger

CALL_ID = "charge-order-A-1001"


def wait_for(predicate: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("gave up waiting")
        time.sleep(0.01)


def worker(workdir: Path, name: str) -> int:
    charges = workdir / "charges.log"

    def charge(input: dict[str, Any], ctx: toolledger.ExecuteContext) -> dict[str, Any]:
        ctx.operation.write({"charge_id": f"ch-{ctx.call_id}"})
        with charges.open("a") as f:
            f.write(f"{name} charged {input['cents']}\n")
        time.sleep(0.2)  # a slow provider call, so the race is visible
        return {"charge_id": f"ch-{ctx.call_id}", "by": name}

    tool = toolledger.tool("charge_card", revision="1", execute=charge)
    wait_for((workdir / "go").exists)
    role = "executed"
    with toolledger.run("charge an order", agent=name, db=workdir / "ledger.db") as run:
        try:
            out = run.call(tool, call_id=CALL_ID, input={"cents": 1999})
            role = "replayed" if out.replayed else "executed"
        except toolledger.OutcomeUnknownError:
            # Another worker holds the call. Never execute: wait for its result.
            def done() -> bool:
                rec = run.store.get(run.namespace, CALL_ID)
                return rec is not None and rec.result is not None

            wait_for(done)
            out = run.call(tool, call_id=CALL_ID, input={"cents": 1999})
            role = "waited, then replayed"
        try:
            sent = run.deliver(CALL_ID, lambda payload: print(f"{name} posts {payload}") or True)
            delivery = "delivered" if sent else "already delivered"
        except toolledger.DeliveryUncertainError:
            delivery = "the other worker is delivering"
    print(json.dumps({"worker": name, "role": role, "payload": out.payload, "delivery": delivery}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--worker")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="toolledger-cas-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.worker:
        return worker(workdir, args.worker)
    toolledger.SQLiteStore(workdir / "ledger.db").close()  # create the schema once
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--workdir", str(workdir), "--worker", name],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for name in ("worker-a", "worker-b")
    ]
    (workdir / "go").touch()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    charges = (workdir / "charges.log").read_text().splitlines()
    for r in reports:
        print(f"{r['worker']}: {r['role']}; {r['delivery']}; payload {r['payload']}")
    print(f"charges made: {len(charges)}")
    same = reports[0]["payload"] == reports[1]["payload"]
    return 0 if len(charges) == 1 and same and all(p.returncode == 0 for p in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
