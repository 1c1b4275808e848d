"""``journaled`` for the Anthropic SDK: ``messages.create`` (streams too) and ``messages.stream``.

Rules this module keeps:

- The wrapper changes nothing the SDK returns: the same objects (or the same stream
  items, through a pass-through stream) reach the caller; only ``llm_call`` events are added.
- No SDK import: the client is reached by attribute; sync and async clients are told
  apart by the SDK's resource class names (``AsyncMessages``).
"""

from __future__ import annotations

from typing import Any

from ._journaled import AsyncStream, Recorder, StreamManager, SyncStream
from ._journaled_facts import AnthropicAccumulator, anthropic_facts

__all__ = ["JournaledAnthropic", "wrap_anthropic"]


def _snapshot(stream: Any) -> Any:
    return anthropic_facts(stream.current_message_snapshot)


def _complete(stream: Any) -> bool:
    return stream.current_message_snapshot.stop_reason is not None


class _Messages:
    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def create(self, **kwargs: Any) -> Any:
        """``messages.create``: one ``llm_call`` event per completion."""
        call = self._recorder.begin(kwargs.get("model"), kwargs.get("messages"))
        try:
            result = self._inner.create(**kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        if kwargs.get("stream"):
            return SyncStream(result, call, AnthropicAccumulator())
        call.end(anthropic_facts(result))
        return result

    def stream(self, **kwargs: Any) -> Any:
        """``messages.stream``: the event is written when the helper's block exits."""
        return StreamManager(
            self._inner.stream(**kwargs),
            lambda: self._recorder.begin(kwargs.get("model"), kwargs.get("messages")),
            _snapshot,
            _complete,
        )


class _AsyncMessages(_Messages):
    async def create(self, **kwargs: Any) -> Any:
        """``await messages.create``: one ``llm_call`` event per completion."""
        call = self._recorder.begin(kwargs.get("model"), kwargs.get("messages"))
        try:
            result = await self._inner.create(**kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        if kwargs.get("stream"):
            return AsyncStream(result, call, AnthropicAccumulator())
        call.end(anthropic_facts(result))
        return result


class JournaledAnthropic:
    """An Anthropic client whose completions are journaled; everything else is delegated."""

    def __init__(self, client: Any, recorder: Recorder) -> None:
        self._client = client
        self._recorder = recorder
        messages = client.messages
        is_async = type(messages).__name__.startswith("Async")
        self.messages = (_AsyncMessages if is_async else _Messages)(messages, recorder)

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
