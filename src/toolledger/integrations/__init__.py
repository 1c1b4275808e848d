"""Provider and framework adapters.

Provider adapters (``toolledger.integrations.anthropic``, ``.openai``, ``.mcp``,
``.aisuite``) accept the SDK's objects or plain dicts. Framework adapters guard the tool
loops frameworks run themselves: ``.anthropic_runner`` (the SDK's tool runners, also
importable from ``.anthropic``), ``.openai_agents``, ``.langgraph``, ``.pydantic_ai``; each
imports its framework when it is imported (an ``ImportError`` names the extra to install).
Importing this package imports no SDK. ``ToolCall`` is the provider-neutral parsed call;
``ToolGate`` an approval gate for a framework tool; ``ConversationWarning`` says that a
framework's thread or session is not the run's conversation; ``CallIdReuseWarning`` that a
model gave an earlier run's call id to another call.
"""

from ._common import NOT_EXECUTED, OUTCOME_UNKNOWN, ToolCall
from ._framework import CallIdReuseWarning, ConversationWarning, ToolGate

__all__ = [
    "NOT_EXECUTED",
    "OUTCOME_UNKNOWN",
    "CallIdReuseWarning",
    "ConversationWarning",
    "ToolCall",
    "ToolGate",
]
