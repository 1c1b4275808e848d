"""aisuite: ``JournaledClient(run, aisuite.Client())`` journals every completion.

Rules this module keeps:

- Every completion aisuite asks of a provider (each turn of its tool loop included, and
  streams) becomes an ``llm_call`` journal event (span ``chat {model}``), recorded by a
  pass-through wrapper around the provider object aisuite calls. The responses are
  aisuite's own, unchanged.
- Python functions given as ``tools=`` are wrapped so the schema aisuite builds from them
  has a required ``justification`` string argument (described in the docstring aisuite
  parses). When aisuite runs a tool (``max_turns`` set), the call goes through the guard
  (``run.call``/``run.acall``) under the model's tool-call id, with the justification
  recorded (``justification_source="model"``) and removed from the function's arguments.
- ``max_turns``: aisuite runs tools only when ``max_turns`` is set. Without it, aisuite
  >= 0.2 still sends the schemas (justification included) and the caller runs the calls
  (e.g. with ``toolledger.integrations.openai.run_tool_calls``); older aisuite dropped
  ``tools`` without ``max_turns``, so with such a version this wrapper refuses the call
  (``INVALID_ARGUMENT``) instead of letting the tools vanish silently.
- Tool schemas passed as dicts, ``aisuite.Tools`` instances and MCP config dicts are
  passed through unchanged (no justification is added to them).
- Replay, fork, resume: a completion the record answers is aisuite's own
  ``ChatCompletionResponse`` rebuilt from the stored content; a stream is aisuite's own
  ``ChatCompletionChunk`` objects (the stored chunks, else rebuilt from the content). The
  provider is not asked.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, ReplayUnavailableError
from ..tools import Tool, tool
from ._common import JUSTIFICATION, JUSTIFICATION_SCHEMA, field
from ._journaled import AsyncStream, LLMCall, Recorder, SyncStream
from ._journaled_endpoint import Proxy
from ._journaled_facts import ChatAccumulator, chat_facts

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["PROVIDER_NAMES", "JournaledClient"]

#: aisuite provider keys → ``gen_ai.provider.name`` (others are used as they are).
PROVIDER_NAMES: Mapping[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "aws": "aws.bedrock",
    "azure": "azure.ai.inference",
    "google": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "groq": "groq",
    "mistral": "mistral_ai",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "perplexity": "perplexity",
}


def _forwards_tools_without_max_turns() -> bool:
    from aisuite.client import Completions

    return hasattr(Completions, "_provider_ready_tools")


class _Pending:
    """Tool calls the model requested and aisuite has not run yet (per client, FIFO)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[tuple[str, str, Any]] = []

    def add(self, response: Any) -> None:
        found = []
        for choice in field(response, "choices") or []:
            for call in field(field(choice, "message"), "tool_calls") or []:
                fn = field(call, "function")
                raw = field(fn, "arguments")
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except ValueError:
                    args = None
                found.append((field(call, "id"), field(fn, "name"), args))
        with self._lock:
            self._calls.extend(c for c in found if isinstance(c[0], str))

    def take(self, name: str, kwargs: Mapping[str, Any]) -> str | None:
        """Return (and forget) the id of the oldest pending call of ``name``.

        A call whose arguments equal ``kwargs`` is preferred (aisuite validates and may
        coerce arguments, so equality is not required).
        """
        with self._lock:
            named = [i for i, c in enumerate(self._calls) if c[1] == name]
            if not named:
                return None
            exact = [i for i in named if self._calls[i][2] == dict(kwargs)]
            call_id, _, _ = self._calls.pop(exact[0] if exact else named[0])
            return call_id


