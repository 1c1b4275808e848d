"""``journaled`` for the OpenAI SDK: chat completions (streams and ``stream``) and responses.

Rules this module keeps:

- The wrapper changes nothing the SDK returns: the same objects (or the same stream
  items, through a pass-through stream) reach the caller; only ``llm_call`` events are added.
- Wrapped: ``chat.completions.create`` (``stream=True`` too), ``chat.completions.stream``,
  ``responses.create`` (``stream=True`` too). Everything else (``responses.stream``,
  ``chat.completions.parse``, embeddings, …) is the SDK's own, unjournaled.
- No SDK import: sync and async clients are told apart by the SDK's resource class names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._journaled import AsyncStream, Recorder, ResponseFacts, StreamManager, SyncStream
from ._journaled_facts import ChatAccumulator, ResponsesAccumulator, chat_facts, responses_facts

__all__ = ["JournaledOpenAI", "wrap_openai"]


class _Proxy:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def _chat_snapshot(stream: Any) -> ResponseFacts:
    return chat_facts(stream.current_completion_snapshot)


def _chat_complete(stream: Any) -> bool:
    choices = stream.current_completion_snapshot.choices
    return bool(choices) and all(c.finish_reason is not None for c in choices)


class _Endpoint(_Proxy):
    """One ``create`` endpoint: ``messages_key`` names the request's messages argument."""

    def __init__(
        self,
        inner: Any,
        recorder: Recorder,
        messages_key: str,
        facts: Callable[[Any], ResponseFacts],
        accumulator: Callable[[], Any],
    ) -> None:
        super().__init__(inner)
        self._recorder = recorder
        self._key = messages_key
        self._facts = facts
        self._acc = accumulator

    def create(self, **kwargs: Any) -> Any:
        """``create``: one ``llm_call`` event per completion."""
        call = self._recorder.begin(kwargs.get("model"), kwargs.get(self._key))
        try:
            result = self._inner.create(**kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        if kwargs.get("stream"):
            return SyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result

    def stream(self, **kwargs: Any) -> Any:
        """``chat.completions.stream``: the event is written when the block exits."""
        if self._key != "messages":
            return self._inner.stream(**kwargs)  # responses.stream: not journaled
        return StreamManager(
            self._inner.stream(**kwargs),
            lambda: self._recorder.begin(kwargs.get("model"), kwargs.get("messages")),
            _chat_snapshot,
            _chat_complete,
        )


class _AsyncEndpoint(_Endpoint):
    async def create(self, **kwargs: Any) -> Any:
        """``await create``: one ``llm_call`` event per completion."""
        call = self._recorder.begin(kwargs.get("model"), kwargs.get(self._key))
        try:
            result = await self._inner.create(**kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        if kwargs.get("stream"):
            return AsyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result


class _Chat(_Proxy):
    def __init__(self, inner: Any, completions: _Endpoint) -> None:
        super().__init__(inner)
        self.completions = completions


class JournaledOpenAI(_Proxy):
    """An OpenAI client whose completions are journaled; everything else is delegated."""

    def __init__(self, client: Any, recorder: Recorder) -> None:
        super().__init__(client)
        self._recorder = recorder
        completions = client.chat.completions
        endpoint = _AsyncEndpoint if type(completions).__name__.startswith("Async") else _Endpoint
        self.chat = _Chat(
            client.chat,
            endpoint(completions, recorder, "messages", chat_facts, ChatAccumulator),
        )
        self.responses = endpoint(
            client.responses, recorder, "input", responses_facts, ResponsesAccumulator
        )

    def with_options(self, **kwargs: Any) -> JournaledOpenAI:
        """The SDK's ``with_options``, still journaled."""
        return JournaledOpenAI(self._inner.with_options(**kwargs), self._recorder)

    copy = with_options


def wrap_openai(client: Any, recorder: Recorder) -> JournaledOpenAI:
    """Return ``client`` wrapped (see ``journaled``)."""
    return JournaledOpenAI(client, recorder)
