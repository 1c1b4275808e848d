"""Fixtures for approval-gate tests: a SQLite ledger, a counting tool, a recording approver."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint
from toolledger.store.base import CreateCheckpoint, SwapCheckpoint
from toolledger.testing import stored_run

ANSWERS: dict[str, Any] = {
    "approved": Approved("alice", "looks right"),
    "denied": Denied("bob", "wrong recipient"),
    "pending": Pending("T-42"),
}


@dataclasses.dataclass
class Approver:
    """Answers with ``answer`` and records every request it is asked."""

    answer: Any
    requests: list[Any] = dataclasses.field(default_factory=list)

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return self.answer


@dataclasses.dataclass
class Effects:
    """Counts executions of the email tool."""

    sent: list[Any] = dataclasses.field(default_factory=list)

    def tool(self, approval: str | None, approver: Callable[..., Any] | None) -> toolledger.Tool:
        def send(input: Any, ctx: Any) -> dict[str, Any]:
            self.sent.append(input)
            return {"sent_to": input["to"]}

        return toolledger.tool(
            "send_email",
            revision="1",
            execute=send,
            recover=lambda ctx: toolledger.Recovered({"sent_to": "recovered"}),
            description="Send one email.",
            approval=approval,
            approver=approver,
        )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def effects() -> Effects:
    return Effects()


def leave_executing(store: Any, binding: Binding) -> None:
    """Leave the call claimed by another attempt, as a crash after the claim does."""
    at = datetime.now(timezone.utc)
    new = create_checkpoint(binding, at=at)
    claimed = claim_execution(new, attempt_id="0" * 32, at=at).next
    assert store.apply([CreateCheckpoint(new), SwapCheckpoint(0, claimed)]) == [
        (True, new),
        True,
    ]


def approval_events(store: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's approval journal events, in order."""
    return [e for e in stored_run(store, run_id).events if e["kind"] == "approval"]


def kinds(store: Any, run_id: str) -> list[str]:
    return [e["kind"] for e in stored_run(store, run_id).events]
