"""anthropic-sdk-python #1749: the session tool runner re-runs a tool whose result post failed.

Offline: a real ``AsyncAnthropic`` client talks to a small fake managed-agents session (a
``httpx2.MockTransport``: the event history, the event stream, result posts). The session
waits on one ``send_email`` call. The first runner's result post is refused; a second runner
takes the session up. The stock ``SessionToolRunner`` runs the tool again (two emails);
``guarded_session_tool_runner`` posts the stored result, the same bytes, and sends one.

Run it:  python examples/framework_anthropic_session.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from anthropic import beta_tool
from anthropic.lib.tools._beta_session_runner import SessionToolRunner

import toolledger
from toolledger.integrations.anthropic import guarded_session_tool_runner

SESSION = "sesn_01"
AT = "2026-01-01T00:00:00Z"


class Session:
    """One session waiting on a ``send_email`` call; its first result post is refused."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = [
            {"id": "sevt_01", "type": "agent.custom_tool_use", "name": "send_email",
             "input": {"to": "ana@example.com"}, "processed_at": AT},
            {"id": "sevt_02", "type": "session.status_idle", "processed_at": AT,
             "stop_reason": {"type": "requires_action", "event_ids": ["sevt_01"]}},
        ]  # fmt: skip
        self.posts: list[bytes] = []
        self.changed = asyncio.Event()

    def ended(self) -> bool:
        return self.events[-1]["type"] == "session.status_terminated"

    async def stream(self) -> AsyncIterator[bytes]:
        sent = 0
        while True:
            for e in self.events[sent:]:
                yield f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
            sent = len(self.events)
            if self.ended():
                return
            self.changed.clear()
            await self.changed.wait()

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path.removeprefix(f"/v1/sessions/{SESSION}")
        if request.method == "GET" and path == "":
            status = "terminated" if self.ended() else "idle"
            return httpx2.Response(200, json={"id": SESSION, "type": "session", "status": status})
        if request.method == "GET" and path == "/events":
            return httpx2.Response(200, json={"data": self.events, "next_page": None})
        if request.method == "GET" and path == "/events/stream":
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=self.stream()
            )
        self.posts.append(request.content)
        if len(self.posts) == 1:  # the network drops the first result
            return httpx2.Response(
                403, json={"type": "error", "error": {"type": "permission_error"}}
            )
        (result,) = json.loads(request.content)["events"]
        self.events += [
            {**result, "id": "sevt_03", "processed_at": AT},
            {"id": "sevt_04", "type": "session.status_terminated", "processed_at": AT},
        ]
        self.changed.set()
        return httpx2.Response(200, json={"data": []})

    def client(self) -> anthropic.AsyncAnthropic:
        transport = httpx2.MockTransport(self.handle)
        return anthropic.AsyncAnthropic(
            api_key="offline",
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
        )


outbox: list[str] = []


@beta_tool
def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


async def two_runners(make: Any) -> None:
    async with contextlib.aclosing(make().__aiter__()) as calls:
        async for call in calls:
            print(f"runner 1: ran {call.name}, result posted: {call.posted}")
            break
    async for call in make():
        print(f"runner 2: {call.name}, result posted: {call.posted}")


def main() -> None:
    stock = Session()
    asyncio.run(two_runners(lambda: SessionToolRunner(stock.client(), SESSION, tools=[send_email])))
    print(f"stock SessionToolRunner: {len(outbox)} emails")
    runs = len(outbox)
    outbox.clear()
    guarded = Session()
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    with toolledger.run("session worker", db=str(db)) as run:
        asyncio.run(
            two_runners(
                lambda: guarded_session_tool_runner(
                    run, guarded.client(), SESSION, tools=[send_email]
                )
            )
        )
    same = guarded.posts[0] == guarded.posts[1]
    print(f"guarded runner: {len(outbox)} email; both posts carry the same bytes: {same}")
    assert (runs, len(outbox), same) == (2, 1, True)


if __name__ == "__main__":
    main()
