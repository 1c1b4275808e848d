"""OpenInference keys (what Phoenix, Arize and Langfuse display) projected from our attributes.

Rules of this module:

- A pure projection of attributes the policy already allowed (and ``redact`` already saw):
  it never reads the journal, so it can never show what the GenAI attributes do not
  (content only with capture on, intent only with intent on, redacted values redacted).
- Where the GenAI conventions have no field for what these backends display (a span's
  kind, input, output, metadata), this is where it comes from. ``Policy.openinference``
  (``configure(openinference=False)`` or ``TOOLLEDGER_OPENINFERENCE=false``) leaves it out.
- No OpenTelemetry import, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from . import attributes as a

__all__ = ["SPAN_KINDS", "project"]

#: The OpenInference span kind of each span type.
SPAN_KINDS: Mapping[str, str] = {
    "invoke_agent": a.OI_AGENT,
    "execute_tool": a.OI_TOOL,
    "replay_tool": a.OI_CHAIN,
    "recover_tool": a.OI_CHAIN,
    # The framework's span is the call's TOOL span; toolledger's child is the guard on it.
    "guard_tool": a.OI_GUARDRAIL,
    "chat": a.OI_LLM,
    "step": a.OI_CHAIN,
    "approval": a.OI_GUARDRAIL,
    "note": a.OI_CHAIN,
    "artifact": a.OI_CHAIN,
    "other": a.OI_CHAIN,
}
_META_KEYS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "invoke_agent": (("run_id", a.TL_RUN_ID), ("event_count", a.TL_JOURNAL_EVENT_COUNT)),
    "execute_tool": (
        ("call_id", a.GEN_AI_TOOL_CALL_ID),
        ("outcome", a.TL_TOOL_OUTCOME),
        ("justification", a.TL_INTENT_JUSTIFICATION),
        ("justification_source", a.TL_INTENT_JUSTIFICATION_SOURCE),
        ("checkpoint_status", a.TL_CHECKPOINT_STATUS),
        ("checkpoint_revision", a.TL_CHECKPOINT_REVISION),
    ),
    "replay_tool": (
        ("tool", a.TL_TOOL_NAME),
        ("call_id", a.TL_TOOL_CALL_ID),
        ("outcome", a.TL_TOOL_OUTCOME),
        ("deduplicated_from", a.TL_CHECKPOINT_DEDUPLICATED_FROM),
        ("justification", a.TL_INTENT_JUSTIFICATION),
        ("checkpoint_status", a.TL_CHECKPOINT_STATUS),
        ("checkpoint_revision", a.TL_CHECKPOINT_REVISION),
    ),
    "step": (("justification", a.TL_INTENT_JUSTIFICATION),),
    "approval": (
        ("tool", a.TL_TOOL_NAME),
        ("call_id", a.TL_APPROVAL_CALL_ID),
        ("decision", a.TL_APPROVAL_OUTCOME),
        ("by", a.TL_APPROVAL_BY),
        ("reason", a.TL_APPROVAL_REASON),
    ),
    "artifact": (
        ("sha256", a.TL_ARTIFACT_SHA256),
        ("media_type", a.TL_ARTIFACT_MEDIA_TYPE),
        ("size", a.TL_ARTIFACT_SIZE),
    ),
}
_META_KEYS = {
    **_META_KEYS,
    "recover_tool": _META_KEYS["replay_tool"],
    "guard_tool": _META_KEYS["replay_tool"],
}
#: (input key, output key, mime type) per span type.
_IO: Mapping[str, tuple[str | None, str | None, str]] = {
    "invoke_agent": (a.TL_INTENT_GOAL, a.TL_RUN_SUMMARY, a.MIME_TEXT),
    "execute_tool": (a.GEN_AI_TOOL_CALL_ARGUMENTS, a.GEN_AI_TOOL_CALL_RESULT, a.MIME_JSON),
    "replay_tool": (a.TL_TOOL_ARGUMENTS, a.TL_TOOL_RESULT, a.MIME_JSON),
    "recover_tool": (a.TL_TOOL_ARGUMENTS, a.TL_TOOL_RESULT, a.MIME_JSON),
    "guard_tool": (a.TL_TOOL_ARGUMENTS, a.TL_TOOL_RESULT, a.MIME_JSON),
    "chat": (a.GEN_AI_INPUT_MESSAGES, a.GEN_AI_OUTPUT_MESSAGES, a.MIME_JSON),
    "step": (a.TL_STEP_INPUTS, a.TL_STEP_OUTPUTS, a.MIME_JSON),
    "approval": (a.TL_TOOL_NAME, a.TL_APPROVAL_OUTCOME, a.MIME_TEXT),
    "note": (a.TL_NOTE_TEXT, None, a.MIME_TEXT),
}


def _metadata_encoder() -> Callable[[Mapping[str, Any]], str]:
    """``json.dumps(meta, ensure_ascii=False, default=str)`` without a C encoder per call.

    ``JSONEncoder.encode`` builds one per call; metadata is a flat mapping of attribute
    values (never a cycle), so one encoder made once, without cycle markers, writes the
    same text.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover (no C accelerator: PyPy, some builds)
        return json.JSONEncoder(ensure_ascii=False, default=str).encode
    encode = make(None, str, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)

    def dumps(meta: Mapping[str, Any]) -> str:
        return "".join(encode(meta, 0))

    return dumps


