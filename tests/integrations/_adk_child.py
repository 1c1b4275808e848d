"""Google ADK scenarios, run in the ADK's own virtualenv: one JSON line of observations.

Usage: python _adk_child.py DIR   (with toolledger's ``src`` on PYTHONPATH)

google-adk pins OpenTelemetry below the dev environment's, so ``test_google_adk.py`` runs
this file with ``$TOOLLEDGER_ADK/bin/python`` and asserts on what it prints: ``{scenario:
observations}``. Each scenario runs the real ADK (``Runner``, ``LlmAgent``, ``FunctionTool``,
plugins, callbacks, tool confirmation) with a scripted ``BaseLlm``, offline.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.genai import types

import toolledger
from toolledger.integrations import ToolGate
from toolledger.integrations.google_adk import GuardCallbacks, ToolledgerPlugin
from toolledger.testing import stored_run

Call = tuple[str, str, dict[str, Any]]  # (id, tool, args)


class Scripted(BaseLlm):
    """A model that makes ``calls`` in its first turn, then reports the last response."""

    model: str = "scripted"
    calls: list[Any]

    async def generate_content_async(
        self, llm_request: Any, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = [p for c in llm_request.contents for p in (c.parts or [])]
        answered = [p.function_response for p in parts if p.function_response]
        if answered:
            text = json.dumps(answered[-1].response, sort_keys=True)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        yield LlmResponse(
            content=types.Content(
                role="model",
                parts=[
                    types.Part(function_call=types.FunctionCall(id=i, name=n, args=a))
                    for i, n, a in self.calls
                ],
            )
        )


class Outbox:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[str] = []
        self.fail = fail

    def send_email(self, to: str, justification: str = "") -> dict[str, str]:
        """Send one email."""
        self.sent.append(to)
        if self.fail:
            raise ValueError("mailbox full")
        return {"sent_to": to}


def tool_of(box: Outbox, **kwargs: Any) -> FunctionTool:
    def send_email(to: str, justification: str = "") -> dict[str, str]:
        """Send one email."""
        return box.send_email(to, justification)

    return FunctionTool(send_email, **kwargs)


ANA = {"to": "ana@example.com"}


class Harness:
    """One app: an agent with the guarded tool, in-memory sessions, a scripted model."""

    def __init__(
        self,
        calls: list[Call],
        tool: Any,
        *,
        plugin: ToolledgerPlugin | None = None,
        callbacks: GuardCallbacks | None = None,
    ) -> None:
        model = Scripted(calls=calls)
        extra: dict[str, Any] = {}
        if callbacks is not None:
            extra = {
                "before_tool_callback": callbacks.before_tool_callback,
                "after_tool_callback": callbacks.after_tool_callback,
            }
        agent = LlmAgent(name="mailer", model=model, tools=[tool], **extra)
        app = App(name="shop", root_agent=agent, plugins=[plugin] if plugin else [])
        self.sessions = InMemorySessionService()
        self.runner = Runner(app=app, session_service=self.sessions)

    async def invoke(self, text: str = "Tell Ana", session_id: str | None = None) -> dict:
        """One invocation in a (new) session; the function responses and events seen."""
        if session_id is None:
            session = await self.sessions.create_session(app_name="shop", user_id="u")
            session_id = session.id
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return await self.send(session_id, message)

    async def send(self, session_id: str, message: types.Content) -> dict:
        responses: dict[str, Any] = {}
        confirmations: list[dict[str, Any]] = []
        error = None
        try:
            async for event in self.runner.run_async(
                user_id="u", session_id=session_id, new_message=message
            ):
                for p in (event.content.parts if event.content else None) or []:
                    if p.function_response is not None:
                        responses[p.function_response.id] = p.function_response.response
                    if p.function_call is not None and p.function_call.name == (
                        "adk_request_confirmation"
                    ):
                        confirmations.append(
                            {"id": p.function_call.id, "args": dict(p.function_call.args or {})}
                        )
        except Exception as exc:
            cause = exc.__cause__ or exc
            error = {"type": type(exc).__name__, "cause": type(cause).__name__, "text": str(cause)}
        return {
            "session": session_id,
            "responses": responses,
            "confirmations": confirmations,
            "error": error,
        }

    async def confirm(self, session_id: str, confirmation_id: str, ok: bool) -> dict:
        part = types.Part(
            function_response=types.FunctionResponse(
                id=confirmation_id, name="adk_request_confirmation", response={"confirmed": ok}
            )
        )
        return await self.send(session_id, types.Content(role="user", parts=[part]))


def status(run: toolledger.Run, call_id: str) -> str | None:
    rec = run.store.get(run.namespace, call_id)
    return None if rec is None else rec.status.value


def tool_events(run: toolledger.Run) -> list[dict[str, Any]]:
    run.flush()
    return [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]


# -- scenarios -----------------------------------------------------------------------------------


async def replay(run: toolledger.Run) -> dict:
    box = Outbox()
    h = Harness([("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run))
    first = await h.invoke()
    second = await h.invoke()
    rec = run.store.get(run.namespace, "fc_1")
    return {
        "sent": box.sent,
        "responses": [first["responses"], second["responses"]],
        "stored": rec.result.payload,
        "conversation": run.conversation_id,
        "first_session": first["session"],
    }


async def parallel(run: toolledger.Run) -> dict:
    box = Outbox()
    calls = [("fc_1", "send_email", ANA), ("fc_2", "send_email", {"to": "bob@example.com"})]
    out = await Harness(calls, tool_of(box), plugin=ToolledgerPlugin(run)).invoke()
    return {"sent": sorted(box.sent), "responses": out["responses"]}


async def conflict(run: toolledger.Run) -> dict:
    box = Outbox()
    plugin = ToolledgerPlugin(run)
    await Harness([("fc_1", "send_email", ANA)], tool_of(box), plugin=plugin).invoke()
    other = [("fc_1", "send_email", {"to": "bob@example.com"})]
    out = await Harness(other, tool_of(box), plugin=plugin).invoke()
    return {"sent": box.sent, "error": out["error"]}


async def justification(run: toolledger.Run) -> dict:
    args = {**ANA, "justification": "Ana asked to be told."}
    await Harness(
        [("fc_1", "send_email", args)], tool_of(Outbox()), plugin=ToolledgerPlugin(run)
    ).invoke()
    (event,) = tool_events(run)
    return {"justification": event["justification"], "inputs": event["inputs"]}


async def tool_error(run: toolledger.Run) -> dict:
    box = Outbox(fail=True)
    out = await Harness(
        [("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run)
    ).invoke()
    return {"error": out["error"], "status": status(run, "fc_1")}


async def error_result(run: toolledger.Run) -> dict:
    box = Outbox(fail=True)
    h = Harness(
        [("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run, on_error="result")
    )
    outs = [await h.invoke(), await h.invoke()]
    return {"sent": box.sent, "responses": [o["responses"] for o in outs]}


async def approver_denies(run: toolledger.Run) -> dict:
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda r: toolledger.Denied("ops", "not today"))}
    out = await Harness(
        [("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run, gates=gates)
    ).invoke()
    return {"sent": box.sent, "responses": out["responses"]}


async def approver_pending(run: toolledger.Run) -> dict:
    box = Outbox()
    gates = {"send_email": ToolGate(approver=lambda r: toolledger.Pending("HELP-1"))}
    out = await Harness(
        [("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run, gates=gates)
    ).invoke()
    return {"sent": box.sent, "responses": out["responses"]}


async def _paused(run: toolledger.Run, decide: Callable[[Harness, dict], Any]) -> dict:
    box = Outbox()
    gates = {"send_email": ToolGate()}
    h = Harness(
        [("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin(run, gates=gates)
    )
    first = await h.invoke()
    pending = toolledger.approvals.get_approval(run.store, run.namespace, "fc_1")
    sent_before = list(box.sent)
    after = await decide(h, first)
    again = await h.confirm(first["session"], first["confirmations"][0]["id"], True)
    rec = toolledger.approvals.get_approval(run.store, run.namespace, "fc_1")
    return {
        "first": first,
        "pending": None if pending is None else pending.status.value,
        "sent_before": sent_before,
        "after": after,
        "again": again["responses"],
        "sent": box.sent,
        "decision": None if rec is None else [rec.status.value, rec.by],
    }


async def person_approves(run: toolledger.Run) -> dict:
    async def decide(h: Harness, first: dict) -> dict:
        toolledger.decide_approval(run.store, run.namespace, "fc_1", True, "ana", "checked")
        return await h.confirm(first["session"], first["confirmations"][0]["id"], False)

    return await _paused(run, decide)


async def person_denies(run: toolledger.Run) -> dict:
    async def decide(h: Harness, first: dict) -> dict:
        toolledger.decide_approval(run.store, run.namespace, "fc_1", False, "ana", "checked")
        return await h.confirm(first["session"], first["confirmations"][0]["id"], True)

    return await _paused(run, decide)


async def adk_confirms(run: toolledger.Run) -> dict:
    async def decide(h: Harness, first: dict) -> dict:
        return await h.confirm(first["session"], first["confirmations"][0]["id"], True)

    return await _paused(run, decide)


async def adk_confirmation_tool(run: toolledger.Run) -> dict:
    """A tool with ADK's own ``require_confirmation``: ADK asks; confirmed, it runs once."""
    box = Outbox()
    h = Harness(
        [("fc_1", "send_email", ANA)],
        tool_of(box, require_confirmation=True),
        plugin=ToolledgerPlugin(run),
    )
    first = await h.invoke()
    status_before = status(run, "fc_1")
    done = await h.confirm(first["session"], first["confirmations"][0]["id"], True)
    again = await h.confirm(first["session"], first["confirmations"][0]["id"], True)
    rec = toolledger.approvals.get_approval(run.store, run.namespace, "fc_1")
    return {
        "confirmations": len(first["confirmations"]),
        "status_before": status_before,
        "responses": [done["responses"], again["responses"]],
        "sent": box.sent,
        "decision": None if rec is None else [rec.status.value, rec.by],
    }


