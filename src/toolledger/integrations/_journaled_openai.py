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

from typing import Any

from ._journaled import Recorder, ResponseFacts
from ._journaled_endpoint import AsyncEndpoint, Endpoint, Proxy
from ._journaled_facts import ChatAccumulator, ResponsesAccumulator, chat_facts, responses_facts
from ._journaled_replay import ReplayAnswers

__all__ = ["JournaledOpenAI", "wrap_openai"]


def _chat_snapshot(stream: Any) -> ResponseFacts:
    return chat_facts(stream.current_completion_snapshot)


def _chat_complete(stream: Any) -> bool:
    choices = stream.current_completion_snapshot.choices
    return bool(choices) and all(c.finish_reason is not None for c in choices)


class _Chat(Proxy):
    def __init__(self, inner: Any, completions: Endpoint) -> None:
        super().__init__(inner)
        self.completions = completions


class JournaledOpenAI(Proxy):
    """An OpenAI client whose completions are journaled; everything else is delegated."""

    def __init__(self, client: Any, recorder: Recorder) -> None:
        super().__init__(client)
        self._recorder = recorder
        completions = client.chat.completions
        is_async = type(completions).__name__.startswith("Async")
        endpoint = AsyncEndpoint if is_async else Endpoint
        answers = ReplayAnswers(client, is_async=is_async)
        self.chat = _Chat(
            client.chat,
            endpoint(
                completions,
                recorder,
                "messages",
                chat_facts,
                ChatAccumulator,
                _chat_snapshot,
                _chat_complete,
                api="openai",
                answers=answers,
                resource=lambda c: c.chat.completions,
            ),
        )
        self.responses = endpoint(
            client.responses,
            recorder,
            "input",
            responses_facts,
            ResponsesAccumulator,
            api="openai.responses",
            system_key="instructions",
            answers=answers,
            resource=lambda c: c.responses,
        )

    def with_options(self, **kwargs: Any) -> JournaledOpenAI:
        """The SDK's ``with_options``, still journaled."""
        return JournaledOpenAI(self._inner.with_options(**kwargs), self._recorder)

    copy = with_options


def wrap_openai(client: Any, recorder: Recorder) -> JournaledOpenAI:
    """Return ``client`` wrapped (see ``journaled``)."""
    return JournaledOpenAI(client, recorder)
