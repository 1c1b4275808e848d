"""Claude Agent SDK tools through the guard: ``ToolledgerHooks`` (``toolledger[claude-agent-sdk]``).

    guard = ToolledgerHooks()                      # the run active at each call
    options = ClaudeAgentOptions(
        mcp_servers={"pay": guard.server("pay", [pay])},   # in-process tools (@tool)
        hooks=guard.hooks(),                               # PreToolUse / PostToolUse
    )

Every call of a tool of ``guard.server(...)`` goes through ``run.acall`` keyed by the
model's ``tool_use_id``: the same id again (a resumed session, a retried request, another
process) returns the stored result without running the tool.

Rules this module keeps:

- ``claude_agent_sdk`` is imported when this module is (``ImportError`` naming the extra).
- The hooks are public: ``HookMatcher`` callbacks for ``PreToolUse``, ``PostToolUse`` and
  ``PostToolUseFailure`` (``ClaudeAgentOptions(hooks=...)``), and the ``SdkMcpTool``
  handler of an in-process server (``create_sdk_mcp_server``). The SDK hands a tool
  handler only its arguments, so ``PreToolUse`` (which carries ``tool_use_id``) files the
  id for the call the CLI is about to make and the handler takes it, matched by tool name
  and input (the newest first; the ``PostToolUse`` hooks drop an id the handler never took,
  a call the CLI refused). A handler call no hook announced is refused with an error
  result (``INVALID_ARGUMENT``: install ``guard.hooks()``), never run unguarded.
- The binding's input is the tool's arguments without ``justification`` (journaled as the
  model's justification); the tool gets them as the SDK passes them. The stored result is
  the handler's return value (``{"content": [...], "is_error": ...}``), and that is what
  the model gets, the first time and on every replay.
- The session's ``session_id`` (in every hook input) is the run's conversation when the app
  named none.
- Approvals pause the SDK's own way: a call of a gated tool (``gates=``) whose gate has no
  approver is decided by a person in toolledger (``toolledger approve``/``deny``):
  ``PreToolUse`` files a pending request and answers ``permissionDecision: "defer"`` (the
  run stops; its ``ResultMessage.deferred_tool_use`` names the call); resumed once decided,
  an approved call runs and a denied one is refused (``"deny"``, the reason ``"denied by
  X: reason"``). A gate with an approver is asked by the guard when the tool is called (a
  denial is the tool's error result ``"denied by X: reason"``; a pending answer is
  ``"awaiting approval; not executed yet"``). An unknown outcome is answered ``"outcome
  unknown; not re-run"``.
- Built-in tools (Bash, Write, ...) and external MCP servers run inside the CLI, not here:
  they are not guarded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..approvals import Pending, get_approval
from ..checkpoint.model import fingerprint
from ..errors import ApprovalDenied, CheckpointError, InvalidArgumentError
from ..store import ApprovalStatus
from ..tools import EffectKey, OnError
from ._common import render
from ._framework import Answer, FrameworkGuard, ToolGate, denied_text, missing

try:
    from claude_agent_sdk import HookMatcher, SdkMcpTool, create_sdk_mcp_server
    from claude_agent_sdk.types import HookCallback, McpSdkServerConfig
except ImportError as exc:
    raise missing("claude_agent_sdk", "claude-agent-sdk", "claude-agent-sdk") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["SDK_APPROVER", "ToolledgerHooks"]

#: ``by`` of the pending request a deferred call files (decided with ``toolledger approve``).
SDK_APPROVER = "claude-agent-sdk"
#: The gate that files a pending toolledger request for a call the SDK defers.
_FILE_REQUEST = ToolGate(approval="always", approver=lambda request: Pending(SDK_APPROVER))


def _short_name(tool_name: str) -> str:
    """``mcp__server__tool`` -> ``tool`` (the CLI's name of an MCP tool)."""
    if tool_name.startswith("mcp__"):
        rest = tool_name[len("mcp__") :]
        _, sep, tool = rest.partition("__")
        if sep:
            return tool
    return tool_name


def _key(name: str, arguments: Any) -> tuple[str, str] | None:
    try:
        return name, fingerprint(arguments)
    except (CheckpointError, RecursionError):
        return None  # arguments the guard refuses: the handler reports it


def _text(text: str, is_error: bool = True) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "is_error": is_error}


def _tool_result(answer: Answer) -> dict[str, Any]:
    """What the SDK's handler returns for a guard answer."""
    if (
        answer.kind == "result"
        and isinstance(answer.payload, Mapping)
        and "content" in (answer.payload)
    ):
        return copy.deepcopy(dict(answer.payload))
    return _text(render(answer.payload), answer.is_error or answer.kind != "result")


async def _never() -> Any:
    raise AssertionError("a deferred call is never executed")  # a pending gate never runs