async def effect_key(run: toolledger.Run) -> dict:
    box = Outbox()
    plugin = ToolledgerPlugin(run, effect_keys={"send_email": "input"})
    outs = [
        await Harness([(i, "send_email", ANA)], tool_of(box), plugin=plugin).invoke()
        for i in ("fc_1", "fc_2")
    ]
    return {"sent": box.sent, "responses": [o["responses"] for o in outs]}


async def agent_callbacks(run: toolledger.Run) -> dict:
    box = Outbox()
    callbacks = GuardCallbacks(run)
    h = Harness([("fc_1", "send_email", ANA)], tool_of(box), callbacks=callbacks)
    outs = [await h.invoke(), await h.invoke()]
    return {"sent": box.sent, "responses": [o["responses"] for o in outs]}


async def spans(folder: Path) -> dict:
    """ADK's own tracing on (the global provider): two calls at once, the same turn twice."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolledger.telemetry import flush_spans

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    box = Outbox()
    calls = [("fc_1", "send_email", ANA), ("fc_2", "send_email", {"to": "bob@example.com"})]
    with toolledger.run(
        "tell them", agent="mailer", db=str(folder / "spans.db"), tracer_provider=provider
    ) as run:
        h = Harness(calls, tool_of(box), plugin=ToolledgerPlugin(run))
        for _ in range(2):
            await h.invoke()
    assert flush_spans()
    provider.force_flush()
    return {
        "sent": sorted(box.sent),
        "spans": [
            {
                "name": sp.name,
                "scope": sp.instrumentation_scope.name if sp.instrumentation_scope else None,
                "id": sp.context.span_id,
                "parent": sp.parent.span_id if sp.parent else None,
                "trace": sp.context.trace_id,
                "attributes": {k: v for k, v in (sp.attributes or {}).items() if "." in k},
            }
            for sp in exporter.get_finished_spans()
        ],
    }


async def no_run(folder: Path) -> dict:
    box = Outbox()
    h = Harness([("fc_1", "send_email", ANA)], tool_of(box), plugin=ToolledgerPlugin())
    outside = await h.invoke()
    with toolledger.run("later", db=str(folder / "later.db")) as later:
        inside = await h.invoke()
        stored = status(later, "fc_1")
    return {"outside": outside["error"], "inside": inside["responses"], "stored": stored}


SCENARIOS: dict[str, Callable[[toolledger.Run], Any]] = {
    "replay": replay,
    "parallel": parallel,
    "conflict": conflict,
    "justification": justification,
    "tool_error": tool_error,
    "error_result": error_result,
    "approver_denies": approver_denies,
    "approver_pending": approver_pending,
    "person_approves": person_approves,
    "person_denies": person_denies,
    "adk_confirms": adk_confirms,
    "adk_confirmation_tool": adk_confirmation_tool,
    "effect_key": effect_key,
    "agent_callbacks": agent_callbacks,
}


async def main(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, scenario in SCENARIOS.items():
        try:
            with toolledger.run(f"adk {name}", db=str(folder / f"{name}.db")) as run:
                out[name] = await scenario(run)
        except Exception:
            out[name] = {"crashed": traceback.format_exc()[-3000:]}
    for name, extra in (("no_run", no_run), ("spans", spans)):
        try:
            out[name] = await extra(folder)
        except Exception:
            out[name] = {"crashed": traceback.format_exc()[-3000:]}
    return out


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")  # ADK's experimental-feature warnings; not ours to test
    result = asyncio.run(main(Path(sys.argv[1])))
    print(json.dumps(result, default=str))
