"""Stored model-call content as the GenAI conventions' messages: roles and typed parts.

Rules of this module:

- Pure functions over what the journal stores for an ``llm_call`` (``inputs.messages``,
  ``inputs.system``, ``outputs.content``, in each API's own request/response shape, see
  ``integrations/_journaled``): no SDK import, no I/O. Live spans and re-export both call
  it, so they agree.
- The output is the conventions' parts format: a message is ``{"role", "parts"}`` (output
  messages add ``finish_reason``); parts are ``text`` (``content``), ``tool_call`` (``id``,
  ``name``, ``arguments``), ``tool_call_response`` (``id``, ``response``), ``reasoning``
  (``content``); anything else is kept as a generic part with its own ``type``.
- ``api`` tells the shapes apart: ``anthropic`` (Messages), ``openai`` (Chat Completions),
  ``openai.responses`` (Responses).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["input_messages", "output_messages", "system_instructions"]

Message = dict[str, Any]


def _text(content: Any) -> dict[str, Any]:
    return {"type": "text", "content": content if isinstance(content, str) else str(content)}


def _args(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _anthropic_part(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return _text(block)
    if not isinstance(block, Mapping):
        return {"type": "unknown"}
    kind = block.get("type")
    if kind == "text":
        return _text(block.get("text", ""))
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, Mapping) and "text" in b]
            content = "".join(str(t) for t in texts) if len(texts) == len(content) else content
        return {"type": "tool_call_response", "id": block.get("tool_use_id"), "response": content}
    if kind in ("thinking", "redacted_thinking"):
        return {"type": "reasoning", "content": block.get("thinking", "")}
    return {k: v for k, v in block.items() if k != "cache_control"}


def _anthropic_message(message: Any) -> Message:
    if not isinstance(message, Mapping):
        return {"role": "user", "parts": [_text(message)]}
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    parts = [_anthropic_part(b) for b in blocks if b is not None]
    role = str(message.get("role") or "user")
    if parts and all(p.get("type") == "tool_call_response" for p in parts):
        role = "tool"  # a user turn that only answers tool calls
    return {"role": role, "parts": parts}


def _openai_tool_calls(calls: Any) -> list[dict[str, Any]]:
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        out.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": fn.get("name"),
                "arguments": _args(fn.get("arguments")),
            }
        )
    return out


def _openai_content(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_text(content)]
    parts = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, Mapping) and item.get("type") in ("text", "input_text", "output_text"):
            parts.append(_text(item.get("text", "")))
        elif isinstance(item, Mapping):
            parts.append(dict(item))
        else:
            parts.append(_text(item))
    return parts


def _openai_message(message: Any) -> Message:
    if not isinstance(message, Mapping):
        return {"role": "user", "parts": [_text(message)]}
    role = str(message.get("role") or "user")
    if role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": message.get("content"),
                }
            ],
        }
    if message.get("type") == "function_call_output":  # Responses API input item
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("call_id"),
                    "response": message.get("output"),
                }
            ],
        }
    if message.get("type") == "function_call":
        return {"role": "assistant", "parts": [_responses_call(message)]}
    parts = _openai_content(message.get("content"))
    parts.extend(_openai_tool_calls(message.get("tool_calls")))
    return {"role": role, "parts": parts}


def _responses_call(item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": item.get("call_id", item.get("id")),
        "name": item.get("name"),
        "arguments": _args(item.get("arguments")),
    }


def input_messages(api: Any, inputs: Any) -> list[Message] | None:
    """The request's chat history in the conventions' format (``None``: nothing stored)."""
    if not isinstance(inputs, Mapping):
        return None
    messages = inputs.get("messages")
    if messages is None:
        return None
    if isinstance(messages, str):
        return [{"role": "user", "parts": [_text(messages)]}]
    if not isinstance(messages, Sequence):
        return None
    convert = _anthropic_message if api == "anthropic" else _openai_message
    return [convert(m) for m in messages]


def system_instructions(api: Any, inputs: Any) -> list[dict[str, Any]] | None:
    """Instructions given apart from the history (Anthropic ``system``, ``instructions``)."""
    if not isinstance(inputs, Mapping):
        return None
    system = inputs.get("system")
    if system is None or system == "":
        return None
    if isinstance(system, str):
        return [_text(system)]
    if isinstance(system, list):
        return [_anthropic_part(b) for b in system]
    return [_text(system)]


def output_messages(api: Any, outputs: Any, finish_reasons: Any) -> list[Message] | None:
    """The response's messages in the conventions' format (``None``: nothing stored)."""
    if not isinstance(outputs, Mapping) or outputs.get("content") is None:
        return None
    content = outputs["content"]
    reasons = [str(r) for r in finish_reasons] if isinstance(finish_reasons, list) else []
    if api == "anthropic":
        blocks = content if isinstance(content, list) else [content]
        message: Message = {"role": "assistant", "parts": [_anthropic_part(b) for b in blocks]}
        if reasons:
            message["finish_reason"] = reasons[0]
        return [message]
    if api == "openai.responses":
        parts: list[dict[str, Any]] = []
        for item in content if isinstance(content, list) else []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "function_call":
                parts.append(_responses_call(item))
            elif item.get("type") == "message":
                parts.extend(_openai_content(item.get("content")))
            elif item.get("type") == "reasoning":
                summary = item.get("summary") or []
                text = " ".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
                parts.append({"type": "reasoning", "content": text})
            else:
                parts.append(dict(item))
        message = {"role": "assistant", "parts": parts}
        if reasons:
            message["finish_reason"] = reasons[0]
        return [message]
    out = []
    for i, choice in enumerate(content if isinstance(content, list) else [content]):
        message = _openai_message(choice)
        message["role"] = "assistant"
        if i < len(reasons):
            message["finish_reason"] = reasons[i]
        out.append(message)
    return out
