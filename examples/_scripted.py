"""The scripted provider API the replay examples run against, offline.

A ``ScriptedAPI`` answers the requests a real SDK client sends through an
``httpx2.MockTransport(api.handle)``; a subclass says what a request's JSON body gets back
(``reply``). ``offline=True`` refuses every request, so a replay that reaches the network
fails loudly; ``requests`` counts what was sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2


class ScriptedAPI:
    """A scripted API; ``offline`` refuses every request (a replay must send none)."""

    def __init__(self, *, offline: bool = False) -> None:
        self.requests = 0
        self.offline = offline

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if self.offline:
            raise httpx2.ConnectError("offline: a replay must not reach the network")
        return httpx2.Response(200, json=self.reply(json.loads(request.content)))

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The response body for a request's JSON ``body``."""
        raise NotImplementedError
