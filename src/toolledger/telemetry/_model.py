"""The span model: how a run or journal event becomes a span's name and raw attributes.

Rules of this module:

- Pure functions over the journal's dicts: no OpenTelemetry import, no I/O. Live spans
  (``_spans``) and re-exported spans (``_reexport``) both use it, so they agree.
- Attributes returned here are *raw*: the content/intent policy and ``redact`` are applied
  by the caller (``Policy.apply``) before anything is set. ``None`` means "not set".
- ``SPAN_ATTRIBUTES`` lists every attribute each span type may carry; ``docs/telemetry.md``
  is checked against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from . import attributes as a

__all__ = [
    "SPAN_ATTRIBUTES",
    "UPDATE_KEYS",
    "approval_outcome",
    "error_type",
    "event_end_attributes",
    "event_start_attributes",
    "event_type",
    "is_error",
    "link_ids",
    "run_end_attributes",
    "run_start_attributes",
    "span_name",
    "time_ns",
    "transition_attributes",
    "update_attributes",
]

_GENERIC = (a.TL_EVENT_ID, a.TL_EVENT_KIND)

#: Every attribute each span type may carry (content and intent included).
SPAN_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "invoke_agent": (
        a.GEN_AI_OPERATION_NAME,
        a.GEN_AI_AGENT_NAME,
        a.GEN_AI_CONVERSATION_ID,
        a.TL_RUN_ID,
        a.TL_INTENT_GOAL,
        a.TL_JOURNAL_HEAD_HASH,
        a.TL_JOURNAL_EVENT_COUNT,
        a.ERROR_TYPE,
    ),
    "execute_tool": (
        a.GEN_AI_OPERATION_NAME,
        a.GEN_AI_TOOL_NAME,
        a.GEN_AI_TOOL_CALL_ID,
        a.GEN_AI_TOOL_TYPE,
        a.GEN_AI_TOOL_DESCRIPTION,
        a.TL_EVENT_ID,
        a.TL_INTENT_JUSTIFICATION,
        a.TL_INTENT_JUSTIFICATION_SOURCE,
        a.TL_INTENT_JUSTIFICATION_MISSING,
        a.TL_CHECKPOINT_NAMESPACE,
        a.TL_CHECKPOINT_STATUS,
        a.TL_CHECKPOINT_REVISION,
        a.TL_CHECKPOINT_ACTION,
        a.TL_CHECKPOINT_REPLAYED,
        a.TL_CHECKPOINT_RECOVERED,
        a.TL_CHECKPOINT_DEDUPLICATED_FROM,
        a.GEN_AI_TOOL_CALL_ARGUMENTS,
        a.GEN_AI_TOOL_CALL_RESULT,
        a.ERROR_TYPE,
    ),
    "checkpoint": (
        a.TL_CHECKPOINT_TRANSITION,
        a.TL_CHECKPOINT_STATUS_FROM,
        a.TL_CHECKPOINT_STATUS_TO,
        a.TL_CHECKPOINT_EXPECTED_REVISION,
        a.TL_CHECKPOINT_REVISION,
        a.TL_CHECKPOINT_CAS,
    ),
    "step": (
        a.TL_EVENT_ID,
        a.TL_INTENT_JUSTIFICATION,
        a.TL_INTENT_JUSTIFICATION_SOURCE,
        a.TL_INTENT_JUSTIFICATION_MISSING,
        a.TL_STEP_INPUTS,
        a.TL_STEP_OUTPUTS,
        a.ERROR_TYPE,
    ),
    "approval": (
        a.TL_EVENT_ID,
        a.TL_APPROVAL_OUTCOME,
        a.TL_APPROVAL_BY,
        a.TL_APPROVAL_REASON,
        a.TL_APPROVAL_CALL_ID,
        a.GEN_AI_TOOL_CALL_ID,
    ),
    "chat": (
        a.GEN_AI_OPERATION_NAME,
        a.GEN_AI_PROVIDER_NAME,
        a.GEN_AI_REQUEST_MODEL,
        a.GEN_AI_RESPONSE_MODEL,
        a.GEN_AI_USAGE_INPUT_TOKENS,
        a.GEN_AI_USAGE_OUTPUT_TOKENS,
        a.GEN_AI_RESPONSE_FINISH_REASONS,
        a.TL_EVENT_ID,
        a.ERROR_TYPE,
    ),
    "other": (*_GENERIC, a.ERROR_TYPE),
}

#: Short keys the guard may pass to ``SpanHandle.update`` (full attribute names work too).
UPDATE_KEYS: Mapping[str, str] = {
    "status": a.TL_CHECKPOINT_STATUS,
    "checkpoint_status": a.TL_CHECKPOINT_STATUS,
    "checkpoint.status": a.TL_CHECKPOINT_STATUS,
    "action": a.TL_CHECKPOINT_ACTION,
    "checkpoint_action": a.TL_CHECKPOINT_ACTION,
    "checkpoint.action": a.TL_CHECKPOINT_ACTION,
    "revision": a.TL_CHECKPOINT_REVISION,
    "checkpoint_revision": a.TL_CHECKPOINT_REVISION,
    "checkpoint.revision": a.TL_CHECKPOINT_REVISION,
    "replayed": a.TL_CHECKPOINT_REPLAYED,
    "recovered": a.TL_CHECKPOINT_RECOVERED,
    "deduplicated_from": a.TL_CHECKPOINT_DEDUPLICATED_FROM,
    "description": a.GEN_AI_TOOL_DESCRIPTION,
    "tool_description": a.GEN_AI_TOOL_DESCRIPTION,
    "tool.description": a.GEN_AI_TOOL_DESCRIPTION,
    "call_id": a.GEN_AI_TOOL_CALL_ID,
    "namespace": a.TL_CHECKPOINT_NAMESPACE,
    "justification_source": a.TL_INTENT_JUSTIFICATION_SOURCE,
}
_CHECKPOINT_LINK: Mapping[str, str] = {
    "namespace": a.TL_CHECKPOINT_NAMESPACE,
    "call_id": a.GEN_AI_TOOL_CALL_ID,
    "revision": a.TL_CHECKPOINT_REVISION,
    "status": a.TL_CHECKPOINT_STATUS,
    "action": a.TL_CHECKPOINT_ACTION,
}
_LINK_KEYS = ("resumed_from", "link", "original_span")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def event_type(kind: Any) -> str:
    """Return the span type of a journal event kind."""
    if kind == "tool_call":
        return "execute_tool"
    if kind in ("step", "approval"):
        return str(kind)
    if kind == "llm_call":
        return "chat"
    return "other"


def span_name(kind: str, name: Any) -> str:
    """Return the span name for a span type (``invoke_agent`` and event kinds)."""
    label = "" if name is None else str(name)
    if kind == "invoke_agent":
        return a.SPAN_INVOKE_AGENT.format(label).rstrip()
    if kind in ("tool_call", "execute_tool"):
        return a.SPAN_EXECUTE_TOOL.format(label).rstrip()
    if kind == "step":
        return a.SPAN_STEP.format(label).rstrip()
    if kind == "approval":
        return a.SPAN_APPROVAL.format(label).rstrip()
    if kind == "checkpoint":
        return a.SPAN_CHECKPOINT.format(label).rstrip()
    if kind in ("llm_call", "chat"):
        return a.SPAN_CHAT.format(label).rstrip()
    return kind if label in ("", kind) else f"{kind} {label}"  # a note is "note", not "note note"


def run_start_attributes(run: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes of an ``invoke_agent`` span at its start."""
    run_id = run.get("run_id")
    return {
        a.GEN_AI_OPERATION_NAME: a.OPERATION_INVOKE_AGENT,
        a.GEN_AI_AGENT_NAME: run.get("agent"),
        a.GEN_AI_CONVERSATION_ID: run_id,
        a.TL_RUN_ID: run_id,
        a.TL_INTENT_GOAL: run.get("goal"),
    }


