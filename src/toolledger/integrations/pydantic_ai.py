"""Pydantic AI tools through the guard: ``GuardedToolset`` (``toolledger[pydantic-ai]``).

Wrap any toolset; every call goes through ``run.acall`` keyed by ``RunContext.tool_call_id``:

    agent = Agent(model, toolsets=[GuardedToolset(FunctionToolset([send_email]), run=run)])

Rules this module keeps:

- ``pydantic_ai`` is imported when this module is (``ImportError`` naming the extra).
- The hook is public: ``WrapperToolset.call_tool(name, tool_args, ctx, tool)``.
- The binding's input is the validated arguments as JSON (``to_jsonable_python``), without
  ``justification`` (journaled as the model's when the tool's schema has that argument; the
  tool still gets it). The stored result is the tool's return value as JSON, and that is what
  the model gets, the first time and on every replay.
- ``ModelRetry``, ``ApprovalRequired`` and ``CallDeferred`` pass through with the claim
  released (nothing ran, so the retried or resumed call, same id, may run). Any other
  exception is the tool's error: released when the operation journal is empty, re-raised.
- A call without a ``tool_call_id`` is refused (``INVALID_ARGUMENT``), never run unguarded.
- A toolledger gate (``gates=``) waiting for a decision defers the call (``CallDeferred``
  with ``metadata={"toolledger": "awaiting_approval"}``: the run ends with deferred tool
  requests; resume it from its history once decided); a denial is the tool's result,
  ``"denied by X: reason"`` (never an exception out of ``agent.run``). An unknown outcome is
  answered ``"outcome unknown; not re-run"``.
- A result is seen (``run.mark_seen``) when a model turn that carried it completed:
  ``GuardedTools`` marks the tool returns in the run's messages after every model request;
  ``GuardedToolset`` alone marks them when the next turn's tool calls run.
- ``GuardedTools`` (a capability) guards the agent's whole toolset in place, tools declared
  with ``@agent.tool``/``tool_plain`` included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ApprovalDenied, InvalidArgumentError
from ..tools import EffectKey, OnError
from ._framework import FrameworkGuard, ToolGate, denied_text, missing

try:
    from pydantic_ai import CallDeferred
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelRequest, ModelResponse, RetryPromptPart, ToolReturnPart
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import to_jsonable_python
except ImportError as exc:
    raise missing("pydantic_ai", "pydantic-ai-slim", "pydantic-ai") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["GuardedTools", "GuardedToolset"]


@dataclass
class GuardedToolset(WrapperToolset[Any]):
    """A toolset whose every call goes through the guard, keyed by the model's call id.

    Args:
        wrapped: The toolset to guard (``FunctionToolset``, an MCP server, ...).
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate``.
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety
            (``ModelRetry`` and id-less providers re-plan with new ids).
        on_error: ``"raise"`` (the tool's exception fails the call, as Pydantic AI does;
            the claim is released when the operation journal is empty) or ``"result"``
            (stored as an error result, the same on every replay).
    """

    run: Run | None = field(default=None, kw_only=True)
    revisions: Mapping[str, str] | None = field(default=None, kw_only=True)
    gates: Mapping[str, ToolGate] | None = field(default=None, kw_only=True)
    recover: Mapping[str, Callable[..., Any]] | None = field(default=None, kw_only=True)
    effect_keys: Mapping[str, EffectKey] | None = field(default=None, kw_only=True)
    on_error: OnError = field(default="raise", kw_only=True)

    def __post_init__(self) -> None:
        self._guard = FrameworkGuard(
            self.run,
            revisions=self.revisions,
            gates=self.gates,
            on_error=self.on_error,
            recover=self.recover,
            effect_keys=self.effect_keys,
        )

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[Any]], AbstractToolset[Any]]
    ) -> AbstractToolset[Any]:
        return GuardedToolset(
            self.wrapped.visit_and_replace(visitor),
            run=self.run,
            revisions=self.revisions,
            gates=self.gates,
            recover=self.recover,
            effect_keys=self.effect_keys,
            on_error=self.on_error,
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call_id = ctx.tool_call_id
        # The model turn that made this call completed: the results it carried were seen.
        self._guard.seen(tool_returns(ctx.messages))
        if not call_id:
            raise InvalidArgumentError(
                message=f"tool {name}: the model's call has no tool_call_id; not running it "
                "unguarded",
                details={"tool": name},
            )

        async def execute() -> Any:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
            return to_jsonable_python(result)

        try:
            answer = await self._guard.acall(
                name, call_id=call_id, arguments=to_jsonable_python(tool_args), execute=execute
            )
        except ApprovalDenied as denied:  # the model is told; the run goes on
            return denied_text(denied)
        if answer.kind == "awaiting_approval":
            raise CallDeferred(metadata={"toolledger": "awaiting_approval"})
        return answer.payload


def tool_returns(messages: Any) -> list[str]:
    """The call ids of the tool returns in a run's messages."""
    return [
        p.tool_call_id
        for m in messages or []
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, (ToolReturnPart, RetryPromptPart)) and p.tool_call_id
    ]


@dataclass
class GuardedTools(AbstractCapability[Any]):
    """A capability that guards every tool of the agent in place, however declared.

    ``Agent(model, capabilities=[GuardedTools(run)])``: the tools given with ``tools=``,
    ``@agent.tool``/``@agent.tool_plain`` and ``toolsets=`` all go through
    :class:`GuardedToolset` (Pydantic AI wraps the agent's assembled toolset with it for
    each run). Same arguments as :class:`GuardedToolset`; ``run=None`` takes the run
    active when a tool is called.
    """

    run: Run | None = None
    revisions: Mapping[str, str] | None = field(default=None, kw_only=True)
    gates: Mapping[str, ToolGate] | None = field(default=None, kw_only=True)
    recover: Mapping[str, Callable[..., Any]] | None = field(default=None, kw_only=True)
    effect_keys: Mapping[str, EffectKey] | None = field(default=None, kw_only=True)
    on_error: OnError = field(default="raise", kw_only=True)

    def __post_init__(self) -> None:
        # Bad options fail when the agent is built, not at its first tool call.
        self._guard = FrameworkGuard(self.run, gates=self.gates, on_error=self.on_error)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # not spec-serializable (it holds a run and callables)

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        """A model request completed: the tool results it carried were seen."""
        self._guard.seen(tool_returns(ctx.messages))
        return response

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        return GuardedToolset(
            toolset,
            run=self.run,
            revisions=self.revisions,
            gates=self.gates,
            recover=self.recover,
            effect_keys=self.effect_keys,
            on_error=self.on_error,
        )