class _JournaledProvider(Proxy):
    """An aisuite provider whose completions are journaled (pass-through otherwise)."""

    def __init__(self, inner: Any, recorder: Recorder, pending: _Pending) -> None:
        super().__init__(inner)
        self._recorder = recorder
        self._pending = pending

    def _ended(self, call: LLMCall, response: Any) -> Any:
        call.end(chat_facts(response))
        self._pending.add(response)
        return response

    def _served(self, model: str, messages: Any, kwargs: Any, *, stream: bool) -> Any:
        """The recorded answer (replay, fork, resume) or ``None``: ask the provider.

        Raises:
            ReplayDivergedError: ``REPLAY_DIVERGED``, before anything is sent.
        """
        ctl = self._recorder.run.replay
        if ctl is None or ctl.live:
            return None
        doc = self._recorder.request(messages, None, dict(kwargs), stream=stream) or {}
        return ctl.model_call(model if isinstance(model, str) and model else "unknown", doc)

    def _begin(self, model: str, messages: Any, kwargs: Any, served: Any, stream: bool) -> LLMCall:
        return self._recorder.begin(
            model,
            messages,
            request=dict(kwargs),
            stream=stream,
            served=None if served is None else served.marker,
        )

    def _stream(
        self,
        method: str,
        wrap: type[SyncStream | AsyncStream],
        model: str,
        messages: Any,
        kwargs: Any,
    ) -> Any:
        served = self._served(model, messages, kwargs, stream=True)
        call = self._begin(model, messages, kwargs, served, True)
        with call:
            if served is None:
                stream = getattr(self._inner, method)(model, messages, **kwargs)
            elif wrap is SyncStream:
                stream = iter(_rebuilt_chunks(served))
            else:
                stream = _each(_rebuilt_chunks(served))
        return wrap(stream, call, ChatAccumulator())

    def chat_completions_create(self, model: str, messages: Any, **kwargs: Any) -> Any:
        served = self._served(model, messages, kwargs, stream=False)
        call = self._begin(model, messages, kwargs, served, False)
        with call:
            if served is not None:
                response = _rebuilt(served)
            else:
                response = self._inner.chat_completions_create(model, messages, **kwargs)
        return self._ended(call, response)

    async def achat_completions_create(self, model: str, messages: Any, **kwargs: Any) -> Any:
        served = self._served(model, messages, kwargs, stream=False)
        call = self._begin(model, messages, kwargs, served, False)
        with call:
            if served is not None:
                response = _rebuilt(served)
            else:
                response = await self._inner.achat_completions_create(model, messages, **kwargs)
        return self._ended(call, response)

    def chat_completions_create_stream(self, model: str, messages: Any, **kwargs: Any) -> Any:
        return self._stream("chat_completions_create_stream", SyncStream, model, messages, kwargs)

    def achat_completions_create_stream(self, model: str, messages: Any, **kwargs: Any) -> Any:
        return self._stream("achat_completions_create_stream", AsyncStream, model, messages, kwargs)


def _rebuilt(served: Any) -> Any:
    """aisuite's own response (``ChatCompletionResponse``) from a recorded answer.

    Raises:
        ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` when the record lacks the content.
    """
    from aisuite.framework.chat_completion_response import (
        ChatCompletionResponse,
    )
    from aisuite.framework.choice import Choice
    from aisuite.framework.message import (
        CompletionUsage,
        Message,
    )

    content = served.outputs.get("content")
    if not isinstance(content, list) or not content:
        raise ReplayUnavailableError(
            message="the recorded call holds no content", details={"event_id": served.event_id}
        )
    reasons = served.meta.get("finish_reasons") or []
    response = ChatCompletionResponse()
    response.choices = []
    for i, message in enumerate(content):
        choice = Choice()
        choice.message = Message.model_validate(message)
        choice.finish_reason = reasons[i] if i < len(reasons) else None
        response.choices.append(choice)
    usage = served.meta.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
        total = (
            prompt + completion if isinstance(prompt, int) and isinstance(completion, int) else None
        )
        response.usage = CompletionUsage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=total
        )
    return response


async def _each(items: list[Any]) -> Any:
    for item in items:
        yield item


