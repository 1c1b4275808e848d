"""Server process of the framework crash matrix: one interpreter per framework, a fork per step.

Usage: python _crash_matrix_child.py FRAMEWORK

The server imports FRAMEWORK once, then reads one JSON command a line on stdin
(``{"dir": ..., "kill": "tool"|"stored"|"model", "restart": "resume"|"replan",
"parallel": bool, "optin": bool}``)
and answers one JSON line on stdout. For each command it forks the *first* process, which
runs a small payments agent adopted as docs/frameworks.md shows and is SIGKILLed at the
kill point, then forks the *restart*, which takes the framework's resume path
(``resume``) or starts again with the saved state lost (``replan``: the model is asked
again). Each forked step is a real process killed with a real SIGKILL; forking saves
importing the framework twice per cell.

The model is scripted and offline, and like a real model it retries once (under a new call
id) an action whose tool result reads as a failure (anything but ``paid ...``). Kill
points: ``tool``: inside the first payment's tool, right after its effect (a line appended
to ``effects.log``; with three payments in one turn and a framework that runs a turn's
calls concurrently, after all three effects); ``stored``: right after the guard stored the
result (before the framework saved or sent anything); ``model``: when the next model
request carries the tool results. ``optin``: the tools have an effect key and a
``recover(input, ctx)`` that proves a payment from the effects. The answer has the effect
lines after each step and the tool results the restarted model saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolledger
from toolledger.testing import crash_at

PAYMENTS = [("ana", 30), ("ben", 40), ("cy", 50)]
#: The conversation the app runs (a chat id), in both processes.
CONVERSATION = "chat-42"
PROMPT = "Pay the invoices"
#: Frameworks whose app passes ``conversation_id`` to ``toolledger.run``.
APP_CONVERSATION = {"anthropic", "pydantic_ai"}
#: Frameworks that run one turn's tool calls concurrently.
CONCURRENT = {
    "anthropic": False,
    "claude_agent_sdk": False,
    "google_adk": False,
    "langgraph": True,
    "openai_agents": True,
    "pydantic_ai": True,
}
#: The fake ``claude`` CLI the Claude Agent SDK talks to (examples/_fake_claude_cli.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

Event = tuple[Any, ...]  # ("call", id, to, amount) | ("result", id, text)


def append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@dataclass
class Step:
    """One process of a cell: what it runs and where it is killed."""

    framework: str
    folder: Path
    phase: str  # "first" | "restart"
    kill: str
    restart: str
    parallel: bool
    optin: bool = False
    issued: int = 0
    barrier: threading.Barrier | None = None
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.phase == "first" and self.parallel and CONCURRENT[self.framework]:
            self.barrier = threading.Barrier(len(PAYMENTS), timeout=60)

    @property
    def effects(self) -> Path:
        return self.folder / "effects.log"

    def killing(self, point: str) -> bool:
        return self.phase == "first" and self.kill == point

    # -- the tool ---------------------------------------------------------------------------

    def pay(self, to: str, amount: int) -> str:
        append(self.effects, f"{to} {amount}")  # the irreversible effect
        if self.barrier is not None:
            self.barrier.wait()  # the turn's three effects are done (they run concurrently)
        if self.killing("tool") and to == PAYMENTS[0][0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {amount} to {to}"

    # -- the model --------------------------------------------------------------------------

    def options(self) -> dict[str, Any]:
        """The adapter's options: none (the documented default) or the opt-ins."""
        if not self.optin:
            return {}
        return {"effect_keys": {"pay": "input"}, "recover": {"pay": self.recover}}

    def recover(self, input: Any, ctx: toolledger.RecoverContext) -> Any:
        """Proves a lost payment from the effects (the only thing a lost outcome leaves)."""
        assert set(input) == {"to", "amount"}, input  # every adapter passes the input
        if f"{input['to']} {input['amount']}" in lines(self.effects):
            return toolledger.Recovered(f"paid {input['amount']} to {input['to']}")
        return toolledger.NotRecovered("no such payment")

    def new_id(self) -> str:
        self.issued += 1
        if self.issued > 12:  # a runaway loop fails the cell instead of running for ever
            raise RuntimeError("the scripted model was asked for more than 12 calls")
        return f"call_{self.phase[0]}{self.issued}"

    def decide(self, events: list[Event]) -> list[tuple[str, str, int]]:
        """The model's next turn: the calls ``(id, to, amount)`` to make, or none (done)."""
        results = {e[1]: e[2] for e in events if e[0] == "result"}
        if results and self.killing("model"):
            os.kill(os.getpid(), signal.SIGKILL)
        calls = [e for e in events if e[0] == "call"]
        if not calls:
            todo = PAYMENTS if self.parallel else PAYMENTS[:1]
            return [(self.new_id(), to, amount) for to, amount in todo]
        self.seen = [results[c[1]] for c in calls if c[1] in results]
        asked = Counter((c[2], c[3]) for c in calls)
        retry: list[tuple[str, int]] = []
        for c in calls:
            text = results.get(c[1])
            action = (c[2], c[3])
            failed = text is not None and not text.startswith("paid")
            if failed and asked[action] < 2 and action not in retry:
                retry.append(action)  # a real model retries a failed action once
        return [(self.new_id(), to, amount) for to, amount in retry]

    def lost(self, *names: str) -> None:
        """A re-plan: the framework's saved state is gone."""
        for name in names:
            for path in self.folder.glob(name + "*"):
                path.unlink()


