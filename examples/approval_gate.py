"""Approval gate: an email waits for a human, who approves it from another process.

The story: an agent wants to send an email. ``send_email`` is gated
(``approval="effect-only"``): its approver files a ticket and answers ``Pending``, so the
call returns ``status="awaiting_approval"`` and nothing is sent (the checkpoint waits in
``ready``). A human, in a *second process*, lists what waits and approves it with the CLI:

    toolledger --db demo-out/approval_gate.db approvals --pending
    toolledger --db demo-out/approval_gate.db approve toolu_email_01 --by alice --reason "..."

The agent calls again: the stored decision counts (nobody is asked twice), the email is
sent once, and a third call replays the stored result. The approval is bound to the call's
input: the same approval never authorizes another recipient. Finally the run is exported
to HTML, which shows who approved what, bound to which input.

Run it: ``python examples/approval_gate.py``. It writes ``demo-out/approval_gate.db``,
``demo-out/approval_outbox.log`` (one line per email actually sent) and
``demo-out/approval_gate.html``, and exits non-zero if anything went differently.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import toolledger as tl
from toolledger.checkpoint import fingerprint

OUT = Path("demo-out")
DB = OUT / "approval_gate.db"
OUTBOX = OUT / "approval_outbox.log"
HTML = OUT / "approval_gate.html"
CALL_ID = "toolu_email_01"
EMAIL = {"to": "ana@example.com", "subject": "Your refund", "body": "We refunded 40 EUR."}
tickets: list[str] = []


def file_ticket(request: tl.approvals.ApprovalRequest) -> Any:
    """The approver: a human must decide, so file a ticket and let the call wait."""
    ticket = f"HELP-{len(tickets) + 1}"
    tickets.append(ticket)
    print(f"[approver] {request.tool_name} to {request.input['to']!r} needs a human: {ticket}")
    return tl.Pending(ticket)


@tl.tool(revision="1", approval="effect-only", approver=file_ticket)
def send_email(input: dict[str, Any], ctx: tl.ExecuteContext) -> dict[str, Any]:
    """Send one email to one recipient."""
    with OUTBOX.open("a") as f:  # the irreversible effect
        f.write(f"{input['to']}\t{input['subject']}\n")
    return {"sent_to": input["to"]}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``toolledger --db DB ARGS`` in a second process (as a human at a terminal)."""
    cmd = [sys.executable, "-c", "from toolledger.cli import main; main()", "--db", str(DB)]
    print("$ toolledger --db", DB, " ".join(args))
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60, check=False)
    print(proc.stdout.rstrip() or proc.stderr.rstrip())
    return proc


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for stale in (DB, OUTBOX, HTML, Path(f"{DB}-wal"), Path(f"{DB}-shm")):
        stale.unlink(missing_ok=True)

    with tl.run("Refund Ana and tell her", agent="support-bot", db=DB) as run:
        first = run.call(
            send_email, call_id=CALL_ID, input=EMAIL, justification="Ana asked for a refund."
        )
        print(f"[agent] first call: status={first.status}")
        if first.status != "awaiting_approval" or OUTBOX.exists():
            fail("the gated call should wait, with nothing sent")

        again = run.call(send_email, call_id=CALL_ID, input=EMAIL)
        print(f"[agent] still waiting: status={again.status} (no second ticket: {tickets})")

        # A human, in another process, sees what waits and approves this exact call.
        if cli("approvals", "--pending").returncode != 0:
            fail("listing pending approvals failed")
        decided = cli("approve", CALL_ID, "--by", "alice", "--reason", "refund verified")
        if decided.returncode != 0:
            fail("approving from the CLI failed")

        sent = run.call(send_email, call_id=CALL_ID, input=EMAIL)
        print(f"[agent] after approval: status={sent.status} payload={sent.payload}")
        replay = run.call(send_email, call_id=CALL_ID, input=EMAIL)
        print(f"[agent] same call again: replayed={replay.replayed}")
        if sent.replayed or not replay.replayed:
            fail("the approved call should run once, then replay")

        other = {**EMAIL, "to": "mallory@example.com"}
        try:
            run.call(send_email, call_id=CALL_ID, input=other)
            fail("an approval must never authorize another input")
        except tl.BindingConflictError:
            print("[agent] same call id, other recipient: BINDING_CONFLICT (not authorized)")

    lines = OUTBOX.read_text().splitlines()
    print(f"send_email ran {len(lines)} time(s); tickets filed: {tickets}")
    if len(lines) != 1 or tickets != ["HELP-1"]:
        fail("expected exactly one email and one ticket")

    tl.export_html(DB, run.run_id, HTML)
    page = HTML.read_text(encoding="utf-8")
    fp = fingerprint(EMAIL)  # what the approval is bound to (with tool and revision)
    if "alice" not in page or fp not in page:
        fail("the HTML export should show who approved what, bound to which input")
    print(f"HTML export: {HTML} shows the approval by alice bound to input {fp}")


if __name__ == "__main__":
    main()
