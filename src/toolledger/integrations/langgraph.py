"""LangGraph tool calls through the guard (``toolledger[langgraph]``).

    ToolNode(tools, wrap_tool_call=guard_tool_calls(run), awrap_tool_call=aguard_tool_calls(run))
    create_agent(model, tools, middleware=[ToolledgerMiddleware(run)])

Every tool call goes through ``run.call``/``run.acall`` keyed by ``tool_call["id"]``.
Resuming a thread from its checkpoint re-runs the tools node with the same ids: a call that
already ran returns its stored result instead of running again.

Rules this module keeps:

- ``langgraph`` and ``langchain`` are imported when this module is (``ImportError`` naming
  the extra).
- The hooks are public: ``ToolNode(wrap_tool_call=, awrap_tool_call=)`` and
  ``AgentMiddleware.wrap_tool_call``/``awrap_tool_call`` (``(request, handler)``).
- **The guard runs inside the tool's own run**: the wrapper hands the tool node a copy of
  the tool whose ``_run``/``_arun`` make the guarded call, so LangChain has validated the
  arguments (a call with invalid arguments is the node's error, never recorded) and started
  the run's callbacks. With openinference-instrumentation-langchain on, its ``TOOL`` span
  for the call (never made current by it) is handed to telemetry
  (``framework_tool_span``): it is the call's tool span, toolledger's span its
  ``guard_tool`` child. Without it, or without a span, toolledger's span is the call's.
- **Errors reach the guard as errors**: the tool's exception, or an error ``ToolMessage``
  the tool returns, is a failure: with ``on_error="raise"`` (default) the claim is released
  (when the operation journal is empty) and the exception goes on to the tool's and the
  tool node's own error handling (the message goes to the model); with
  ``on_error="result"`` its text is stored and sent again, as an error ``ToolMessage``, now
  and on every replay.
- A result is seen (``run.mark_seen``) when a model turn that carried it completed: the
  middleware marks the ``ToolMessage``s in the state after every model call
  (``after_model``); ``guard_tool_calls`` marks them when the next turn's tool calls run
  (the last turn's results, which no tool call follows, stay unseen with it).
- Approvals pause the graph its own way: a call whose gate waits for a decision is an
  ``interrupt()`` (value ``{"toolledger": "awaiting_approval", "call_id", "tool",
  "args"}``; the graph needs a checkpointer). Resume with ``Command(resume=...)``: a
  decision made in toolledger (``toolledger approve``/``deny``) is read first; else
  ``resume={"approved": bool, "by": name, "reason": text}`` is stored as the decision.
  A denial is an error ``ToolMessage`` ``"denied by X: reason"`` (the model is told).
- The stored result is what the tool returned (its raw return): text as it is; a
  ``response_format="content_and_artifact"`` pair as both; a ``ToolMessage`` as content,
  status, artifact; a ``Command`` as its ``update`` (messages as dicts), ``goto`` and
  ``graph``; anything else as JSON. A replay returns it again from the tool's ``_run``, so
  LangChain builds the same message (the call's ``tool_call_id`` and ``name``). A result
  ``recover`` proved may be any JSON: it becomes the message's content. Results earlier
  versions stored (the node's ``ToolMessage`` or ``Command``) replay as that message.
- The graph's ``thread_id`` is the run's conversation when the app named none (a re-plan
  in the same thread, in a new process, is then recognized; see ``_framework``).
- The model's tool calls are safe across a crash only if the checkpoint that holds them is
  written before the tools run: a graph without a checkpointer, or with
  ``durability="async"`` (the default) or ``"exit"``, can lose them, and the model then
  issues the same action under new ids (use an effect key). Each wrapper warns once
  (``DurabilityWarning``) when it sees such a graph, at the app's line that made it.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..approvals import decide_approval
from ..errors import ApprovalDenied, InvalidArgumentError
from ..telemetry import framework_tool_span
from ..tools import EffectKey, OnError
from ._common import render
from ._framework import Answer, FrameworkGuard, ToolGate, denied_text, missing

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import BaseMessage, ToolMessage, message_to_dict
    from langchain_core.messages import messages_from_dict as _messages_from_dict
    from langchain_core.tools import BaseTool
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_DURABILITY
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command, interrupt
    from pydantic_core import to_jsonable_python
except ImportError as exc:
    raise missing("langgraph", "langgraph", "langgraph") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "DurabilityWarning",
    "ToolledgerMiddleware",
    "aguard_tool_calls",
    "guard_tool_calls",
]

_MESSAGE = "__toolledger_message__"
_SAFE_DURABILITY = "sync"


class DurabilityWarning(UserWarning):
    """The graph may lose the model's tool calls in a crash (see the module's rules)."""


class ToolCallFailed(Exception):
    """The tool node answered with an error ``ToolMessage``: a failed call, for the guard."""

    def __init__(self, message: Any) -> None:
        super().__init__(str(message.content))
        self.message = message


# -- encoding results -----------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return {_MESSAGE: message_to_dict(value)}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    try:
        return to_jsonable_python(value)
    except Exception:  # shown to the model as text, as the tool node would show it
        return str(value)


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_MESSAGE}:
            return _messages_from_dict([value[_MESSAGE]])[0]
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _dump(out: Any, pair: bool) -> Any:
    """The stored result of what a tool's ``_run`` returned (``pair``: a
    ``(content, artifact)`` tuple)."""
    if isinstance(out, str):
        return out  # the common case, stored as the bare text
    if pair and isinstance(out, tuple) and len(out) == 2:
        return {"content_and_artifact": [_encode(out[0]), _encode(out[1])]}
    if isinstance(out, Command):
        return {
            "command": {
                "update": _encode(out.update),
                "goto": _encode(out.goto),
                "graph": out.graph,
            }
        }
    if isinstance(out, ToolMessage):  # what the model and the graph see of it
        if out.status == "success" and out.artifact is None and isinstance(out.content, str):
            return out.content  # the common case, stored as the bare text
        body: dict[str, Any] = {"content": _encode(out.content), "status": out.status}
        if out.artifact is not None:
            body["artifact"] = _encode(out.artifact)
        return {"tool_message": body}
    return {"value": _encode(out)}


def _load(payload: Mapping[str, Any], call: _Call) -> Any:
    if "content_and_artifact" in payload:
        content, artifact = _decode(payload["content_and_artifact"])
        return content, artifact
    if "command" in payload:
        body = payload["command"]
        return Command(
            update=_decode(body["update"]), goto=_decode(body["goto"]), graph=body["graph"]
        )
    if "tool_message" in payload:
        body = payload["tool_message"]
        return ToolMessage(
            content=_decode(body["content"]),
            tool_call_id=call.call_id,
            name=call.name,
            status=body["status"],
            artifact=_decode(body.get("artifact")),
        )
    return _decode(payload["value"])


@dataclass(frozen=True, slots=True)
class _Call:
    """One model tool call, as the guard sees it and as its tool's ``_run`` answers."""

    name: str
    call_id: str
    args: Any
    #: ``response_format="content_and_artifact"``: ``_run`` returns ``(content, artifact)``.
    pair: bool

    def error(self, text: Any) -> ToolMessage:
        """An error ``ToolMessage`` for this call (the model is told ``text``)."""
        return ToolMessage(
            content=render(text), tool_call_id=self.call_id, name=self.name, status="error"
        )

    def shaped(self, out: Any) -> Any:
        """``out`` as the tool's ``_run`` returns it: a message (passed through by the
        tool as it is) goes as the content of a pair when the tool returns pairs."""
        return (out, None) if self.pair and not isinstance(out, tuple) else out


