"""The SDK resource wrappers ``journaled`` puts in front of each provider's ``create``.

Rules this module keeps:

- One wrapper serves every provider: Anthropic ``messages`` and OpenAI
  ``chat.completions``/``responses`` differ only in the request argument that holds the
  messages, how a response's facts are read, and how a stream is accumulated; those are
  passed in, the journaling flow is written once here.
- The wrapper changes nothing the SDK returns: the same objects (or the same stream items,
  through a pass-through stream) reach the caller; every other attribute is the SDK's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._journaled import AsyncStream, Recorder, ResponseFacts, StreamManager, SyncStream

__all__ = ["AsyncEndpoint", "Endpoint", "Proxy"]


class Proxy:
    """Delegates every attribute it does not define to the wrapped SDK object."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class Endpoint(Proxy):
    """One ``create`` endpoint (and its ``stream`` helper), journaled.

    Args:
        inner: The SDK resource (``client.messages``, ``client.chat.completions``, …).
        recorder: Begins the ``llm_call`` events.
        messages_key: The request argument holding the messages (``messages``, ``input``).
        facts: Reads a complete response's facts.
        accumulator: Makes the accumulator of a ``stream=True`` response.
        snapshot: Reads the facts of a ``stream(...)`` helper's stream; ``None`` leaves
            ``stream`` unjournaled (the SDK's own).
        complete: Whether a ``stream(...)`` helper's stream was consumed to the end.
        api: The shape of the stored content (``anthropic``, ``openai``,
            ``openai.responses``).
        system_key: The request argument holding instructions given apart from the
            messages (Anthropic ``system``, Responses ``instructions``), if any.
    """

    def __init__(
        self,
        inner: Any,
        recorder: Recorder,
        messages_key: str,
        facts: Callable[[Any], ResponseFacts],
        accumulator: Callable[[], Any],
        snapshot: Callable[[Any], ResponseFacts] | None = None,
        complete: Callable[[Any], bool] | None = None,
        *,
        api: str,
        system_key: str | None = None,
    ) -> None:
        super().__init__(inner)
        self._api = api
        self._system_key = system_key
        self._recorder = recorder
        self._key = messages_key
        self._facts = facts
        self._acc = accumulator
        self._snapshot = snapshot
        self._complete = complete

    def _begin(self, kwargs: dict[str, Any]) -> Any:
        system = kwargs.get(self._system_key) if self._system_key else None
        return self._recorder.begin(
            kwargs.get("model"), kwargs.get(self._key), api=self._api, request=kwargs, system=system
        )

    def create(self, **kwargs: Any) -> Any:
        """``create``: one ``llm_call`` event per completion."""
        call = self._begin(kwargs)
        with call:
            result = self._inner.create(**kwargs)
        if kwargs.get("stream"):
            return SyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result

    def stream(self, **kwargs: Any) -> Any:
        """``stream``: the event is written when the helper's block exits."""
        if self._snapshot is None or self._complete is None:
            return self._inner.stream(**kwargs)  # e.g. responses.stream: not journaled
        return StreamManager(
            self._inner.stream(**kwargs),
            lambda: self._begin(kwargs),
            self._snapshot,
            self._complete,
        )


class AsyncEndpoint(Endpoint):
    """``Endpoint`` of an async client: ``create`` is awaited."""

    async def create(self, **kwargs: Any) -> Any:
        """``await create``: one ``llm_call`` event per completion."""
        call = self._begin(kwargs)
        with call:
            result = await self._inner.create(**kwargs)
        if kwargs.get("stream"):
            return AsyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result
