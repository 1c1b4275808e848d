"""OpenAI adapter: Chat Completions and Responses API shapes.

Rules this module keeps: the ``openai`` SDK is never imported (its objects are read
through ``model_dump``; plain dicts work the same); the caller's lists are never mutated;
results carry the stored payload's text, so a re-sent request carries the same bytes.
Chat Completions results are ``{"role": "tool", ...}`` messages; Responses API results are
``function_call_output`` items (their ``call_id`` is the checkpoint's call id).
"""

from __future__ import annotations

import json
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
from ._journaled_wrap import journaled as journaled

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "ToolCall",
    "adeliver_results",
    "arun_tool_calls",
    "deliver_results",
    "repair_transcript",
    "run_tool_calls",
    "tool_calls",
    "with_justification",
]

CHAT = "openai.chat"
RESPONSES = "openai.responses"


def with_justification(tools: Sequence[Any]) -> list[Any]:
    """Return ``tools`` with a required ``justification`` string in each function schema.

    Chat Completions tools (``{"type": "function", "function": {"parameters": …}}``) and
    Responses API tools (``{"type": "function", "parameters": …}``) are both handled;
    built-in tools (web search, file search, …) and tools that already have the argument
    are returned unchanged. Idempotent; the caller's list is not mutated.
    """
    out: list[Any] = []
    for t in tools:
        if field(t, "type") != "function":
            out.append(t)
            continue
        fn = field(t, "function")
        if fn is not None:  # Chat Completions
            if has_justification(field(fn, "parameters") or {}):
                out.append(t)
                continue
            new = dict(as_plain(t))
            new["function"] = {
                **as_plain(fn),
                "parameters": add_justification(field(fn, "parameters")),
            }
            out.append(new)
            continue
        if has_justification(field(t, "parameters") or {}):  # Responses API
            out.append(t)
            continue
        new = dict(as_plain(t))
        new["parameters"] = add_justification(field(t, "parameters"))
        out.append(new)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _call(call_id: Any, name: Any, arguments: Any, provider: str) -> ToolCall:
    """Build the ``ToolCall`` of one function call; ``arguments`` is JSON text or a mapping.

    Nothing the model sent raises here: arguments that are not JSON (``NaN`` included),
    nest past the parser's depth, or a call without an id give a ``ToolCall`` carrying
    the reason, which becomes that call's error result.
    """
    error = None
    try:
        if isinstance(arguments, str):
            value = (
                json.loads(arguments, parse_constant=_reject_constant) if arguments.strip() else {}
            )
        else:
            value = as_plain(arguments) if arguments is not None else {}
    except RecursionError:
        value, error = None, "arguments are nested too deeply"
    except ValueError as exc:
        value, error = None, f"arguments are not JSON ({exc})"
    args, why = split_args(value) if error is None else (None, None)
    has_id = isinstance(call_id, str) and bool(call_id)
    return ToolCall(
        id=call_id if has_id else "",
        name=str(name),
        args=args,
        justification=why,
        provider=provider,
        error=error,
        refused=None if has_id else f"the call has no id (got {call_id!r:.40}); not run",
    )


def tool_calls(response: Any) -> list[ToolCall]:
    """Return one ``ToolCall`` per function call.

    Accepts a ``ChatCompletion`` (first choice), a chat assistant message, a Responses API
    ``Response``, or a list of Responses output items; objects or dicts.
    """
    choices = field(response, "choices")
    output = response if isinstance(response, list) else field(response, "output")
    if choices:
        message = field(choices[0], "message")
        return _chat_calls(message)
    if field(response, "tool_calls") is not None:
        return _chat_calls(response)
    return [
        _call(field(item, "call_id"), field(item, "name"), field(item, "arguments"), RESPONSES)
        for item in output or []
        if field(item, "type") == "function_call"
    ]


