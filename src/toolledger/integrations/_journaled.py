"""Model calls in the journal: the ``llm_call`` recorder behind ``journaled(client, run)``.

Every completion made through a journaled client becomes one journal event of kind
``llm_call`` (its span is ``chat {model}``), written by the run's internal event API.

Rules this module keeps:

- The event's ``name`` is the requested model; its ``meta`` keeps ``provider``, ``api``
  (``anthropic``, ``openai`` or ``openai.responses``: the shape of the stored content),
  ``model`` (requested), ``request`` (the sampling parameters the SDK call carried:
  ``temperature``, ``max_tokens``, ``top_p``, ``top_k``, ``stop_sequences``, ``seed``,
  ``frequency_penalty``, ``presence_penalty``), ``stream``, ``server`` (``address``,
  ``port`` of the client's base URL), ``response_id``, ``response_model``,
  ``finish_reasons``, ``usage`` (``input_tokens`` and ``output_tokens`` as the provider
  reported them, ``cache_read_input_tokens``, ``cache_creation_input_tokens``,
  ``reasoning_output_tokens`` when reported), ``time_to_first_chunk`` (seconds, streams),
  ``tool_call_ids`` and ``content_sha256``: the hex SHA-256 of the
  canonical JSON (RFC 8785 style) of ``{"messages": <request messages>, "response":
  <response content>}``, where the response content is the provider-neutral form built in
  ``_journaled_facts`` (so a streamed and a plain completion of the same answer hash alike).
- Content is journaled by default, like tool inputs and outputs (``docs/replay.md``): the
  request (``inputs``: ``messages``, ``system``: Anthropic's ``system`` or the Responses
  API's ``instructions``, ``tools``, ``parameters``: every other argument sent to the
  model, never the transport's options) and the response (``outputs``: ``content``, the
  provider-neutral form; ``response``, the whole SDK response; ``stream``, a
  ``stream=True`` response's events, stored once, whole). ``toolledger.run(...,
  journal_content=False)`` or ``journaled(..., capture_content=False)`` turn it off; the
  telemetry capture setting governs spans only. ``meta.tool_calls`` (ids and names) is
  stored either way.
- Stored content passes through the run's redact hook first (``run.journal_redact``: the
  run's ``redact=``, else ``configure()``'s): the request as ``{REDACT_REQUEST: <JSON
  text>}``, the response as ``{REDACT_RESPONSE: <JSON text>}``; what the hook returns under
  the key is parsed back and stored. A hook that raises, drops the key or returns text
  that is not a JSON object stores no content for that half (fail closed; the failure is
  kept in ``run.errors``). Replay compares a live request in the same redacted form, and
  ``meta.content_sha256`` then hashes the redacted messages and content (what is stored).
- Streams: the event is begun when the request is sent and ended when the stream is
  consumed, closed, or fails; a stream closed early records what was received
  (``meta.stream_closed_early``).
- Recording never breaks the agent: a journal failure is kept in ``run.errors`` (raised
  only with ``strict=True``); the SDK's own exceptions are recorded and re-raised unchanged.
- Tool calls the model requested are remembered on the run (``run.remember_request``, bounded)
  so the guard's ``tool_call`` events of those ids get this event (and span) as parent.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..checkpoint import canonical_json
from ..errors import InvalidArgumentError
from ._common import as_plain

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "REDACT_REQUEST",
    "REDACT_RESPONSE",
    "AsyncStream",
    "LLMCall",
    "Recorder",
    "ResponseFacts",
    "StreamManager",
    "SyncStream",
    "content_sha256",
]

#: The key a model request's journaled content is given to the run's redact hook under.
REDACT_REQUEST = "toolledger.llm_call.request"
#: The key a model response's journaled content is given to the run's redact hook under.
REDACT_RESPONSE = "toolledger.llm_call.response"


@dataclass(slots=True, kw_only=True)
class ResponseFacts:
    """What a completion answered, provider-neutral."""

    response_id: str | None = None
    response_model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None
    tool_call_ids: list[str] = field(default_factory=list)
    tool_call_names: list[str] = field(default_factory=list)
    content: Any = None
    #: The whole response as the SDK dumps it (stored with content, served by replay).
    response: Any = None


def carried_result_ids(messages: Any) -> list[str]:
    """Return the tool-call ids whose results ``messages`` carry to the model, in order.

    Anthropic ``tool_result`` blocks (``tool_use_id``), OpenAI chat ``tool`` messages
    (``tool_call_id``) and Responses ``function_call_output`` items (``call_id``), as
    dicts or SDK objects. Anything unreadable carries nothing.
    """
    out: list[str] = []
    if not isinstance(messages, (list, tuple)):
        return out

    def add(value: Any) -> None:
        if isinstance(value, str) and value and value not in out:
            out.append(value)

    try:
        for message in messages:
            item = as_plain(message)
            if not isinstance(item, Mapping):
                continue
            if item.get("role") == "tool":
                add(item.get("tool_call_id"))
            if item.get("type") == "function_call_output":
                add(item.get("call_id"))
            content = item.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, Mapping) and block.get("type") == "tool_result":
                        add(block.get("tool_use_id"))
    except Exception:  # an unreadable request object: nothing counted as seen
        return out
    return out


def content_sha256(messages: Any, content: Any) -> str:
    """Return the hex SHA-256 of the canonical JSON of ``{"messages", "response"}``.

    Values that are not exact JSON (bytes, NaN) fall back to sorted compact ``json.dumps``
    with ``repr`` for the odd value, so hashing never fails.
    """
    doc = {"messages": as_plain(messages), "response": content}
    try:
        text = canonical_json(doc)
    except Exception:  # not exact JSON: still hash something stable
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def redacted(run: Run, key: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    """``doc`` as the run's redact hook leaves it (``doc`` itself without a hook).

    The hook gets ``{key: <compact JSON text of doc>}`` and returns a mapping whose value
    under ``key`` is parsed back. ``None`` (fail closed: no content is stored) when the hook
    raises, drops the key or returns something that is not a JSON object's text; the
    failure goes to ``run.errors`` (raised when the run is strict).
    """
    hook = run.journal_redact
    if hook is None:
        return doc
    try:
        text = json.dumps(
            doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
        )
        out = hook({key: text})
        value = out.get(key) if isinstance(out, Mapping) else None
        back = json.loads(value) if isinstance(value, str) else None
        if not isinstance(back, dict):
            raise TypeError(f"returned no JSON object text under {key!r}")
        return back
    except Exception as exc:  # fail closed: the content is not stored
        run.record_failure(
            InvalidArgumentError(
                message=f"redact hook failed on a model call's content ({exc}); "
                "the content was not journaled",
                details={"key": key},
            )
        )
        return None


def _capture(run: Run, explicit: bool | None) -> bool:
    """Journal content: ``journaled(..., capture_content=)`` when given, else the run's
    ``journal_content`` (on unless ``toolledger.run(..., journal_content=False)``)."""
    if explicit is not None:
        return bool(explicit)
    return run.journal_content


#: SDK call arguments that are not part of the model request: the transport's options
#: (headers may hold secrets), and the arguments stored apart (``request_doc``).
_NOT_PARAMETERS = frozenset(
    {
        "model",
        "messages",
        "input",
        "system",
        "instructions",
        "tools",
        "stream",
        "extra_headers",
        "extra_query",
        "timeout",
    }
)


def _given(value: Any) -> bool:
    """False for the SDKs' ``NOT_GIVEN``/``omit`` sentinels (and ``None``)."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def request_doc(
    messages: Any, system: Any, kwargs: dict[str, Any], *, stream: bool
) -> dict[str, Any]:
    """The model request as the journal stores it (``inputs``) and replay compares it.

    ``{"messages", "system"?, "tools"?, "parameters"}``: ``parameters`` are every other
    argument sent to the model (``stream: true`` for a streamed request, whichever way it
    was asked for), never the transport's options (``extra_headers``, ``timeout``, …).
    """
    doc: dict[str, Any] = {"messages": as_plain(messages)}
    if _given(system):
        doc["system"] = as_plain(system)
    tools = kwargs.get("tools")
    if _given(tools):
        doc["tools"] = as_plain(tools)
    params = {k: as_plain(v) for k, v in kwargs.items() if k not in _NOT_PARAMETERS and _given(v)}
    if stream:
        params["stream"] = True
    doc["parameters"] = params
    return doc


