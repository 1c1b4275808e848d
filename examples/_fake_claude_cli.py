"""A fake Claude Code CLI behind the Claude Agent SDK's own ``Transport``: offline, scripted.

The SDK normally drives the ``claude`` CLI as a subprocess over a JSON-lines control
protocol. ``FakeCLI`` speaks that protocol from the CLI's side, so the SDK's real code runs:
its ``Query`` answers ``initialize``, ``hook_callback`` (``PreToolUse``, ``PostToolUse``,
``PostToolUseFailure``) and ``mcp_message`` requests (its in-process MCP bridge and the
server ``create_sdk_mcp_server`` built), and parses the messages the fake emits.

What the fake does as the CLI would (and what was not checked against the real CLI): for
each tool use of a scripted model turn, in order, it runs the ``PreToolUse`` hooks, then
(unless denied or deferred) calls the MCP tool with ``_meta["claudecode/toolUseId"]``, then
the ``PostToolUse`` hooks; a ``"defer"`` stops the run with ``deferred_tool_use`` in the
result. The conversation is kept in ``transcript`` (a JSON file) after every message; a
fake started on an existing transcript whose last turn has tool uses without results runs
those again with their ids (what the CLI does when a session with a deferred call resumes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from claude_agent_sdk import Transport

#: ``model(history) -> [(tool_use_id, tool_name, input), ...]`` (none: the model is done).
Model = Callable[[list[dict[str, Any]]], list[tuple[str, str, dict[str, Any]]]]
SESSION = "sess-1"


class FakeCLI(Transport):
    """The CLI's side of the SDK's control protocol, with a scripted model."""

    def __init__(
        self, model: Model, *, transcript: Path | None = None, session_id: str = SESSION
    ) -> None:
        self.model = model
        self.transcript = transcript
        self.session_id = session_id
        self.out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.hooks: dict[str, list[str]] = {}
        self.counter = 0
        self.mcp_ready: set[str] = set()
        self.history: list[dict[str, Any]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.ready = False
        self.deferred: dict[str, Any] | None = None

    # -- Transport ----------------------------------------------------------------------------

    async def connect(self) -> None:
        self.ready = True

    def is_ready(self) -> bool:
        return self.ready

    async def end_input(self) -> None:
        await self.out.put(None)

    async def close(self) -> None:
        self.ready = False
        for t in self.tasks:
            t.cancel()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            msg = await self.out.get()
            if msg is None:
                return
            yield msg

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            if line.strip():
                self._receive(json.loads(line))

    # -- the CLI's side -----------------------------------------------------------------------

    def _receive(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "control_request" and msg["request"]["subtype"] == "initialize":
            for event, matchers in (msg["request"].get("hooks") or {}).items():
                self.hooks[event] = [i for m in matchers for i in m["hookCallbackIds"]]
            self._emit(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": msg["request_id"],
                        "response": {"commands": []},
                    },
                }
            )
        elif kind == "control_request":
            self._emit(
                {
                    "type": "control_response",
                    "response": {"subtype": "success", "request_id": msg["request_id"]},
                }
            )
        elif kind == "control_response":
            response = msg["response"]
            future = self.pending.pop(response["request_id"])
            if response.get("subtype") == "error":
                future.set_exception(RuntimeError(response.get("error")))
            else:
                future.set_result(response.get("response") or {})
        elif kind == "user":
            self.tasks.append(asyncio.ensure_future(self._turns(msg["message"])))

    def _emit(self, msg: dict[str, Any]) -> None:
        self.out.put_nowait(msg)

    async def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        self.counter += 1
        request_id = f"cli_{self.counter}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self._emit({"type": "control_request", "request_id": request_id, "request": request})
        return await future

    def _save(self, message: dict[str, Any]) -> None:
        self.history.append(message)
        if self.transcript is not None:
            self.transcript.write_text(json.dumps(self.history))

    async def _hook(self, event: str, payload: dict[str, Any], tool_use_id: str) -> dict:
        out: dict[str, Any] = {}
        for callback_id in self.hooks.get(event, []):
            try:
                answer = await self._request(
                    {
                        "subtype": "hook_callback",
                        "callback_id": callback_id,
                        "input": {
                            "session_id": self.session_id,
                            "transcript_path": str(self.transcript or ""),
                            "cwd": ".",
                            "hook_event_name": event,
                            **payload,
                        },
                        "tool_use_id": tool_use_id,
                    }
                )
            except RuntimeError:  # a failed hook is no decision (on_failure unset)
                continue
            out.update(answer.get("hookSpecificOutput") or {})
        return out

    async def _mcp(self, server: str, message: dict[str, Any]) -> dict[str, Any]:
        answer = await self._request(
            {"subtype": "mcp_message", "server_name": server, "message": message}
        )
        return answer["mcp_response"]

    async def _call_tool(self, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """One tool use as the CLI runs it: PreToolUse, the MCP call, PostToolUse."""
        _, server, tool = name.split("__", 2)
        base = {"tool_name": name, "tool_input": args, "tool_use_id": call_id}
        decision = await self._hook("PreToolUse", base, call_id)
        verdict = decision.get("permissionDecision")
        if verdict == "defer":
            self.deferred = {"id": call_id, "name": name, "input": args}
            return {}
        if verdict == "deny":
            text = decision.get("permissionDecisionReason", "denied")
            return {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": text,
                "is_error": True,
            }
        if server not in self.mcp_ready:
            await self._mcp(
                server,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "fake-cli", "version": "0"},
                    },
                },
            )
            await self._mcp(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            self.mcp_ready.add(server)
        self.counter += 1
        reply = await self._mcp(
            server,
            {
                "jsonrpc": "2.0",
                "id": self.counter,
                "method": "tools/call",
                "params": {
                    "name": tool,
                    "arguments": args,
                    "_meta": {"claudecode/toolUseId": call_id},
                },
            },
        )
        result = reply.get("result") or {}
        content = result.get("content") or []
        is_error = bool(result.get("isError"))
        text = "".join(c.get("text", "") for c in content)
        event = "PostToolUseFailure" if is_error else "PostToolUse"
        extra = {"error": text} if is_error else {"tool_response": content}
        await self._hook(event, {**base, **extra}, call_id)
        return {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": text,
            "is_error": is_error,
        }

    async def _run_calls(self, calls: list[dict[str, Any]]) -> bool:
        """Run a turn's tool uses; False when one was deferred (the run stops)."""
        results = []
        for c in calls:
            block = await self._call_tool(c["id"], c["name"], c["input"])
            if self.deferred is not None:
                return False
            results.append(block)
        message = {"role": "user", "content": results}
        self._save(message)
        self._emit(
            {
                "type": "user",
                "message": message,
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
        )
        return True

    async def _turns(self, prompt: dict[str, Any]) -> None:
        try:
            await self._turns_inner(prompt)
        except BaseException as exc:  # the SDK reports a failed run; never hang it
            self._emit({"type": "result", **self._result(f"fake CLI failed: {exc!r}", True)})
            raise

    def _result(self, text: str, is_error: bool = False) -> dict[str, Any]:
        return {
            "subtype": "success",
            "duration_ms": 1,
            "duration_api_ms": 1,
            "is_error": is_error,
            "num_turns": len(self.history),
            "session_id": self.session_id,
            "result": text,
            "deferred_tool_use": self.deferred,
        }

    async def _turns_inner(self, prompt: dict[str, Any]) -> None:
        if self.transcript is not None and self.transcript.exists():
            self.history = json.loads(self.transcript.read_text())
        dangling = _unanswered(self.history)
        if dangling:  # a resumed session: the last turn's calls run with their ids
            if not await self._run_calls(dangling):
                self._emit({"type": "result", **self._result("deferred")})
                return
        else:
            self._save(dict(prompt))
        for _ in range(20):
            calls = self.model(self.history)
            blocks = [
                {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls
            ] or [{"type": "text", "text": "done"}]
            message = {"role": "assistant", "content": blocks}
            self._save(message)
            self._emit(
                {
                    "type": "assistant",
                    "message": {**message, "model": "claude-fake"},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                }
            )
            if not calls:
                break
            if not await self._run_calls(blocks):
                break
        self._emit({"type": "result", **self._result("deferred" if self.deferred else "done")})


def _unanswered(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last assistant turn's tool uses, when no result follows it."""
    if not history or history[-1]["role"] != "assistant":
        return []
    return [b for b in history[-1]["content"] if b.get("type") == "tool_use"]


def tool_results(history: list[dict[str, Any]]) -> dict[str, tuple[str, bool]]:
    """``{tool_use_id: (text, is_error)}`` of every tool result in ``history``."""
    out = {}
    for m in history:
        if m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    out[b["tool_use_id"]] = (b["content"], bool(b.get("is_error")))
    return out
