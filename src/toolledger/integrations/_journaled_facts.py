"""Provider-neutral facts of a completion: from a response, or folded from a stream.

Rules this module keeps:

- No SDK import: responses, chunks and events are read through attributes or keys
  (``field``), so SDK objects and plain dicts are read alike.
- The response *content* (hashed, and stored with content capture on) has one form per
  API, identical whether the completion was streamed or not:

  - Anthropic Messages: the content blocks; ``text`` → ``{"type", "text"}``,
    ``tool_use`` → ``{"type", "id", "name", "input"}``, ``thinking`` →
    ``{"type", "thinking"}``, any other block as the SDK dumps it.
  - OpenAI Chat Completions: one ``{"role": "assistant", "content", "tool_calls"}`` per
    choice (index order); a tool call is ``{"id", "type": "function", "function":
    {"name", "arguments"}}``; ``tool_calls`` is omitted when empty.
  - OpenAI Responses: the ``output`` items as the SDK dumps them.
- Finish reasons for the Responses API: ``tool_calls`` when the output has a function
  call, else ``stop`` for a completed response, the ``incomplete_details.reason`` of an
  incomplete one, else the response's status.
"""

from __future__ import annotations

import json
from typing import Any

from ._common import as_plain, field
from ._journaled import ResponseFacts

__all__ = [
    "AnthropicAccumulator",
    "ChatAccumulator",
    "ResponsesAccumulator",
    "anthropic_facts",
    "chat_facts",
    "responses_facts",
]


def _dumped(response: Any) -> dict[str, Any] | None:
    """The response as the SDK dumps it; ``None`` for an object that is not an SDK model
    (aisuite's own responses): replay rebuilds those from the content."""
    plain = as_plain(response)
    return plain if isinstance(plain, dict) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _openai_usage(usage: Any, prompt: str, completion: str) -> dict[str, int | None]:
    """OpenAI token counts: prompt tokens include cached ones (details say how many)."""
    prompt_details = field(usage, f"{prompt}_tokens_details") or field(
        usage, "prompt_tokens_details"
    )
    output_details = field(usage, f"{completion}_tokens_details")
    return {
        "input_tokens": _int(field(usage, f"{prompt}_tokens")),
        "output_tokens": _int(field(usage, f"{completion}_tokens")),
        "cache_read_input_tokens": _int(field(prompt_details, "cached_tokens")),
        "reasoning_output_tokens": _int(field(output_details, "reasoning_tokens")),
    }


# -- Anthropic Messages ---------------------------------------------------------------------


def _anthropic_block(block: Any) -> dict[str, Any]:
    plain = as_plain(block)
    if not isinstance(plain, dict):
        return {"type": "unknown"}
    kind = plain.get("type")
    if kind == "text":
        return {"type": "text", "text": plain.get("text", "")}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": plain.get("id"),
            "name": plain.get("name"),
            "input": plain.get("input", {}),
        }
    if kind == "thinking":
        return {"type": "thinking", "thinking": plain.get("thinking", "")}
    return plain


def anthropic_facts(message: Any) -> ResponseFacts:
    """Facts of an Anthropic ``Message`` (or a stream helper's snapshot)."""
    blocks = [_anthropic_block(b) for b in field(message, "content") or []]
    ids, names = _anthropic_calls(blocks)
    usage = field(message, "usage")
    stop = field(message, "stop_reason")
    return ResponseFacts(
        response_id=_str(field(message, "id")),
        response_model=field(message, "model"),
        finish_reasons=[stop] if isinstance(stop, str) else [],
        input_tokens=_int(field(usage, "input_tokens")),
        output_tokens=_int(field(usage, "output_tokens")),
        cache_read_input_tokens=_int(field(usage, "cache_read_input_tokens")),
        cache_creation_input_tokens=_int(field(usage, "cache_creation_input_tokens")),
        tool_call_ids=ids,
        tool_call_names=names,
        content=blocks,
        response=_dumped(message),
    )


