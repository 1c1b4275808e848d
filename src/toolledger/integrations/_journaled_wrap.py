"""``journaled(client, run)``: pick the SDK's wrapper for a client.

This module sits above the recorder (``_journaled``) and the per-SDK wrappers
(``_journaled_anthropic``, ``_journaled_openai``), which import the recorder: keeping the
entry point here keeps those imports one-way. No SDK is imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError
from ._journaled import Recorder, server_of
from ._journaled_anthropic import wrap_anthropic
from ._journaled_openai import wrap_openai

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["journaled"]


def journaled(client: Any, run: Run, *, capture_content: bool | None = None) -> Any:
    """Wrap an Anthropic or OpenAI SDK client so every completion is journaled.

    The returned object is used like the client (everything else is delegated):
    Anthropic ``messages.create`` (``stream=True`` too) and ``messages.stream``; OpenAI
    ``chat.completions.create`` (``stream=True`` too), ``chat.completions.stream`` and
    ``responses.create`` (``stream=True`` too); sync and async clients alike. Each
    completion becomes an ``llm_call`` event (span ``chat {model}``).

    Args:
        client: ``anthropic.Anthropic``/``AsyncAnthropic`` (or their Bedrock/Vertex
            variants), ``openai.OpenAI``/``AsyncOpenAI`` (or ``AzureOpenAI``).
        run: The ``toolledger`` run.
        capture_content: Store message content in the journal (``None``: the run's
            ``journal_content``, on by default; telemetry's capture setting is not read).

    Returns:
        The wrapped client.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a client of another SDK.
    """
    root = type(client).__module__.split(".", 1)[0]
    if root == "anthropic":
        return wrap_anthropic(
            client, Recorder(run, "anthropic", capture_content, server_of(client))
        )
    if root == "openai":
        provider = "azure.ai.openai" if "Azure" in type(client).__name__ else "openai"
        return wrap_openai(client, Recorder(run, provider, capture_content, server_of(client)))
    raise InvalidArgumentError(
        message=f"journaled() wraps anthropic and openai SDK clients; got {type(client).__name__}"
    )
