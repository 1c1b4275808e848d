"""The SDK resource wrappers ``journaled`` puts in front of each provider's ``create``.

Rules this module keeps:

- One wrapper serves every provider: Anthropic ``messages`` and OpenAI
  ``chat.completions``/``responses`` differ only in the request argument that holds the
  messages, how a response's facts are read, and how a stream is accumulated; those are
  passed in, the journaling flow is written once here.
- The wrapper changes nothing the SDK returns: the same objects (or the same stream items,
  through a pass-through stream) reach the caller; every other attribute is the SDK's own.
- Replay, fork, resume: before a request is sent, the run's replay controller is asked
  whether the record answers it (``guard._replay``); an answered request is made on the
  serving copy of the client (``_journaled_replay``), so it reaches no network and the
  SDK builds its own objects from the recorded answer. It is journaled like any other,
  its ``meta`` naming the recorded event (``replayed_from`` / ``resumed_from``). The
  request is compared as the journal stores it: through the run's redact hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._journaled import (
    AsyncStream,
    Recorder,
    ResponseFacts,
    StreamManager,
    SyncStream,
)
from ._journaled_replay import ReplayAnswers, answer_body

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
        answers: Serves recorded answers (replay); ``None``: never served.
        resource: This endpoint's resource on a client (``lambda c: c.messages``).
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
        answers: ReplayAnswers | None = None,
        resource: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(inner)
        self._answers = answers
        self._resource = resource
        self._api = api
        self._system_key = system_key
        self._recorder = recorder
        self._key = messages_key
        self._facts = facts
        self._acc = accumulator
        self._snapshot = snapshot
        self._complete = complete

    def _begin(self, kwargs: dict[str, Any], *, stream: bool = False, served: Any = None) -> Any:
        system = kwargs.get(self._system_key) if self._system_key else None
        return self._recorder.begin(
            kwargs.get("model"),
            kwargs.get(self._key),
            api=self._api,
            request=kwargs,
            system=system,
            stream=stream,
            served=served,
        )

    def _route(
        self, kwargs: dict[str, Any], *, stream: bool
    ) -> tuple[Any, dict[str, Any], dict[str, Any] | None]:
        """Where the request goes: ``(resource, kwargs, served marker)``.

        Raises:
            ReplayDivergedError: ``REPLAY_DIVERGED``, before anything is sent.
            ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` for an answer the record lacks.
        """
        ctl = self._recorder.run.replay
        if ctl is None or ctl.live or self._answers is None or self._resource is None:
            return self._inner, kwargs, None
        system = kwargs.get(self._system_key) if self._system_key else None
        model = kwargs.get("model")
        served = ctl.model_call(
            model if isinstance(model, str) and model else "unknown",
            self._recorder.request(kwargs.get(self._key), system, kwargs, stream=stream) or {},
        )
        if served is None:
            return self._inner, kwargs, None
        token = self._answers.add(answer_body(self._api, served.outputs, stream=stream))
        headers = {**(kwargs.get("extra_headers") or {}), **token}
        resource = self._resource(self._answers.serving_client())
        return resource, {**kwargs, "extra_headers": headers}, served.marker

    def create(self, **kwargs: Any) -> Any:
        """``create``: one ``llm_call`` event per completion."""
        inner, sent, served = self._route(kwargs, stream=kwargs.get("stream") is True)
        call = self._begin(kwargs, served=served)
        with call:
            result = inner.create(**sent)
        if kwargs.get("stream"):
            return SyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result

    def stream(self, **kwargs: Any) -> Any:
        """``stream``: the event is written when the helper's block exits."""
        if self._snapshot is None or self._complete is None:
            return self._inner.stream(**kwargs)  # e.g. responses.stream: not journaled
        inner, sent, served = self._route(kwargs, stream=True)
        return StreamManager(
            inner.stream(**sent),
            lambda: self._begin(kwargs, stream=True, served=served),
            self._snapshot,
            self._complete,
        )


class AsyncEndpoint(Endpoint):
    """``Endpoint`` of an async client: ``create`` is awaited."""

    async def create(self, **kwargs: Any) -> Any:
        """``await create``: one ``llm_call`` event per completion."""
        inner, sent, served = self._route(kwargs, stream=kwargs.get("stream") is True)
        call = self._begin(kwargs, served=served)
        with call:
            result = await inner.create(**sent)
        if kwargs.get("stream"):
            return AsyncStream(result, call, self._acc())
        call.end(self._facts(result))
        return result