def _rebuilt_chunks(served: Any) -> list[Any]:
    """aisuite's own stream chunks (``ChatCompletionChunk``) from a recorded answer: the
    recorded chunks when the stream was stored whole, else one chunk per choice with its
    whole message and a last one with the finish reasons and usage.

    Raises:
        ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` when the record lacks the content.
    """
    from aisuite.framework.chat_completion_chunk import (
        ChatCompletionChunk,
        ChoiceDelta,
        ChoiceDeltaFunction,
        ChoiceDeltaToolCall,
        StreamChoice,
    )
    from aisuite.framework.message import CompletionUsage

    items = served.outputs.get("stream")
    if isinstance(items, list) and all(isinstance(i, dict) for i in items):
        return [ChatCompletionChunk.model_validate(i) for i in items]
    content = served.outputs.get("content")
    if not isinstance(content, list):
        raise ReplayUnavailableError(
            message="the recorded call holds no content", details={"event_id": served.event_id}
        )
    chunks = []
    for i, message in enumerate(content):
        message = message if isinstance(message, dict) else {}
        calls = [
            ChoiceDeltaToolCall(
                index=j,
                id=call.get("id"),
                type=call.get("type", "function"),
                function=ChoiceDeltaFunction(
                    name=(call.get("function") or {}).get("name"),
                    arguments=(call.get("function") or {}).get("arguments"),
                ),
            )
            for j, call in enumerate(message.get("tool_calls") or [])
        ]
        delta = ChoiceDelta(
            role=message.get("role", "assistant"),
            content=message.get("content"),
            tool_calls=calls or None,
        )
        chunks.append(ChatCompletionChunk(choices=[StreamChoice(index=i, delta=delta)]))
    reasons = served.meta.get("finish_reasons") or []
    usage = served.meta.get("usage")
    last = ChatCompletionChunk(
        choices=[StreamChoice(index=i, finish_reason=r) for i, r in enumerate(reasons)]
    )
    if isinstance(usage, dict) and isinstance(usage.get("input_tokens"), int):
        prompt, completion = usage["input_tokens"], usage.get("output_tokens") or 0
        last.usage = CompletionUsage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
    return [*chunks, last]


def _docstring(fn: Callable[..., Any]) -> str:
    """The function's docstring with a Google-style ``Args:`` section naming every argument
    plus ``justification`` (aisuite reads argument descriptions from it)."""
    from docstring_parser import parse

    parsed = parse(inspect.getdoc(fn) or "")
    text = parsed.short_description or ""
    if parsed.long_description:
        text += "\n\n" + parsed.long_description
    lines = [text, "", "Args:"]
    for p in parsed.params:
        desc = (p.description or "").replace("\n", "\n        ")
        lines.append(f"    {p.arg_name}: {desc}")
    lines.append(f"    {JUSTIFICATION}: {JUSTIFICATION_SCHEMA['description']}")
    return "\n".join(lines)


