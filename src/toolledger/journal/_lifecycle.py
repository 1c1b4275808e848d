"""The event lifecycle: an event begins, learns facts, ends; one-record events.

Everything that reads or changes an event in flight is in this module: ``EventHandle``
(the internal API; the user's ``Step`` in ``_step`` wraps one) and ``Events`` (a run's
events: it writes their records and tells telemetry). ``Events`` reaches its run only
through the seam ``RecordSink`` (public names; ``Recorder`` is one): it hands records to
the run's chain and telemetry calls to the run's guard, and reads nothing else of the run.

Rules this module keeps:

- ``Events.begin(kind, name, ...)`` writes the event's *start* record, starts its span
  and pushes the handle on the context-variable stack, so events begun inside it (in this
  thread or asyncio task, and in tasks created from it) get it as ``parent_id``. Threads
  and tasks each keep their own stack. The start record is buffered lazy: the handle
  builds it (``_start_record``) when the writer needs it, from values fixed at the begin.
- Each event's telemetry span is started before its first record is written, so the
  record header can carry the span's ``trace_id``/``span_id``. Without telemetry
  (``NOOP_TELEMETRY``) no event dict is built: only hooks read it.
- ``EventHandle.update(...)`` merges facts learned mid-flight (outputs, meta, the
  checkpoint link); they are written with the *end* record. Nothing hashed is updated in
  place: the journal is append-only.
- ``EventHandle.end(status, ...)`` writes the end record (or, while the start record is
  still the last one buffered, the whole event as one record in its place), ends the
  span and pops the stack. Ending twice is a no-op.
- ``record_point`` writes one-record events (approval, note, artifact, finish);
  ``record_event`` one that began and ended at once (a replayed or refused tool call).
- Every record's content is canonicalised and hashed (``content_json``) and its header
  written by the run's ``HeaderFormat`` from values checked or made here. Telemetry calls
  go through ``RecordSink.safe_telemetry``: they can never raise into the caller.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from functools import partial
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import InvalidArgumentError
from ..telemetry import NOOP_TELEMETRY, CallFacts, NoopSpan, SpanHandle, TelemetryHooks
from ._content import (
    JUSTIFICATION_MISSING,
    Artifact,
    check_event_args,
    check_text,
    checkpoint_link,
    error_info,
    event_content,
    hash_artifact,
    justification_missing,
    new_id,
    now,
)
from ._header import HeaderFormat, RecordHeader, point_event
from ._records import content_json
from ._values import encoded_json, exact_floats, to_json

if TYPE_CHECKING:
    from ..store.base import EventRow

__all__ = [
    "EventHandle",
    "Events",
    "PreparedEnd",
    "RecordSink",
    "current_stack",
    "span_ids",
]


class RecordSink(Protocol):
    """What a run's ``Events`` ask of the run (``Recorder`` is one): the seam between the
    event lifecycle and the run's chain and failure guards.

    Attributes:
        run_id: The run's id (in telemetry's event dicts).
        status: ``running`` while the run takes records (else ``require_running`` raises).
        telemetry: The run's hooks (``NOOP_TELEMETRY``: no event dict is built).
    """

    run_id: str
    status: str
    telemetry: TelemetryHooks

    def require_running(self) -> None:
        """Raise ``INVALID_ARGUMENT`` unless the run is running."""
        ...

    def safe_telemetry(self, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        """Call a telemetry hook; a failure is logged, never raised."""
        ...

    def append(self, header: RecordHeader, content_json: str) -> EventRow:
        """Chain one record (buffered); return its row."""
        ...

    def append_lazy(self, build: Callable[[], tuple[RecordHeader, str]]) -> object:
        """Chain one record built only when needed; return its token."""
        ...

    def is_last(self, token: object) -> bool:
        """Whether the record of ``token`` is the last one chained, still buffered."""
        ...

    def replace_last(self, token: object, header: RecordHeader, content_json: str) -> bool:
        """Put a record in place of the last buffered one (``token``); ``False`` if it is
        not the last one any more."""
        ...

    def flush(self) -> bool:
        """Write every buffered record now; return whether nothing is left buffered."""
        ...

    def maybe_flush(self) -> None:
        """Flush the buffered records if the run's policy says so."""
        ...


