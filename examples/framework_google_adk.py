"""Google ADK tools, guarded: the same function call handled twice sends one email.

Offline: a scripted ``BaseLlm`` plays the model (it asks for ``send_email`` with function
call id ``fc_01``). The job is handled twice, as when a worker retries a request whose
answer was lost: the stock runner runs the tool twice, the runner with
``ToolledgerPlugin()`` once, and both times the model gets the same response.

Needs google-adk (``pip install 'toolledger[google-adk]'``; it pins OpenTelemetry <= 1.44,
so the tests run it in a virtualenv of its own).

Run it:  python examples/framework_google_adk.py
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

import toolledger
from toolledger.integrations.google_adk import ToolledgerPlugin

outbox: list[str] = []


def send_email(to: str) -> str:
    """Send one email."""
    outbox.append(to)  # the irreversible effect
    return f"sent to {to}"


class Scripted(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: Any, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = [p for c in llm_request.contents for p in (c.parts or [])]
        answers = [p.function_response.response for p in parts if p.function_response]
        if answers:
            part = types.Part(text=f"Done: {answers[-1]['result']}")
        else:
            call = types.FunctionCall(id="fc_01", name="send_email", args={"to": "ana@example.com"})
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def handle_twice(plugins: list[BasePlugin]) -> None:
    agent = LlmAgent(name="mailer", model=Scripted(), tools=[send_email])
    sessions = InMemorySessionService()
    runner = Runner(
        app=App(name="shop", root_agent=agent, plugins=plugins), session_service=sessions
    )

    async def handle() -> None:
        session = await sessions.create_session(app_name="shop", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="Tell Ana it shipped.")])
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            if event.content and event.content.parts and event.content.parts[0].text:
                print("agent:", event.content.parts[0].text)

    async def main() -> None:
        for _ in range(2):
            await handle()
        await runner.close()

    asyncio.run(main())


def main() -> None:
    handle_twice([])
    print(f"stock runner, handled twice: {len(outbox)} emails")
    stock = len(outbox)
    outbox.clear()
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    with toolledger.run("Tell Ana her order shipped", db=str(db)):
        handle_twice([ToolledgerPlugin()])
    print(f"guarded runner, handled twice: {len(outbox)} email")
    assert (stock, len(outbox)) == (2, 1)


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")  # the ADK's experimental-feature warnings
    main()
