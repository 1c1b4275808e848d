"""OpenAI Agents SDK tools through the guard: ``guarded_tools`` (``toolledger[openai-agents]``).

    agent = Agent(name="mailer", tools=guarded_tools(run, [send_email]))

Every call of a returned tool goes through ``run.acall`` keyed by ``ToolContext.tool_call_id``,
which ``RunState.to_string``/``from_string`` keep: resuming a saved run (once or twice, in
this process or another) gives the stored result instead of running the tool again.

Rules this module keeps:

- ``agents`` is imported when this module is (``ImportError`` naming the extra).
- The hook is public: ``FunctionTool.on_invoke_tool(ctx, input_json)``. Each returned tool is
  a copy of the SDK's (same name, schema, guardrails, timeout, failure policy) whose invoker
  runs the guard around a second copy with the failure policy turned off, so **errors
  reach the guard as errors**: with ``on_error="raise"`` (default) the claim is released
  (when the operation journal is empty) and the SDK's own failure policy then turns the
  exception into the model's error text (or fails the run, if the tool was made with
  ``failure_error_function=None``); with ``on_error="result"`` the error is stored and sent
  on every replay.
- The stored result is the tool's output as JSON (``str`` as is; other values through
  ``pydantic_core.to_jsonable_python``): the model gets it, the first time and on replay.
- Approvals compose, one decision per call. A call the SDK approved (``needs_approval``,
  then ``RunState.approve``) reaches the guard as approved ``by="openai-agents"`` and is
  recorded as the call's decision, so a toolledger gate does not ask again. A decision
  stored in toolledger (``toolledger approve``, ``decide_approval``) answers the SDK's
  ``needs_approval`` (no interruption): approved runs, denied is refused by the guard. A
  call the SDK pauses (its ``needs_approval``, or a toolledger gate without an approver)
  files a pending toolledger request, so ``toolledger approve``/``deny`` decides either
  way; ``apply_decisions(state)`` answers the paused ``RunState`` with those decisions. A
  call the SDK rejected never reaches the tool.
- A result is seen (``run.mark_seen``) when a model turn that carried it completed: a
  tool call asked by the run's model request ``n`` (``usage.requests``) marks the outputs
  this process returned for earlier requests. The last turn's outputs, which no tool call
  follows, stay unseen, as do outputs returned by another process.
- ``session=`` (the SDK ``Session`` the agent runs with): its ``session_id`` is the run's
  conversation when the app named none.
- Only ``FunctionTool``s can be guarded (``INVALID_ARGUMENT`` otherwise): hosted tools run
  at the provider, not here.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..approvals import Approved, Pending, decide_approval, get_approval
from ..errors import InvalidArgumentError, InvalidTransitionError
from ..store import ApprovalStatus
from ..tools import EffectKey, OnError
from ._common import render
from ._framework import Answer, FrameworkGuard, ToolGate, active_run, missing

try:
    from agents import FunctionTool
    from agents.tool import (
        set_function_tool_failure_error_function,
        with_function_tool_failure_error_handler,
    )
    from agents.tool_context import ToolContext
    from pydantic_core import to_jsonable_python
except ImportError as exc:
    raise missing("openai_agents", "openai-agents", "openai-agents") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["SDK_APPROVER", "apply_decisions", "guarded_tools"]

#: ``by`` of a decision made through the SDK's ``RunState.approve``.
SDK_APPROVER = "openai-agents"
#: The SDK's protocol for a tool invoker that can prepare arguments ahead of approval.
_PREPARE = "__agents_prepare_arguments__"


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return value
    try:
        return to_jsonable_python(value)
    except Exception:  # an object only str() can show, as the SDK itself would send it
        return str(value)


def _model_text(answer: Answer) -> Any:
    if answer.kind == "result" and not answer.is_error:
        return answer.payload
    return render(answer.payload)


class _Posted:
    """The outputs this process's guarded tools returned, by the model request that asked.

    ``usage.requests`` counts a run's model requests: a call asked by request ``n`` runs
    after that request completed, and that request carried every output returned for the
    requests before it. So those are seen.
    """

    def __init__(self) -> None:
        self._by_request: dict[str, int] = {}
        self._lock = threading.Lock()

    def returned(self, call_id: str, request: int) -> None:
        with self._lock:
            self._by_request[call_id] = request

    def seen_by(self, request: int) -> list[str]:
        with self._lock:
            done = [c for c, r in self._by_request.items() if r < request]
            for c in done:
                del self._by_request[c]
        return done


def _request_count(ctx: Any) -> int | None:
    requests = getattr(getattr(ctx, "usage", None), "requests", None)
    return requests if isinstance(requests, int) else None


def _ignore_handled(tool: Any, error: Exception, input_json: str) -> None:
    """The SDK's handled-error callback: the guard has journaled the error already."""