#: The stack of open events in this context (innermost last), across runs.
_STACK: ContextVar[tuple[EventHandle, ...]] = ContextVar("toolledger_event_stack", default=())

_NOOP_SPAN = NoopSpan()
_new = object.__new__

#: What an event's start record holds, fixed when the event began: (content, floats, at,
#: checkpoint link, justification source, justification missing). While that record is
#: still buffered, the event's end may store the whole event as one record in its place.
_StartRecord = tuple[dict[str, Any], bool, str, "dict[str, Any] | None", str, bool]


def current_stack() -> tuple[EventHandle, ...]:
    """Return the open events of the current context, innermost last."""
    return _STACK.get()


class PreparedEnd:
    """An event's end record built ahead of time; read-only.

    Made by ``Events.prepare_end`` only, which fills its slots (no ``__init__``: one call
    less per carried end).

    Attributes:
        on_carried: Call it once the chain holds this record: a later ``end`` of its
            event ends with it and writes no other end record (the caller may have been
            interrupted before it heard that its transaction carried the record).
    """

    __slots__ = (
        "content_json",
        "ended_at",
        "floats",
        "handle",
        "header",
        "link",
        "meta",
        "on_carried",
        "outputs",
    )

    handle: EventHandle
    ended_at: str
    header: RecordHeader
    content_json: str
    outputs: dict[str, Any]  # the event's outputs, meta and link once ended (converted)
    meta: dict[str, Any]
    link: dict[str, Any]
    floats: bool
    on_carried: Callable[[], None]


