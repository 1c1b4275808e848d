"""Child-process bodies for the real-process store tests (importable by "spawn" children)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from multiprocessing.connection import Connection
from typing import Any

import toolledger as tl
from toolledger.checkpoint import (
    Action,
    Binding,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
BARRIER_TIMEOUT = 60


def binding(call_id: str, namespace: str = "race") -> Binding:
    """The binding every process agrees on for ``call_id``."""
    return Binding(namespace, call_id, "send_email", "1", fingerprint({"id": call_id}))


def create_store_at_once(paths: list[str], index: int, barrier: Any, out: Connection) -> None:
    """For each fresh path: wait for everyone, open (create) the store, write one record."""
    results = []
    for path in paths:
        barrier.wait(BARRIER_TIMEOUT)
        try:
            with SQLiteStore(path) as store:
                rec = create_checkpoint(binding(f"p{index}", "open"), at=T0)
                created, _ = store.create_if_absent(rec)
                results.append("created" if created else "not created")
        except Exception as exc:  # report to the parent, which asserts on it
            results.append(f"{type(exc).__name__}: {exc}")
    out.send(results)


def race_claims(path: str, index: int, rounds: int, barrier: Any, out: Connection) -> None:
    """Each round: wait for everyone, then create-if-absent and try to claim the call."""
    won: list[int] = []
    errors: list[str] = []
    with SQLiteStore(path) as store:
        for r in range(rounds):
            barrier.wait(BARRIER_TIMEOUT)
            try:
                _, rec = store.create_if_absent(create_checkpoint(binding(f"r{r}"), at=T0))
                try:
                    t = claim_execution(rec, attempt_id=f"w{index}", at=T0 + timedelta(seconds=1))
                except tl.FenceConflictError:
                    continue  # someone already won this round
                if store.compare_and_swap(t.expected_revision, t.next):
                    won.append(r)
            except Exception as exc:
                errors.append(f"round {r}: {type(exc).__name__}: {exc}")
    out.send((won, errors))


def _tool(effects: str) -> dict[str, Any]:
    """The side effect: append a line to ``effects`` and make it durable."""
    with open(effects, "a", encoding="utf-8") as f:
        f.write(f"sent by pid {os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())
    return {"message_id": "msg-1"}


def claim_then_hang(path: str, effects: str, conn: Connection) -> None:
    """Claim execution, say so, then block until killed (the tool never finishes)."""
    with SQLiteStore(path) as store:
        _, rec = store.create_if_absent(create_checkpoint(binding("crash"), at=T0))
        t = claim_execution(rec, attempt_id="child", at=T0 + timedelta(seconds=1))
        assert store.compare_and_swap(t.expected_revision, t.next)
        conn.send("claimed")
        conn.recv()  # never answered: the parent SIGKILLs us here


def complete_then_hang(path: str, effects: str, conn: Connection) -> None:
    """Claim, run the tool once, store its result, say so, then block until killed."""
    with SQLiteStore(path) as store:
        _, rec = store.create_if_absent(create_checkpoint(binding("crash"), at=T0))
        t = claim_execution(rec, attempt_id="child", at=T0 + timedelta(seconds=1))
        assert store.compare_and_swap(t.expected_revision, t.next)
        result = _tool(effects)
        t = complete_execution(
            t.next, attempt_id="child", at=T0 + timedelta(seconds=2), result=result
        )
        assert store.compare_and_swap(t.expected_revision, t.next)
        conn.send("completed")
        conn.recv()  # never answered: the parent SIGKILLs us here


def recover(path: str, effects: str, conn: Connection) -> None:
    """A fresh process: decide; deliver a stored result; never re-run a claimed call."""
    with SQLiteStore(path) as store:
        b = binding("crash")
        rec = store.get(b.namespace, b.call_id)
        assert rec is not None
        decision = decide_checkpoint(rec, b)
        delivered = None
        if decision.action is Action.EXECUTE:
            _tool(effects)  # would be a second run if the claim had been lost
        elif decision.action is Action.DELIVER:
            t = claim_delivery(rec, delivery_id="fresh", at=T0 + timedelta(seconds=3))
            assert store.compare_and_swap(t.expected_revision, t.next)
            assert t.next.result is not None
            delivered = t.next.result.payload  # "post" the stored result
            t = complete_delivery(t.next, delivery_id="fresh", at=T0 + timedelta(seconds=4))
            assert store.compare_and_swap(t.expected_revision, t.next)
        final = store.get(b.namespace, b.call_id)
        assert final is not None
        conn.send((decision.action.value, decision.status.value, delivered, final.status.value))