def _guard_one(
    guard: FrameworkGuard, tool: Any, conversation_id: str | None, posted: _Posted
) -> Any:
    if not isinstance(tool, FunctionTool):
        raise InvalidArgumentError(
            message=f"guarded_tools guards FunctionTools only; got {type(tool).__name__} "
            f"({getattr(tool, 'name', '?')!r}), which runs at the provider",
            details={"tool": getattr(tool, "name", None)},
        )
    inner = copy.copy(tool)
    set_function_tool_failure_error_function(inner, None)  # exceptions reach the guard
    name = tool.name

    async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        if not call_id:
            raise InvalidArgumentError(
                message=f"tool {name}: the call has no tool_call_id; not running it unguarded",
                details={"tool": name},
            )
        guard.conversation(conversation_id)
        # The model request that asked for this call completed: the outputs it carried
        # (returned for earlier requests) were seen.
        request = _request_count(ctx)
        if request is not None:
            guard.seen(posted.seen_by(request))
        try:
            arguments = json.loads(input_json) if input_json else {}
        except ValueError:
            arguments = {"arguments": input_json}  # the SDK reports the bad JSON itself
        gate = None
        if ctx.is_tool_approved(name, call_id) is True:
            _record_sdk_approval(guard.run, call_id)
            gate = ToolGate(
                approval="effect-only",
                approver=lambda request: Approved(SDK_APPROVER, _SDK_REASON),
            )

        async def execute() -> Any:
            return _jsonable(await inner.on_invoke_tool(ctx, input_json))

        answer = await guard.acall(
            name, call_id=call_id, arguments=arguments, execute=execute, gate=gate
        )
        if request is not None:
            posted.returned(call_id, request)
        return _model_text(answer)

    prepare = getattr(tool.on_invoke_tool, "prepare_arguments", None)
    if callable(prepare):  # the SDK inspects arguments before approval through this
        setattr(invoke, _PREPARE, prepare)
    changes: dict[str, Any] = {
        "on_invoke_tool": with_function_tool_failure_error_handler(invoke, _ignore_handled)
    }
    if tool.needs_approval is not False or guard.gate(name) is not None:
        changes["needs_approval"] = _needs_approval(guard, name, tool.needs_approval)
    return dataclasses.replace(tool, **changes)


_SDK_REASON = "approved through RunState"


def _record_sdk_approval(run: Run, call_id: str) -> None:
    """The SDK approved a call whose pause filed a toolledger request: decide that request
    (a person may have decided it in toolledger meanwhile; that decision stands)."""
    rec = get_approval(run.store, run.namespace, call_id)
    if rec is None or rec.status is not ApprovalStatus.PENDING:
        return
    with contextlib.suppress(InvalidTransitionError):
        decide_approval(run.store, run.namespace, call_id, True, SDK_APPROVER, _SDK_REASON)


#: The gate that files a pending toolledger request for a call the SDK pauses.
_FILE_REQUEST = ToolGate(approval="always", approver=lambda request: Pending(SDK_APPROVER))


async def _never() -> Any:
    raise AssertionError("a paused call is never executed")  # a pending gate never runs


