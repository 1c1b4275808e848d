"""Every span name, attribute name and fixed value toolledger's telemetry uses, defined once.

Rules of this module:

- Every attribute toolledger sets on a span is a constant here; ``docs/telemetry.md`` is
  checked against these constants by ``tests/telemetry/test_docs.py``.
- ``gen_ai.*`` names follow the OpenTelemetry GenAI semantic conventions (Development
  status, now maintained in the ``semantic-conventions-genai`` repository). They are spelled
  out here on purpose: the ``gen_ai`` constants of ``opentelemetry-semantic-conventions`` are
  deprecated and must not be imported.
- Project attributes live under ``toolledger.``.
- No logic and no imports beyond ``typing``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVAL_ALLOW",
    "APPROVAL_DENY",
    "APPROVAL_REQUIRE",
    "CAS_LOST",
    "CAS_WON",
    "CONTENT_ATTRIBUTES",
    "ERROR_TYPE",
    "EVENT_TOOL_CALL_DECISION",
    "EVENT_TOOL_CALL_RESOLUTION",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_FREQUENCY_PENALTY",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_PRESENCE_PENALTY",
    "GEN_AI_REQUEST_SEED",
    "GEN_AI_REQUEST_STOP_SEQUENCES",
    "GEN_AI_REQUEST_STREAM",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_K",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOKEN_TYPE",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_DECISION_OUTCOME",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DESCRIPTION",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
    "INTENT_ATTRIBUTES",
    "MIME_JSON",
    "MIME_TEXT",
    "OI_AGENT",
    "OI_CHAIN",
    "OI_GUARDRAIL",
    "OI_INPUT_MIME_TYPE",
    "OI_INPUT_VALUE",
    "OI_LLM",
    "OI_LLM_INPUT_MESSAGES",
    "OI_LLM_INVOCATION_PARAMETERS",
    "OI_LLM_MODEL_NAME",
    "OI_LLM_OUTPUT_MESSAGES",
    "OI_LLM_PROVIDER",
    "OI_LLM_TOKEN_CACHE_READ",
    "OI_LLM_TOKEN_CACHE_WRITE",
    "OI_LLM_TOKEN_COMPLETION",
    "OI_LLM_TOKEN_PROMPT",
    "OI_LLM_TOKEN_TOTAL",
    "OI_METADATA",
    "OI_OUTPUT_MIME_TYPE",
    "OI_OUTPUT_VALUE",
    "OI_PROJECT_NAME",
    "OI_SESSION_ID",
    "OI_SPAN_KIND",
    "OI_TOOL",
    "OI_TOOL_DESCRIPTION",
    "OI_TOOL_NAME",
    "OPERATION_CHAT",
    "OPERATION_EXECUTE_TOOL",
    "OPERATION_INVOKE_AGENT",
    "OUTCOME_DEDUPLICATED",
    "OUTCOME_DENIED",
    "OUTCOME_EXECUTED",
    "OUTCOME_FAILED",
    "OUTCOME_RECOVERED",
    "OUTCOME_REFUSED",
    "OUTCOME_REPLAYED",
    "OUTCOME_UNKNOWN",
    "SCHEMA_URL",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SPAN_APPROVAL",
    "SPAN_CHAT",
    "SPAN_CHECKPOINT",
    "SPAN_EXECUTE_TOOL",
    "SPAN_GUARD_TOOL",
    "SPAN_INVOKE_AGENT",
    "SPAN_RECOVER_TOOL",
    "SPAN_REPLAY_TOOL",
    "SPAN_RESOLVE_TOOL",
    "SPAN_STEP",
    "TL_APPROVAL_BY",
    "TL_APPROVAL_CALL_ID",
    "TL_APPROVAL_OUTCOME",
    "TL_APPROVAL_REASON",
    "TL_ARTIFACT_MEDIA_TYPE",
    "TL_ARTIFACT_SHA256",
    "TL_ARTIFACT_SIZE",
    "TL_CHECKPOINT_ACTION",
    "TL_CHECKPOINT_CAS",
    "TL_CHECKPOINT_DEDUPLICATED_FROM",
    "TL_CHECKPOINT_EXPECTED_REVISION",
    "TL_CHECKPOINT_NAMESPACE",
    "TL_CHECKPOINT_REVISION",
    "TL_CHECKPOINT_STATUS",
    "TL_CHECKPOINT_STATUS_FROM",
    "TL_CHECKPOINT_STATUS_TO",
    "TL_EVENT_ID",
    "TL_EVENT_KIND",
    "TL_INTENT_GOAL",
    "TL_INTENT_JUSTIFICATION",
    "TL_INTENT_JUSTIFICATION_MISSING",
    "TL_INTENT_JUSTIFICATION_SOURCE",
    "TL_JOURNAL_EVENT_COUNT",
    "TL_JOURNAL_HEAD_HASH",
    "TL_NOTE_TEXT",
    "TL_RESOLUTION_BY",
    "TL_RESOLUTION_FORCED",
    "TL_RESOLUTION_OUTCOME",
    "TL_RUN_ID",
    "TL_RUN_SUMMARY",
    "TL_STEP_INPUTS",
    "TL_CHAT_TOOL_CALL_IDS",
    "TL_CHAT_TOOL_CALL_NAMES",
    "TL_STEP_OUTPUTS",
    "TL_TOOL_ARGUMENTS",
    "TL_TOOL_CALL_ID",
    "TL_TOOL_NAME",
    "TL_TOOL_OUTCOME",
    "TL_TOOL_RESULT",
    "TOOL_TYPE_FUNCTION",
    "USER_ID",
]

#: Schema URL of the semantic-conventions version these names follow (tracer scope).
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.37.0"

# -- span names (``str.format`` templates; the placeholder is the agent/tool/step name) ----
SPAN_INVOKE_AGENT: Final = "invoke_agent {}"
SPAN_EXECUTE_TOOL: Final = "execute_tool {}"
#: A call answered from its checkpoint (the tool did not run): not an execution.
SPAN_REPLAY_TOOL: Final = "replay_tool {}"
#: A call whose outcome ``recover`` proved (it ran in an earlier attempt): not an execution.
SPAN_RECOVER_TOOL: Final = "recover_tool {}"
#: A guarded call inside a framework's own tool span for it (Pydantic AI's ``execute_tool``,
#: an OpenInference ``TOOL`` span): toolledger's facts on one child of a distinct kind, so
#: the call has one tool span. Not an execution of its own.
SPAN_GUARD_TOOL: Final = "guard_tool {}"
SPAN_CHECKPOINT: Final = "checkpoint {}"
SPAN_STEP: Final = "step {}"
SPAN_APPROVAL: Final = "approval {}"
#: A person settled a stuck call (``toolledger.resolve``/``reconcile``); placeholder: the tool.
SPAN_RESOLVE_TOOL: Final = "resolve_tool {}"
#: A model call (journal kind ``llm_call``); the placeholder is the requested model.
SPAN_CHAT: Final = "chat {}"

# -- OpenTelemetry GenAI semantic conventions ---------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
# model calls (``chat`` spans)
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
#: Input tokens served from / written to the provider's prompt cache (already counted in
#: ``gen_ai.usage.input_tokens``, as the conventions require).
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
#: Content (only with capture on), in the conventions' parts format, as JSON text.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
#: The ``gen_ai.tool.call.decision`` log record (an approval) and its outcome attribute.
EVENT_TOOL_CALL_DECISION: Final = "gen_ai.tool.call.decision"
GEN_AI_TOOL_CALL_DECISION_OUTCOME: Final = "gen_ai.tool.call.decision.outcome"
#: Metric attribute: ``input`` or ``output`` on ``gen_ai.client.token.usage``.
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
#: General conventions: the model server (from the client's base URL) and the end user.
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
USER_ID: Final = "user.id"
#: General semantic conventions: the class of an error (exception qualname or error code).
ERROR_TYPE: Final = "error.type"

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"
TOOL_TYPE_FUNCTION: Final = "function"

# -- toolledger: run and journal -----------------------------------------------------------
TL_RUN_ID: Final = "toolledger.run.id"
TL_EVENT_ID: Final = "toolledger.event.id"
#: Only on spans of event kinds without a span type of their own (note, artifact, finish).
TL_EVENT_KIND: Final = "toolledger.event.kind"
TL_JOURNAL_HEAD_HASH: Final = "toolledger.journal.head_hash"
TL_JOURNAL_EVENT_COUNT: Final = "toolledger.journal.event_count"

# -- toolledger: intent (free text; on by default, ``capture_intent=False`` drops it) ----
TL_INTENT_GOAL: Final = "toolledger.intent.goal"
TL_INTENT_JUSTIFICATION: Final = "toolledger.intent.justification"
TL_INTENT_JUSTIFICATION_SOURCE: Final = "toolledger.intent.justification_source"
TL_INTENT_JUSTIFICATION_MISSING: Final = "toolledger.intent.justification_missing"

# -- toolledger: checkpoint ----------------------------------------------------------------
TL_CHECKPOINT_NAMESPACE: Final = "toolledger.checkpoint.namespace"
TL_CHECKPOINT_STATUS: Final = "toolledger.checkpoint.status"
TL_CHECKPOINT_REVISION: Final = "toolledger.checkpoint.revision"
TL_CHECKPOINT_ACTION: Final = "toolledger.checkpoint.action"
#: The call id whose stored result an effect-keyed call returned (re-plan safety).
TL_CHECKPOINT_DEDUPLICATED_FROM: Final = "toolledger.checkpoint.deduplicated_from"
TL_CHECKPOINT_STATUS_FROM: Final = "toolledger.checkpoint.status_from"
TL_CHECKPOINT_STATUS_TO: Final = "toolledger.checkpoint.status_to"
TL_CHECKPOINT_EXPECTED_REVISION: Final = "toolledger.checkpoint.expected_revision"
TL_CHECKPOINT_CAS: Final = "toolledger.checkpoint.cas"
CAS_WON: Final = "won"
CAS_LOST: Final = "lost"

# -- toolledger: tool calls that are not executions (replayed, recovered) -------------
#: ``executed``, ``replayed``, ``recovered``, ``deduplicated``, ``refused``, ``failed`` or
#: ``unknown`` (also a metric label).
TL_TOOL_OUTCOME: Final = "toolledger.tool.outcome"
TL_TOOL_NAME: Final = "toolledger.tool.name"
TL_TOOL_CALL_ID: Final = "toolledger.tool.call_id"
#: Content: the input and the stored result of a replayed/recovered call.
TL_TOOL_ARGUMENTS: Final = "toolledger.tool.arguments"
TL_TOOL_RESULT: Final = "toolledger.tool.result"
OUTCOME_EXECUTED: Final = "executed"
OUTCOME_REPLAYED: Final = "replayed"
OUTCOME_RECOVERED: Final = "recovered"
OUTCOME_FAILED: Final = "failed"
OUTCOME_UNKNOWN: Final = "unknown"
OUTCOME_DENIED: Final = "denied"
#: An effect-keyed call answered with another call's stored result (the tool did not run).
OUTCOME_DEDUPLICATED: Final = "deduplicated"
#: A call the guard refused before it ran (``error.type`` says why: ``BINDING_CONFLICT``…).
OUTCOME_REFUSED: Final = "refused"

# -- toolledger: run, notes, artifacts ----------------------------------------------------
#: Intent: the ``finish`` summary of the run.
TL_RUN_SUMMARY: Final = "toolledger.run.summary"
#: Intent: a note's text.
TL_NOTE_TEXT: Final = "toolledger.note.text"
TL_ARTIFACT_SHA256: Final = "toolledger.artifact.sha256"
TL_ARTIFACT_MEDIA_TYPE: Final = "toolledger.artifact.media_type"
TL_ARTIFACT_SIZE: Final = "toolledger.artifact.size"

# -- toolledger: a person's decision on a stuck call (resolve / reconcile) ------------------
#: ``not_executed``, ``completed``, ``failed``, or ``recovered`` (reconcile's recover proof).
TL_RESOLUTION_OUTCOME: Final = "toolledger.resolution.outcome"
TL_RESOLUTION_BY: Final = "toolledger.resolution.by"
#: ``true`` when the call was ``executing`` (a live attempt may have held it).
TL_RESOLUTION_FORCED: Final = "toolledger.resolution.forced"
#: The log record of a person's decision on a stuck call.
EVENT_TOOL_CALL_RESOLUTION: Final = "toolledger.tool.call.resolution"

# -- toolledger: approvals -----------------------------------------------------------------
TL_APPROVAL_OUTCOME: Final = "toolledger.approval.outcome"
TL_APPROVAL_BY: Final = "toolledger.approval.by"
#: Free text: dropped with ``capture_intent=False``.
TL_APPROVAL_REASON: Final = "toolledger.approval.reason"
#: The tool call id (``gen_ai.tool.call.id`` of the call) the approval is bound to.
TL_APPROVAL_CALL_ID: Final = "toolledger.approval.call_id"
APPROVAL_ALLOW: Final = "allow"
APPROVAL_DENY: Final = "deny"
APPROVAL_REQUIRE: Final = "require_approval"

# -- toolledger: step content (only with content capture on, like tool arguments) --------
TL_STEP_INPUTS: Final = "toolledger.step.inputs"
#: A model call's requested tool calls, in order (not content: names and ids only; their
#: arguments are in ``gen_ai.output.messages`` under content capture).
TL_CHAT_TOOL_CALL_NAMES: Final = "toolledger.chat.tool_call.names"
TL_CHAT_TOOL_CALL_IDS: Final = "toolledger.chat.tool_call.ids"
TL_STEP_OUTPUTS: Final = "toolledger.step.outputs"

# -- OpenInference (what Phoenix, Arize and Langfuse display; a projection of the above) ----
OI_SPAN_KIND: Final = "openinference.span.kind"
OI_INPUT_VALUE: Final = "input.value"
OI_INPUT_MIME_TYPE: Final = "input.mime_type"
OI_OUTPUT_VALUE: Final = "output.value"
OI_OUTPUT_MIME_TYPE: Final = "output.mime_type"
OI_METADATA: Final = "metadata"
OI_SESSION_ID: Final = "session.id"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_DESCRIPTION: Final = "tool.description"
OI_LLM_MODEL_NAME: Final = "llm.model_name"
OI_LLM_PROVIDER: Final = "llm.provider"
OI_LLM_INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
OI_LLM_TOKEN_PROMPT: Final = "llm.token_count.prompt"
OI_LLM_TOKEN_COMPLETION: Final = "llm.token_count.completion"
OI_LLM_TOKEN_TOTAL: Final = "llm.token_count.total"
OI_LLM_TOKEN_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
OI_LLM_TOKEN_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
#: Prefixes of the flattened message lists (``llm.input_messages.0.message.role`` …).
OI_LLM_INPUT_MESSAGES: Final = "llm.input_messages"
OI_LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
OI_AGENT: Final = "AGENT"
OI_LLM: Final = "LLM"
OI_TOOL: Final = "TOOL"
OI_CHAIN: Final = "CHAIN"
OI_GUARDRAIL: Final = "GUARDRAIL"
MIME_JSON: Final = "application/json"
MIME_TEXT: Final = "text/plain"
#: Resource attribute Phoenix files spans under (``configure(project=...)``).
OI_PROJECT_NAME: Final = "openinference.project.name"

#: Set only when content capture is on (and truncated to a bound).
CONTENT_ATTRIBUTES: Final = frozenset(
    {
        GEN_AI_TOOL_CALL_ARGUMENTS,
        GEN_AI_TOOL_CALL_RESULT,
        TL_TOOL_ARGUMENTS,
        TL_TOOL_RESULT,
        TL_STEP_INPUTS,
        TL_STEP_OUTPUTS,
        GEN_AI_INPUT_MESSAGES,
        GEN_AI_OUTPUT_MESSAGES,
        GEN_AI_SYSTEM_INSTRUCTIONS,
    }
)
#: Free-text intent: set by default, dropped with ``capture_intent=False``.
INTENT_ATTRIBUTES: Final = frozenset(
    {TL_INTENT_GOAL, TL_INTENT_JUSTIFICATION, TL_APPROVAL_REASON, TL_RUN_SUMMARY, TL_NOTE_TEXT}
)
