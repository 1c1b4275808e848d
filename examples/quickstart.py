"""Quick start: a tool call whose result post fails is delivered again, never re-run.

The story from the README: the model asks for ``send_email``; the tool sends it; posting
the result back to the model fails; the agent reconnects and finds the call unanswered.
A naive agent would run the tool again and send a second email. With a checkpoint, the
reconnected agent (a fresh process here, to prove nothing survives in memory) asks
``decide_checkpoint``, gets ``deliver``, and posts the *stored* result instead.

Run it: ``python examples/quickstart.py`` (or ``make demo``). It writes
``demo-out/quickstart.db`` (the checkpoint store) and ``demo-out/outbox.log`` (one line
per email actually sent) under the current directory, and exits non-zero if the tool ran
more than once.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
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
    release_delivery,
)

OUT = Path("demo-out")
DB = OUT / "quickstart.db"
OUTBOX = OUT / "outbox.log"

# The model's tool call, as it arrives from the model API.
TOOL_CALL = {
    "id": "toolu_demo_01",
    "name": "send_email",
    "input": {"to": "ada@example.com", "subject": "Your invoice", "body": "Attached."},
}


def now() -> datetime:
    return datetime.now(timezone.utc)


def binding_for(call: dict[str, Any]) -> Binding:
    """What the checkpoint is for: this call id, this tool (revision), these arguments."""
    return Binding("demo", call["id"], call["name"], "1", fingerprint(call["input"]))


def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
    """The irreversible effect: here, one line appended to the outbox."""
    with OUTBOX.open("a", encoding="utf-8") as f:
        f.write(f"to={to} subject={subject!r}\n")
    sent = len(OUTBOX.read_text(encoding="utf-8").splitlines())
    return {"status": "sent", "message_id": f"msg-{sent:04d}"}


def post_result_to_model(call_id: str, result: Any, *, fail: bool) -> None:
    """Stand-in for the model API call that hands the tool result back."""
    if fail:
        raise ConnectionError("connection reset while posting the tool result")
    print(f"  posted result for {call_id}: {result}")


def first_life() -> None:
    """The agent's first process: execute once, then the result post fails."""
    with tl.SQLiteStore(DB) as store:
        b = binding_for(TOOL_CALL)
        _, rec = store.create_if_absent(create_checkpoint(b, at=now()))
        decision = decide_checkpoint(rec, b)
        print(f"[agent] new call {b.call_id}: decide -> {decision.action}")

        claim = claim_execution(rec, attempt_id="attempt-1", at=now())
        if not store.compare_and_swap(claim.expected_revision, claim.next):
            raise SystemExit("another process claimed this call first")
        result = send_email(**TOOL_CALL["input"])  # act only after the claim is stored
        print(f"[tool]  send_email ran: {result}")
        done = complete_execution(claim.next, attempt_id="attempt-1", at=now(), result=result)
        assert store.compare_and_swap(done.expected_revision, done.next)

        delivery = claim_delivery(done.next, delivery_id="post-1", at=now())
        assert store.compare_and_swap(delivery.expected_revision, delivery.next)
        try:
            post_result_to_model(b.call_id, result, fail=True)
        except ConnectionError as exc:
            print(f"[agent] posting the result failed: {exc}")
            # A known failed post: give the delivery back; the result stays stored.
            back = release_delivery(delivery.next, delivery_id="post-1", at=now())
            assert store.compare_and_swap(back.expected_revision, back.next)
    print("[agent] disconnected\n")


def reconnect() -> None:
    """A fresh process: the call looks unanswered; the checkpoint says deliver."""
    with tl.SQLiteStore(DB) as store:
        b = binding_for(TOOL_CALL)
        rec = store.get(b.namespace, b.call_id)
        assert rec is not None, "the checkpoint must have survived the restart"
        decision = decide_checkpoint(rec, b)
        print(f"[agent] reconnected; call {b.call_id} is unanswered: decide -> {decision.action}")
        if decision.action is not Action.DELIVER:
            raise SystemExit(f"expected deliver, got {decision.action}")

        delivery = claim_delivery(rec, delivery_id="post-2", at=now())
        assert store.compare_and_swap(delivery.expected_revision, delivery.next)
        assert delivery.next.result is not None
        post_result_to_model(b.call_id, delivery.next.result.payload, fail=False)
        done = complete_delivery(delivery.next, delivery_id="post-2", at=now())
        assert store.compare_and_swap(done.expected_revision, done.next)

        print("\nhistory of the checkpoint:")
        for h in store.history(b.namespace, b.call_id):
            print(f"  rev {h.revision}: {h.transition:<18} -> {h.status:<10} ({h.action})")

    runs = len(OUTBOX.read_text(encoding="utf-8").splitlines())
    print(f"\nsend_email ran {runs} time(s) for one tool call.")
    if runs != 1:
        raise SystemExit("FAIL: the tool ran more than once")
    print("OK: the tool ran exactly once; the stored result was delivered after reconnecting.")


def main() -> None:
    if sys.argv[1:] == ["--reconnect"]:
        reconnect()
        return
    OUT.mkdir(exist_ok=True)
    for stale in (DB, Path(f"{DB}-wal"), Path(f"{DB}-shm"), OUTBOX):
        stale.unlink(missing_ok=True)  # every run tells the story from the start
    print(f"store: {DB} (SQLite, durability=full)\n")
    first_life()
    # Reconnect in a brand-new process: only the database carries state across.
    subprocess.run([sys.executable, __file__, "--reconnect"], check=True)


if __name__ == "__main__":
    main()
