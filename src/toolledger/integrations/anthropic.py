"""Anthropic Messages API adapter: justification injection, tool calls, results, repair.

Rules this module keeps: the ``anthropic`` SDK is never imported (its objects are read
through ``model_dump``, plain dicts work the same); the caller's lists and dicts are never
mutated; results are ``tool_result`` blocks whose content is the stored payload's text
(``is_error`` set for error results), so a re-sent turn carries the same bytes.

The SDK's own tool loops, guarded (``guarded_tool_runner``, ``guarded_session_tool_runner``),
are in ``anthropic_runner``, which needs the SDK (``toolledger[anthropic]``); they are
importable from here too, imported on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..store import StoreLike
from ..tools import Tool
from ._common import (
    ToolCall,
    add_justification,
    adeliver_calls,
    arun_calls,
    as_plain,
    deliver_calls,
    field,
    has_justification,
    repair_results,
    run_calls,
    split_args,
)
from ._framework import active_run
from ._journaled_wrap import journaled as journaled

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "ToolCall",
    "adeliver_results",
    "aresume_tool_runner",
    "arun_tool_calls",
    "deliver_results",
    "repair_transcript",
    "resume_tool_runner",
    "run_tool_calls",
    "tool_calls",
    "with_justification",
]

#: The SDK's tool runners, guarded: they live in ``anthropic_runner``, which imports the SDK
#: (so they are not in ``__all__``: a star import must work without it).
_RUNNERS = ("guarded_session_tool_runner", "guarded_tool_runner")


def __getattr__(name: str) -> Any:
    # The raw-loop adapter above works without the SDK; only the runners need it, so they
    # are imported on first use (ImportError naming toolledger[anthropic] without the SDK).
    if name in _RUNNERS:
        from . import anthropic_runner

        return getattr(anthropic_runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROVIDER = "anthropic"


def with_justification(tools: Sequence[Any]) -> list[Any]:
    """Return ``tools`` with a required ``justification`` string in each ``input_schema``.

    Server tools (those with a ``type`` other than ``custom``, or no ``input_schema``) and
    tools that already have the argument are returned unchanged. Idempotent; the
    caller's list is not mutated.
    """
    out: list[Any] = []
    for t in tools:
        schema = field(t, "input_schema")
        kind = field(t, "type")
        if schema is None or kind not in (None, "custom") or has_justification(schema):
            out.append(t)
            continue
        new = dict(as_plain(t))
        new["input_schema"] = add_justification(schema)
        out.append(new)
    return out


def tool_calls(response: Any) -> list[ToolCall]:
    """Return one ``ToolCall`` per ``tool_use`` block of a ``Message`` (object or dict)."""
    content = field(response, "content") or []
    calls = []
    for block in content:
        if field(block, "type") != "tool_use":
            continue
        error = None
        try:
            args, why = split_args(as_plain(field(block, "input")) or {})
        except RecursionError:
            args, why, error = None, None, "arguments are nested too deeply"
        call_id = field(block, "id")
        has_id = isinstance(call_id, str) and bool(call_id)
        calls.append(
            ToolCall(
                id=call_id if has_id else "",
                name=str(field(block, "name")),
                args=args,
                justification=why,
                provider=PROVIDER,
                error=error,
                refused=None if has_id else f"the call has no id (got {call_id!r:.40}); not run",
            )
        )
    return calls


def _result_block(call_id: str, text: str, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id or None,  # a call without an id is answered without one
        "content": text,
    }
    if is_error:
        block["is_error"] = True
    return block


def run_tool_calls(
    run: Run, response: Any, tools: Iterable[Tool] | Mapping[str, Tool]
) -> list[dict[str, Any]]:
    """Run every tool call of ``response`` through ``run.call`` and shape the results.

    New calls of the turn claim in one transaction; a call already done returns its
    stored result (running this again on the same response after a crash executes
    nothing twice). Errors are results (``is_error``); an unknown outcome is reported as
    "outcome unknown; not re-run".

    Returns:
        ``tool_result`` blocks, in call order, for the next ``user`` message.

    Raises:
        BindingConflictError: ``BINDING_CONFLICT`` when a tool-use id was used before for
            another call.
    """
    return [
        _result_block(c.id, text, err)
        for c, text, err in run_calls(run, tool_calls(response), tools)
    ]


def deliver_results(
    run: Run, response: Any, post: Callable[[dict[str, Any]], Any], *, redeliver: bool = False
) -> Any:
    """Post the next request (carrying this response's results) through the checkpoints.

    ``post(payloads)`` sends the request; if it raises, the delivery claims are released
    and the error re-raised. Returns what ``post`` returned, or ``None`` when every result
    was already delivered. See ``toolledger.guard.deliver_many``.
    """
    return deliver_calls(run, tool_calls(response), post, redeliver=redeliver)


async def arun_tool_calls(
    run: Run, response: Any, tools: Iterable[Tool] | Mapping[str, Tool]
) -> list[dict[str, Any]]:
    """Async ``run_tool_calls``: the turn's calls run concurrently via ``run.acall``.

    Async tools are awaited; the new calls' claims share one transaction. Same results
    and errors as ``run_tool_calls``.
    """
    done = await arun_calls(run, tool_calls(response), tools)
    return [_result_block(c.id, text, err) for c, text, err in done]


async def adeliver_results(
    run: Run, response: Any, post: Callable[[dict[str, Any]], Any], *, redeliver: bool = False
) -> Any:
    """Async ``deliver_results``: ``post(payloads)`` may be a coroutine function."""
    return await adeliver_calls(run, tool_calls(response), post, redeliver=redeliver)


def repair_transcript(
    messages: Sequence[Any], store: Run | StoreLike | None, *, namespace: str | None = None
) -> list[Any]:
    """Return ``messages`` with a truthful ``tool_result`` for every orphaned ``tool_use``.

    A crash can leave an assistant turn's tool calls without results, which the API
    rejects. Each missing result is chosen by the call's checkpoint: the stored payload
    (completed or later), "outcome unknown; not re-run" (executing, uncertain), or "not
    executed" (no checkpoint, ready). Results go first in the following user message (a
    new one is inserted when there is none).

    Args:
        messages: The conversation (dicts or SDK objects).
        store: A ``Run``, a ``Store``, or a database path/DSN.
        namespace: The checkpoint namespace (default: the run's, else ``"default"``).
    """
    out: list[Any] = list(messages)
    i = 0
    while i < len(out):
        msg = out[i]
        if field(msg, "role") != "assistant":
            i += 1
            continue
        uses = [
            str(field(b, "id"))
            for b in (field(msg, "content") or [])
            if not isinstance(field(msg, "content"), str) and field(b, "type") == "tool_use"
        ]
        if not uses:
            i += 1
            continue
        nxt = out[i + 1] if i + 1 < len(out) else None
        content = (
            field(nxt, "content") if nxt is not None and field(nxt, "role") == "user" else None
        )
        have = set()
        if isinstance(content, list):
            have = {
                str(field(b, "tool_use_id")) for b in content if field(b, "type") == "tool_result"
            }
        missing = [u for u in uses if u not in have]
        if missing:
            texts = repair_results(store, namespace, missing)
            blocks = [_result_block(u, *texts[u]) for u in missing]
            if nxt is not None and field(nxt, "role") == "user":
                rest = (
                    [{"type": "text", "text": content}]
                    if isinstance(content, str)
                    else list(content or [])
                )
                have_blocks = [b for b in rest if field(b, "type") == "tool_result"]
                others = [b for b in rest if field(b, "type") != "tool_result"]
                out[i + 1] = {**as_plain(nxt), "content": [*have_blocks, *blocks, *others]}
            else:
                out.insert(i + 1, {"role": "user", "content": blocks})
        i += 1
    return out


def resume_tool_runner(
    run: Run | None,
    client: Any,
    messages: Sequence[Any],
    *,
    tools: Iterable[Any],
    **options: Any,
) -> Any:
    """Return a guarded tool runner that resumes a conversation a crash (or a wait for a
    decision) interrupted.

    The SDK's runner never runs the tool calls of an assistant turn it is given. Save each
    turn as the runner yields it; after a restart, pass the saved turns here. The calls of
    the last turn that have no result go through the guard now, with their ids, as the
    runner would have run them: a call that completed returns its stored result, one that
    was running when the process died is answered from ``recover`` or ``"outcome unknown;
    not re-run"``, one that never started runs (once), one that waited for a decision runs
    (or is denied) now that it is decided. Calls of earlier turns without a result are
    answered from their checkpoints (:func:`repair_transcript`). Needs the SDK
    (``toolledger[anthropic]``), as ``guarded_tool_runner``. With an ``AsyncAnthropic``
    client, use :func:`aresume_tool_runner`.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active now.
        client: An ``Anthropic`` client.
        messages: The saved conversation (dicts or SDK objects).
        tools: The SDK's runnable tools.
        options: As ``guarded_tool_runner`` (``model``, ``max_tokens``, ``revisions``,
            ``gates``, ``recover``, ...), without ``messages``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``run`` is ``None`` and no run is
            active.
    """
    runner, tools, uses, answer = _resumed(run, client, messages, tools, options)
    if uses:
        answer(runner, tools, uses)
    return runner


async def aresume_tool_runner(
    run: Run | None,
    client: Any,
    messages: Sequence[Any],
    *,
    tools: Iterable[Any],
    **options: Any,
) -> Any:
    """Async :func:`resume_tool_runner` (an ``AsyncAnthropic`` client, async tools)."""
    runner, tools, uses, answer = _resumed(run, client, messages, tools, options)
    if uses:
        await answer(runner, tools, uses)
    return runner


def _resumed(
    run: Run | None,
    client: Any,
    messages: Sequence[Any],
    tools: Iterable[Any],
    options: Mapping[str, Any],
) -> tuple[Any, list[Any], list[Any], Any]:
    from . import anthropic_runner  # the SDK, imported on first use (see __getattr__)

    active = active_run(run)
    out = [as_plain(m) for m in messages]
    uses: list[Any] = []
    if out and field(out[-1], "role") == "assistant" and isinstance(out[-1]["content"], list):
        uses = [b for b in out[-1]["content"] if field(b, "type") == "tool_use"]
    head = out[:-1] if uses else out
    history = [*repair_transcript(head, active), *out[len(head) :]]
    tools = list(tools)
    runner = anthropic_runner.guarded_tool_runner(
        active, client, tools=tools, messages=history, **options
    )
    return runner, tools, uses, anthropic_runner.answer_calls
