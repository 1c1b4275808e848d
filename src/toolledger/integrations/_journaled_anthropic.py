"""``journaled`` for the Anthropic SDK: ``messages.create`` (streams too) and ``messages.stream``.

Rules this module keeps:

- The wrapper changes nothing the SDK returns: the same objects (or the same stream
  items, through a pass-through stream) reach the caller; only ``llm_call`` events are added.
- No SDK import: the client is reached by attribute; sync and async clients are told
  apart by the SDK's resource class names (``AsyncMessages``).
"""

from __future__ import annotations

from typing import Any

from ._journaled import Recorder, ResponseFacts
from ._journaled_endpoint import AsyncEndpoint, Endpoint
from ._journaled_facts import AnthropicAccumulator, anthropic_facts
from ._journaled_replay import ReplayAnswers

__all__ = ["JournaledAnthropic", "wrap_anthropic"]


def _snapshot(stream: Any) -> ResponseFacts:
    return anthropic_facts(stream.current_message_snapshot)


def _complete(stream: Any) -> bool:
    return stream.current_message_snapshot.stop_reason is not None


class JournaledAnthropic:
    """An Anthropic client whose completions are journaled; everything else is delegated."""

    def __init__(self, client: Any, recorder: Recorder) -> None:
        self._client = client
        self._recorder = recorder
        messages = client.messages
        is_async = type(messages).__name__.startswith("Async")
        endpoint = AsyncEndpoint if is_async else Endpoint
        self.messages = endpoint(
            messages,
            recorder,
            "messages",
            anthropic_facts,
            AnthropicAccumulator,
            _snapshot,
            _complete,
            api="anthropic",
            system_key="system",
            answers=ReplayAnswers(client, is_async=is_async),
            resource=lambda c: c.messages,
        )

    def __getattr__(self, name: str) -> Any:
        if name == "_client":
            raise AttributeError(name)
        return getattr(self._client, name)

    def with_options(self, **kwargs: Any) -> JournaledAnthropic:
        """The SDK's ``with_options``, still journaled."""
        return JournaledAnthropic(self._client.with_options(**kwargs), self._recorder)

    copy = with_options


def wrap_anthropic(client: Any, recorder: Recorder) -> JournaledAnthropic:
    """Return ``client`` wrapped (see ``journaled``)."""
    return JournaledAnthropic(client, recorder)