#: Request parameters kept in ``meta.request`` (the SDK argument names).
REQUEST_PARAMS = (
    "temperature",
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
    "top_p",
    "top_k",
    "stop",
    "stop_sequences",
    "seed",
    "frequency_penalty",
    "presence_penalty",
)
_PARAM_NAMES = {
    "max_output_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "stop": "stop_sequences",
}


def request_params(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The sampling parameters of an SDK call, under the conventions' names."""
    out: dict[str, Any] = {}
    for key in REQUEST_PARAMS:
        value = kwargs.get(key)
        if value is None or not isinstance(value, (int, float, str, list, tuple)):
            continue  # the SDKs' NOT_GIVEN sentinels and anything odd are left out
        if isinstance(value, bool):
            continue
        name = _PARAM_NAMES.get(key, key)
        if name == "stop_sequences":
            if isinstance(value, str):
                value = [value]
            elif isinstance(value, (list, tuple)):
                value = [str(v) for v in value]
            else:
                continue
        out[name] = value
    return out


def server_of(client: Any) -> dict[str, Any] | None:
    """``{"address", "port"}`` of an SDK client's base URL (``None``: unknown)."""
    try:
        url = client.base_url
        host = getattr(url, "host", None)
        if not isinstance(host, str) or not host:
            return None
        port = getattr(url, "port", None)
        if not isinstance(port, int):
            port = 443 if getattr(url, "scheme", "https") == "https" else 80
        return {"address": host, "port": port}
    except Exception:  # a client without a base URL: no server attributes
        return None


class Recorder:
    """Begins ``llm_call`` events for one wrapped client.

    Args:
        run: The run the events go to.
        provider: ``gen_ai.provider.name`` (``anthropic``, ``openai``, …).
        capture_content: Store message content (``None``: the run's policy).
        server: ``{"address", "port"}`` of the client's base URL.
    """

    __slots__ = ("capture", "provider", "run", "server")

    def __init__(
        self,
        run: Run,
        provider: str,
        capture_content: bool | None = None,
        server: dict[str, Any] | None = None,
    ) -> None:
        self.run = run
        self.provider = provider
        self.capture = _capture(run, capture_content)
        self.server = server

    def request(
        self, messages: Any, system: Any, kwargs: dict[str, Any], *, stream: bool
    ) -> dict[str, Any] | None:
        """The request as stored (``inputs``) and as replay compares it: ``request_doc``
        through the run's redact hook (``None``: the hook failed, nothing is stored)."""
        return redacted(
            self.run, REDACT_REQUEST, request_doc(messages, system, kwargs, stream=stream)
        )

    def begin(
        self,
        model: Any,
        messages: Any,
        *,
        api: str | None = None,
        request: dict[str, Any] | None = None,
        system: Any = None,
        stream: bool = False,
        served: dict[str, Any] | None = None,
    ) -> LLMCall:
        """Write the event's start record; return the call to end.

        Args:
            model: The requested model.
            messages: The request's messages (stored with journal content).
            api: The shape of the stored content (default: the provider's name).
            request: The SDK call's keyword arguments (parameters and ``stream`` are kept).
            system: Instructions given apart from the messages (stored with content).
            stream: The request is streamed (``stream=True`` or a ``stream`` helper).
            served: Where a replayed or resumed answer came from (``meta``).
        """
        return LLMCall(
            self,
            model,
            messages,
            api=api,
            request=request,
            system=system,
            stream=stream,
            served=served,
        )


class LLMCall:
    """One completion in flight; ``end(facts)`` or ``fail(exc)`` exactly once."""

    __slots__ = (
        "_done",
        "_first",
        "_started",
        "carried",
        "handle",
        "messages",
        "model",
        "recorder",
        "stream_items",
    )

    def __init__(
        self,
        recorder: Recorder,
        model: Any,
        messages: Any,
        *,
        api: str | None = None,
        request: dict[str, Any] | None = None,
        system: Any = None,
        stream: bool = False,
        served: dict[str, Any] | None = None,
    ) -> None:
        self.recorder = recorder
        self.model = model if isinstance(model, str) and model else "unknown"
        self.messages = messages
        #: Tool results this request carries to the model (marked seen once it completes);
        #: none for an answer served from a record (that turn was the record's).
        self.carried: list[str] = [] if served is not None else carried_result_ids(messages)
        self._done = False
        self._started = time.monotonic()
        self._first: float | None = None
        self.handle: Any = None
        #: A stream's items as the SDK dumps them (kept with journal content, stored whole).
        self.stream_items: list[Any] | None = None
        run = recorder.run
        try:
            kwargs = request or {}
            stream = stream or kwargs.get("stream") is True
            inputs: dict[str, Any] | None = None
            if recorder.capture:
                inputs = recorder.request(messages, system, kwargs, stream=stream)
                if recorder.run.journal_redact is not None:
                    # meta.content_sha256 hashes what is stored: the redacted messages
                    self.messages = None if inputs is None else inputs.get("messages")
                if stream:
                    self.stream_items = []
            meta: dict[str, Any] = {
                "provider": recorder.provider,
                "api": api or recorder.provider,
                "model": self.model,
            }
            params = request_params(kwargs)
            if params:
                meta["request"] = params
            if stream:
                meta["stream"] = True
            if recorder.server is not None:
                meta["server"] = dict(recorder.server)
            if served is not None:
                meta.update(served)
            self.handle = run.begin_event("llm_call", self.model[:256], inputs=inputs, meta=meta)
        except Exception as exc:  # recording never breaks the agent (strict re-raises)
            self._failed(exc)

    def __enter__(self) -> LLMCall:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """``with call:`` around the SDK request: an exception fails the call, unchanged."""
        if exc is not None:
            self.fail(exc)

    def first_chunk(self) -> None:
        """Note that a stream's first chunk arrived (``time_to_first_chunk``)."""
        if self._first is None:
            self._first = time.monotonic() - self._started

    def _failed(self, exc: Exception) -> None:
        self.recorder.run.record_failure(exc)

    def end(self, facts: ResponseFacts, *, closed_early: bool = False) -> None:
        """Write the end record with the response's facts."""
        if self._done:
            return
        self._done = True
        if self.handle is None:
            return
        outputs: dict[str, Any] | None = None
        content = facts.content
        if self.recorder.capture:
            outputs = {"content": facts.content}
            if self.stream_items is not None and not closed_early and self.stream_items:
                outputs["stream"] = self.stream_items
            elif facts.response is not None:
                outputs["response"] = facts.response
            if self.recorder.run.journal_redact is not None:
                outputs = redacted(self.recorder.run, REDACT_RESPONSE, outputs)
                content = None if outputs is None else outputs.get("content")
        try:
            digest: str | None = content_sha256(self.messages, content)
        except Exception:  # an unreadable request object: the facts still count
            digest = None
        usage: dict[str, Any] = {
            "input_tokens": facts.input_tokens,
            "output_tokens": facts.output_tokens,
        }
        for key in (
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "reasoning_output_tokens",
        ):
            value = getattr(facts, key)
            if value is not None:
                usage[key] = value
        meta: dict[str, Any] = {
            "provider": self.recorder.provider,
            "model": self.model,
            "response_model": facts.response_model,
            "finish_reasons": list(facts.finish_reasons),
            "usage": usage,
            "tool_call_ids": list(facts.tool_call_ids),
            "content_sha256": digest,
        }
        if facts.tool_call_names and len(facts.tool_call_names) == len(facts.tool_call_ids):
            # Ids and names are not content: stored with or without journal content.
            meta["tool_calls"] = [
                {"id": i, "name": n}
                for i, n in zip(facts.tool_call_ids, facts.tool_call_names, strict=True)
            ]
        if facts.response_id is not None:
            meta["response_id"] = facts.response_id
        if self._first is not None:
            meta["time_to_first_chunk"] = round(self._first, 6)
        if closed_early:
            meta["stream_closed_early"] = True
        try:
            self.handle.end("completed", outputs=outputs, meta=meta)
        except Exception as exc:
            self._failed(exc)
        self._remember(facts.tool_call_ids)
        self._seen()

    def _seen(self) -> None:
        """The completed turn carried these results to the model: it saw them."""
        if not self.carried:
            return
        try:
            self.recorder.run.mark_seen(self.carried)
        except Exception as exc:  # recording never breaks the agent
            self._failed(exc)

    def fail(self, error: BaseException, facts: ResponseFacts | None = None) -> None:
        """Write the end record of a failed (or cancelled) completion."""
        if self._done:
            return
        self._done = True
        if self.handle is None:
            return
        meta: dict[str, Any] = {"provider": self.recorder.provider, "model": self.model}
        if facts is not None and facts.response_model:
            meta["response_model"] = facts.response_model
        status = "failed" if isinstance(error, Exception) else "cancelled"
        try:
            self.handle.end(status, error=error, meta=meta)
        except Exception as exc:
            self._failed(exc)

    def _remember(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        for call_id in ids:
            self.recorder.run.remember_request(call_id, self.handle)


# -- streams ----------------------------------------------------------------------------------


class _Stream:
    """What both pass-through streams share: delegation, and ending the event once."""

    def __init__(self, inner: Any, call: LLMCall, acc: Any) -> None:
        self._inner = inner
        self._call = call
        self._acc = acc
        self._it: Any = None
        self._finished = False

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def _keep(self, item: Any) -> None:
        items = self._call.stream_items
        if items is not None:
            plain = as_plain(item)
            if isinstance(plain, dict):
                items.append(plain)
            else:  # not an SDK model (aisuite's chunks): the content is kept, not the items
                self._call.stream_items = None

    def _finish(self, error: BaseException | None, *, early: bool) -> None:
        if self._finished:
            return
        self._finished = True
        facts = _safe_facts(self._acc)
        if error is not None:
            self._call.fail(error, facts)
        else:
            self._call.end(facts, closed_early=early)


class SyncStream(_Stream):
    """Wraps an SDK stream: items pass through unchanged; the event ends with the stream."""

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        if self._it is None:
            self._it = iter(self._inner)
        try:
            item = next(self._it)
        except StopIteration:
            self._finish(None, early=False)
            raise
        except BaseException as exc:
            self._finish(exc, early=False)
            raise
        self._call.first_chunk()
        with contextlib.suppress(Exception):  # a shape we do not know costs facts only
            self._acc.add(item)
            self._keep(item)
        return item

    def close(self) -> None:
        """Close the SDK stream and record what was received."""
        try:
            closer = getattr(self._inner, "close", None)  # a plain iterator has none
            if closer is not None:
                closer()
        finally:
            self._finish(None, early=True)

    def __enter__(self) -> SyncStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncStream(_Stream):
    """Async ``SyncStream``: ``async for``; ``await close()``."""

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        if self._it is None:
            self._it = self._inner.__aiter__()
        try:
            item = await self._it.__anext__()
        except StopAsyncIteration:
            self._finish(None, early=False)
            raise
        except BaseException as exc:
            self._finish(exc, early=False)
            raise
        self._call.first_chunk()
        with contextlib.suppress(Exception):
            self._acc.add(item)
            self._keep(item)
        return item

    async def close(self) -> None:
        """Close the SDK stream (``close`` or, for an async generator, ``aclose``) and
        record what was received."""
        try:
            closer = getattr(self._inner, "close", None) or getattr(self._inner, "aclose", None)
            done = closer() if closer is not None else None
            if inspect.isawaitable(done):
                await done
        finally:
            self._finish(None, early=True)

    aclose = close  # async generators (aisuite's streams) are closed with ``aclose``

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _safe_facts(acc: Any) -> ResponseFacts:
    try:
        facts: ResponseFacts = acc.facts()
        return facts
    except Exception:
        return ResponseFacts()


class StreamManager:
    """Wraps an SDK ``stream(...)`` helper (a context manager); records at exit.

    ``snapshot(stream)`` reads the helper's accumulated response (whatever was consumed,
    however it was consumed: iteration, ``text_stream``, ``get_final_…``).
    """

    def __init__(
        self,
        inner: Any,
        begin: Callable[[], LLMCall],
        snapshot: Callable[[Any], ResponseFacts],
        complete: Callable[[Any], bool],
    ) -> None:
        self._inner = inner
        self._begin = begin
        self._snapshot = snapshot
        self._complete = complete
        self._call: LLMCall | None = None
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._call = self._begin()
        with self._call:
            self._stream = self._inner.__enter__()
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._record(exc)
        return self._inner.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> Any:
        self._call = self._begin()
        with self._call:
            self._stream = await self._inner.__aenter__()
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._record(exc)
        return await self._inner.__aexit__(exc_type, exc, tb)

    def _record(self, exc: BaseException | None) -> None:
        call = self._call
        if call is None:
            return
        try:
            facts = self._snapshot(self._stream)
            complete = self._complete(self._stream)
        except Exception:  # nothing received yet
            facts, complete = ResponseFacts(), False
        if exc is not None:
            call.fail(exc, facts)
        else:
            call.end(facts, closed_early=not complete)
