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
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DESCRIPTION",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "INTENT_ATTRIBUTES",
    "OPERATION_CHAT",
    "OPERATION_EXECUTE_TOOL",
    "OPERATION_INVOKE_AGENT",
    "SCHEMA_URL",
    "SPAN_APPROVAL",
    "SPAN_CHAT",
    "SPAN_CHECKPOINT",
    "SPAN_EXECUTE_TOOL",
    "SPAN_INVOKE_AGENT",
    "SPAN_STEP",
    "TL_APPROVAL_BY",
    "TL_APPROVAL_CALL_ID",
    "TL_APPROVAL_OUTCOME",
    "TL_APPROVAL_REASON",
    "TL_CHECKPOINT_ACTION",
    "TL_CHECKPOINT_CAS",
    "TL_CHECKPOINT_DEDUPLICATED_FROM",
    "TL_CHECKPOINT_EXPECTED_REVISION",
    "TL_CHECKPOINT_NAMESPACE",
    "TL_CHECKPOINT_RECOVERED",
    "TL_CHECKPOINT_REPLAYED",
    "TL_CHECKPOINT_REVISION",
    "TL_CHECKPOINT_STATUS",
    "TL_CHECKPOINT_STATUS_FROM",
    "TL_CHECKPOINT_STATUS_TO",
    "TL_CHECKPOINT_TRANSITION",
    "TL_EVENT_ID",
    "TL_EVENT_KIND",
    "TL_INTENT_GOAL",
    "TL_INTENT_JUSTIFICATION",
    "TL_INTENT_JUSTIFICATION_MISSING",
    "TL_INTENT_JUSTIFICATION_SOURCE",
    "TL_JOURNAL_EVENT_COUNT",
    "TL_JOURNAL_HEAD_HASH",
    "TL_RUN_ID",
    "TL_STEP_INPUTS",
    "TL_STEP_OUTPUTS",
    "TOOL_TYPE_FUNCTION",
]

#: Schema URL of the semantic-conventions version these names follow (tracer scope).
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.37.0"

# -- span names (``str.format`` templates; the placeholder is the agent/tool/step name) ----
SPAN_INVOKE_AGENT: Final = "invoke_agent {}"
SPAN_EXECUTE_TOOL: Final = "execute_tool {}"
SPAN_CHECKPOINT: Final = "checkpoint {}"
SPAN_STEP: Final = "step {}"
SPAN_APPROVAL: Final = "approval {}"
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
TL_CHECKPOINT_REPLAYED: Final = "toolledger.checkpoint.replayed"
TL_CHECKPOINT_RECOVERED: Final = "toolledger.checkpoint.recovered"
#: The call id whose stored result an effect-keyed call returned (re-plan safety).
TL_CHECKPOINT_DEDUPLICATED_FROM: Final = "toolledger.checkpoint.deduplicated_from"
TL_CHECKPOINT_TRANSITION: Final = "toolledger.checkpoint.transition"
TL_CHECKPOINT_STATUS_FROM: Final = "toolledger.checkpoint.status_from"
TL_CHECKPOINT_STATUS_TO: Final = "toolledger.checkpoint.status_to"
TL_CHECKPOINT_EXPECTED_REVISION: Final = "toolledger.checkpoint.expected_revision"
TL_CHECKPOINT_CAS: Final = "toolledger.checkpoint.cas"
CAS_WON: Final = "won"
CAS_LOST: Final = "lost"

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
TL_STEP_OUTPUTS: Final = "toolledger.step.outputs"

#: Set only when content capture is on (and truncated to a bound).
CONTENT_ATTRIBUTES: Final = frozenset(
    {GEN_AI_TOOL_CALL_ARGUMENTS, GEN_AI_TOOL_CALL_RESULT, TL_STEP_INPUTS, TL_STEP_OUTPUTS}
)
#: Free-text intent: set by default, dropped with ``capture_intent=False``.
INTENT_ATTRIBUTES: Final = frozenset({TL_INTENT_GOAL, TL_INTENT_JUSTIFICATION, TL_APPROVAL_REASON})
