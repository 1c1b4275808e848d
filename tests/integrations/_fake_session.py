"""A fake managed-agents session API for the session-runner tests (anthropic-sdk-python #1749).

Real ``AsyncAnthropic`` clients over ``httpx2.MockTransport``: ``GET /v1/sessions/{id}``,
``GET /v1/sessions/{id}/events`` (the history), ``GET /v1/sessions/{id}/events/stream`` (SSE:
the history, then each new event until the session terminates) and ``POST
/v1/sessions/{id}/events`` (a tool result). The session waits on one custom tool call; an
accepted result terminates it. The server's state lives in a JSON file, so a second process
sees what the first one left (the call still waiting after a failed or killed post).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2

SESSION_ID = "sesn_1"
CALL_EVENT_ID = "sevt_tool_1"
AT = "2026-01-01T00:00:00Z"


class FakeSession:
    """One session: a ``send_email`` call waiting for its result.

    Args:
        state: The file holding the server's state (created when missing).
        fail_posts: How many result posts to refuse (HTTP 403, a permanent failure).
        kill_on_post: SIGKILL this process when a result is posted (before answering).
    """

    def __init__(self, state: Path, *, fail_posts: int = 0, kill_on_post: bool = False) -> None:
        self.path = state
        self.kill_on_post = kill_on_post
        if state.exists():
            self.state = json.loads(state.read_text())
            self.state["fail_posts"] = fail_posts
        else:
            self.state = {
                "events": [
                    {
                        "id": CALL_EVENT_ID,
                        "type": "agent.custom_tool_use",
                        "name": "send_email",
                        "input": {"to": "ana@example.com"},
                        "processed_at": AT,
                    },
                    {
                        "id": "sevt_idle_1",
                        "type": "session.status_idle",
                        "stop_reason": {"type": "requires_action", "event_ids": [CALL_EVENT_ID]},
                        "processed_at": AT,
                    },
                ],
                "posts": [],
                "fail_posts": fail_posts,
            }
            self._save()
        self._changed = asyncio.Event()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)

    @property
    def posts(self) -> list[dict[str, Any]]:
        """Every result event posted (accepted or refused), as sent."""
        return list(self.state["posts"])

    @property
    def raw_posts(self) -> list[str]:
        """The body of every result post, byte for byte (decoded)."""
        return list(self.state.get("raw_posts", []))

    @property
    def terminated(self) -> bool:
        return any(e["type"] == "session.status_terminated" for e in self.state["events"])

    def _session(self) -> dict[str, Any]:
        status = "terminated" if self.terminated else "idle"
        return {"id": SESSION_ID, "type": "session", "status": status}

    async def _stream(self) -> AsyncIterator[bytes]:
        sent = 0
        while True:
            events = self.state["events"]
            for e in events[sent:]:
                yield f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
            sent = len(events)
            if self.terminated:
                return
            self._changed.clear()
            await self._changed.wait()

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if request.method == "GET" and path == f"/v1/sessions/{SESSION_ID}":
            return httpx2.Response(200, json=self._session())
        if request.method == "GET" and path == f"/v1/sessions/{SESSION_ID}/events":
            return httpx2.Response(200, json={"data": self.state["events"], "next_page": None})
        if request.method == "GET" and path == f"/v1/sessions/{SESSION_ID}/events/stream":
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._stream()
            )
        if request.method == "POST" and path == f"/v1/sessions/{SESSION_ID}/events":
            (event,) = json.loads(request.content)["events"]
            self.state["posts"].append(event)
            self.state.setdefault("raw_posts", []).append(request.content.decode())
            self._save()
            if self.kill_on_post:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.state["fail_posts"] > 0:
                self.state["fail_posts"] -= 1
                self._save()
                return httpx2.Response(
                    403,
                    json={"type": "error", "error": {"type": "permission_error", "message": "no"}},
                )
            n = len(self.state["events"])
            self.state["events"] += [
                {**event, "id": f"sevt_result_{n}", "processed_at": AT},
                {"id": "sevt_end", "type": "session.status_terminated", "processed_at": AT},
            ]
            self._save()
            self._changed.set()
            return httpx2.Response(200, json={"data": []})
        return httpx2.Response(404, json={"type": "error", "error": {"type": "not_found_error"}})

    def client(self) -> Any:
        return anthropic.AsyncAnthropic(
            api_key="k",
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(
                transport=httpx2.MockTransport(self.handler)
            ),
        )