def _needs_approval(guard: FrameworkGuard, name: str, sdk: Any) -> Callable[..., Any]:
    """The SDK's ``needs_approval``, answered by a decision toolledger already holds.

    A call toolledger has decided (or already ran) does not pause. A call the SDK pauses
    (its own ``needs_approval``, or a toolledger gate whose decision comes from the store)
    files a pending toolledger request, so ``toolledger approve``/``deny`` can decide it
    (``apply_decisions`` then answers the SDK's interruption).
    """

    async def needs(ctx: Any, params: Any, call_id: str) -> bool:
        run = guard.run
        rec = get_approval(run.store, run.namespace, call_id)
        if rec is not None and rec.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED):
            return False  # decided: the guard runs (or refuses) the call on that decision
        done = run.store.get(run.namespace, call_id)
        if done is not None and done.result is not None:
            return False  # it ran: the guard replays it, nobody is asked
        pause = bool(await sdk(ctx, params, call_id)) if callable(sdk) else bool(sdk)
        gate = guard.gate(name)
        if gate is not None and gate.approver is None:
            pause = True  # a person decides in toolledger: the SDK's own pause
        if pause:
            await guard.acall(
                name, call_id=call_id, arguments=params, execute=_never, gate=_FILE_REQUEST
            )
        return pause

    return needs


def apply_decisions(state: Any, run: Run | None = None) -> list[str]:
    """Answer a paused ``RunState``'s interruptions with the decisions toolledger holds.

    For each interruption whose call was decided in toolledger (``toolledger approve`` /
    ``deny``, ``decide_approval``): approved -> ``state.approve(item)``; denied ->
    ``state.reject(item)`` with the message ``"denied by X: reason"``, which the model
    gets. Undecided calls stay paused. Then resume: ``Runner.run(agent, state)``.

    Args:
        state: The SDK's ``RunState`` (``result.to_state()``, ``RunState.from_string``).
        run: The ``toolledger.Run``, or ``None``: the run active now.

    Returns:
        The call ids answered.
    """
    active = active_run(run)
    answered = []
    for item in state.get_interruptions():
        raw = item.raw_item
        call_id = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
        if not isinstance(call_id, str):
            continue
        rec = get_approval(active.store, active.namespace, call_id)
        if rec is None or rec.status not in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED):
            continue
        if rec.status is ApprovalStatus.APPROVED:
            state.approve(item)
        else:
            text = f"denied by {rec.by}" + (f": {rec.reason}" if rec.reason else "")
            state.reject(item, rejection_message=text)
        answered.append(call_id)
    return answered


def guarded_tools(
    run: Run | None,
    tools: Iterable[Any],
    *,
    revisions: Mapping[str, str] | None = None,
    gates: Mapping[str, ToolGate] | None = None,
    on_error: OnError = "raise",
    recover: Mapping[str, Callable[..., Any]] | None = None,
    effect_keys: Mapping[str, EffectKey] | None = None,
    session: Any = None,
) -> list[Any]:
    """Return guarded copies of the SDK's ``FunctionTool``s, for ``Agent(tools=...)``.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        tools: ``FunctionTool``s (``@function_tool``).
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate`` (a toolledger approval gate; a call waiting for a
            decision is answered "awaiting approval; not executed yet").
        on_error: ``"raise"`` or ``"result"`` (see the module's rules).
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety (a
            run started again, not resumed, gets new call ids).
        session: The SDK ``Session`` the agent runs with (``Runner.run(...,
            session=session)``): its ``session_id`` is the run's conversation when the
            run has none, so a re-plan in the same session, in a new process, is
            recognized.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a tool that is not a ``FunctionTool``
            or bad options.
    """
    guard = FrameworkGuard(
        run,
        revisions=revisions,
        gates=gates,
        on_error=on_error,
        recover=recover,
        effect_keys=effect_keys,
    )
    conversation_id = None if session is None else session.session_id
    posted = _Posted()  # shared by the tools: one turn's calls may be of several tools
    return [_guard_one(guard, t, conversation_id, posted) for t in tools]
