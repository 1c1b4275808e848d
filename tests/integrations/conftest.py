"""Fixtures for adapter tests: a run on SQLite and a counting tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolledger


@pytest.fixture
def run(tmp_path: Path) -> Iterator[toolledger.Run]:
    store = toolledger.SQLiteStore(tmp_path / "adapters.db", durability="normal")
    with toolledger.run("adapter tests", db=store) as r:
        yield r
    store.close()


class Calls:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def tools(self) -> list[toolledger.Tool]:
        def send(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            self.seen.append(input)
            return {"sent_to": input["to"]}

        def fail(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            self.seen.append(input)
            raise ValueError("mailbox full")

        def lost(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            self.seen.append(input)
            ctx.operation.write({"id": 1})
            raise TimeoutError("no answer")

        return [
            toolledger.tool("send_email", revision="1", execute=send),
            toolledger.tool("failing", revision="1", execute=fail),
            toolledger.tool("lossy", revision="1", execute=lost),
        ]


@pytest.fixture
def calls() -> Calls:
    return Calls()
