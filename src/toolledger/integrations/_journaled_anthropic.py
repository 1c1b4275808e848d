"""``journaled`` for the Anthropic SDK: ``messages`` and ``beta.messages`` (``create``,
streams too, and ``stream``); the beta tool runner and threads send their turns through them.

Rules this module keeps:

- The wrapper changes nothing the SDK returns: the same objects (or the same stream
  items, through a pass-through stream) reach the caller; only ``llm_call`` events are added.
- No SDK import: the client is reached by attribute; sync and async clients are told
  apart by the SDK's resource class names (``AsyncMessages``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._journaled import Recorder, ResponseFacts
from ._journaled_endpoint import AsyncEndpoint, Endpoint, Proxy
from ._journaled_facts import AnthropicAccumulator, anthropic_facts
from ._journaled_replay import ReplayAnswers

__all__ = ["JournaledAnthropic", "wrap_anthropic"]


def _snapshot(stream: Any) -> ResponseFacts:
    return anthropic_facts(stream.current_message_snapshot)


def _complete(stream: Any) -> bool:
    return stream.current_message_snapshot.stop_reason is not None


class _OnJournaled:
    """``tool_runner`` and ``thread`` of ``beta.messages``, made on the journaled client.

    The SDK's runner (and thread) sends each turn with ``client.beta.messages.create`` on
    the client its resource holds; here that resource is a copy of the SDK's own bound to
    the journaled client, so every turn comes back through this endpoint's ``create`` and
    is journaled, replayed, forked or resumed like a direct call.
    """

    _inner: Any
    owner: Any = None  # the journaled client (set once it exists)

    def _bound(self) -> Any:
        return type(self._inner)(self.owner)

    def tool_runner(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``tool_runner``; its model calls go through the journaled client."""
        return self._bound().tool_runner(*args, **kwargs)

    def thread(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``thread``; its turns go through the journaled client."""
        return self._bound().thread(*args, **kwargs)


class _BetaMessages(_OnJournaled, Endpoint):
    pass


class _AsyncBetaMessages(_OnJournaled, AsyncEndpoint):
    pass


def _endpoint(
    resource: Any,
    recorder: Recorder,
    client: Any,
    pick: Callable[[Any], Any],
    *,
    beta: bool = False,
) -> Any:
    is_async = type(resource).__name__.startswith("Async")
    if beta:
        endpoint: type[Endpoint] = _AsyncBetaMessages if is_async else _BetaMessages
    else:
        endpoint = AsyncEndpoint if is_async else Endpoint
    return endpoint(
        resource,
        recorder,
        "messages",
        anthropic_facts,
        AnthropicAccumulator,
        _snapshot,
        _complete,
        api="anthropic",
        system_key="system",
        answers=ReplayAnswers(client, is_async=is_async),
        resource=pick,
    )


class JournaledAnthropic:
    """An Anthropic client whose completions are journaled; everything else is delegated.

    ``messages`` and ``beta.messages`` (``create``, ``stream``; ``beta.messages.tool_runner``
    and ``thread`` send their turns through them) are journaled.
    """

    def __init__(self, client: Any, recorder: Recorder) -> None:
        # Not ``_client``: the SDK's own clients name their HTTP client so.
        self._wrapped = client
        self._recorder = recorder
        self.messages = _endpoint(client.messages, recorder, client, lambda c: c.messages)
        beta = getattr(getattr(client, "beta", None), "messages", None)
        if beta is not None:  # a client without beta messages keeps its own ``beta``
            messages = _endpoint(beta, recorder, client, lambda c: c.beta.messages, beta=True)
            messages.owner = self
            self.beta = _Beta(client.beta, messages)

    def __getattr__(self, name: str) -> Any:
        if name == "_wrapped":
            raise AttributeError(name)
        return getattr(self._wrapped, name)

    def with_options(self, **kwargs: Any) -> JournaledAnthropic:
        """The SDK's ``with_options``, still journaled."""
        return JournaledAnthropic(self._wrapped.with_options(**kwargs), self._recorder)

    copy = with_options


class _Beta(Proxy):
    """``client.beta`` with ``messages`` journaled; everything else is the SDK's."""

    def __init__(self, inner: Any, messages: Any) -> None:
        super().__init__(inner)
        self.messages = messages


def wrap_anthropic(client: Any, recorder: Recorder) -> JournaledAnthropic:
    """Return ``client`` wrapped (see ``journaled``)."""
    return JournaledAnthropic(client, recorder)