# -- the four frameworks, each adopted as docs/frameworks.md shows -------------------------------


def run_anthropic(run: toolledger.Run, s: Step) -> None:
    import anthropic
    import httpx2
    from anthropic import beta_tool

    from toolledger.integrations.anthropic import guarded_tool_runner, resume_tool_runner

    @beta_tool
    def pay(to: str, amount: int) -> str:
        """Pay an invoice."""
        return s.pay(to, amount)

    def text_of(content: Any) -> str:
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content)

    #: The fake API keeps each thread's history (the SDK then sends only what is new).
    threads: dict[str, list[Any]] = {}

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        thread = body.get("thread") or {}
        history = [*threads.get(thread.get("previous_message_id", ""), []), *body["messages"]]
        events: list[Event] = []
        for m in history:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b["type"] == "tool_use":
                    events.append(("call", b["id"], b["input"]["to"], b["input"]["amount"]))
                elif b["type"] == "tool_result":
                    events.append(("result", b["tool_use_id"], text_of(b.get("content", ""))))
        calls = s.decide(events)
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": i, "name": "pay", "input": {"to": to, "amount": amount}}
            for i, to, amount in calls
        ] or [{"type": "text", "text": "done"}]
        reply_id = f"msg_{s.phase}_{len(threads)}"
        threads[reply_id] = [*history, {"role": "assistant", "content": blocks}]
        return httpx2.Response(
            200,
            json={
                "id": reply_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": blocks,
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    client = anthropic.Anthropic(
        api_key="k",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(transport=httpx2.MockTransport(handler)),
    )
    saved = s.folder / "transcript.json"
    if s.phase == "restart" and s.restart == "replan":
        s.lost("transcript.json")
    options: dict[str, Any] = {"model": "claude-x", "max_tokens": 100, **s.options()}
    if saved.exists():  # resume: the saved turns, each tool call answered from the ledger
        transcript = json.loads(saved.read_text())
        runner = resume_tool_runner(run, client, list(transcript), tools=[pay], **options)
    else:
        transcript = [{"role": "user", "content": PROMPT}]
        runner = guarded_tool_runner(run, client, tools=[pay], messages=list(transcript), **options)
    for message in runner:  # the app saves every model turn before its tools run
        transcript.append(
            {"role": "assistant", "content": message.model_dump(mode="json")["content"]}
        )
        saved.write_text(json.dumps(transcript))


def run_openai_agents(run: toolledger.Run, s: Step) -> None:
    from agents import Agent, Runner, SQLiteSession, function_tool, set_trace_processors
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from toolledger.integrations.openai_agents import guarded_tools

    set_trace_processors([])

    @function_tool
    def pay(to: str, amount: int) -> str:
        """Pay an invoice."""
        return s.pay(to, amount)

    def respond(call: Any) -> Any:
        events: list[Event] = []
        for item in call.input if isinstance(call.input, list) else []:
            kind = item.get("type")
            if kind == "function_call":
                args = json.loads(item["arguments"])
                events.append(("call", item["call_id"], args["to"], args["amount"]))
            elif kind == "function_call_output":
                events.append(("result", item["call_id"], str(item["output"])))
        calls = s.decide(events)
        if not calls:
            return [assistant_message("done")]
        return [function_call("pay", {"to": t, "amount": a}, call_id=i) for i, t, a in calls]

    if s.phase == "restart" and s.restart == "replan":
        s.lost("session.db")
    model = ScriptedModel([ModelStep(responder=respond) for _ in range(8)])
    session = SQLiteSession(CONVERSATION, db_path=s.folder / "session.db")
    agent = Agent(
        name="payer", model=model, tools=guarded_tools(run, [pay], session=session, **s.options())
    )
    # Resume: the session holds the conversation so far; the run continues from it.
    prompt: Any = [] if s.phase == "restart" and s.restart == "resume" else PROMPT
    asyncio.run(Runner.run(agent, prompt, session=session))


def run_langgraph(run: toolledger.Run, s: Step) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolledger.integrations.langgraph import ToolledgerMiddleware

    @tool
    def pay(to: str, amount: int) -> str:
        """Pay an invoice."""
        return s.pay(to, amount)

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
            events: list[Event] = []
            for m in messages:
                if isinstance(m, AIMessage):
                    events += [
                        ("call", c["id"], c["args"]["to"], c["args"]["amount"])
                        for c in m.tool_calls
                    ]
                elif isinstance(m, ToolMessage):
                    events.append(("result", m.tool_call_id, str(m.content)))
            calls = s.decide(events)
            tool_calls = [
                {"name": "pay", "args": {"to": t, "amount": a}, "id": i, "type": "tool_call"}
                for i, t, a in calls
            ]
            msg = AIMessage(content="" if calls else "done", tool_calls=tool_calls)
            return ChatResult(generations=[ChatGeneration(message=msg)])

    if s.phase == "restart" and s.restart == "replan":
        s.lost("checkpoints.db")
    config = {"configurable": {"thread_id": CONVERSATION}}
    with SqliteSaver.from_conn_string(str(s.folder / "checkpoints.db")) as saver:
        agent = create_agent(
            Scripted(),
            [pay],
            middleware=[ToolledgerMiddleware(run, **s.options())],
            checkpointer=saver,
        )
        # Resume: the thread from its last checkpoint.
        start = (
            None
            if s.phase == "restart" and s.restart == "resume"
            else {"messages": [("user", PROMPT)]}
        )
        agent.invoke(start, config, durability="sync")


def run_pydantic_ai(run: toolledger.Run, s: Step) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from toolledger.integrations.pydantic_ai import GuardedToolset

    def pay(to: str, amount: int) -> str:
        """Pay an invoice."""
        return s.pay(to, amount)

    def model(messages: list[Any], info: Any) -> ModelResponse:
        events: list[Event] = []
        for m in messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    args = p.args_as_dict()
                    events.append(("call", p.tool_call_id, args["to"], args["amount"]))
                elif isinstance(p, (ToolReturnPart, RetryPromptPart)):
                    events.append(("result", p.tool_call_id, p.model_response_str()))
        calls = s.decide(events)
        if not calls:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart("pay", {"to": t, "amount": a}, i) for i, t, a in calls]
        )

    saved = s.folder / "history.json"
    if s.phase == "restart" and s.restart == "replan":
        s.lost("history.json")
    agent = Agent(
        FunctionModel(model),
        toolsets=[GuardedToolset(FunctionToolset([pay]), run=run, **s.options())],
    )

    async def go() -> None:
        history = None
        if saved.exists():  # resume: the saved history (it ends with the model's tool calls)
            history = ModelMessagesTypeAdapter.validate_json(saved.read_bytes())
            assert isinstance(history[0], ModelRequest)
        async with agent.iter(None if history else PROMPT, message_history=history) as it:
            async for _node in it:  # the app saves the history after every step
                saved.write_bytes(ModelMessagesTypeAdapter.dump_json(it.all_messages()))

    asyncio.run(go())


