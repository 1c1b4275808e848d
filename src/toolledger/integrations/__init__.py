"""Provider adapters: ``toolledger.integrations.anthropic`` and ``.openai``.

Importing this package imports no SDK; each adapter accepts the SDK's objects or plain
dicts. ``ToolCall`` is the provider-neutral parsed call.
"""

from ._common import NOT_EXECUTED, OUTCOME_UNKNOWN, ToolCall

__all__ = ["NOT_EXECUTED", "OUTCOME_UNKNOWN", "ToolCall"]
