"""The span model: how a run or journal event becomes a span's name and raw attributes.

Rules of this module:

- Pure functions over the journal's dicts: no OpenTelemetry import, no I/O. Live spans
  (``_spans``) and re-exported spans (``_reexport``) both use it, so they agree: a span's
  final name and attributes come from ``finish(kind, raw)`` in both.
- Attributes returned here are *raw*: the content/intent policy and ``redact`` are applied
  by the caller (``Policy.apply``) before anything is set, then ``_openinference`` projects
  the allowed attributes onto the keys Phoenix/Langfuse read. ``None`` means "not set".
- A tool call's span type is decided when it ends: ``execute_tool`` (the tool ran),
  ``replay_tool`` (a stored result was returned: this call's, or with an effect key another
  call's) or ``recover_tool`` (``recover`` proved an earlier attempt's outcome). Only
  ``execute_tool`` carries ``gen_ai.operation.name`` and the ``gen_ai.tool.*`` attributes,
  so no backend counts a replay as an execution.
- ``SPAN_ATTRIBUTES`` lists every attribute each span type may carry
  (``TRANSITION_ATTRIBUTES`` the checkpoint transition events'); ``docs/telemetry.md`` is
  checked against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from ..checkpoint.model import parse_iso
from . import _messages
from . import attributes as a
from ._hooks import CallFacts
from ._policy import to_json_text

__all__ = [
    "CONTEXT_KEYS",
    "FACT_KEYS",
    "SPAN_ATTRIBUTES",
    "TRANSITION_ATTRIBUTES",
    "approval_outcome",
    "call_attributes",
    "context_attributes",
    "error_type",
    "event_end_attributes",
    "event_start_attributes",
    "event_type",
    "finish",
    "is_error",
    "link_ids",
    "run_end_attributes",
    "run_start_attributes",
    "span_name",
    "status_description",
    "time_ns",
    "transition_event",
    "transition_times",
    "update_attributes",
]

#: What every GenAI span of a run (``execute_tool``, ``chat``) carries about the run.
CONTEXT_KEYS = (a.GEN_AI_CONVERSATION_ID, a.GEN_AI_AGENT_NAME, a.USER_ID)
_INTENT = (
    a.TL_INTENT_JUSTIFICATION,
    a.TL_INTENT_JUSTIFICATION_SOURCE,
    a.TL_INTENT_JUSTIFICATION_MISSING,
)
_CHECKPOINT = (
    a.TL_CHECKPOINT_NAMESPACE,
    a.TL_CHECKPOINT_STATUS,
    a.TL_CHECKPOINT_REVISION,
    a.TL_CHECKPOINT_ACTION,
)
_REQUEST = {
    "temperature": a.GEN_AI_REQUEST_TEMPERATURE,
    "max_tokens": a.GEN_AI_REQUEST_MAX_TOKENS,
    "top_p": a.GEN_AI_REQUEST_TOP_P,
    "top_k": a.GEN_AI_REQUEST_TOP_K,
    "stop_sequences": a.GEN_AI_REQUEST_STOP_SEQUENCES,
    "seed": a.GEN_AI_REQUEST_SEED,
    "frequency_penalty": a.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": a.GEN_AI_REQUEST_PRESENCE_PENALTY,
}

#: Every attribute each span type may carry (content and intent included).
SPAN_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "invoke_agent": (
        a.GEN_AI_OPERATION_NAME,
        *CONTEXT_KEYS,
        a.TL_RUN_ID,
        a.TL_INTENT_GOAL,
        a.TL_RUN_SUMMARY,
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
        *CONTEXT_KEYS,
        a.TL_EVENT_ID,
        a.TL_TOOL_OUTCOME,
        *_INTENT,
        *_CHECKPOINT,
        a.GEN_AI_TOOL_CALL_ARGUMENTS,
        a.GEN_AI_TOOL_CALL_RESULT,
        a.ERROR_TYPE,
    ),
    "replay_tool": (
        a.TL_TOOL_NAME,
        a.TL_TOOL_CALL_ID,
        *CONTEXT_KEYS,
        a.TL_EVENT_ID,
        a.TL_TOOL_OUTCOME,
        *_INTENT,
        *_CHECKPOINT,
        a.TL_CHECKPOINT_DEDUPLICATED_FROM,
        a.TL_TOOL_ARGUMENTS,
        a.TL_TOOL_RESULT,
        a.ERROR_TYPE,
    ),
    "step": (
        a.TL_EVENT_ID,
        *_INTENT,
        a.TL_STEP_INPUTS,
        a.TL_STEP_OUTPUTS,
        a.ERROR_TYPE,
    ),
    "approval": (
        a.TL_EVENT_ID,
        a.TL_TOOL_NAME,
        a.TL_APPROVAL_OUTCOME,
        a.TL_APPROVAL_BY,
        a.TL_APPROVAL_REASON,
        a.TL_APPROVAL_CALL_ID,
    ),
    "chat": (
        a.GEN_AI_OPERATION_NAME,
        a.GEN_AI_PROVIDER_NAME,
        a.GEN_AI_REQUEST_MODEL,
        *_REQUEST.values(),
        a.GEN_AI_REQUEST_STREAM,
        a.SERVER_ADDRESS,
        a.SERVER_PORT,
        *CONTEXT_KEYS,
        a.GEN_AI_RESPONSE_MODEL,
        a.GEN_AI_RESPONSE_ID,
        a.GEN_AI_RESPONSE_FINISH_REASONS,
        a.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        a.GEN_AI_USAGE_INPUT_TOKENS,
        a.GEN_AI_USAGE_OUTPUT_TOKENS,
        a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        a.GEN_AI_SYSTEM_INSTRUCTIONS,
        a.GEN_AI_INPUT_MESSAGES,
        a.GEN_AI_OUTPUT_MESSAGES,
        a.TL_CHAT_TOOL_CALL_NAMES,
        a.TL_CHAT_TOOL_CALL_IDS,
        a.TL_EVENT_ID,
        a.ERROR_TYPE,
    ),
    "note": (a.TL_EVENT_ID, a.TL_EVENT_KIND, a.TL_NOTE_TEXT),
    "artifact": (
        a.TL_EVENT_ID,
        a.TL_EVENT_KIND,
        a.TL_ARTIFACT_SHA256,
        a.TL_ARTIFACT_MEDIA_TYPE,
        a.TL_ARTIFACT_SIZE,
    ),
    "other": (a.TL_EVENT_ID, a.TL_EVENT_KIND, a.ERROR_TYPE),
}
SPAN_ATTRIBUTES = {
    **SPAN_ATTRIBUTES,
    "recover_tool": SPAN_ATTRIBUTES["replay_tool"],
    "guard_tool": SPAN_ATTRIBUTES["replay_tool"],
}

#: Attributes of a ``checkpoint {transition}`` event on a tool call's span (the last three
#: only on a lost CAS: ``transition_event``).
TRANSITION_ATTRIBUTES = (
    a.TL_CHECKPOINT_STATUS_TO,
    a.TL_CHECKPOINT_REVISION,
    a.TL_CHECKPOINT_STATUS_FROM,
    a.TL_CHECKPOINT_EXPECTED_REVISION,
    a.TL_CHECKPOINT_CAS,
)

#: The facts ``SpanHandle.update`` accepts: one spelling each (anything else is ignored,
#: so the journal can pass an event's meta whole). ``checkpoint`` is the journal's link
#: ``{"namespace", "call_id", "revision"}``; ``link`` is ``{"trace_id", "span_id"}``.
FACT_KEYS: Mapping[str, str] = {
    "checkpoint.status": a.TL_CHECKPOINT_STATUS,
    "checkpoint.revision": a.TL_CHECKPOINT_REVISION,
    "checkpoint.action": a.TL_CHECKPOINT_ACTION,
    "tool.description": a.GEN_AI_TOOL_DESCRIPTION,
    "replayed": "replayed",
    "recovered": "recovered",
    "deduplicated_from": a.TL_CHECKPOINT_DEDUPLICATED_FROM,
}
_CHECKPOINT_LINK: Mapping[str, str] = {
    "namespace": a.TL_CHECKPOINT_NAMESPACE,
    "call_id": a.GEN_AI_TOOL_CALL_ID,
    "revision": a.TL_CHECKPOINT_REVISION,
    "status": a.TL_CHECKPOINT_STATUS,
    "action": a.TL_CHECKPOINT_ACTION,
}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_OTHER = {"note": "note", "artifact": "artifact"}


def event_type(kind: Any) -> str:
    """Return the span type of a journal event kind (a tool call's, until it ends)."""
    if kind == "tool_call":
        return "execute_tool"
    if kind in ("step", "approval"):
        return str(kind)
    if kind == "llm_call":
        return "chat"
    return _OTHER.get(kind, "other") if isinstance(kind, str) else "other"


_NAMES = {
    "invoke_agent": a.SPAN_INVOKE_AGENT,
    "execute_tool": a.SPAN_EXECUTE_TOOL,
    "tool_call": a.SPAN_EXECUTE_TOOL,
    "replay_tool": a.SPAN_REPLAY_TOOL,
    "guard_tool": a.SPAN_GUARD_TOOL,
    "recover_tool": a.SPAN_RECOVER_TOOL,
    "step": a.SPAN_STEP,
    "approval": a.SPAN_APPROVAL,
    "checkpoint": a.SPAN_CHECKPOINT,
    "chat": a.SPAN_CHAT,
    "llm_call": a.SPAN_CHAT,
}


def span_name(kind: str, name: Any) -> str:
    """Return the span name for a span type (``invoke_agent`` and event kinds)."""
    label = "" if name is None else str(name)
    template = _NAMES.get(kind)
    if template is not None:
        return template.format(label).rstrip()
    return kind if label in ("", kind) else f"{kind} {label}"  # a note is "note", not "note note"


def context_attributes(run: Mapping[str, Any]) -> dict[str, Any]:
    """What each GenAI span of ``run`` carries about it (conversation, agent, user)."""
    return {
        a.GEN_AI_CONVERSATION_ID: run.get("conversation_id"),
        a.GEN_AI_AGENT_NAME: run.get("agent"),
        a.USER_ID: run.get("user_id"),
    }


def run_start_attributes(run: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes of an ``invoke_agent`` span at its start."""
    return {
        a.GEN_AI_OPERATION_NAME: a.OPERATION_INVOKE_AGENT,
        **context_attributes(run),
        a.TL_RUN_ID: run.get("run_id"),
        a.TL_INTENT_GOAL: run.get("goal"),
    }


def run_end_attributes(run: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes of an ``invoke_agent`` span at its end (summary, journal head, count)."""
    found = run.get("journal")
    journal: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    head = run.get("head_hash", journal.get("head_hash"))
    count = run.get("event_count", journal.get("event_count"))
    return {
        a.TL_RUN_SUMMARY: run.get("summary"),
        a.TL_JOURNAL_HEAD_HASH: head,
        a.TL_JOURNAL_EVENT_COUNT: count,
    }


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


def _approval(event: Mapping[str, Any]) -> dict[str, Any]:
    approval = event.get("approval")
    ap: Mapping[str, Any] = approval if isinstance(approval, Mapping) else {}
    return {
        a.TL_EVENT_ID: event.get("event_id"),
        a.TL_TOOL_NAME: event.get("name"),
        a.TL_APPROVAL_OUTCOME: approval_outcome(ap),
        a.TL_APPROVAL_BY: ap.get("by"),
        a.TL_APPROVAL_REASON: ap.get("reason"),
        a.TL_APPROVAL_CALL_ID: ap.get("for_call"),
    }


def _chat_start(event: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(event)
    request = meta.get("request")
    params: Mapping[str, Any] = request if isinstance(request, Mapping) else {}
    server = meta.get("server")
    srv: Mapping[str, Any] = server if isinstance(server, Mapping) else {}
    out: dict[str, Any] = {
        a.GEN_AI_OPERATION_NAME: a.OPERATION_CHAT,
        a.GEN_AI_PROVIDER_NAME: meta.get("provider"),
        a.GEN_AI_REQUEST_MODEL: meta.get("model", event.get("name")),
    }
    for key, name in _REQUEST.items():
        value = params.get(key)
        out[name] = list(value) if isinstance(value, (list, tuple)) else value
    out[a.GEN_AI_REQUEST_STREAM] = True if meta.get("stream") else None
    out[a.SERVER_ADDRESS] = srv.get("address")
    out[a.SERVER_PORT] = srv.get("port")
    out[a.TL_EVENT_ID] = event.get("event_id")
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(provider: Any, usage: Mapping[str, Any]) -> dict[str, Any]:
    """Token counts as the conventions define them, from what the provider reported.

    Anthropic reports uncached input apart from cache reads and writes; the conventions'
    ``gen_ai.usage.input_tokens`` is their sum. OpenAI's prompt tokens already include
    cached ones.
    """
    base = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    total = base
    if provider == "anthropic" and base is not None:
        total = base + (read or 0) + (write or 0)
    return {
        a.GEN_AI_USAGE_INPUT_TOKENS: total,
        a.GEN_AI_USAGE_OUTPUT_TOKENS: _int(usage.get("output_tokens")),
        a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: read,
        a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: write,
        a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: _int(usage.get("reasoning_output_tokens")),
    }


def _json_or_none(value: Any) -> str | None:
    return None if value is None else to_json_text(value)


def _chat_end(event: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(event)
    usage = meta.get("usage")
    api = meta.get("api", meta.get("provider"))
    reasons = meta.get("finish_reasons") or None
    calls = meta.get("tool_calls")
    requested = [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []
    return {
        a.TL_CHAT_TOOL_CALL_NAMES: [str(c.get("name")) for c in requested] or None,
        a.TL_CHAT_TOOL_CALL_IDS: [str(c.get("id")) for c in requested] or None,
        a.GEN_AI_RESPONSE_MODEL: meta.get("response_model"),
        a.GEN_AI_RESPONSE_ID: meta.get("response_id"),
        a.GEN_AI_RESPONSE_FINISH_REASONS: reasons,
        a.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: meta.get("time_to_first_chunk"),
        **_usage(meta.get("provider"), usage if isinstance(usage, Mapping) else {}),
        a.GEN_AI_SYSTEM_INSTRUCTIONS: _json_or_none(
            _messages.system_instructions(api, event.get("inputs"))
        ),
        a.GEN_AI_INPUT_MESSAGES: _json_or_none(_messages.input_messages(api, event.get("inputs"))),
        a.GEN_AI_OUTPUT_MESSAGES: _json_or_none(
            _messages.output_messages(api, event.get("outputs"), reasons)
        ),
    }


def event_start_attributes(event: Mapping[str, Any], kind: str | None = None) -> dict[str, Any]:
    """Raw attributes of an event span at its start (sampling-relevant ones included).

    A tool call starts with only toolledger's attributes: whether it is an execution is
    known when it ends (``finish``). ``kind``: the event's span type, when already known.
    """
    if kind is None:
        kind = event_type(event.get("kind"))
    event_id = event.get("event_id")
    if kind == "execute_tool":
        return {
            a.TL_EVENT_ID: event_id,
            a.TL_CHECKPOINT_NAMESPACE: _checkpoint(event).get("namespace"),
            **_intent(event),
        }
    if kind == "step":
        return {
            a.TL_EVENT_ID: event_id,
            **_intent(event),
            a.TL_STEP_INPUTS: event.get("inputs") or None,
        }
    if kind == "approval":
        return _approval(event)
    if kind == "chat":
        return _chat_start(event)
    return {a.TL_EVENT_ID: event_id, a.TL_EVENT_KIND: event.get("kind")}


def event_end_attributes(event: Mapping[str, Any]) -> dict[str, Any]:
    """Raw attributes an event's final form adds at the span's end."""
    kind = event_type(event.get("kind"))
    if kind == "execute_tool":
        cp = _checkpoint(event)
        meta = _meta(event)
        return {
            a.GEN_AI_TOOL_NAME: event.get("name"),
            a.GEN_AI_TOOL_CALL_ID: cp.get("call_id", meta.get("call_id")),
            a.TL_CHECKPOINT_REVISION: cp.get("revision"),
            "replayed": meta.get("replayed"),
            "recovered": meta.get("recovered"),
            a.TL_CHECKPOINT_DEDUPLICATED_FROM: meta.get("deduplicated_from"),
            _REFUSED: event.get("status") == "refused" or None,
            a.GEN_AI_TOOL_CALL_ARGUMENTS: event.get("inputs") or None,
            a.GEN_AI_TOOL_CALL_RESULT: _result(event),
            **_intent(event),
        }
    if kind == "step":
        return {a.TL_STEP_OUTPUTS: event.get("outputs") or None}
    if kind == "approval":
        return _approval(event)
    if kind == "chat":
        return _chat_end(event)
    if kind == "note":
        return {a.TL_NOTE_TEXT: event.get("text")}
    if kind == "artifact":
        art = event.get("artifact")
        info: Mapping[str, Any] = art if isinstance(art, Mapping) else {}
        return {
            a.TL_ARTIFACT_SHA256: info.get("sha256"),
            a.TL_ARTIFACT_MEDIA_TYPE: info.get("media_type"),
            a.TL_ARTIFACT_SIZE: info.get("size"),
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


#: The raw fact (never an attribute) of a tool call the guard refused before it ran.
_REFUSED = "refused"


def tool_outcome(raw: Mapping[str, Any]) -> str:
    """``executed``, ``replayed``, ``recovered``, ``deduplicated``, ``refused``, ``failed`` or
    ``unknown``."""
    if raw.get(_REFUSED):
        return a.OUTCOME_REFUSED
    if raw.get(a.TL_CHECKPOINT_DEDUPLICATED_FROM):
        return a.OUTCOME_DEDUPLICATED
    if raw.get("replayed"):
        return a.OUTCOME_REPLAYED
    if raw.get("recovered"):
        return a.OUTCOME_RECOVERED
    err = raw.get(a.ERROR_TYPE)
    if err == "OUTCOME_UNKNOWN":
        return a.OUTCOME_UNKNOWN
    if err is not None:
        return a.OUTCOME_FAILED
    return a.OUTCOME_EXECUTED


_AS_REPLAY = {
    a.GEN_AI_TOOL_NAME: a.TL_TOOL_NAME,
    a.GEN_AI_TOOL_CALL_ID: a.TL_TOOL_CALL_ID,
    a.GEN_AI_TOOL_CALL_ARGUMENTS: a.TL_TOOL_ARGUMENTS,
    a.GEN_AI_TOOL_CALL_RESULT: a.TL_TOOL_RESULT,
}


def finish(kind: str, raw: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return a span's final type and raw attributes (only those its type carries).

    ``raw`` is everything known: start attributes, facts, the final event's attributes. A
    tool call becomes ``execute_tool``, ``replay_tool`` or ``recover_tool`` here; one that
    started as ``guard_tool`` (under a framework's tool span) stays one.
    """
    if kind != "execute_tool" and kind != "guard_tool":
        allowed = SPAN_ATTRIBUTES.get(kind, SPAN_ATTRIBUTES["other"])
        return kind, {k: raw[k] for k in allowed if raw.get(k) is not None}
    outcome = tool_outcome(raw)
    out: dict[str, Any] = {}
    if kind == "guard_tool":  # under the framework's tool span: stays a guard, whatever it did
        final = kind
        for key, value in raw.items():
            out[_AS_REPLAY.get(key, key)] = value
    elif outcome in (a.OUTCOME_REPLAYED, a.OUTCOME_RECOVERED, a.OUTCOME_DEDUPLICATED):
        final = "recover_tool" if outcome == a.OUTCOME_RECOVERED else "replay_tool"
        for key, value in raw.items():
            out[_AS_REPLAY.get(key, key)] = value
    else:
        final = "execute_tool"
        out.update(raw)
        out[a.GEN_AI_OPERATION_NAME] = a.OPERATION_EXECUTE_TOOL
        out[a.GEN_AI_TOOL_TYPE] = a.TOOL_TYPE_FUNCTION
    out[a.TL_TOOL_OUTCOME] = outcome
    allowed = SPAN_ATTRIBUTES[final]
    return final, {k: out[k] for k in allowed if out.get(k) is not None}


def call_attributes(facts: CallFacts) -> dict[str, Any]:
    """Raw attributes of a tool call's ``CallFacts`` (live and re-exported alike)."""
    return {
        a.TL_CHECKPOINT_STATUS: facts.status,
        a.TL_CHECKPOINT_REVISION: facts.revision,
        a.TL_CHECKPOINT_ACTION: facts.action,
        a.GEN_AI_TOOL_DESCRIPTION: facts.description,
        "replayed": facts.replayed,
        "recovered": facts.recovered,
        a.TL_CHECKPOINT_DEDUPLICATED_FROM: facts.deduplicated_from,
    }


def update_attributes(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Map facts passed to ``SpanHandle.update`` (``FACT_KEYS``, ``checkpoint``) to raw ones."""
    out: dict[str, Any] = {}
    cp = facts.get("checkpoint")
    if isinstance(cp, Mapping):  # the journal's checkpoint link
        for key, name in _CHECKPOINT_LINK.items():
            if cp.get(key) is not None:
                out[name] = cp[key]
    for key, value in facts.items():
        fact = FACT_KEYS.get(key)
        if fact is not None and value is not None:
            out[fact] = value
    return out


def link_ids(facts: Mapping[str, Any]) -> tuple[str, str] | None:
    """Return ``(trace_id, span_id)`` hex of the span a resumed call links to (``link``)."""
    target = facts.get("link")
    if isinstance(target, Mapping):
        trace_id, span_id = target.get("trace_id"), target.get("span_id")
        if isinstance(trace_id, str) and isinstance(span_id, str):
            return trace_id, span_id
    return None


def transition_event(
    *,
    name: str,
    status_from: Any,
    status_to: Any,
    expected_revision: int,
    revision: int,
    won: bool,
) -> tuple[str, dict[str, Any]]:
    """Name and raw attributes of a ``checkpoint {transition}`` event.

    A won CAS says what it made (the status and revision after): what it started from is the
    event before it. A lost one also says what it expected, and ``cas = lost``.
    """
    attrs: dict[str, Any] = {
        a.TL_CHECKPOINT_STATUS_TO: status_to,
        a.TL_CHECKPOINT_REVISION: revision,
    }
    if not won:
        attrs[a.TL_CHECKPOINT_STATUS_FROM] = status_from
        attrs[a.TL_CHECKPOINT_EXPECTED_REVISION] = expected_revision
        attrs[a.TL_CHECKPOINT_CAS] = a.CAS_LOST
    label = _TRANSITION_LABELS.get(name)
    if label is None:
        label = span_name("checkpoint", name)
        if type(name) is str and len(_TRANSITION_LABELS) < 64:  # the table's few names
            _TRANSITION_LABELS[name] = label
    return label, attrs


_TRANSITION_LABELS: dict[str, str] = {}


def transition_times(times: list[int | None], start: int, end: int) -> list[int]:
    """Event times for transitions in revision order: inside ``[start, end]``, increasing.

    A transition's own time is kept when it fits; two transitions of one transaction
    (create and claim) share a time, so each later one is at least 1 µs after the one
    before (the span's end may move to make room, see ``span_end``).
    """
    out: list[int] = []
    previous = start - 1000
    for at in times:
        t = start if at is None else min(max(at, start), end)
        t = max(t, previous + 1000)
        out.append(t)
        previous = t
    return out


def status_description(
    event: Mapping[str, Any], error: BaseException | None, capture_content: bool
) -> str | None:
    """A span's status description: the error message only with content capture on."""
    kind = error_type(event, error)
    if not capture_content:
        return kind
    if error is not None:
        return str(error) or type(error).__qualname__
    err = event.get("error")
    if isinstance(err, Mapping) and err.get("message"):
        return str(err["message"])
    result = _error_result(event)
    if isinstance(result, Mapping) and isinstance(result.get("message"), str) and result["message"]:
        return str(result["message"])
    if isinstance(result, str) and result:
        return result
    return kind


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
            dt = parse_iso(value)
        elif isinstance(value, datetime):
            dt = value
        else:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return ((dt - _EPOCH) // _US) * 1000
    except (ValueError, TypeError, OverflowError):
        return None