def _anthropic_calls(blocks: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The requested tool calls' ids and names."""
    calls = [b for b in blocks if b.get("type") == "tool_use" and b.get("id")]
    return [b["id"] for b in calls], [str(b.get("name")) for b in calls]


def _chat_calls(content: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The requested tool calls' ids and names."""
    calls = [t for m in content for t in m.get("tool_calls", []) if t["id"]]
    return [t["id"] for t in calls], [str(t["function"]["name"]) for t in calls]


class AnthropicAccumulator:
    """Folds ``messages.create(stream=True)`` events into facts."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.response_id: str | None = None
        self.stop: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read: int | None = None
        self.cache_creation: int | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}

    def add(self, event: Any) -> None:
        """Fold one stream event."""
        kind = field(event, "type")
        if kind == "message_start":
            message = field(event, "message")
            self.model = field(message, "model")
            self.response_id = _str(field(message, "id"))
            usage = field(message, "usage")
            self.input_tokens = _int(field(usage, "input_tokens"))
            self.output_tokens = _int(field(usage, "output_tokens"))
            self.cache_read = _int(field(usage, "cache_read_input_tokens"))
            self.cache_creation = _int(field(usage, "cache_creation_input_tokens"))
        elif kind == "content_block_start":
            index = field(event, "index")
            block = _anthropic_block(field(event, "content_block"))
            if block.get("type") == "tool_use":
                block["input"] = {}
                self.partial[index] = ""
            self.blocks[index] = block
        elif kind == "content_block_delta":
            self._delta(field(event, "index"), field(event, "delta"))
        elif kind == "content_block_stop":
            index = field(event, "index")
            if index in self.partial:
                text = self.partial.pop(index)
                self.blocks[index]["input"] = json.loads(text) if text else {}
        elif kind == "message_delta":
            stop = field(field(event, "delta"), "stop_reason")
            self.stop = stop if isinstance(stop, str) else self.stop
            usage = field(event, "usage")
            self.output_tokens = _int(field(usage, "output_tokens")) or self.output_tokens
            self.input_tokens = _int(field(usage, "input_tokens")) or self.input_tokens

    def _delta(self, index: Any, delta: Any) -> None:
        block = self.blocks.get(index)
        if block is None:
            return
        kind = field(delta, "type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + (field(delta, "text") or "")
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + (field(delta, "partial_json") or "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + (field(delta, "thinking") or "")

    def facts(self) -> ResponseFacts:
        """The facts so far."""
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        ids, names = _anthropic_calls(blocks)
        return ResponseFacts(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[self.stop] if self.stop else [],
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_input_tokens=self.cache_read,
            cache_creation_input_tokens=self.cache_creation,
            tool_call_ids=ids,
            tool_call_names=names,
            content=blocks,
        )


# -- OpenAI Chat Completions ----------------------------------------------------------------


def _chat_message(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": field(message, "content")}
    calls = []
    for call in field(message, "tool_calls") or []:
        fn = field(call, "function")
        calls.append(
            {
                "id": field(call, "id"),
                "type": "function",
                "function": {"name": field(fn, "name"), "arguments": field(fn, "arguments")},
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def chat_facts(completion: Any) -> ResponseFacts:
    """Facts of an OpenAI ``ChatCompletion`` (or a stream helper's snapshot)."""
    choices = sorted(field(completion, "choices") or [], key=lambda c: field(c, "index") or 0)
    content = [_chat_message(field(c, "message")) for c in choices]
    ids, names = _chat_calls(content)
    usage = field(completion, "usage")
    return ResponseFacts(
        response_id=_str(field(completion, "id")),
        response_model=field(completion, "model"),
        finish_reasons=[r for r in (field(c, "finish_reason") for c in choices) if r],
        **_openai_usage(usage, "prompt", "completion"),
        tool_call_ids=ids,
        tool_call_names=names,
        content=content,
        response=_dumped(completion),
    )


class ChatAccumulator:
    """Folds ``chat.completions.create(stream=True)`` chunks into facts."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.response_id: str | None = None
        self.usage: Any = None
        self.choices: dict[int, dict[str, Any]] = {}
        self.finish: dict[int, str] = {}

    def add(self, chunk: Any) -> None:
        """Fold one chunk."""
        self.model = field(chunk, "model") or self.model
        self.response_id = _str(field(chunk, "id")) or self.response_id
        if field(chunk, "usage") is not None:
            self.usage = field(chunk, "usage")
        for choice in field(chunk, "choices") or []:
            index = field(choice, "index") or 0
            acc = self.choices.setdefault(index, {"content": None, "calls": {}})
            delta = field(choice, "delta")
            text = field(delta, "content")
            if isinstance(text, str):
                acc["content"] = (acc["content"] or "") + text
            for call in field(delta, "tool_calls") or []:
                at = field(call, "index") or 0
                entry = acc["calls"].setdefault(at, {"id": None, "name": "", "arguments": ""})
                entry["id"] = field(call, "id") or entry["id"]
                fn = field(call, "function")
                entry["name"] += field(fn, "name") or ""
                entry["arguments"] += field(fn, "arguments") or ""
            reason = field(choice, "finish_reason")
            if isinstance(reason, str):
                self.finish[index] = reason

    def facts(self) -> ResponseFacts:
        """The facts so far."""
        content = []
        for index in sorted(self.choices):
            acc = self.choices[index]
            message: dict[str, Any] = {"role": "assistant", "content": acc["content"]}
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for _, c in sorted(acc["calls"].items())
            ]
            if calls:
                message["tool_calls"] = calls
            content.append(message)
        ids, names = _chat_calls(content)
        return ResponseFacts(
            response_id=self.response_id,
            response_model=self.model,
            finish_reasons=[self.finish[i] for i in sorted(self.finish)],
            **_openai_usage(self.usage, "prompt", "completion"),
            tool_call_ids=ids,
            tool_call_names=names,
            content=content,
        )


# -- OpenAI Responses -----------------------------------------------------------------------


def responses_facts(response: Any) -> ResponseFacts:
    """Facts of an OpenAI Responses ``Response``."""
    output = [as_plain(item) for item in field(response, "output") or []]
    calls = [o for o in output if isinstance(o, dict) and o.get("type") == "function_call"]
    status = field(response, "status")
    if calls:
        reasons = ["tool_calls"]
    elif status == "completed":
        reasons = ["stop"]
    elif status == "incomplete":
        reason = field(field(response, "incomplete_details"), "reason")
        reasons = [reason] if isinstance(reason, str) else ["incomplete"]
    else:
        reasons = [status] if isinstance(status, str) else []
    usage = field(response, "usage")
    return ResponseFacts(
        response_id=_str(field(response, "id")),
        response_model=field(response, "model"),
        finish_reasons=reasons,
        **_openai_usage(usage, "input", "output"),
        tool_call_ids=[c["call_id"] for c in calls if c.get("call_id")],
        tool_call_names=[str(c.get("name")) for c in calls if c.get("call_id")],
        content=output,
        response=_dumped(response),
    )


class ResponsesAccumulator:
    """Keeps the last response snapshot of ``responses.create(stream=True)`` events."""

    def __init__(self) -> None:
        self.response: Any = None

    def add(self, event: Any) -> None:
        """Fold one event (``response.created`` … ``response.completed`` carry a snapshot)."""
        response = field(event, "response")
        if response is not None:
            self.response = response

    def facts(self) -> ResponseFacts:
        """The facts of the last snapshot (empty before the first)."""
        return ResponseFacts() if self.response is None else responses_facts(self.response)