_METADATA_JSON = _metadata_encoder()


def _loads(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


def _flatten(prefix: str, messages: Any, out: dict[str, Any]) -> None:
    """``llm.input_messages.{i}.message.role/content/tool_calls…`` from GenAI messages."""
    if not isinstance(messages, list):
        return
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        base = f"{prefix}.{i}.message"
        out[f"{base}.role"] = str(message.get("role", ""))
        texts: list[str] = []
        calls = 0
        for part in message.get("parts") or []:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                call = f"{base}.tool_calls.{calls}.tool_call"
                out[f"{call}.id"] = str(part.get("id"))
                out[f"{call}.function.name"] = str(part.get("name"))
                out[f"{call}.function.arguments"] = json.dumps(
                    part.get("arguments"), ensure_ascii=False
                )
                calls += 1
            elif kind == "tool_call_response":
                out[f"{base}.tool_call_id"] = str(part.get("id"))
                response = part.get("response")
                texts.append(
                    response if isinstance(response, str) else json.dumps(response, default=str)
                )
        if texts:
            out[f"{base}.content"] = "\n".join(texts)


def _llm(attrs: Mapping[str, Any], out: dict[str, Any]) -> None:
    model = attrs.get(a.GEN_AI_RESPONSE_MODEL, attrs.get(a.GEN_AI_REQUEST_MODEL))
    if model is not None:
        out[a.OI_LLM_MODEL_NAME] = model
    if a.GEN_AI_PROVIDER_NAME in attrs:
        out[a.OI_LLM_PROVIDER] = attrs[a.GEN_AI_PROVIDER_NAME]
    prompt = attrs.get(a.GEN_AI_USAGE_INPUT_TOKENS)
    completion = attrs.get(a.GEN_AI_USAGE_OUTPUT_TOKENS)
    for key, value in (
        (a.OI_LLM_TOKEN_PROMPT, prompt),
        (a.OI_LLM_TOKEN_COMPLETION, completion),
        (a.OI_LLM_TOKEN_CACHE_READ, attrs.get(a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
        (a.OI_LLM_TOKEN_CACHE_WRITE, attrs.get(a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)),
    ):
        if value is not None:
            out[key] = value
    if isinstance(prompt, int) and isinstance(completion, int):
        out[a.OI_LLM_TOKEN_TOTAL] = prompt + completion
    params = {
        key.removeprefix("gen_ai.request."): value
        for key, value in attrs.items()
        if key.startswith("gen_ai.request.") and key != a.GEN_AI_REQUEST_MODEL
    }
    if params:
        out[a.OI_LLM_INVOCATION_PARAMETERS] = json.dumps(
            {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(params.items())}
        )
    system = _loads(attrs.get(a.GEN_AI_SYSTEM_INSTRUCTIONS))
    history = _loads(attrs.get(a.GEN_AI_INPUT_MESSAGES))
    if isinstance(history, list):
        if isinstance(system, list):
            history = [{"role": "system", "parts": system}, *history]
        _flatten(a.OI_LLM_INPUT_MESSAGES, history, out)
    _flatten(a.OI_LLM_OUTPUT_MESSAGES, _loads(attrs.get(a.GEN_AI_OUTPUT_MESSAGES)), out)


def project(kind: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Return the OpenInference attributes of a span of type ``kind`` with ``attrs`` set."""
    out: dict[str, Any] = {a.OI_SPAN_KIND: SPAN_KINDS.get(kind, a.OI_CHAIN)}
    conversation = attrs.get(a.GEN_AI_CONVERSATION_ID)
    if conversation is not None:
        out[a.OI_SESSION_ID] = conversation
    io = _IO.get(kind)
    if io is not None:
        key_in, key_out, mime = io
        if key_in is not None and attrs.get(key_in) is not None:
            out[a.OI_INPUT_VALUE] = attrs[key_in]
            out[a.OI_INPUT_MIME_TYPE] = mime
        if key_out is not None and attrs.get(key_out) is not None:
            out[a.OI_OUTPUT_VALUE] = attrs[key_out]
            out[a.OI_OUTPUT_MIME_TYPE] = mime
    if kind == "execute_tool":
        if a.GEN_AI_TOOL_NAME in attrs:
            out[a.OI_TOOL_NAME] = attrs[a.GEN_AI_TOOL_NAME]
        if a.GEN_AI_TOOL_DESCRIPTION in attrs:
            out[a.OI_TOOL_DESCRIPTION] = attrs[a.GEN_AI_TOOL_DESCRIPTION]
    elif kind == "chat":
        _llm(attrs, out)
    meta = {name: attrs[key] for name, key in _META_KEYS.get(kind, ()) if key in attrs}
    if meta:
        out[a.OI_METADATA] = _METADATA_JSON(meta)
    return out
