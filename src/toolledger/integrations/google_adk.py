"""Google ADK tools through the guard: ``ToolledgerPlugin``, ``GuardCallbacks`` (extra
``toolledger[google-adk]``).

    runner = Runner(agent=agent, app_name="shop", session_service=sessions,
                    plugins=[ToolledgerPlugin()])          # every agent's tools
    # or, for one agent:
    guard = GuardCallbacks()
    agent = LlmAgent(..., before_tool_callback=guard.before_tool_callback,
                     after_tool_callback=guard.after_tool_callback)

Every call of a tool goes through ``run.acall`` keyed by ``ToolContext.function_call_id``
(the model's id, or the one ADK gave the call and stored in the session's event): the same
id again (a resumed invocation, another process) returns the stored result without running
the tool.

Rules this module keeps:

- ``google.adk`` is imported when this module is (``ImportError`` naming the extra).
- The hooks are public: a ``before_tool_callback`` that answers the call (ADK then skips its
  own run of the tool) runs the tool through the guard (``tool.run_async(args=,
  tool_context=)``) and answers with the stored result; ADK's after-tool callbacks then see
  that result. ``after_tool_callback`` records nothing and changes nothing (it is there so
  an agent's two slots can both be ours; an app's own after-callback still runs in a plugin
  setup).
- The binding's input is the call's arguments without ``justification``. The stored result
  is the tool's response as ADK would have made it (a ``dict``; anything else becomes
  ``{"result": value}``), and that is what the model gets, the first time and on replay.
- ADK's own confirmation pauses first: a tool that requires confirmation
  (``require_confirmation=``, ``check_require_confirmation``) and is not yet confirmed is
  left to ADK's gate (it asks, or refuses a rejected call; nothing is claimed). A call
  confirmed through ADK reaches the guard approved ``by="google-adk"`` (the journal shows the
  decision). A toolledger gate without an approver (``gates=``) uses the same pause: the
  call files a pending toolledger request and asks ADK's confirmation
  (``tool_context.request_confirmation``); confirmed in ADK, or decided in toolledger
  (``toolledger approve``/``deny``) before the invocation resumes, it runs once or is
  refused (``{"error": "denied by X: reason"}``).
- A gate with an approver is asked by the guard: a denial is ``{"error": "denied by X:
  reason"}``, a pending answer ``{"error": "awaiting approval; not executed yet"}``; an
  unknown outcome is ``{"error": "outcome unknown; not re-run"}``.
- The session's id is the run's conversation when the app named none.
- A synchronous ``FunctionTool`` (ADK runs it on the event loop, one after another) goes
  through the guard one call at a time: claim, effect, result, then the next call's claim,
  so a crash leaves no call claimed that never ran. Async tools run concurrently.
- Long-running tools (``is_long_running``) are passed to ADK unguarded: their response
  arrives later, outside the call.
- A call without a ``function_call_id`` is refused (``INVALID_ARGUMENT``), never run
  unguarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..approvals import Approved, Pending, decide_approval, get_approval
from ..errors import ApprovalDenied, InvalidArgumentError, InvalidTransitionError, NotFoundError
from ..store import ApprovalStatus
from ..tools import EffectKey, OnError
from ._common import AWAITING_APPROVAL_TEXT
from ._framework import Answer, FrameworkGuard, ToolGate, denied_text, missing

try:
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
except ImportError as exc:
    raise missing("google_adk", "google-adk", "google-adk") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["SDK_APPROVER", "GuardCallbacks", "ToolledgerPlugin"]

#: ``by`` of a decision made through ADK's tool confirmation.
SDK_APPROVER = "google-adk"
_CONFIRMED = "confirmed through ADK"
#: The gate that files a pending toolledger request for a call ADK is asked to confirm.
_FILE_REQUEST = ToolGate(approval="always", approver=lambda request: Pending(SDK_APPROVER))
_ADK_APPROVED = ToolGate(
    approval="effect-only", approver=lambda request: Approved(SDK_APPROVER, _CONFIRMED)
)


def _response(value: Any) -> dict[str, Any]:
    """The tool's response as ADK makes it (a dict)."""
    return value if isinstance(value, dict) else {"result": value}


def _answer(answer: Answer) -> dict[str, Any]:
    if answer.kind == "result":
        return _response(answer.payload)
    return {"error": answer.payload if isinstance(answer.payload, str) else str(answer.payload)}


def _blocks_the_loop(tool: BaseTool) -> bool:
    """Whether ADK runs ``tool`` on the event loop, blocking it (a sync ``FunctionTool``)."""
    func = getattr(tool, "func", None)
    return callable(func) and not (
        inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    )


async def _never() -> Any:
    raise AssertionError("a call waiting for confirmation is never executed")