class ToolledgerHooks:
    """The hooks and in-process MCP servers that put Claude Agent SDK tools through the guard.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate`` (see the module's rules for the SDK's pause).
        on_error: ``"raise"`` (the handler's exception reaches the SDK, which tells the
            model; the claim is released when the operation journal is empty) or
            ``"result"`` (stored as an error result, the same on every replay).
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad options.
    """

    def __init__(
        self,
        run: Run | None = None,
        *,
        revisions: Mapping[str, str] | None = None,
        gates: Mapping[str, ToolGate] | None = None,
        on_error: OnError = "raise",
        recover: Mapping[str, Callable[..., Any]] | None = None,
        effect_keys: Mapping[str, EffectKey] | None = None,
    ) -> None:
        self._guard = FrameworkGuard(
            run,
            revisions=revisions,
            gates=gates,
            on_error=on_error,
            recover=recover,
            effect_keys=effect_keys,
        )
        self._tools: set[str] = set()
        #: (tool, input fingerprint) -> the tool_use_ids PreToolUse announced, oldest first.
        self._announced: dict[tuple[str, str], list[str]] = {}

    # -- the in-process tools ----------------------------------------------------------------

    def server(
        self, name: str, tools: Sequence[SdkMcpTool[Any]], version: str = "1.0.0"
    ) -> McpSdkServerConfig:
        """``create_sdk_mcp_server(name, version, tools)`` with every tool guarded.

        Register it under the same ``name`` in ``ClaudeAgentOptions(mcp_servers=...)`` and
        pass :meth:`hooks` too (they give each call its ``tool_use_id``).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a tool that is not an
                ``SdkMcpTool`` (``@tool``).
        """
        guarded = []
        for t in tools:
            if not isinstance(t, SdkMcpTool):
                raise InvalidArgumentError(
                    message=f"ToolledgerHooks.server guards @tool (SdkMcpTool) tools; got "
                    f"{type(t).__name__}",
                    details={"tool": getattr(t, "name", None)},
                )
            self._tools.add(t.name)
            guarded.append(
                SdkMcpTool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    handler=self._handler(t),
                    annotations=t.annotations,
                )
            )
        return create_sdk_mcp_server(name, version, tools=guarded)

    def _handler(self, t: SdkMcpTool[Any]) -> Callable[[Any], Any]:
        name, handler = t.name, t.handler

        async def guarded(args: Any) -> dict[str, Any]:
            arguments = copy.deepcopy(args)
            key = _key(name, arguments)
            ids = self._announced.get(key) if key is not None else None
            if not ids:
                raise InvalidArgumentError(
                    message=f"tool {name}: no PreToolUse hook announced this call (pass "
                    "ToolledgerHooks.hooks() to ClaudeAgentOptions); not running it unguarded",
                    details={"tool": name},
                )
            call_id = ids.pop()  # the newest: an older one is a call the CLI refused
            if not ids and key is not None:
                del self._announced[key]

            async def execute() -> Any:
                return await handler(args)

            try:
                answer = await self._guard.acall(
                    name, call_id=call_id, arguments=arguments, execute=execute
                )
            except ApprovalDenied as denied:  # the model is told; the session goes on
                return _text(denied_text(denied))
            return _tool_result(answer)

        return guarded

    # -- the hooks ----------------------------------------------------------------------------

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """``ClaudeAgentOptions(hooks=...)``: the ``PreToolUse``, ``PostToolUse`` and
        ``PostToolUseFailure`` hooks (merge them with your own lists if you have some)."""
        return {
            "PreToolUse": [HookMatcher(hooks=[cast(HookCallback, self.pre_tool_use)])],
            "PostToolUse": [HookMatcher(hooks=[cast(HookCallback, self.post_tool_use)])],
            "PostToolUseFailure": [HookMatcher(hooks=[cast(HookCallback, self.post_tool_use)])],
        }

    async def pre_tool_use(
        self, input: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """Announce a guarded tool's call and its id; defer or refuse it on a gate."""
        name = _short_name(str(input.get("tool_name", "")))
        call_id = tool_use_id or input.get("tool_use_id")
        if name not in self._tools or not isinstance(call_id, str) or not call_id:
            return {}
        arguments = input.get("tool_input") or {}
        try:
            self._guard.conversation(input.get("session_id"))
            decision = await self._gate_decision(name, call_id, arguments)
        except InvalidArgumentError:  # no run is active: the tool's call is refused
            decision = None
        if decision is not None:
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}
        key = _key(name, arguments)
        if key is not None:
            self._announced.setdefault(key, []).append(call_id)
        return {}

    async def post_tool_use(
        self, input: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """Drop an announced id the tool handler never took (the CLI did not call it)."""
        name = _short_name(str(input.get("tool_name", "")))
        call_id = tool_use_id or input.get("tool_use_id")
        key = _key(name, input.get("tool_input") or {})
        ids = self._announced.get(key) if key is not None else None
        if ids and call_id in ids:
            ids.remove(call_id)
            if not ids and key is not None:
                del self._announced[key]
        return {}

    async def _gate_decision(
        self, name: str, call_id: str, arguments: Any
    ) -> dict[str, Any] | None:
        """``permissionDecision`` for a call a person decides in toolledger, else ``None``."""
        gate = self._guard.gate(name)
        if gate is None or gate.approver is not None:
            return None  # no gate, or the guard asks the approver when the tool runs
        run = self._guard.run
        rec = get_approval(run.store, run.namespace, call_id)
        if rec is not None and rec.status is ApprovalStatus.DENIED:
            text = f"denied by {rec.by}" + (f": {rec.reason}" if rec.reason else "")
            return {"permissionDecision": "deny", "permissionDecisionReason": text}
        if rec is not None and rec.status is ApprovalStatus.APPROVED:
            return None
        done = run.store.get(run.namespace, call_id)
        if done is not None and done.result is not None:
            return None  # it ran: the guard replays it
        await self._guard.acall(
            name, call_id=call_id, arguments=arguments, execute=_never, gate=_FILE_REQUEST
        )
        return {
            "permissionDecision": "defer",
            "permissionDecisionReason": f"awaiting approval in toolledger ({call_id})",
        }
