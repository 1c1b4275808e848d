"""Anthropic's tool runners through the guard (``toolledger[anthropic]``).

``guarded_tool_runner`` is ``client.beta.messages.tool_runner(...)`` (sync or async after
the client, streaming or not, eager streaming included) with every tool call keyed by its
``tool_use.id``; ``guarded_session_tool_runner`` is the managed-agents
``SessionToolRunner`` with every call keyed by the session's tool-use event id, which the
server's history keeps: a second runner on the session, the same runner iterated again or
a new process after a crash gets the stored result and posts it, byte for byte, instead of
running the tool again.

Rules this module keeps:

- The SDK is imported when this module is (``ImportError`` naming the extra otherwise).
- The hooks are the SDK's private per-call methods: ``BaseSyncToolRunner._run_tool`` /
  ``BaseAsyncToolRunner._run_tool`` (``(tool, tool_use) -> tool_result block``) and
  ``SessionRun._call_tool`` (``(tool, event, input, running) -> (result event,
  recorded)``). They are checked when this module is imported and when a runner is made:
  a missing hook raises ``ImportError``/``TypeError`` at once, never a silently unguarded
  runner. The SDK's own method then runs with a stand-in tool whose ``call(input)`` goes
  through the guard, so everything else the SDK does around a call (spans, timeouts,
  error results, eager-call bookkeeping) is unchanged.
- The stored result is the tool's content as the SDK normalizes it (a string or content
  blocks). A replay returns it; a stored error result (``on_error="result"``) and an
  unknown outcome are sent as ``is_error`` results (raised as ``ToolError`` inside the
  SDK's method). With ``on_error="raise"`` (default) the tool's exception reaches the
  guard (the claim is released when the operation journal is empty) and then the SDK,
  which sends its usual error result.
- A result is seen (``run.mark_seen``) when a reply whose request carried it completed:
  each call of a reply marks the results in the history that reply was requested with
  (``BaseToolRunner._params``, checked at import). The last reply's results, which no
  call follows, stay unseen.
- The session runner is patched once, at the class: a stock ``SessionToolRunner`` runs
  the SDK's own method unchanged; only runners made here take the guarded path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ApprovalDenied, CheckpointError
from ..tools import EffectKey, OnError
from ._common import render, split_args
from ._framework import Answer, FrameworkGuard, ToolGate, denied_text, missing

try:
    import anthropic as _sdk
    from anthropic.lib.tools import _beta_functions as _functions
    from anthropic.lib.tools import _beta_runner as _runner_mod
    from anthropic.lib.tools import _beta_session_runner as _session_mod
    from anthropic.lib.tools import _tool_dispatch as _dispatch
except ImportError as exc:
    raise missing("anthropic", "anthropic", "anthropic") from exc

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "GuardedSessionToolRunner",
    "guarded_session_tool_runner",
    "answer_calls",
    "guarded_tool_runner",
]

ToolError = _functions.ToolError
#: The SDK methods this module goes through: (class, method name, parameter names).
HOOKS: tuple[tuple[type, str, tuple[str, ...]], ...] = (
    (_runner_mod.BaseSyncToolRunner, "_run_tool", ("self", "tool", "tool_use")),
    (_runner_mod.BaseAsyncToolRunner, "_run_tool", ("self", "tool", "tool_use")),
    (_session_mod.SessionRun, "_call_tool", ("self", "tool", "ev", "input_", "running")),
)


def check_hooks() -> None:
    """Check that the SDK still has the per-call methods this adapter goes through.

    Raises:
        ImportError: a hook is missing or has another signature (this adapter does not
            support the installed ``anthropic`` release: nothing would be guarded).
    """
    for owner, name, params in HOOKS:
        method = owner.__dict__.get(name)
        found = tuple(inspect.signature(method).parameters) if callable(method) else None
        if found != params:
            raise ImportError(
                f"toolledger.integrations.anthropic: anthropic {_sdk.__version__} has no "
                f"{owner.__name__}.{name}{params!r} (found {found!r}); this release of the "
                "SDK is not supported, and a runner would not be guarded"
            )

    history = _runner_mod.BaseToolRunner.__dict__.get("_params")
    if not isinstance(history, property):
        raise ImportError(
            f"toolledger.integrations.anthropic: anthropic {_sdk.__version__} has no "
            "BaseToolRunner._params (the history a turn was requested with); this release "
            "of the SDK is not supported"
        )


check_hooks()


def _tool_results(messages: Any) -> list[Any]:
    """The ``tool_use_id``s of the tool results in a request's history."""
    out = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                out.append(block.get("tool_use_id"))
    return out


def _text(payload: Any) -> Any:
    """Tool-result content for a stored payload: strings and block lists as they are."""
    return payload if isinstance(payload, (str, list)) else render(payload)


