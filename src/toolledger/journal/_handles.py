"""Live events: ``EventHandle`` (the internal API), ``Step`` (the user's context manager).

Rules this module keeps:

- ``Run.begin_event(kind, name, ...)`` writes the event's *start* record, starts its span
  and pushes the handle on the context-variable stack, so events begun inside it (in this
  thread or asyncio task, and in tasks created from it) get it as ``parent_id``. Threads
  and tasks each keep their own stack.
- ``EventHandle.update(...)`` merges facts learned mid-flight (outputs, meta, the
  checkpoint link); they are written with the *end* record. Nothing hashed is updated in
  place: the journal is append-only.
- ``EventHandle.end(status, ...)`` writes the end record, ends the span and pops the stack.
  Ending twice is a no-op.
- An exception inside ``with run.step(...)`` is recorded (type, message) as a failed event
  and re-raised unchanged; ``KeyboardInterrupt`` and cancellation record ``cancelled``.
- Telemetry calls are guarded by the run: they can never raise into the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType, TracebackType
from typing import Any, Protocol

from ..errors import CheckpointError, InvalidArgumentError
from ..telemetry import CallFacts, NoopSpan, SpanHandle
from ._values import to_json

__all__ = [
    "Artifact",
    "EventHandle",
    "EventSink",
    "FirstRecord",
    "Step",
    "checkpoint_link",
    "current_stack",
    "error_info",
    "hash_artifact",
    "push_event",
]

#: An event's start record while it may still be buffered: (its writer token, content, at,
#: justification source, justification missing); its end may then store the whole event
#: as one record instead.
FirstRecord = tuple[Any, dict[str, Any], str, str | None, bool]


class EventSink(Protocol):
    """What an ``EventHandle`` and a ``Step`` ask of their run (``Recorder`` is one)."""

    def begin_event(
        self,
        kind: str,
        name: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: Any = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
        flush: bool = False,
    ) -> EventHandle:
        """Begin an event (``Recorder.begin_event``)."""
        ...

    def begin_step(
        self, name: str, justification: str | None, justification_source: str, inputs: Any
    ) -> EventHandle:
        """Begin a step whose arguments were checked already."""
        ...

    def end_event(
        self,
        handle: EventHandle,
        status: str,
        error: Any,
        carried: Any,
        flush: bool,
        facts: CallFacts | None = None,
    ) -> None:
        """Write ``handle``'s end record (unless ``carried``) and end its span (with a tool
        call's ``facts``)."""
        ...

    def record_point(
        self, kind: str, name: str, *, text: str | None = None, parent: Any = ...
    ) -> str:
        """Write a one-record event; return its id."""
        ...

    def record_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None,
        parent: Any,
    ) -> Artifact:
        """Hash and record an artifact."""
        ...

    def safe_telemetry(self, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        """Call a telemetry hook; a failure is logged, never raised."""
        ...

    def activate(self, handle: EventHandle) -> contextlib.AbstractContextManager[None] | None:
        """Make the event's span current (``None``: nothing to undo)."""
        ...

    def deactivate(
        self,
        cm: contextlib.AbstractContextManager[None] | None,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Undo ``activate``."""
        ...

    def maybe_flush(self) -> None:
        """Flush the run's buffered records if its policy says so."""
        ...


#: The stack of open events in this context (innermost last), across runs.
_STACK: ContextVar[tuple[EventHandle, ...]] = ContextVar("toolledger_event_stack", default=())

_NOOP_SPAN = NoopSpan()


def current_stack() -> tuple[EventHandle, ...]:
    """Return the open events of the current context, innermost last."""
    return _STACK.get()


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """An artifact recorded by hash: the bytes stay where they were."""

    name: str
    sha256: str
    size: int
    media_type: str | None
    path: str | None
    event_id: str


def error_info(error: BaseException | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Return the journal form of an error: ``{"type", "message"}`` (+ ``code``)."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        tp = type(error)
        info: dict[str, Any] = {"type": tp.__qualname__, "message": _safe_str(error)}
        if tp.__module__ not in ("builtins", "__main__"):
            info["module"] = tp.__module__
        if isinstance(error, CheckpointError):
            info["code"] = error.code
        return info
    value, _ = to_json(dict(error))
    return dict(value)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:4000]
    except Exception:
        return f"<unprintable {type(exc).__qualname__}>"


class EventHandle:
    """A journal event in flight (a step, tool call, approval …).

    Attributes:
        event_id: 128-bit id (32 hex digits).
        kind, name: What the event is.
        parent_id: The enclosing event, or ``None`` at the run's top level.
        span: Its telemetry ``SpanHandle`` (a no-op span without telemetry).
        outputs, meta, link, floats: What the end record will hold (the outputs, meta and
            checkpoint link merged so far, converted; whether a float may be in them).
        first: The start record while it may still be buffered (``FirstRecord``), set and
            taken by the recorder.

    The handle's run is its ``EventSink``: the handle asks it to end the event and to
    guard telemetry calls, and reads nothing else of it.
    """

    __slots__ = (
        "_carried_end",
        "_ended",
        "event",
        "event_id",
        "first",
        "floats",
        "kind",
        "link",
        "meta",
        "name",
        "outputs",
        "parent_id",
        "run",
        "span",
        "started",
    )

    def __init__(
        self,
        run: EventSink,
        *,
        event_id: str,
        kind: str,
        name: str,
        parent_id: str | None,
        event: dict[str, Any] | None,
        floats: bool,
        checkpoint: dict[str, Any] | None,
    ) -> None:
        self.run = run
        self.event_id = event_id
        self.kind = kind
        self.name = name
        self.parent_id = parent_id
        # The event dict telemetry sees, completed at the end (``None`` without telemetry).
        self.event = event
        self.span: SpanHandle = _NOOP_SPAN
        self.started = time.monotonic()
        self.outputs: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.link = checkpoint
        self.floats = floats
        self._ended = False
        self.first: FirstRecord | None = None
        # The end record a caller's transaction put in the chain (``Run.prepare_end``),
        # set by the writer the moment that is known, before the caller hears of it.
        self._carried_end: Any = None

    @property
    def ended(self) -> bool:
        """Whether ``end`` was called."""
        return self._ended

    def end_carried(self, prepared: Any) -> None:
        """The chain holds ``prepared`` (this event's ``Run.prepare_end``): a later
        ``end`` ends with it and writes no other end record (the caller may have been
        interrupted before it heard that its transaction carried the record)."""
        if not self._ended:
            self._carried_end = prepared

    def update(
        self,
        *,
        outputs: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> None:
        """Merge facts learned mid-flight; they are written with the end record.

        Args:
            outputs: Merged into the event's outputs (later keys win).
            meta: Merged into the event's meta.
            checkpoint: The checkpoint link ``{"namespace", "call_id", "revision"}``.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when a mapping argument is not one.
        """
        self._merge(outputs, meta, checkpoint, tell=True)

    def _merge(
        self,
        outputs: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        checkpoint: Mapping[str, Any] | None,
        *,
        tell: bool,
    ) -> None:
        """``update``'s merge; ``tell``: tell the span the meta and link too."""
        if outputs:
            value, floats = to_json(_mapping(outputs, "outputs"))
            self.outputs.update(value)
            self.floats |= floats
        if meta:
            value, floats = to_json(_mapping(meta, "meta"))
            self.meta.update(value)
            self.floats |= floats
        if checkpoint is not None:
            self.link = checkpoint_link(checkpoint)
        if tell and (checkpoint is not None or meta) and self.span is not _NOOP_SPAN:
            facts: dict[str, Any] = dict(self.meta)
            if self.link is not None:
                facts["checkpoint"] = self.link
            self.run.safe_telemetry(self.span.update, facts)

    def end(
        self,
        status: str,
        *,
        outputs: Mapping[str, Any] | None = None,
        error: BaseException | Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        carried: Any = None,
        flush: bool = False,
        checkpoint: Mapping[str, Any] | None = None,
        facts: CallFacts | None = None,
    ) -> None:
        """Write the end record, end the span and pop the context stack.

        Args:
            status: ``completed``, ``failed``, ``refused``, ``replayed``, ``cancelled`` …
            outputs: Merged into the outputs recorded so far.
            error: An exception or a JSON-able dict describing the failure.
            meta: Merged into meta.
            flush: Write the end record (with everything buffered) now.
            carried: The ``PreparedEnd`` (``Run.prepare_end``) of this end, which a
                transaction already put in the chain: it is not written again, and its
                outputs, meta and checkpoint link replace ``outputs``/``meta``.
            checkpoint: The checkpoint link ``{"namespace", "call_id", "revision"}``.
            facts: A tool call's ``CallFacts``: its span is told them (and the final
                event) once, at its end, and nothing before.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for an empty or non-str status.
        """
        if self._ended:
            return
        _check_status(status)
        if carried is None and self._carried_end is not None:
            carried = self._carried_end  # the chain holds this event's end already
            status = carried.header.status
        if carried is None:
            if outputs or meta or checkpoint is not None:
                self._merge(outputs, meta, checkpoint, tell=facts is None)
        else:
            self.outputs = carried.outputs
            self.meta = carried.meta
            self.link = carried.link
            self.floats = carried.floats
            if self.span is not _NOOP_SPAN and facts is None:  # as ``update`` tells telemetry
                self.run.safe_telemetry(self.span.update, {**self.meta, "checkpoint": self.link})
        self._ended = True
        _pop(self)
        self.run.end_event(self, status, error, carried, flush, facts)


def _pop(handle: EventHandle) -> None:
    stack = _STACK.get()
    if stack and stack[-1] is handle:
        _STACK.set(stack[:-1])
    elif handle in stack:
        _STACK.set(tuple(h for h in stack if h is not handle))


def push_event(handle: EventHandle) -> None:
    _STACK.set((*_STACK.get(), handle))


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if type(value) is not dict and not isinstance(value, Mapping):  # (the ABC check costs)
        raise InvalidArgumentError(message=f"{what} must be a mapping; got {type(value).__name__}")
    return value


def _check_status(status: object) -> None:
    if not isinstance(status, str) or not status or len(status) > 64 or not status.isascii():
        raise InvalidArgumentError(message=f"status must be a short non-empty str; got {status!r}")


def checkpoint_link(link: Mapping[str, Any]) -> dict[str, Any]:
    if type(link) is not dict and not isinstance(link, Mapping):
        raise InvalidArgumentError(message="checkpoint must be a mapping")
    out = {
        "namespace": link.get("namespace"),
        "call_id": link.get("call_id"),
        "revision": link.get("revision"),
    }
    if not isinstance(out["namespace"], str) or not isinstance(out["call_id"], str):
        raise InvalidArgumentError(message="checkpoint needs str namespace and call_id")
    rev = out["revision"]
    if rev is not None and (type(rev) is not int or rev < 0):
        raise InvalidArgumentError(message="checkpoint revision must be a non-negative int")
    return out


class Step:
    """``with run.step(...) as step`` (sync or async): one recorded step.

    The step starts when the block is entered and ends when it is left: ``completed``, or
    ``failed`` with the exception's type and message (the exception is re-raised).
    """

    __slots__ = ("_activation", "_checked", "_handle", "_spec", "run")

    def __init__(self, run: EventSink, spec: dict[str, Any], *, checked: bool = False) -> None:
        self.run = run
        self._spec = spec
        self._checked = checked  # the name, justification and source were checked
        self._handle: EventHandle | None = None
        self._activation: contextlib.AbstractContextManager[None] | None = None

    @property
    def handle(self) -> EventHandle:
        """The live event (after the block is entered).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` before the step started.
        """
        if self._handle is None:
            raise InvalidArgumentError(message="the step has not started (use it in a with)")
        return self._handle

    @property
    def event_id(self) -> str:
        """The step's event id."""
        return self.handle.event_id

    def __enter__(self) -> Step:
        spec = self._spec
        if self._checked:
            self._handle = self.run.begin_step(
                spec["name"], spec["justification"], spec["justification_source"], spec["inputs"]
            )
        else:
            self._handle = self.run.begin_event("step", **spec)
        self._activation = self.run.activate(self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._activation is not None:
            self.run.deactivate(self._activation, exc_type, exc, tb)
        handle = self.handle
        if exc is None:
            handle.end("completed")
        elif isinstance(exc, Exception):
            handle.end("failed", error=exc)
        else:
            handle.end("cancelled", error=exc)
        self.run.maybe_flush()

    async def __aenter__(self) -> Step:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def record_output(self, **outputs: Any) -> None:
        """Record outputs (merged; later keys win). Non-JSON values get markers."""
        self.handle.update(outputs=outputs)

    def note(self, text: str) -> str:
        """Record a note inside this step; return its event id.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when ``text`` is not a str.
        """
        return self.run.record_point("note", "note", parent=self.handle, text=text)

    def add_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None = None,
    ) -> Artifact:
        """Record an artifact of this step by SHA-256, size and media type.

        The bytes stay where they are (a file is read once to hash it); the journal keeps
        the hash, the size, the media type and, for a file, its absolute path.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a missing file or bad argument.
        """
        return self.run.record_artifact(
            path_or_bytes, name=name, media_type=media_type, parent=self
        )


def hash_artifact(
    path_or_bytes: str | os.PathLike[str] | bytes, name: str, media_type: str | None
) -> dict[str, Any]:
    """Return the artifact's journal form; the bytes are hashed, never copied.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a missing file or bad argument.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(message="artifact name must be a non-empty str")
    if media_type is not None and not isinstance(media_type, str):
        raise InvalidArgumentError(message="media_type must be a str or None")
    for what, text in (("artifact name", name), ("media_type", media_type)):
        if text is not None and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgumentError(
                    message=f"{what} is not valid Unicode (a lone surrogate at {exc.start})"
                ) from exc
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        return {
            "name": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "media_type": media_type or "application/octet-stream",
            "path": None,
        }
    if not isinstance(path_or_bytes, (str, os.PathLike)):
        raise InvalidArgumentError(
            message=f"an artifact is a path or bytes; got {type(path_or_bytes).__name__}"
        )
    path = Path(path_or_bytes).resolve()
    digest = hashlib.sha256()
    size = 0
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise InvalidArgumentError(
            message=f"cannot read artifact {str(path)!r}: {exc.strerror or exc}",
            details={"path": str(path)},
        ) from exc
    guessed = mimetypes.guess_type(path.name)[0]
    return {
        "name": name,
        "sha256": digest.hexdigest(),
        "size": size,
        "media_type": media_type or guessed or "application/octet-stream",
        "path": str(path),
    }