class JournaledClient:
    """An ``aisuite.Client`` whose completions are journaled and whose tools are guarded.

    ``client.chat.completions.create(model, messages, **kwargs)`` and ``acreate`` work as
    aisuite's; everything else is the wrapped client's own attribute.

    Args:
        run: The ``toolledger`` run.
        client: An ``aisuite.Client``.
        capture_content: Store message content in the journal (``None``: the run's
            ``journal_content``, on by default; telemetry's capture setting is not read).
        revisions: ``{function name: revision}`` for the guard's bindings (default ``"1"``;
            bump a tool's revision when its behaviour changes).
    """

    def __init__(
        self,
        run: Run,
        client: Any,
        *,
        capture_content: bool | None = None,
        revisions: Mapping[str, str] | None = None,
    ) -> None:
        self.run = run
        self.client = client
        self._capture = capture_content
        self._revisions = dict(revisions or {})
        self._pending = _Pending()
        self._tools: dict[int, tuple[Callable[..., Any], Tool]] = {}
        self.chat = _Chat(self)

    def __getattr__(self, name: str) -> Any:
        if name == "client":
            raise AttributeError(name)
        return getattr(self.client, name)

    # -- providers ------------------------------------------------------------------------

    def _prepare(self, model: str, kwargs: dict[str, Any]) -> None:
        key = model.split(":", 1)[0] if isinstance(model, str) and ":" in model else None
        if key is not None:
            self._wrap_provider(key)
        tools = kwargs.get("tools")
        if tools is None:
            return
        if kwargs.get("max_turns") is None and not _forwards_tools_without_max_turns():
            raise InvalidArgumentError(
                message="this aisuite version drops tools unless max_turns is set: pass "
                "max_turns=... (aisuite runs the tools) or upgrade to aisuite>=0.2"
            )
        if isinstance(tools, (list, tuple)):
            kwargs["tools"] = [self._justified(t) for t in tools]

    def _wrap_provider(self, key: str) -> None:
        from aisuite.provider import ProviderFactory

        providers = self.client.providers
        current = providers.get(key)
        if isinstance(current, _JournaledProvider):
            return
        if current is None:
            if key not in ProviderFactory.get_supported_providers():
                return  # aisuite reports the bad key itself
            config = dict(self.client.provider_configs.get(key, {}))
            current = ProviderFactory.create_provider(key, config)
        recorder = Recorder(self.run, PROVIDER_NAMES.get(key, key), self._capture)
        providers[key] = _JournaledProvider(current, recorder, self._pending)

    # -- tools ----------------------------------------------------------------------------

    def _justified(self, fn: Any) -> Any:
        if not callable(fn) or isinstance(fn, type) or hasattr(fn, "__mcp_input_schema__"):
            return fn  # schema dicts, Tools instances, MCP tools: unchanged
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return fn
        if JUSTIFICATION in sig.parameters or getattr(fn, "__toolledger_justified__", False):
            return fn
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        params.append(
            inspect.Parameter(JUSTIFICATION, inspect.Parameter.KEYWORD_ONLY, annotation=str)
        )
        name = fn.__name__

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(**kwargs: Any) -> Any:
                justification = kwargs.pop(JUSTIFICATION, None)
                call_id = self._pending.take(name, {**kwargs, JUSTIFICATION: justification})
                if call_id is None:
                    return await fn(**kwargs)
                outcome = await self.run.acall(
                    self._tool(fn), **self._call(call_id, kwargs, justification)
                )
                return outcome.payload

            wrapper: Any = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(**kwargs: Any) -> Any:
                justification = kwargs.pop(JUSTIFICATION, None)
                call_id = self._pending.take(name, {**kwargs, JUSTIFICATION: justification})
                if call_id is None:
                    return fn(**kwargs)
                outcome = self.run.call(
                    self._tool(fn), **self._call(call_id, kwargs, justification)
                )
                return outcome.payload

            wrapper = sync_wrapper
        wrapper.__signature__ = sig.replace(parameters=_ordered(params))
        wrapper.__doc__ = _docstring(fn)
        wrapper.__toolledger_justified__ = True
        del wrapper.__wrapped__  # aisuite must read the new signature, not the original's
        return wrapper

    @staticmethod
    def _call(call_id: str, kwargs: dict[str, Any], justification: Any) -> dict[str, Any]:
        return {
            "call_id": call_id,
            "input": kwargs,
            "justification": justification
            if isinstance(justification, str) and justification.strip()
            else None,
            "justification_source": "model",
        }

    def _tool(self, fn: Callable[..., Any]) -> Tool:
        found = self._tools.get(id(fn))
        if found is not None and found[0] is fn:
            return found[1]
        name = fn.__name__
        if inspect.iscoroutinefunction(fn):

            async def aexecute(input: Any, ctx: Any) -> Any:
                return await fn(**input)

            execute: Callable[..., Any] = aexecute
        else:

            def execute(input: Any, ctx: Any) -> Any:
                return fn(**input)

        made = tool(
            name,
            revision=self._revisions.get(name, "1"),
            execute=execute,
            description=(inspect.getdoc(fn) or "").split("\n", 1)[0] or None,
        )
        self._tools[id(fn)] = (fn, made)
        return made


def _ordered(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Parameters in a valid order (keyword-only after the positional ones)."""
    rank = {
        inspect.Parameter.POSITIONAL_ONLY: 0,
        inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
        inspect.Parameter.VAR_POSITIONAL: 2,
        inspect.Parameter.KEYWORD_ONLY: 3,
        inspect.Parameter.VAR_KEYWORD: 4,
    }
    return sorted(params, key=lambda p: rank[p.kind])


class _Completions:
    def __init__(self, owner: JournaledClient) -> None:
        self._owner = owner

    def create(self, model: str, messages: list[Any], **kwargs: Any) -> Any:
        """aisuite's ``chat.completions.create``, journaled (see ``JournaledClient``).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when ``tools`` would be dropped
                (aisuite < 0.2 without ``max_turns``).
        """
        self._owner._prepare(model, kwargs)
        return self._owner.client.chat.completions.create(model, messages, **kwargs)

    async def acreate(self, model: str, messages: list[Any], **kwargs: Any) -> Any:
        """aisuite's ``chat.completions.acreate``, journaled."""
        self._owner._prepare(model, kwargs)
        return await self._owner.client.chat.completions.acreate(model, messages, **kwargs)


class _Chat:
    def __init__(self, owner: JournaledClient) -> None:
        self.completions = _Completions(owner)