class _Guard:
    """The one guarded call both the plugin and the agent callbacks make."""

    def __init__(
        self,
        run: Run | None,
        *,
        revisions: Mapping[str, str] | None,
        gates: Mapping[str, ToolGate] | None,
        on_error: OnError,
        recover: Mapping[str, Callable[..., Any]] | None,
        effect_keys: Mapping[str, EffectKey] | None,
    ) -> None:
        self.guard = FrameworkGuard(
            run,
            revisions=revisions,
            gates=gates,
            on_error=on_error,
            recover=recover,
            effect_keys=effect_keys,
        )
        self._locks: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def before(
        self, tool: BaseTool, args: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any] | None:
        if not _blocks_the_loop(tool):
            return await self._before(tool, args, ctx)
        # ADK runs a turn's sync tools one after another on the event loop. Claimed together,
        # a crash inside the first would leave the others claimed but never run (answered
        # "outcome unknown" for ever): each one claims, runs and stores before the next.
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            return await self._before(tool, args, ctx)

    async def _before(
        self, tool: BaseTool, args: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any] | None:
        if tool.is_long_running:
            return None  # its response arrives later, outside the call
        name = tool.name
        call_id = ctx.function_call_id
        if not call_id:
            raise InvalidArgumentError(
                message=f"tool {name}: the call has no function_call_id; not running it unguarded",
                details={"tool": name},
            )
        session = getattr(ctx, "session", None)
        self.guard.conversation(getattr(session, "id", None))
        run = self.guard.run
        done = run.store.get(run.namespace, call_id)
        ran = done is not None and done.result is not None
        confirmation = ctx.tool_confirmation
        gate: ToolGate | None = None
        if not ran and await tool.check_require_confirmation(args, ctx) is True:
            if confirmation is None or not confirmation.confirmed:
                return None  # ADK's own gate asks (or refuses a rejected call)
            gate = _ADK_APPROVED
        elif not ran:
            own = self.guard.gate(name)
            if (
                own is not None
                and own.approver is None
                and not self._decided(run, call_id, confirmation)
            ):  # nobody decided yet: ADK's pause
                await self.guard.acall(
                    name, call_id=call_id, arguments=args, execute=_never, gate=_FILE_REQUEST
                )
                ctx.request_confirmation(
                    hint=f"Approve or reject {name}() (toolledger call {call_id})."
                )
                ctx.actions.skip_summarization = True
                return {"error": AWAITING_APPROVAL_TEXT}

        async def execute() -> Any:
            return _response(await tool.run_async(args=args, tool_context=ctx))

        try:
            answer = await self.guard.acall(
                name, call_id=call_id, arguments=args, execute=execute, gate=gate
            )
        except ApprovalDenied as denied:  # the model is told; the invocation goes on
            return {"error": denied_text(denied)}
        return _answer(answer)

    def _decided(self, run: Run, call_id: str, confirmation: Any) -> bool:
        """Whether a toolledger-gated call is decided: in toolledger, or now by ADK's
        confirmation (recorded as the call's decision). The stored decision then binds the
        call (the tool's gate asks the store)."""
        rec = get_approval(run.store, run.namespace, call_id)
        if rec is not None and rec.status is not ApprovalStatus.PENDING:
            return True
        if confirmation is None:
            return False
        with contextlib.suppress(InvalidTransitionError, NotFoundError):
            decide_approval(  # decided in toolledger meanwhile: that decision stands
                run.store,
                run.namespace,
                call_id,
                bool(confirmation.confirmed),
                SDK_APPROVER,
                _CONFIRMED if confirmation.confirmed else "rejected through ADK",
            )
        return True


def _options(
    revisions: Mapping[str, str] | None,
    gates: Mapping[str, ToolGate] | None,
    on_error: OnError,
    recover: Mapping[str, Callable[..., Any]] | None,
    effect_keys: Mapping[str, EffectKey] | None,
) -> dict[str, Any]:
    return {
        "revisions": revisions,
        "gates": gates,
        "on_error": on_error,
        "recover": recover,
        "effect_keys": effect_keys,
    }


class ToolledgerPlugin(BasePlugin):
    """A Runner plugin that puts every agent's tool calls through the guard.

    ``Runner(..., plugins=[ToolledgerPlugin()])`` (or ``App(plugins=...)``).

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate`` (see the module's rules for ADK's pause).
        on_error: ``"raise"`` (the tool's exception fails the invocation, ADK wrapping it
            in its plugin ``RuntimeError``; the claim is released when the operation journal
            is empty) or ``"result"`` (stored as an error result, the same on replay).
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety.
        name: The plugin's name (unique among the runner's plugins).

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
        name: str = "toolledger",
    ) -> None:
        super().__init__(name)
        self._guard = _Guard(run, **_options(revisions, gates, on_error, recover, effect_keys))

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Run the call through the guard and answer it (ADK then skips its own run)."""
        return await self._guard.before(tool, tool_args, tool_context)


class GuardCallbacks:
    """An agent's ``before_tool_callback``/``after_tool_callback`` that guard its tools.

    Same arguments as :class:`ToolledgerPlugin` (without ``name``). If the agent has
    before-tool callbacks of its own, put ours last in the list: ADK stops at the first
    callback that answers.
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
        self._guard = _Guard(run, **_options(revisions, gates, on_error, recover, effect_keys))

    async def before_tool_callback(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Run the call through the guard and answer it (ADK then skips its own run)."""
        return await self._guard.before(tool, args, tool_context)

    async def after_tool_callback(
        self,
        tool: BaseTool,
        args: dict[str, Any],
        tool_context: ToolContext,
        tool_response: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Leave the response as it is (the stored result is what the model gets)."""
        return None
