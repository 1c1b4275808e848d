"""A Pydantic AI run (its own instrumentation on) through toolledger: what Phoenix is sent.

The model asks for two tool calls at once (``call_1``, ``call_2``), then, in a second agent
run, reuses ``call_1`` for another input: the guard refuses it (``BINDING_CONFLICT``). Used
by ``_phoenix_child.py``; ``test_phoenix.py`` reads it back from Phoenix.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import toolledger

AGENT = "pydantic-mailer"
CALLS = (("call_1", "ana@example.com"), ("call_2", "bo@example.com"))
CONFLICT = ("call_1", "eve@example.com")


def record(db: Path, provider: Any = None) -> str:
    """Run the agent twice under one ``toolledger.run``; return the run id."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.toolsets import FunctionToolset

    from toolledger.integrations.pydantic_ai import GuardedToolset

    def send_email(to: str) -> str:
        """Send one email."""
        return f"sent to {to}"

    def scripted(calls: tuple[tuple[str, str], ...]) -> FunctionModel:
        def model(messages: list[Any], info: Any) -> Any:
            parts = [p for m in messages for p in getattr(m, "parts", [])]
            if any(isinstance(p, ToolReturnPart) for p in parts):
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(
                parts=[ToolCallPart("send_email", {"to": to}, cid) for cid, to in calls]
            )

        return FunctionModel(model)

    with toolledger.run("email Ana and Bo", agent=AGENT, db=db, tracer_provider=provider) as run:
        for calls in (CALLS, (CONFLICT,)):
            agent = Agent(
                scripted(calls), toolsets=[GuardedToolset(FunctionToolset([send_email]), run=run)]
            )
            agent.instrument = InstrumentationSettings(tracer_provider=provider)
            with contextlib.suppress(toolledger.CheckpointError):  # the reused id: refused
                agent.run_sync("go")
        return run.run_id