def run_claude_agent_sdk(run: toolledger.Run, s: Step) -> None:
    from _fake_claude_cli import FakeCLI
    from claude_agent_sdk import ClaudeAgentOptions, query, tool

    from toolledger.integrations.claude_agent_sdk import ToolledgerHooks

    @tool("pay", "Pay an invoice.", {"to": str, "amount": int})
    async def pay(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": s.pay(args["to"], args["amount"])}]}

    def model(history: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
        events: list[Event] = []
        for m in history:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b["type"] == "tool_use":
                    events.append(("call", b["id"], b["input"]["to"], b["input"]["amount"]))
                elif b["type"] == "tool_result":
                    events.append(("result", b["tool_use_id"], b["content"]))
        calls = s.decide(events)
        return [(i, "mcp__pay__pay", {"to": to, "amount": a}) for i, to, a in calls]

    if s.phase == "restart" and s.restart == "replan":
        s.lost("session.json")
    guard = ToolledgerHooks(run, **s.options())
    options = ClaudeAgentOptions(
        mcp_servers={"pay": guard.server("pay", [pay])}, hooks=guard.hooks()
    )
    # The CLI saves the session after every message; resume: the same session file.
    cli = FakeCLI(model, transcript=s.folder / "session.json", session_id=CONVERSATION)

    async def go() -> None:
        async for _ in query(prompt=PROMPT, options=options, transport=cli):
            pass

    asyncio.run(go())


def run_google_adk(run: toolledger.Run, s: Step) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App, ResumabilityConfig
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.adk.tools import FunctionTool
    from google.genai import types

    from toolledger.integrations.google_adk import ToolledgerPlugin

    def pay(to: str, amount: int) -> str:
        """Pay an invoice."""
        return s.pay(to, amount)

    def text_of(response: Any) -> str:
        return str(response.get("result", response.get("error", json.dumps(response))))

    class Scripted(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            events: list[Event] = []
            for c in llm_request.contents:
                for p in c.parts or []:
                    if p.function_call is not None and p.function_call.name == "pay":
                        a = p.function_call.args or {}
                        events.append(("call", p.function_call.id, a["to"], a["amount"]))
                    elif p.function_response is not None and p.function_response.name == "pay":
                        r = p.function_response.response or {}
                        events.append(("result", p.function_response.id, text_of(r)))
            calls = s.decide(events)
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=i, name="pay", args={"to": to, "amount": amount}
                    )
                )
                for i, to, amount in calls
            ] or [types.Part(text="done")]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    if s.phase == "restart" and s.restart == "replan":
        s.lost("session.db")
    app = App(
        name="payer",
        root_agent=LlmAgent(name="payer", model=Scripted(), tools=[FunctionTool(pay)]),
        plugins=[ToolledgerPlugin(run, **s.options())],
        resumability_config=ResumabilityConfig(is_resumable=True),
    )

    async def go() -> None:
        sessions = SqliteSessionService(db_path=str(s.folder / "session.db"))
        runner = Runner(app=app, session_service=sessions)
        session = await sessions.get_session(app_name="payer", user_id="u", session_id=CONVERSATION)
        if session is None:
            await sessions.create_session(app_name="payer", user_id="u", session_id=CONVERSATION)
            options: dict[str, Any] = {
                "new_message": types.Content(role="user", parts=[types.Part(text=PROMPT)])
            }
        else:  # resume: the session's last invocation, its pending calls with their ids
            options = {"invocation_id": session.events[-1].invocation_id}
        async for _event in runner.run_async(user_id="u", session_id=CONVERSATION, **options):
            pass
        await runner.close()

    asyncio.run(go())