#: ``_dump``'s shapes besides bare text (the first three are also what earlier versions
#: stored of the tool node's answer: they replay as that answer).
_SHAPES = ({"tool_message"}, {"command"}, {"value"}, {"content_and_artifact"})


def _answer(answer: Answer, call: _Call, fresh: list[Any]) -> Any:
    payload = answer.payload
    if answer.kind == "result" and not answer.is_error:
        outcome = answer.outcome
        if fresh and outcome is not None and not (outcome.replayed or outcome.recovered):
            return fresh[0]  # executed now: the tool's own return value, which was stored
        if isinstance(payload, dict) and set(payload) in _SHAPES:
            return _load(payload, call)
        # A plain text result, or one ``recover`` proved (any JSON): the message's content.
        return payload if isinstance(payload, str) else render(payload)
    if answer.kind == "result" and isinstance(payload, dict) and "message" in payload:
        payload = payload["message"]  # a stored error: the tool's (or its message's) text
    return call.error(payload)


# -- the wrappers ---------------------------------------------------------------------------


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _app_site() -> tuple[str, int, str]:
    """The app's line that made the wrapper: the first frame outside toolledger.

    A tool node runs its tools in worker threads, where the app's ``invoke`` line is not
    on the stack; the line that adopted the adapter is, when the wrapper is made.
    """
    frame = sys._getframe(1)
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE + os.sep
    ):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__", "")