def _chat_calls(message: Any) -> list[ToolCall]:
    calls = []
    for tc in field(message, "tool_calls") or []:
        fn = field(tc, "function")
        calls.append(_call(field(tc, "id"), field(fn, "name"), field(fn, "arguments"), CHAT))
    return calls


def _result(call: ToolCall, text: str) -> dict[str, Any]:
    call_id = call.id or None  # a call without an id is answered without one
    if call.provider == RESPONSES:
        return {"type": "function_call_output", "call_id": call_id, "output": text}
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def run_tool_calls(
    run: Run, response: Any, tools: Iterable[Tool] | Mapping[str, Tool]
) -> list[dict[str, Any]]:
    """Run every function call of ``response`` through ``run.call`` and shape the results.

    New calls of the turn claim in one transaction; a call already done returns its
    stored result (running this again after a crash executes nothing twice). Errors are
    results (the error payload's JSON); an unknown outcome is "outcome unknown; not re-run".

    Returns:
        ``role: "tool"`` messages (Chat Completions) or ``function_call_output`` items
        (Responses API), in call order.

    Raises:
        BindingConflictError: ``BINDING_CONFLICT`` when a call id was used for another call.
    """
    return [_result(c, text) for c, text, _err in run_calls(run, tool_calls(response), tools)]


def deliver_results(
    run: Run, response: Any, post: Callable[[dict[str, Any]], Any], *, redeliver: bool = False
) -> Any:
    """Post the next request (carrying this response's results) through the checkpoints.

    See ``toolledger.integrations.anthropic.deliver_results``.
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
    return [_result(c, text) for c, text, _err in done]


async def adeliver_results(
    run: Run, response: Any, post: Callable[[dict[str, Any]], Any], *, redeliver: bool = False
) -> Any:
    """Async ``deliver_results``: ``post(payloads)`` may be a coroutine function."""
    return await adeliver_calls(run, tool_calls(response), post, redeliver=redeliver)


def repair_transcript(
    messages: Sequence[Any], store: Run | StoreLike | None, *, namespace: str | None = None
) -> list[Any]:
    """Return ``messages`` with a truthful result for every orphaned function call.

    Chat Completions: a ``role: "tool"`` message is inserted after the assistant message's
    existing tool messages for each ``tool_calls`` entry without one. Responses API input
    items: a ``function_call_output`` is inserted after each ``function_call`` item
    without one. The text is chosen by the checkpoint: the stored payload (completed or
    later), "outcome unknown; not re-run" (executing, uncertain), or "not executed".

    Args:
        messages: Chat messages or Responses input items (dicts or SDK objects).
        store: A ``Run``, a ``Store``, or a database path/DSN.
        namespace: The checkpoint namespace (default: the run's, else ``"default"``).
    """
    out: list[Any] = list(messages)
    answered = {
        str(field(m, "tool_call_id"))
        for m in out
        if field(m, "role") == "tool" and field(m, "tool_call_id") is not None
    } | {str(field(m, "call_id")) for m in out if field(m, "type") == "function_call_output"}
    i = 0
    while i < len(out):
        msg = out[i]
        if field(msg, "role") == "assistant" and field(msg, "tool_calls"):
            ids = [str(field(tc, "id")) for tc in field(msg, "tool_calls")]
            missing = [c for c in ids if c not in answered]
            j = i + 1
            while j < len(out) and field(out[j], "role") == "tool":
                j += 1
            if missing:
                texts = repair_results(store, namespace, missing)
                new = [{"role": "tool", "tool_call_id": c, "content": texts[c][0]} for c in missing]
                out[j:j] = new
                answered.update(missing)
                j += len(new)
            i = j
            continue
        if field(msg, "type") == "function_call":
            call_id = str(field(msg, "call_id"))
            if call_id not in answered:
                text = repair_results(store, namespace, [call_id])[call_id][0]
                out.insert(
                    i + 1, {"type": "function_call_output", "call_id": call_id, "output": text}
                )
                answered.add(call_id)
                i += 1
        i += 1
    return out