def run_end_attributes(run: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes of an ``invoke_agent`` span at its end (journal head and count)."""
    found = run.get("journal")
    journal: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    head = run.get("head_hash", journal.get("head_hash"))
    count = run.get("event_count", journal.get("event_count"))
    return {a.TL_JOURNAL_HEAD_HASH: head, a.TL_JOURNAL_EVENT_COUNT: count}


def _meta(event: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = event.get("meta")
    return meta if isinstance(meta, Mapping) else {}


def _first(event: Mapping[str, Any], key: str) -> Any:
    value = event.get(key)
    return _meta(event).get(key) if value is None else value


def _checkpoint(event: Mapping[str, Any]) -> Mapping[str, Any]:
    cp = event.get("checkpoint")
    return cp if isinstance(cp, Mapping) else {}


def _intent(event: Mapping[str, Any]) -> dict[str, Any]:
    missing = _first(event, "justification_missing")
    return {
        a.TL_INTENT_JUSTIFICATION: event.get("justification"),
        a.TL_INTENT_JUSTIFICATION_SOURCE: _first(event, "justification_source"),
        a.TL_INTENT_JUSTIFICATION_MISSING: True if missing else None,
    }


def approval_outcome(approval: Mapping[str, Any]) -> str:
    """Return ``allow``, ``deny`` or ``require_approval`` for an approval dict."""
    outcome = approval.get("outcome")
    if outcome in (a.APPROVAL_ALLOW, a.APPROVAL_DENY, a.APPROVAL_REQUIRE):
        return str(outcome)
    granted = approval.get("granted")
    if granted is True:
        return a.APPROVAL_ALLOW
    if granted is False:
        return a.APPROVAL_DENY
    return a.APPROVAL_REQUIRE


def event_start_attributes(event: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes of an event span at its start (sampling-relevant ones included)."""
    kind = event_type(event.get("kind"))
    event_id = event.get("event_id")
    if kind == "execute_tool":
        cp = _checkpoint(event)
        meta = _meta(event)
        return {
            a.GEN_AI_OPERATION_NAME: a.OPERATION_EXECUTE_TOOL,
            a.GEN_AI_TOOL_NAME: event.get("name"),
            a.GEN_AI_TOOL_CALL_ID: cp.get("call_id", meta.get("call_id")),
            a.GEN_AI_TOOL_TYPE: a.TOOL_TYPE_FUNCTION,
            a.GEN_AI_TOOL_DESCRIPTION: meta.get("tool_description", meta.get("description")),
            a.TL_EVENT_ID: event_id,
            a.TL_CHECKPOINT_NAMESPACE: cp.get("namespace"),
            **_intent(event),
            a.GEN_AI_TOOL_CALL_ARGUMENTS: event.get("inputs") or None,
        }
    if kind == "step":
        return {
            a.TL_EVENT_ID: event_id,
            **_intent(event),
            a.TL_STEP_INPUTS: event.get("inputs") or None,
        }
    if kind == "approval":
        approval = event.get("approval")
        ap: Mapping[str, Any] = approval if isinstance(approval, Mapping) else {}
        return {
            a.TL_EVENT_ID: event_id,
            a.TL_APPROVAL_OUTCOME: approval_outcome(ap),
            a.TL_APPROVAL_BY: ap.get("by"),
            a.TL_APPROVAL_REASON: ap.get("reason"),
            a.TL_APPROVAL_CALL_ID: ap.get("for_call"),
            # Mirrors the proposed ``gen_ai.tool.call.decision`` event: the bound call's id.
            a.GEN_AI_TOOL_CALL_ID: ap.get("for_call"),
        }
    if kind == "chat":  # a model call (issue 8): provider and requested model in meta
        meta = _meta(event)
        return {
            a.GEN_AI_OPERATION_NAME: a.OPERATION_CHAT,
            a.GEN_AI_PROVIDER_NAME: meta.get("provider"),
            a.GEN_AI_REQUEST_MODEL: meta.get("model", event.get("name")),
            a.TL_EVENT_ID: event_id,
        }
    return {a.TL_EVENT_ID: event_id, a.TL_EVENT_KIND: event.get("kind")}


def event_end_attributes(event: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes an event's final form adds at the span's end."""
    kind = event_type(event.get("kind"))
    if kind == "execute_tool":
        cp = _checkpoint(event)
        meta = _meta(event)
        out: dict[str, Any] = {
            a.TL_CHECKPOINT_REVISION: cp.get("revision"),
            a.TL_CHECKPOINT_STATUS: cp.get("status", meta.get("checkpoint_status")),
            a.TL_CHECKPOINT_ACTION: cp.get("action", meta.get("checkpoint_action")),
            a.TL_CHECKPOINT_REPLAYED: meta.get("replayed"),
            a.TL_CHECKPOINT_RECOVERED: meta.get("recovered"),
            a.TL_CHECKPOINT_DEDUPLICATED_FROM: meta.get("deduplicated_from"),
            a.GEN_AI_TOOL_CALL_RESULT: _result(event),
        }
        return out
    if kind == "step":
        return {a.TL_STEP_OUTPUTS: event.get("outputs") or None}
    if kind == "approval":
        return event_start_attributes(event)
    if kind == "chat":
        meta = _meta(event)
        usage = meta.get("usage")
        tokens: Mapping[str, Any] = usage if isinstance(usage, Mapping) else {}
        return {
            a.GEN_AI_RESPONSE_MODEL: meta.get("response_model"),
            a.GEN_AI_USAGE_INPUT_TOKENS: tokens.get("input_tokens"),
            a.GEN_AI_USAGE_OUTPUT_TOKENS: tokens.get("output_tokens"),
            a.GEN_AI_RESPONSE_FINISH_REASONS: meta.get("finish_reasons") or None,
        }
    return {}


def _result(event: Mapping[str, Any]) -> Any:
    outputs = event.get("outputs")
    if (
        isinstance(outputs, Mapping)
        and "result" in outputs
        and set(outputs) <= {"result", "is_error"}
    ):
        return outputs["result"]  # the guard's shape: {"result": payload, "is_error": bool}
    return outputs if outputs not in (None, {}) else None


def update_attributes(facts: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Map facts passed to ``SpanHandle.update`` to raw attributes allowed on ``kind``."""
    allowed = SPAN_ATTRIBUTES.get(kind, ())
    out: dict[str, Any] = {}
    cp = facts.get("checkpoint")
    if isinstance(cp, Mapping):  # the journal's checkpoint link
        for key, name in _CHECKPOINT_LINK.items():
            if cp.get(key) is not None and name in allowed:
                out[name] = cp[key]
    for key, value in facts.items():
        if key == "checkpoint":
            continue
        name = UPDATE_KEYS.get(key, key)
        if name in allowed:
            out[name] = value
    return out


def link_ids(facts: Mapping[str, Any]) -> tuple[str, str] | None:
    """Return ``(trace_id, span_id)`` hex of the span a resumed call links to, if given."""
    for key in _LINK_KEYS:
        target = facts.get(key)
        if target is None:
            continue
        if isinstance(target, Mapping):
            trace_id, span_id = target.get("trace_id"), target.get("span_id")
        else:
            trace_id = getattr(target, "trace_id", None)
            span_id = getattr(target, "span_id", None)
        if isinstance(trace_id, str) and isinstance(span_id, str):
            return trace_id, span_id
    return None


def transition_attributes(
    *,
    name: str,
    status_from: Any,
    status_to: Any,
    expected_revision: int,
    revision: int,
    won: bool,
) -> dict[str, Any]:
    """Raw attributes of a ``checkpoint {transition}`` span."""
    return {
        a.TL_CHECKPOINT_TRANSITION: name,
        a.TL_CHECKPOINT_STATUS_FROM: status_from,
        a.TL_CHECKPOINT_STATUS_TO: status_to,
        a.TL_CHECKPOINT_EXPECTED_REVISION: expected_revision,
        a.TL_CHECKPOINT_REVISION: revision,
        a.TL_CHECKPOINT_CAS: a.CAS_WON if won else a.CAS_LOST,
    }


def _error_result(event: Mapping[str, Any]) -> Any:
    """The stored error result of a tool call (``on_error="result"``), else ``None``."""
    outputs = event.get("outputs")
    if isinstance(outputs, Mapping) and outputs.get("is_error") is True:
        result = outputs.get("result")
        return result if result is not None else {}
    return None


def is_error(event: Mapping[str, Any], error: BaseException | None) -> bool:
    """Return whether the span ends with status ERROR.

    A tool call whose stored result is an error (the guard's ``on_error="result"``: the
    model is told) is an error too.
    """
    return (
        error is not None
        or event.get("status") == "failed"
        or bool(event.get("error"))
        or _error_result(event) is not None
    )


def error_type(event: Mapping[str, Any], error: BaseException | None) -> str | None:
    """Return ``error.type``: a toolledger error code, else the exception's ``__qualname__``."""
    if error is not None:
        code = getattr(error, "code", None)
        if isinstance(code, str) and code and hasattr(error, "details"):
            return code
        return type(error).__qualname__
    err = event.get("error")
    if isinstance(err, Mapping):
        for key in ("code", "type"):
            if isinstance(err.get(key), str) and err[key]:
                return str(err[key])
    if isinstance(err, str) and err:
        return err
    result = _error_result(event)
    if isinstance(result, Mapping) and isinstance(result.get("error"), str) and result["error"]:
        return str(result["error"])  # the guard stores the exception's qualname here
    if event.get("status") == "failed" or result is not None:
        return "_OTHER"
    return None


def time_ns(value: Any) -> int | None:
    """Return an ISO-8601 time (or datetime) as nanoseconds since the epoch, else ``None``."""
    try:
        if isinstance(value, str):
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif isinstance(value, datetime):
            dt = value
        else:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return ((dt - _EPOCH) // _US) * 1000
    except (ValueError, TypeError, OverflowError):
        return None