class EventHandle:
    """A journal event in flight (a step, tool call, approval …).

    Attributes:
        event_id: 128-bit id (32 hex digits).
        kind, name: What the event is.
        parent_id: The enclosing event, or ``None`` at the run's top level.
        span: Its telemetry ``SpanHandle`` (a no-op span without telemetry).
        trace_id, span_id: The span's ids its records keep (``span_ids``), or ``None``.
        events: The run's ``Events`` the event belongs to.
        ended: Whether ``end`` was called (set by ``end`` only).

    Made by ``Events.begin`` only, which fills its slots (no ``__init__``: one call less
    per event).
    """

    __slots__ = (
        "_carried_end",
        "_event",
        "_first",
        "_floats",
        "_link",
        "_meta",
        "_outputs",
        "_start",
        "ended",
        "event_id",
        "events",
        "kind",
        "name",
        "parent_id",
        "span",
        "span_id",
        "started",
        "trace_id",
    )

    events: Events
    event_id: str
    kind: str
    name: str
    parent_id: str | None
    span: SpanHandle
    trace_id: str | None
    span_id: str | None
    started: float
    ended: bool
    # The event dict telemetry sees, completed at the end (``None`` without telemetry).
    _event: dict[str, Any] | None
    _outputs: dict[str, Any]
    _meta: dict[str, Any]
    _start: _StartRecord
    _link: dict[str, Any] | None
    _floats: bool
    # The start record's writer token while it may still be buffered (its end may then
    # take its place); ``None`` once the event ended.
    _first: object
    # The end record a caller's transaction put in the chain (``Run.prepare_end``), set by
    # the writer the moment that is known, before the caller hears of it.
    _carried_end: PreparedEnd | None

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
            self._outputs.update(value)
            self._floats |= floats
        if meta:
            value, floats = to_json(_mapping(meta, "meta"))
            self._meta.update(value)
            self._floats |= floats
        if checkpoint is not None:
            self._link = checkpoint_link(checkpoint)
        if tell and (checkpoint is not None or meta) and self.span is not _NOOP_SPAN:
            facts: dict[str, Any] = dict(self._meta)
            if self._link is not None:
                facts["checkpoint"] = self._link
            self.events.sink.safe_telemetry(self.span.update, facts)

    def end(
        self,
        status: str,
        *,
        outputs: Mapping[str, Any] | None = None,
        error: BaseException | Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        carried: PreparedEnd | None = None,
        flush: bool = False,
        checkpoint: Mapping[str, Any] | None = None,
        facts: CallFacts | None = None,
    ) -> None:
        """Write the end record, end the span and pop the context stack.

        While the start record is still the last one buffered, the whole event is
        written as one record in its place instead.

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
        if self.ended:
            return
        if type(status) is not str or not status or len(status) > 64 or not status.isascii():
            _check_status(status)  # raises
        if carried is None and self._carried_end is not None:
            carried = self._carried_end  # the chain holds this event's end already
            status = carried.header.status
        if carried is None:
            if outputs or meta or checkpoint is not None:
                self._merge(outputs, meta, checkpoint, tell=facts is None)
        else:
            self._outputs = carried.outputs
            self._meta = carried.meta
            self._link = carried.link
            self._floats = carried.floats
            if self.span is not _NOOP_SPAN and facts is None:  # as ``update`` tells telemetry
                self.events.sink.safe_telemetry(
                    self.span.update, {**self._meta, "checkpoint": self._link}
                )
        self.ended = True
        stack = _STACK.get()
        if stack and stack[-1] is self:  # (``_pop``'s usual case, inline)
            _STACK.set(stack[:-1])
        else:
            _pop(self)
        # The end record (unless ``carried``), then the span.
        sink = self.events.sink
        err = None if error is None else error_info(error)
        first, self._first = self._first, None
        if carried is None:
            ended_at = now()
            stored = False
            if first is not None and sink.is_last(first):
                # Nothing was chained after the start record, still buffered: the event's
                # one record takes its place (when no flush took it meanwhile).
                stored = sink.replace_last(first, *self._end_record(status, err, ended_at, True))
            if not stored:
                sink.append(*self._end_record(status, err, ended_at, False))
        else:
            ended_at = carried.ended_at
        event = self._event
        if event is not None:
            event.update(
                status=status,
                ended_at=ended_at,
                outputs=self._outputs or None,
                error=err,
                checkpoint=self._link,
            )
            event["meta"] = {**event["meta"], **self._meta}
            exc = error if isinstance(error, BaseException) else None
            if facts is None:
                sink.safe_telemetry(self.span.end, event, exc)
            else:
                sink.safe_telemetry(self.span.end, event, exc, facts)
        if flush and carried is None:  # a carried record is stored already
            sink.flush()

    def _start_record(self) -> tuple[RecordHeader, str]:
        """The event's start record: its header and content JSON (built when the writer
        needs it, from the values fixed when the event began)."""
        content, floats, at, link, source, missing = self._start
        text, digest = content_json(content, floats, True)
        header = self.events.headers.header(
            self, "running", "start", at, digest, link, source, missing
        )
        return header, text

    def _end_record(
        self,
        status: str,
        err: dict[str, Any] | None,
        ended_at: str,
        whole: bool,
    ) -> tuple[RecordHeader, str]:
        """The event's end record; ``whole``: the record of the whole event that may take
        the start record's place (a ``point`` record at the start's time with
        ``ended_at``, holding both contents)."""
        outputs, meta, link, floats = self._outputs, self._meta, self._link, self._floats
        start = self._start
        content: dict[str, Any] = {}
        if whole:
            content.update(start[0])  # inputs, justification (its meta is in ``meta``)
        if outputs:
            content["outputs"] = outputs
        if err is not None:
            content["error"] = err
        if meta:
            content["meta"] = meta
        text, digest = content_json(content, floats, True)
        if whole:  # the event's one record: a point at the start's time, ``ended_at``
            header = self.events.headers.header(
                self,
                status,
                "point",
                start[2],
                digest,
                link,
                start[4],
                start[5],
                ended_at=ended_at,
            )
        else:
            header = self.events.headers.header(self, status, "end", ended_at, digest, link)
        return header, text


def _pop(handle: EventHandle) -> None:
    stack = _STACK.get()
    if stack and stack[-1] is handle:
        _STACK.set(stack[:-1])
    elif handle in stack:
        _STACK.set(tuple(h for h in stack if h is not handle))


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if type(value) is not dict and not isinstance(value, Mapping):  # (the ABC check costs)
        raise InvalidArgumentError(message=f"{what} must be a mapping; got {type(value).__name__}")
    return value


def _check_status(status: object) -> None:
    if not isinstance(status, str) or not status or len(status) > 64 or not status.isascii():
        raise InvalidArgumentError(message=f"status must be a short non-empty str; got {status!r}")


class Events:
    """A run's events: begin, end, one-record events (see the module's rules).

    Attributes:
        sink: The run (``RecordSink``): its chain, telemetry and failure guards.
        headers: The run's ``HeaderFormat``.
    """

    __slots__ = ("headers", "sink")

    def __init__(self, sink: RecordSink, headers: HeaderFormat) -> None:
        self.sink = sink
        self.headers = headers

    # -- begin ---------------------------------------------------------------------------

    def begin(
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
        checked: bool = False,
    ) -> EventHandle:
        """Write an event's start record, start its span, push it as the current parent
        (``Recorder.begin_event`` says the arguments).

        The start record is buffered lazy: built when the writer needs it, from the
        values fixed here (``EventHandle._start_record``). ``checked``: the kind, name,
        justification and source were checked already (``Run.step`` checks a step's
        when the step is made), and ``meta`` (str, bool or ``None`` values: exact JSON
        without a float) and the ``checkpoint`` link (``namespace``, ``call_id``,
        ``revision``) are the caller's own, built from values it checked (the guard's).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
        """
        sink = self.sink
        if sink.status != "running":
            sink.require_running()  # raises
        if not checked:
            check_event_args(name, "name", justification, justification_source, kind)
        content: dict[str, Any] = {}
        floats = False
        if inputs is not None:
            content["inputs"], floats = to_json(inputs)
        if justification is not None:
            content["justification"] = justification
        meta_value: dict[str, Any] = {}
        if meta:
            if checked:  # the caller's own exact JSON (no float): copied as it is
                meta_value = dict(meta)
            else:
                meta_value, f2 = to_json(meta if type(meta) is dict else dict(meta))
                floats |= f2
            content["meta"] = meta_value
        if checkpoint is None:
            link = None
        else:
            link = dict(checkpoint) if checked else checkpoint_link(checkpoint)
        stack = _STACK.get()
        if parent is ...:
            parent = self.parent() if stack else None
        stamp = now()
        # ``justification_missing``'s rule, inline: the model made the call and gave none.
        missing = justification is None and justification_source == "model"
        handle = _new(EventHandle)
        handle.events = self
        handle.event_id = new_id()
        handle.kind = kind
        handle.name = name
        handle.parent_id = None if parent is None else parent.event_id
        handle._event = None
        handle.span = _NOOP_SPAN
        handle.trace_id = handle.span_id = None
        handle.started = time.monotonic()
        handle._outputs = {}
        handle._meta = dict(meta_value)
        handle._start = (content, floats, stamp, link, justification_source, missing)
        handle._link = link
        handle._floats = floats
        handle.ended = False
        handle._first = None
        handle._carried_end = None
        if sink.telemetry is not NOOP_TELEMETRY:
            event, span = self._started(
                handle.event_id, parent, kind, name, "running", stamp, justification,
                justification_source, missing, meta_value, content, link,
            )  # fmt: skip
            handle._event, handle.span = event, span
            handle.trace_id, handle.span_id = span_ids(span)
        handle._first = sink.append_lazy(handle._start_record)
        _STACK.set((*stack, handle))
        if flush:
            sink.flush()
        return handle

    def _started(
        self,
        event_id: str,
        parent: EventHandle | None,
        kind: str,
        name: str,
        status: str,
        stamp: str,
        justification: str | None,
        justification_source: str,
        missing: bool,
        meta_value: dict[str, Any],
        content: dict[str, Any],
        link: dict[str, Any] | None,
    ) -> tuple[dict[str, Any], SpanHandle]:
        """Tell telemetry a new event started (only with telemetry: hooks alone read the
        event dict); return the event dict and its span (a no-op span if that fails)."""
        sink = self.sink
        event: dict[str, Any] = {
            "run_id": sink.run_id,
            "event_id": event_id,
            "parent_id": None if parent is None else parent.event_id,
            "kind": kind,
            "name": name,
            "status": "running",
            "started_at": stamp,
            "ended_at": None,
            "justification": justification,
            "justification_source": justification_source,
            JUSTIFICATION_MISSING: missing,
            "meta": {**meta_value, "justification_source": justification_source},
            "inputs": content.get("inputs"),
            "outputs": None,
            "error": None,
            "checkpoint": link,
        }
        span: SpanHandle = sink.safe_telemetry(
            sink.telemetry.event_started,
            event,
            None if parent is None else parent.span,
            default=_NOOP_SPAN,
        )
        event["status"] = status  # a point event is told it started running, as a step
        return event, span

    # -- end -----------------------------------------------------------------------------

    def prepare_end(
        self,
        handle: EventHandle,
        status: str,
        *,
        outputs: Mapping[str, Any],
        meta: Mapping[str, Any],
        checkpoint: Mapping[str, Any],
        checked: bool = False,
    ) -> PreparedEnd:
        """Build the end record ``handle.update(checkpoint=…)`` + ``handle.end(status, …)``
        would write, without touching the handle, for a caller to carry in a transaction.

        Pass the result to ``handle.end(status, carried=…)`` once the transaction stored
        it (``Ride.carried``); otherwise just drop it. ``checked``: ``meta`` and the
        ``checkpoint`` link are the caller's own, as ``begin``'s ``checked`` says.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for values the journal refuses.
        """
        out = dict(handle._outputs)
        floats: bool | None = None
        if type(outputs) is dict and self.sink.telemetry is NOOP_TELEMETRY:
            # Encoded below and read by no hook: exact JSON (a stored result) goes in as it
            # is, with no copy to make (``encoded_json``'s rule).
            floats = exact_floats(outputs)
        if floats is None:
            value, floats = to_json(outputs if type(outputs) is dict else dict(outputs))
            out.update(value)
        else:
            out.update(outputs)
        met = dict(handle._meta)
        if checked:  # the caller's own exact JSON (no float), and its link
            met.update(meta)
            floats |= handle._floats
            link = dict(checkpoint)
        else:
            value, f2 = to_json(meta if type(meta) is dict else dict(meta))
            met.update(value)
            floats |= f2 | handle._floats
            link = checkpoint_link(checkpoint)
        ended_at = now()
        # ``handle._end_record``'s end record of these values, inline.
        content: dict[str, Any] = {}
        if out:
            content["outputs"] = out
        if met:
            content["meta"] = met
        text, digest = content_json(content, floats, True)
        header = self.headers.header(handle, status, "end", ended_at, digest, link)
        prepared = _new(PreparedEnd)
        prepared.handle = handle
        prepared.ended_at = ended_at
        prepared.header = header
        prepared.content_json = text
        prepared.outputs = out
        prepared.meta = met
        prepared.link = link
        prepared.floats = floats
        # A C callable (no Python frame); once the event ended nothing reads the attribute.
        prepared.on_carried = partial(setattr, handle, "_carried_end", prepared)
        return prepared

    # -- one-record events ---------------------------------------------------------------

    def record_point(
        self,
        kind: str,
        name: str,
        *,
        status: str = "completed",
        text: str | None = None,
        error: BaseException | None = None,
        approval: dict[str, Any] | None = None,
        artifact: dict[str, Any] | None = None,
        checkpoint: dict[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
    ) -> str:
        """Write a one-record event (approval, note, artifact, finish); return its id.

        ``parent`` as for ``begin``.
        """
        sink = self.sink
        sink.require_running()
        check_text(text, "text")
        if parent is ...:
            parent = self.parent()
        content: dict[str, Any] = {}
        if text is not None:
            content["text"] = text
        if approval is not None:
            content["approval"] = approval
        if artifact is not None:
            content["artifact"] = artifact
        err = error_info(error)
        if err is not None:
            content["error"] = err
        stamp = now()
        event: dict[str, Any] = {
            "run_id": sink.run_id,
            "event_id": new_id(),
            "parent_id": parent.event_id if parent else None,
            "kind": kind,
            "name": name,
            "status": status,
            "started_at": stamp,
            "ended_at": stamp,
            "justification": None,
            "justification_source": None,
            JUSTIFICATION_MISSING: False,
            "meta": {},
            "inputs": None,
            "outputs": None,
            "error": err,
            "checkpoint": checkpoint,
            "approval": approval,
            "artifact": artifact,
            "text": text,
        }
        span: SpanHandle = NoopSpan()
        if kind in ("approval", "artifact", "note"):
            span = sink.safe_telemetry(
                sink.telemetry.event_started,
                event,
                parent.span if parent else None,
                default=span,
            )
        text_json, digest = content_json(content, False)
        trace_id, span_id = span_ids(span)
        fields = point_event((event["event_id"], event["parent_id"], kind, name, trace_id, span_id))
        header = self.headers.header(fields, status, "point", stamp, digest, checkpoint)
        sink.append(header, text_json)
        sink.safe_telemetry(span.end, event, error)
        return str(event["event_id"])

    def record_event(
        self,
        kind: str,
        name: str,
        status: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: Any = None,
        outputs: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
        facts: Callable[[], CallFacts] | None = None,
        error: BaseException | None = None,
    ) -> str:
        """Write an event that began and ended at once as one record; return its id
        (``Run.record_event`` says the arguments).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
        """
        sink = self.sink
        sink.require_running()
        _check_status(status)
        telemetry = sink.telemetry
        # Without telemetry the content is encoded below and nothing keeps it: exact JSON
        # (the inputs, a replay's stored result) is encoded as it is, with no copy to make.
        convert = to_json if telemetry is not NOOP_TELEMETRY else encoded_json
        content, meta_value, floats = event_content(
            kind, name, justification, justification_source, inputs, meta, convert
        )
        link = None if checkpoint is None else checkpoint_link(checkpoint)
        out: dict[str, Any] | None = None
        if outputs:
            out, f3 = convert(outputs if type(outputs) is dict else dict(outputs))
            floats |= f3
            content["outputs"] = out
        err = error_info(error)
        if err is not None:
            content["error"] = err
        if parent is ...:
            parent = self.parent()
        stamp = now()
        event_id = new_id()
        missing = justification_missing(justification, justification_source)
        event: dict[str, Any] | None = None
        span: SpanHandle = _NOOP_SPAN
        trace_id = span_id = None
        if telemetry is not NOOP_TELEMETRY:
            event, span = self._started(
                event_id, parent, kind, name, status, stamp, justification,
                justification_source, missing, meta_value, content, link,
            )  # fmt: skip
            trace_id, span_id = span_ids(span)
        text, digest = content_json(content, floats, True)
        parent_id = None if parent is None else parent.event_id
        header = self.headers.header(
            point_event((event_id, parent_id, kind, name, trace_id, span_id)),
            status,
            "point",
            stamp,
            digest,
            link,
            justification_source,
            missing,
        )
        sink.append(header, text)
        if event is None:
            return event_id
        event.update(ended_at=stamp, outputs=out, error=err)
        if facts is not None:
            sink.safe_telemetry(lambda: span.end(event, error, facts()))
            return event_id
        sink.safe_telemetry(span.update, {**meta_value, "checkpoint": link})
        sink.safe_telemetry(span.end, event, error)
        return event_id

    def record_checked_event(
        self,
        kind: str,
        name: str,
        status: str,
        *,
        justification: str | None,
        justification_source: str,
        inputs: object,
        outputs: dict[str, Any],
        meta: dict[str, Any],
        checkpoint: dict[str, Any],
        parent: EventHandle | EllipsisType | None = ...,
        facts: Callable[[], CallFacts] | None = None,
    ) -> str:
        """``record_event`` of arguments the caller checked already: the same record
        (``Run.record_checked_event`` says which); without telemetry, no event dict and
        no span are made.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when the run is not running.
        """
        sink = self.sink
        if sink.telemetry is not NOOP_TELEMETRY:
            return self.record_event(
                kind,
                name,
                status,
                justification=justification,
                justification_source=justification_source,
                inputs=inputs,
                outputs=outputs,
                meta=meta,
                checkpoint=checkpoint,
                parent=parent,
                facts=facts,
            )
        sink.require_running()
        # Encoded at once and kept by nothing: exact JSON goes in as it is (``encoded_json``).
        content: dict[str, Any] = {}
        floats = False
        if inputs is not None:
            content["inputs"], floats = encoded_json(inputs)
        if justification is not None:
            content["justification"] = justification
        if meta:
            content["meta"], f2 = encoded_json(meta)
            floats |= f2
        if outputs:
            content["outputs"], f3 = encoded_json(outputs)
            floats |= f3
        if parent is ...:
            parent = self.parent()
        stamp = now()
        event_id = new_id()
        text, digest = content_json(content, floats, True)
        parent_id = None if parent is None else parent.event_id
        header = self.headers.header(
            point_event((event_id, parent_id, kind, name, None, None)),
            status,
            "point",
            stamp,
            digest,
            checkpoint,
            justification_source,
            justification_missing(justification, justification_source),
        )
        sink.append(header, text)
        return event_id

    def record_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None,
        parent: EventHandle | EllipsisType | None,
    ) -> Artifact:
        """Hash and record an artifact (``parent`` ``None``: the current context's event).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a missing file or bad argument.
        """
        info = hash_artifact(path_or_bytes, name, media_type)
        event_id = self.record_point(
            "artifact", name, artifact=info, parent=... if parent is None else parent
        )
        return Artifact(event_id=event_id, **info)

    def parent(self) -> EventHandle | None:
        """Return this run's innermost open event in the current context, or ``None``."""
        # An event ended from another context (a thread, a task) may still sit on this
        # context's stack: it is never a parent again.
        for handle in reversed(_STACK.get()):
            if handle.events is self and not handle.ended:
                return handle
        return None

    # -- making a span current -----------------------------------------------------------

    def activate(self, handle: EventHandle) -> contextlib.AbstractContextManager[None] | None:
        """Make the event's span current (``None``: nothing to undo)."""
        if type(handle.span) is NoopSpan:
            return None  # nothing to make current: skip the context manager's cost
        cm: contextlib.AbstractContextManager[None] | None = self.sink.safe_telemetry(
            _entered, handle.span
        )
        return cm

    def deactivate(
        self,
        cm: contextlib.AbstractContextManager[None] | None,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Undo ``activate``."""
        if cm is not None:
            self.sink.safe_telemetry(cm.__exit__, exc_type, exc, tb)


def _entered(span: SpanHandle) -> contextlib.AbstractContextManager[None]:
    cm = span.activate()
    cm.__enter__()
    return cm


def span_ids(span: SpanHandle) -> tuple[str | None, str | None]:
    """Return the span's ``(trace_id, span_id)`` a record keeps: str ids only, and the
    span id only with a trace id."""
    trace_id = getattr(span, "trace_id", None)
    if not isinstance(trace_id, str):
        return None, None
    span_id = getattr(span, "span_id", None)
    return trace_id, span_id if isinstance(span_id, str) else None