def _tool_results(state: Any) -> list[str]:
    """The call ids of the ``ToolMessage``s in a graph state (or a list of messages)."""
    messages = state.get("messages") if isinstance(state, Mapping) else state
    if not isinstance(messages, list):
        messages = getattr(state, "messages", None)
    if not isinstance(messages, list):
        return []
    return [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]


def _configurable(request: ToolCallRequest) -> Mapping[str, Any]:
    """The graph run's ``config["configurable"]`` (empty outside a graph)."""
    runtime = getattr(request, "runtime", None)
    config = getattr(runtime, "config", None) or {}
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    return conf if isinstance(conf, Mapping) else {}


class _Wrapper:
    """What ``guard_tool_calls``/``aguard_tool_calls``/the middleware share."""

    def __init__(self, guard: FrameworkGuard) -> None:
        self._guard = guard
        self._warned = False
        #: Where the app made this wrapper: the durability warning points there.
        self._site = _app_site()
        self._lock = threading.Lock()

    def _check(self, request: ToolCallRequest) -> tuple[Mapping[str, Any], str]:
        tool_call = request.tool_call
        call_id = tool_call.get("id")
        if not call_id:
            raise InvalidArgumentError(
                message=f"tool {tool_call.get('name')}: the model's call has no id; not running "
                "it unguarded",
                details={"tool": tool_call.get("name")},
            )
        self._warn_durability(request)
        self._guard.conversation(_configurable(request).get("thread_id"))
        # The model turn that made this call completed: the results it carried were seen.
        self._guard.seen(_tool_results(getattr(request, "state", None)))
        return tool_call, call_id

    def _warn_durability(self, request: ToolCallRequest) -> None:
        if self._warned:
            return
        conf = _configurable(request)
        if CONFIG_KEY_DURABILITY not in conf and CONFIG_KEY_CHECKPOINTER not in conf:
            return  # not inside a graph run (a ToolNode invoked directly)
        durability = conf.get(CONFIG_KEY_DURABILITY, "async")
        checkpointer = conf.get(CONFIG_KEY_CHECKPOINTER)
        if checkpointer is not None and durability == _SAFE_DURABILITY:
            return
        with self._lock:
            if self._warned:
                return
            self._warned = True
        why = (
            "the graph has no checkpointer"
            if checkpointer is None
            else f'the graph runs with durability="{durability}"'
        )
        filename, lineno, module = self._site
        warnings.warn_explicit(
            f"toolledger: {why}, so a crash can lose the checkpoint that holds the model's tool "
            "calls; the model is then asked again and issues the same action under new call "
            "ids, which the call-id checkpoint cannot recognize. Compile with a checkpointer "
            'and invoke with durability="sync", or give the tools an effect key.',
            DurabilityWarning,
            filename,
            lineno,
            module=module,
        )

    def seen(self, state: Any) -> None:
        """Mark the results in ``state`` seen (a model turn that carried them completed)."""
        self._guard.seen(_tool_results(state))

    def _decided(self, call: _Call) -> bool:
        """Pause the graph for a pending decision (``interrupt``); on resume, take a decision
        passed with ``Command(resume={"approved": bool, "by": name, "reason": text})``.

        Returns whether a decision was stored now (the call is then tried again). A graph
        resumed with anything else, or a decision made in toolledger meanwhile (which the
        next attempt reads first), changes nothing here.
        """
        value = interrupt(
            {
                "toolledger": "awaiting_approval",
                "call_id": call.call_id,
                "tool": call.name,
                "args": call.args,
            }
        )
        if not (
            isinstance(value, Mapping)
            and isinstance(value.get("approved"), bool)
            and isinstance(value.get("by"), str)
        ):
            return False
        run = self._guard.run
        decide_approval(
            run.store,
            run.namespace,
            call.call_id,
            value["approved"],
            value["by"],
            value.get("reason"),
        )
        return True

    def call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Any:
        if request.tool is None:
            return handler(request)  # an unknown tool: the tool node reports it; nothing runs
        tool_call, call_id = self._check(request)
        return handler(request.override(tool=_guarded_tool(self, request.tool, tool_call, call_id)))

    async def acall(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        if request.tool is None:
            return await handler(request)
        tool_call, call_id = self._check(request)
        return await handler(
            request.override(tool=_guarded_tool(self, request.tool, tool_call, call_id))
        )

    def run_guarded(self, call: _Call, execute: Callable[[], Any]) -> Any:
        """The guarded call, inside the tool's run: what the tool's ``_run`` returns."""
        fresh: list[Any] = []

        def checked() -> Any:
            out = execute()
            if isinstance(out, ToolMessage) and out.status == "error":
                raise ToolCallFailed(out)
            fresh.append(out)
            return _dump(out, call.pair)

        def attempt() -> Any:
            return self._guard.call(
                call.name, call_id=call.call_id, arguments=call.args, execute=checked
            )

        with framework_tool_span(_host_span()):
            try:
                answer = attempt()
                if answer.kind == "awaiting_approval" and self._decided(call):
                    answer = attempt()  # decided with the graph's Command(resume=...)
            except ToolCallFailed as failed:
                return call.shaped(failed.message)
            except ApprovalDenied as denied:
                return call.shaped(call.error(denied_text(denied)))
            return call.shaped(_answer(answer, call, fresh))

    async def arun_guarded(self, call: _Call, execute: Callable[[], Awaitable[Any]]) -> Any:
        """Async :meth:`run_guarded`, inside the tool's ``_arun``."""
        fresh: list[Any] = []

        async def checked() -> Any:
            out = await execute()
            if isinstance(out, ToolMessage) and out.status == "error":
                raise ToolCallFailed(out)
            fresh.append(out)
            return _dump(out, call.pair)

        async def attempt() -> Any:
            return await self._guard.acall(
                call.name, call_id=call.call_id, arguments=call.args, execute=checked
            )

        with framework_tool_span(_host_span()):
            try:
                answer = await attempt()
                if answer.kind == "awaiting_approval" and self._decided(call):
                    answer = await attempt()
            except ToolCallFailed as failed:
                return call.shaped(failed.message)
            except ApprovalDenied as denied:
                return call.shaped(call.error(denied_text(denied)))
            return call.shaped(_answer(answer, call, fresh))


#: The tool copy whose guarded call runs in this context: ``BaseTool._arun`` of a tool
#: without an async body runs its ``_run`` in a worker thread, inside the same call.
_GUARDING: ContextVar[object] = ContextVar("toolledger_langgraph_guarding", default=None)


def _guarded_tool(
    wrapper: _Wrapper, tool: BaseTool, tool_call: Mapping[str, Any], call_id: str
) -> BaseTool:
    """A copy of ``tool`` whose ``_run``/``_arun`` run the guarded call.

    The guard runs inside the tool's own LangChain run: its callbacks have started (an
    instrumentation's span for the call exists: toolledger's span goes under it), the
    arguments were validated, and the tool's and the tool node's own handling of what
    ``_run`` returns or raises applies to a replayed answer as to a fresh one.
    """
    call = _Call(
        name=tool_call["name"],
        call_id=call_id,
        args=tool_call["args"],
        pair=tool.response_format == "content_and_artifact",
    )
    clone: BaseTool = tool.model_copy()
    run, arun = clone._run, clone._arun

    @functools.wraps(run)
    def guarded_run(*args: Any, **kwargs: Any) -> Any:
        if _GUARDING.get() is clone:  # called by the tool's own _arun: guarded already
            return run(*args, **kwargs)
        token = _GUARDING.set(clone)
        try:
            return wrapper.run_guarded(call, lambda: run(*args, **kwargs))
        finally:
            _GUARDING.reset(token)

    @functools.wraps(arun)
    async def guarded_arun(*args: Any, **kwargs: Any) -> Any:
        token = _GUARDING.set(clone)
        try:
            return await wrapper.arun_guarded(call, lambda: arun(*args, **kwargs))
        finally:
            _GUARDING.reset(token)

    # The copy's own methods, as LangChain looks them up (the signature tells it which of
    # run_manager and config to pass).
    object.__setattr__(clone, "_run", guarded_run)
    object.__setattr__(clone, "_arun", guarded_arun)
    return clone


#: ``openinference.instrumentation.langchain`` once imported (``None``: not installed).
_OPENINFERENCE: list[Any] = []


def _host_span() -> Any:
    """OpenInference's span for the LangChain tool run in progress (``None``: none).

    openinference-instrumentation-langchain starts it in its callback handler and never
    makes it current; its ``get_current_span()`` finds it from the run's callbacks. Only
    asked when its instrumentor is on (else it prints a hint on every call).
    """
    if not _OPENINFERENCE:
        try:
            from openinference.instrumentation import langchain

            _OPENINFERENCE.append(langchain)
        except ImportError:
            _OPENINFERENCE.append(None)
    oi = _OPENINFERENCE[0]
    if oi is None:
        return None
    try:
        if not oi.LangChainInstrumentor().is_instrumented_by_opentelemetry:
            return None
        return oi.get_current_span()
    except Exception:  # telemetry never costs the call: no host, toolledger's own span
        return None


def _wrapper(
    run: Run | None,
    revisions: Mapping[str, str] | None,
    gates: Mapping[str, ToolGate] | None,
    on_error: OnError,
    recover: Mapping[str, Callable[..., Any]] | None,
    effect_keys: Mapping[str, EffectKey] | None,
) -> _Wrapper:
    return _Wrapper(
        FrameworkGuard(
            run,
            revisions=revisions,
            gates=gates,
            on_error=on_error,
            recover=recover,
            effect_keys=effect_keys,
        )
    )


def guard_tool_calls(
    run: Run | None,
    *,
    revisions: Mapping[str, str] | None = None,
    gates: Mapping[str, ToolGate] | None = None,
    on_error: OnError = "raise",
    recover: Mapping[str, Callable[..., Any]] | None = None,
    effect_keys: Mapping[str, EffectKey] | None = None,
) -> Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]:
    """Return a ``wrap_tool_call`` for ``ToolNode``: every call through ``run.call``.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate`` (a call waiting for a decision is answered with an
            error ``ToolMessage`` "awaiting approval; not executed yet").
        on_error: ``"raise"`` or ``"result"`` (see the module's rules).
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety (a
            crash that lost the checkpoint holding the model's calls gets new ids).
    """
    return _wrapper(run, revisions, gates, on_error, recover, effect_keys).call


def aguard_tool_calls(
    run: Run | None,
    *,
    revisions: Mapping[str, str] | None = None,
    gates: Mapping[str, ToolGate] | None = None,
    on_error: OnError = "raise",
    recover: Mapping[str, Callable[..., Any]] | None = None,
    effect_keys: Mapping[str, EffectKey] | None = None,
) -> Callable[[ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]]:
    """Return an ``awrap_tool_call`` for ``ToolNode``: every call through ``run.acall``.

    Same arguments as :func:`guard_tool_calls`.
    """
    return _wrapper(run, revisions, gates, on_error, recover, effect_keys).acall


class ToolledgerMiddleware(AgentMiddleware[Any, Any]):
    """``create_agent`` middleware: every tool call of the agent through the guard.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        revisions, gates, on_error, recover, effect_keys: as :func:`guard_tool_calls`.
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
        super().__init__()
        self._wrapper = _wrapper(run, revisions, gates, on_error, recover, effect_keys)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """A model call completed: the tool results it carried were seen."""
        self._wrapper.seen(state)
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self._wrapper.seen(state)
        return None

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        return self._wrapper.call(request, handler)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        return await self._wrapper.acall(request, handler)