FRAMEWORKS: dict[str, Callable[[toolledger.Run, Step], None]] = {
    "anthropic": run_anthropic,
    "claude_agent_sdk": run_claude_agent_sdk,
    "google_adk": run_google_adk,
    "langgraph": run_langgraph,
    "openai_agents": run_openai_agents,
    "pydantic_ai": run_pydantic_ai,
}


#: What each framework's steps import (the server imports it once).
PRELOAD = {
    "anthropic": ["httpx2", "toolledger.integrations.anthropic_runner"],
    "claude_agent_sdk": ["_fake_claude_cli", "toolledger.integrations.claude_agent_sdk"],
    "google_adk": [
        "google.adk.runners",
        "google.adk.sessions.sqlite_session_service",
        "toolledger.integrations.google_adk",
    ],
    "langgraph": [
        "langchain.agents",
        "langchain_core.language_models",
        "langgraph.checkpoint.sqlite",
        "toolledger.integrations.langgraph",
    ],
    "openai_agents": ["agents.testing", "toolledger.integrations.openai_agents"],
    "pydantic_ai": [
        "pydantic_ai",
        "pydantic_ai.models.function",
        "toolledger.integrations.pydantic_ai",
    ],
}


def step(s: Step) -> int:
    """Fork one process that runs ``s``; return its wait status code (-signal when killed)."""
    pid = os.fork()
    if pid == 0:  # the step's process
        code = 0
        try:
            err = os.open(s.folder / f"{s.phase}.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(err, 2)
            # The app names the conversation where the framework has no id of its own
            # for it (LangGraph's thread and the Agents SDK's session are read by the
            # adapters).
            conversation = CONVERSATION if s.framework in APP_CONVERSATION else None
            db = str(s.folder / "ledger.db")
            with contextlib.ExitStack() as stack:
                if s.killing("stored"):  # right after the result is stored
                    stack.enter_context(crash_at("after-completion"))
                run = stack.enter_context(
                    toolledger.run(PROMPT, db=db, conversation_id=conversation)
                )
                FRAMEWORKS[s.framework](run, s)
            (s.folder / f"{s.phase}.json").write_text(json.dumps({"seen": s.seen}))
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def cell(framework: str, command: dict[str, Any]) -> dict[str, Any]:
    folder = Path(command["dir"])
    opts = {k: command[k] for k in ("kill", "restart", "parallel", "optin")}
    out: dict[str, Any] = {}
    out["first"] = step(Step(framework, folder, "first", **opts))
    out["first_effects"] = lines(folder / "effects.log")
    out["restart"] = step(Step(framework, folder, "restart", **opts))
    out["effects"] = lines(folder / "effects.log")
    done = folder / "restart.json"
    out["seen"] = json.loads(done.read_text())["seen"] if done.exists() else None
    out["stderr"] = {p: (folder / f"{p}.err").read_text()[-3000:] for p in ("first", "restart")}
    return out


def main() -> None:
    framework = sys.argv[1]
    for module in PRELOAD[framework]:  # imported once, before the forks
        __import__(module)
    assert threading.active_count() == 1, "no thread may run before a fork"
    print(json.dumps({"ready": framework}), flush=True)
    for line in sys.stdin:
        print(json.dumps(cell(framework, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