class _GuardedTool:
    """Stands in for one SDK tool inside the SDK's per-call method: ``call`` is guarded."""

    __slots__ = ("_call_id", "_guard", "_tool", "failure", "name")

    def __init__(self, guard: FrameworkGuard, tool: Any, call_id: str) -> None:
        self._guard = guard
        self._tool = tool
        self._call_id = call_id
        self.name = tool.name
        #: A toolledger error the SDK must not turn into a tool result (re-raised after it).
        self.failure: CheckpointError | None = None

    def _keep(self, exc: BaseException) -> None:
        if isinstance(exc, CheckpointError) and not isinstance(exc, ApprovalDenied):
            self.failure = exc

    def reraise(self) -> None:
        """Raise the toolledger error the SDK's method caught, if any."""
        if self.failure is not None:
            raise self.failure

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    def call(self, input: Any) -> Any:
        try:
            answer = self._guard.call(
                self.name,
                call_id=self._call_id,
                arguments=input,
                execute=lambda: _dispatch.tool_result_content(
                    self._tool.call(_strip_justification(self._tool, input))
                ),
            )
        except ApprovalDenied as denied:
            raise ToolError(denied_text(denied)) from denied
        except Exception as exc:
            self._keep(exc)
            raise
        return _content(answer)


class _AsyncGuardedTool(_GuardedTool):
    __slots__ = ("_limiter", "_on_start")

    def __init__(
        self,
        guard: FrameworkGuard,
        tool: Any,
        call_id: str,
        limiter: Any = None,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(guard, tool, call_id)
        self._limiter = limiter
        self._on_start = on_start

    async def call(self, input: Any) -> Any:
        if self._on_start is not None:
            self._on_start()

        async def execute() -> Any:
            args = _strip_justification(self._tool, input)
            raw = _dispatch.run_runnable_tool(self._tool, args, limiter=self._limiter)
            return _dispatch.tool_result_content(await raw)

        try:
            answer = await self._guard.acall(
                self.name, call_id=self._call_id, arguments=input, execute=execute
            )
        except ApprovalDenied as denied:
            raise ToolError(denied_text(denied)) from denied
        except Exception as exc:
            self._keep(exc)
            raise
        return _content(answer)


def _content(answer: Answer) -> Any:
    if answer.is_error:
        raise ToolError(_text(answer.payload))
    return answer.payload


def _strip_justification(tool: Any, input: Any) -> Any:
    """The input the SDK's tool gets: ``justification`` only if its schema has it."""
    schema = getattr(tool, "input_schema", None)
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(props, Mapping) and "justification" in props:
        return input
    return split_args(input)[0]


def guarded_tool_runner(
    run: Run | None,
    client: Any,
    *,
    tools: Iterable[Any],
    revisions: Mapping[str, str] | None = None,
    gates: Mapping[str, ToolGate] | None = None,
    on_error: OnError = "raise",
    recover: Mapping[str, Callable[..., Any]] | None = None,
    effect_keys: Mapping[str, EffectKey] | None = None,
    **params: Any,
) -> Any:
    """Return ``client.beta.messages.tool_runner(tools=tools, **params)``, guarded.

    Every tool call of the runner goes through ``run.call`` (``run.acall`` for an
    ``AsyncAnthropic`` client) keyed by its ``tool_use.id``: a call already made returns
    its stored result without running the tool. Sync or async after the client; with
    ``stream=True`` (and ``run_tools_eagerly``) too. Toolsets' members run unguarded.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        client: An ``Anthropic`` or ``AsyncAnthropic`` client.
        tools: The SDK's runnable tools (``@beta_tool`` / ``@beta_async_tool``).
        revisions: Tool name -> revision (default ``"1"``; bump it when a tool changes).
        gates: Tool name -> ``ToolGate`` (an approval gate; a call waiting for a
            decision is answered "awaiting approval; not executed yet" as an error).
        on_error: ``"raise"`` (the SDK's error result; the claim is released) or
            ``"result"`` (the error is stored and sent on every replay).
        recover: Tool name -> ``recover(input, ctx)`` (or ``recover(ctx)``).
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input)``: re-plan safety (a
            restart without the saved assistant turn gets new tool-use ids).
        params: The runner's parameters (``model``, ``max_tokens``, ``messages``,
            ``stream``, ``max_iterations``, ...).

    Raises:
        TypeError: the runner the SDK made has no per-call hook (unsupported release).
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad options.
    """
    guard = FrameworkGuard(
        run,
        revisions=revisions,
        gates=gates,
        on_error=on_error,
        recover=recover,
        effect_keys=effect_keys,
    )
    tools = list(tools)
    runner = client.beta.messages.tool_runner(tools=tools, **params)
    is_async = isinstance(runner, _runner_mod.BaseAsyncToolRunner)
    base = _runner_mod.BaseAsyncToolRunner if is_async else _runner_mod.BaseSyncToolRunner
    if not isinstance(runner, base) or "_run_tool" not in base.__dict__:
        raise TypeError(
            f"toolledger: {type(runner).__name__} has no _run_tool hook; not guarding it"
        )
    sdk_run_tool = type(runner)._run_tool.__get__(runner)
    if is_async:

        async def run_tool_async(tool: Any, tool_use: Any) -> Any:
            # The reply asking for this call completed: the results it was sent were seen.
            guard.seen(_tool_results(runner._params.get("messages")))
            stand_in = _AsyncGuardedTool(guard, tool, tool_use.id)
            result = await sdk_run_tool(stand_in, tool_use)
            stand_in.reraise()
            return result

        runner._run_tool = run_tool_async  # type: ignore[method-assign]
    else:

        def run_tool(tool: Any, tool_use: Any) -> Any:
            # The reply asking for this call completed: the results it was sent were seen.
            guard.seen(_tool_results(runner._params.get("messages")))
            stand_in = _GuardedTool(guard, tool, tool_use.id)
            result = sdk_run_tool(stand_in, tool_use)
            stand_in.reraise()
            return result

        runner._run_tool = run_tool  # type: ignore[method-assign]
    return runner


def answer_calls(runner: Any, tools: Iterable[Any], uses: Iterable[Mapping[str, Any]]) -> Any:
    """Run a saved turn's calls through ``runner``'s guarded per-call method (same ids),
    and append their results to its history: what ``resume_tool_runner`` does for the last
    turn. Returns ``None``; for an async runner, an awaitable to await first."""
    by_name = {t.name: t for t in tools}
    blocks = [_sdk.types.beta.BetaToolUseBlock.model_validate(dict(u)) for u in uses]

    def missing(block: Any) -> dict[str, Any]:
        return {
            "type": "tool_result",
            "tool_use_id": block.id,
            "content": f"Error: Tool '{block.name}' not found",
            "is_error": True,
        }

    if isinstance(runner, _runner_mod.BaseAsyncToolRunner):

        async def answer() -> None:
            results: list[Any] = [
                await runner._run_tool(by_name[b.name], b) if b.name in by_name else missing(b)
                for b in blocks
            ]
            runner.append_messages({"role": "user", "content": results})

        return answer()
    results = [
        runner._run_tool(by_name[b.name], b) if b.name in by_name else missing(b) for b in blocks
    ]
    runner.append_messages({"role": "user", "content": results})
    return None


# -- the session runner -------------------------------------------------------------------

_FOUND = _session_mod.SessionRun.__dict__["_call_tool"]
#: The SDK's own method (the class may carry this module's patch from an earlier import).
_SDK_CALL_TOOL = getattr(_FOUND, "toolledger_sdk_method", _FOUND)


class GuardedSessionToolRunner(_session_mod.SessionToolRunner):
    """A ``SessionToolRunner`` whose tool calls go through the guard, keyed by event id.

    Build it with :func:`guarded_session_tool_runner`.
    """

    def __init__(
        self, client: Any, session_id: str, *, guard: FrameworkGuard, **kwargs: Any
    ) -> None:
        super().__init__(client, session_id, **kwargs)
        self.toolledger_guard = guard


async def _call_tool(self: Any, tool: Any, ev: Any, input_: Any, running: Any) -> Any:
    runner = self._runner
    if not isinstance(runner, GuardedSessionToolRunner):
        return await _SDK_CALL_TOOL(self, tool, ev, input_, running)
    sync = isinstance(tool, _dispatch._SYNC_RUNNABLES)

    def shield() -> None:  # as the SDK does for its own sync tools: a thread cannot stop
        running.timeout.shield = sync

    stand_in = _AsyncGuardedTool(
        runner.toolledger_guard, tool, ev.id, self._sync_tool_limiter, shield
    )
    result = await _SDK_CALL_TOOL(self, stand_in, ev, input_, running)
    stand_in.reraise()
    return result


_call_tool.toolledger_sdk_method = _SDK_CALL_TOOL  # type: ignore[attr-defined]
_session_mod.SessionRun._call_tool = _call_tool  # type: ignore[method-assign]


def guarded_session_tool_runner(
    run: Run | None,
    client: Any,
    session_id: str,
    *,
    tools: Iterable[Any],
    revisions: Mapping[str, str] | None = None,
    gates: Mapping[str, ToolGate] | None = None,
    on_error: OnError = "raise",
    recover: Mapping[str, Callable[..., Any]] | None = None,
    effect_keys: Mapping[str, EffectKey] | None = None,
    **params: Any,
) -> GuardedSessionToolRunner:
    """Return a session tool runner (``client.beta.sessions.events.tool_runner``), guarded.

    Every call the session waits on goes through ``run.acall`` keyed by the session's
    tool-use event id. A call whose result post failed (anthropic-sdk-python #1749), one
    taken up by a second runner on the session, or by a new process after a crash, is
    answered with the stored result (the same bytes) and the tool does not run again.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active when a tool is called.
        client: An ``AsyncAnthropic`` client.
        session_id: The managed-agents session.
        tools: The SDK's runnable tools.
        revisions, gates, on_error, recover, effect_keys: as ``guarded_tool_runner``.
        params: ``SessionToolRunner``'s options (``max_idle``, ``max_concurrent_calls``,
            ``environment_key``, ``extra_headers``).
    """
    guard = FrameworkGuard(
        run,
        revisions=revisions,
        gates=gates,
        on_error=on_error,
        recover=recover,
        effect_keys=effect_keys,
    )
    return GuardedSessionToolRunner(client, session_id, guard=guard, tools=list(tools), **params)
