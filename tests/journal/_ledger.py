"""What the append-outcome tests check: a tool that counts its effects, and the chain.

``Effects.tool`` writes its operation-journal entry, then its effect (counted per call
id), then returns; its ``recover`` proves an outcome from the effect log, as a real tool
asks the remote system. ``stored_records`` reads a run's records with their phases;
``check_chain`` asserts what every append outcome must leave: the chain verifies, ``seq``
is dense, no record is stored twice, and every acknowledged record is stored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import toolledger

__all__ = ["Effects", "check_chain", "stored_records"]


class Effects:
    """The outside world of a test: effects per call id and their results."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.results: dict[str, Any] = {}

    def execute(self, input: Any, ctx: toolledger.ExecuteContext) -> Any:
        ctx.operation.write({"n": input["n"]})
        self.count[ctx.call_id] += 1
        result = {"n": input["n"], "call": ctx.call_id}
        self.results[ctx.call_id] = result
        return result

    def recover(self, ctx: toolledger.RecoverContext) -> Any:
        if ctx.call_id in self.results:
            return toolledger.Recovered(self.results[ctx.call_id])
        return toolledger.NotRecovered("no effect for this call")

    def tool(self) -> toolledger.Tool:
        return toolledger.tool("act", revision="1", execute=self.execute, recover=self.recover)

    def double_effects(self) -> list[str]:
        return [cid for cid, n in self.count.items() if n > 1]


def stored_records(store: Any, run_id: str) -> list[tuple[int, str, str]]:
    """``(seq, event_id, phase)`` of every stored record of the run, in ``seq`` order."""
    out = []
    for row in store.read_events(run_id):
        header = json.loads(row.data)["header"]
        out.append((row.seq, row.event_id, header.get("phase", "point")))
    return out


def check_chain(store: Any, run_id: str, acked: Iterable[str] = ()) -> list[tuple[int, str, str]]:
    """Assert the stored chain verifies, is dense, holds no record twice, and holds every
    event id of ``acked``; return the records."""
    report = toolledger.verify(store, run_id)
    assert report.ok, report.reason
    records = stored_records(store, run_id)
    assert [seq for seq, _, _ in records] == list(range(len(records)))
    twice = [key for key, n in Counter((e, p) for _, e, p in records).items() if n > 1]
    assert not twice, f"stored twice: {twice}"
    phases: dict[str, set[str]] = {}
    for _, event_id, phase in records:
        phases.setdefault(event_id, set()).add(phase)
    odd = {e: p for e, p in phases.items() if p not in ({"point"}, {"start"}, {"start", "end"})}
    assert not odd, f"events stored with contradicting records: {odd}"
    stored = set(phases)
    missing = [e for e in acked if e not in stored]
    assert not missing, f"acknowledged but not stored: {missing}"
    return records
