"""The recording machinery behind ``Run``: events, records, telemetry guards.

Rules this module keeps:

- ``begin_event`` / ``EventHandle.end`` write an event's start and end records;
  ``record_point`` writes one-record events (approval, note, artifact, finish). These,
  with ``ride``, ``prepare_end``, ``flush``, ``require_running`` and ``record_failure``,
  are the journal seam (``journal._seam.JournalSeam``) the guard and the integrations
  record through. The journal knows no caller's concept: the caller passes the parent
  and whether a record is flushed at once. Every record goes
  through ``_write``: content is canonicalised and hashed (``content_sha256``), the
  header is written by the run's ``HeaderFormat`` from values checked or made here, then
  chained by the run's ``ChainWriter``.
- Each event's telemetry span is started before its start record is written, so the
  record header can carry the span's ``trace_id``/``span_id``. Without telemetry
  (``NOOP_TELEMETRY``) no event dict is built: only hooks read it.
- Telemetry calls are wrapped (``safe_telemetry``): an exception from a hook is logged
  once and never reaches the caller. Storage failures go to ``run.errors`` (non-strict).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError
from ..telemetry import NOOP_TELEMETRY, CallFacts, NoopSpan, SpanHandle, TelemetryHooks
from ._content import (
    JUSTIFICATION_MISSING,
    check_text,
    checked_content,
    event_content,
    justification_missing,
    new_id,
    now,
)
from ._handles import (
    Artifact,
    EventHandle,
    FirstRecord,
    Step,
    checkpoint_link,
    current_stack,
    error_info,
    hash_artifact,
    push_event,
)
from ._header import HeaderFormat, RecordHeader
from ._records import canonical
from ._values import to_json
from ._writer import ChainWriter, Ride

if TYPE_CHECKING:
    from ..store import Store
    from ..store.base import EventRow

__all__ = [
    "MAX_ERRORS",
    "JournalWarning",
    "PreparedEnd",
    "Recorder",
    "span_ids",
]

log = logging.getLogger("toolledger.journal")

#: ``run.errors`` keeps at most this many failures: the first half and the latest ones
#: (``run.error_count`` counts every failure).
MAX_ERRORS = 100


class JournalWarning(RuntimeWarning):
    """A journal write failed; the agent goes on (see ``run.errors``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedEnd:
    """An event's end record built ahead of time (``Recorder.prepare_end``)."""

    handle: EventHandle
    ended_at: str
    header: RecordHeader
    content_json: str
    outputs: dict[str, Any]  # the event's outputs, meta and link once ended (converted)
    meta: dict[str, Any]
    link: dict[str, Any]
    floats: bool


class Recorder:
    """Base of ``Run``: the internal event API and the failure guards."""

    run_id: str
    store: Store
    strict: bool
    status: str
    errors: list[BaseException]
    error_count: int
    telemetry: TelemetryHooks
    span: SpanHandle
    _headers: HeaderFormat
    _writer: ChainWriter | None
    _warned: bool
    _telemetry_warned: bool

    def flush(self) -> bool:
        """Write every buffered record now; return whether nothing is left buffered.

        Raises:
            StoreError: only with ``strict=True``.
        """
        return True if self._writer is None else self._writer.flush()

    def ride(self, store: Store, end: PreparedEnd | None = None) -> Ride | None:
        """Hand the buffered records (and ``end``'s record, provisional) to a transaction
        on ``store``; see ``ChainWriter.ride``."""
        if self._writer is None:
            return None
        if end is None:
            return self._writer.ride(store)
        extra = (end.header, end.content_json)
        return self._writer.ride(store, extra, partial(end.handle.end_carried, end))

    # -- the event API (the journal seam) --------------------------------------------------

    def _first_record(
        self,
        event_id: str,
        parent: EventHandle | None,
        kind: str,
        name: str,
        status: str,
        phase: str,
        stamp: str,
        justification: str | None,
        justification_source: str,
        meta_value: dict[str, Any],
        content: dict[str, Any],
        floats: bool,
        link: dict[str, Any] | None,
        default: SpanHandle,
        lazy: bool = False,
    ) -> tuple[dict[str, Any] | None, SpanHandle, object]:
        """Write a new event's first record (``phase`` ``start`` or ``point``) and tell
        telemetry the event started.

        Returns the event dict telemetry (and the handle) sees, ``None`` without telemetry
        (nobody else reads it), its span (``default`` without telemetry, or when it
        fails) and the record's token for ``ChainWriter.replace_last`` (its row). The
        span's ids go into the record's header. ``lazy``: the record is built only when
        the writer needs it (``ChainWriter.append_lazy``); its content must not change
        (``to_json``'s private copy).
        """
        missing = justification_missing(justification, justification_source)
        event: dict[str, Any] | None = None
        span = default
        trace_id = span_id = None
        if self.telemetry is not NOOP_TELEMETRY:
            event = {
                "run_id": self.run_id,
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
            span = self.safe_telemetry(
                self.telemetry.event_started,
                event,
                None if parent is None else parent.span,
                default=default,
            )
            event["status"] = status  # a point event is told it started running, as a step
            trace_id, span_id = span_ids(span)
        # ``HeaderFormat.header``'s arguments before and after the content hash.
        head: tuple[str, str | None, str, str, str, str, str] = (
            event_id,
            None if parent is None else parent.event_id,
            kind,
            name,
            status,
            phase,
            stamp,
        )
        tail: tuple[dict[str, Any] | None, str, bool, str | None, str | None] = (
            link,
            justification_source,
            missing,
            trace_id,
            span_id,
        )
        if lazy:
            return (
                event,
                span,
                self._write_lazy(partial(self._record_text, content, floats, head, tail)),
            )
        return event, span, self._write(*self._record_text(content, floats, head, tail))

    def _record_text(
        self,
        content: dict[str, Any],
        floats: bool,
        head: tuple[str, str | None, str, str, str, str, str],
        tail: tuple[dict[str, Any] | None, str, bool, str | None, str | None],
    ) -> tuple[RecordHeader, str]:
        """A first record's header and content JSON (see ``_first_record``): ``head`` and
        ``tail`` are ``HeaderFormat.header``'s arguments before and after the content hash."""
        content_json, digest = self._content_json(content, floats, True)
        return self._headers.header(*head, digest, *tail), content_json

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
        """Write an event's start record, start its span, push it as the current parent.

        Args:
            parent: The enclosing event; ``...`` (default): the innermost open event of
                this run in the current context; ``None``: the run's top level.
            flush: Write the start record (with everything buffered) now; otherwise it is
                buffered, and a caller may carry it in its own transaction (``ride``).

        Returns:
            An ``EventHandle``; call ``.end(status, ...)`` exactly once.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
            StoreError: only with ``strict=True``.
        """
        self.require_running()
        content, meta_value, floats = event_content(
            kind, name, justification, justification_source, inputs, meta
        )
        link = None if checkpoint is None else checkpoint_link(checkpoint)
        return self._begin(
            kind,
            name,
            justification,
            justification_source,
            content,
            meta_value,
            floats,
            link,
            parent,
            flush,
        )

    def begin_step(
        self, name: str, justification: str | None, justification_source: str, inputs: Any
    ) -> EventHandle:
        """``begin_event("step", ...)`` of a name, justification and source checked already
        (``Run.step`` checks them when the step is made).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when the run is not running.
        """
        self.require_running()
        content, meta_value, floats = checked_content(justification, inputs, None)
        return self._begin(
            "step", name, justification, justification_source, content, meta_value, floats, None
        )

    def _begin(
        self,
        kind: str,
        name: str,
        justification: str | None,
        justification_source: str,
        content: dict[str, Any],
        meta_value: dict[str, Any],
        floats: bool,
        link: dict[str, Any] | None,
        parent: EventHandle | EllipsisType | None = ...,
        flush: bool = False,
    ) -> EventHandle:
        if parent is ...:
            parent = self._parent()
        event_id = new_id()
        parent_id = None if parent is None else parent.event_id
        stamp = now()
        handle = EventHandle(
            self,
            event_id=event_id,
            kind=kind,
            name=name,
            parent_id=parent_id,
            event=None,
            floats=floats,
            checkpoint=link,
        )
        handle.event, handle.span, row = self._first_record(
            event_id,
            parent,
            kind,
            name,
            "running",
            "start",
            stamp,
            justification,
            justification_source,
            meta_value,
            content,
            floats,
            link,
            handle.span,
            lazy=True,
        )
        missing = justification_missing(justification, justification_source)
        handle.first = (row, content, stamp, justification_source, missing)
        if meta_value:
            handle.meta.update(meta_value)
        push_event(handle)
        if flush:
            self.flush()
        return handle

    def end_event(
        self,
        handle: EventHandle,
        status: str,
        error: Any,
        carried: PreparedEnd | None = None,
        flush: bool = False,
        facts: CallFacts | None = None,
    ) -> None:
        err = None if error is None else error_info(error)
        first, handle.first = handle.first, None
        if carried is None:
            ended_at = now()
            args = (handle, status, err, handle.outputs, handle.meta, handle.link)
            writer = self._writer
            stored = False
            if first is not None and writer is not None and writer.is_last(first[0]):
                # Nothing was chained after the start record, still buffered: the event's
                # one record takes its place (when no flush took it meanwhile).
                whole = self._end_record(*args, ended_at, handle.floats, first)
                stored = self._replace(first[0], *whole)
            if not stored:
                self._write(*self._end_record(*args, ended_at, handle.floats))
        else:
            ended_at = carried.ended_at
        event = handle.event
        if event is not None:
            event.update(
                status=status,
                ended_at=ended_at,
                outputs=handle.outputs or None,
                error=err,
                checkpoint=handle.link,
            )
            event["meta"] = {**event["meta"], **handle.meta}
            exc = error if isinstance(error, BaseException) else None
            if facts is None:
                self.safe_telemetry(handle.span.end, event, exc)
            else:
                self.safe_telemetry(handle.span.end, event, exc, facts)
        if flush and carried is None:  # a carried record is stored already
            self.flush()

    def _end_record(
        self,
        handle: EventHandle,
        status: str,
        err: dict[str, Any] | None,
        outputs: dict[str, Any],
        meta: dict[str, Any],
        link: dict[str, Any] | None,
        ended_at: str,
        floats: bool,
        first: FirstRecord | None = None,
    ) -> tuple[RecordHeader, str]:
        """The end record of ``handle``'s event; with ``first`` (its start record, while it
        may still be buffered), the record of the whole event that may replace it: a
        ``point`` record at the start's time with ``ended_at``, holding both contents."""
        content: dict[str, Any] = {}
        if first is not None:
            content.update(first[1])  # inputs, justification (its meta is in ``meta``)
        if outputs:
            content["outputs"] = outputs
        if err is not None:
            content["error"] = err
        if meta:
            content["meta"] = meta
        content_json, digest = self._content_json(content, floats, True)
        trace_id, span_id = span_ids(handle.span)
        # The event's one record (a point at the start's time, ``ended_at``), or its end.
        phase, at, source, missing, until = "end", ended_at, None, False, None
        if first is not None:
            phase, until = "point", ended_at
            _, _, at, source, missing = first
        header = self._headers.header(
            handle.event_id,
            handle.parent_id,
            handle.kind,
            handle.name,
            status,
            phase,
            at,
            digest,
            link,
            source,
            missing,
            trace_id,
            span_id,
            ended_at=until,
        )
        return header, content_json

    def prepare_end(
        self,
        handle: EventHandle,
        status: str,
        *,
        outputs: Mapping[str, Any],
        meta: Mapping[str, Any],
        checkpoint: Mapping[str, Any],
    ) -> PreparedEnd:
        """Build the end record ``handle.update(checkpoint=…)`` + ``handle.end(status, …)``
        would write, without touching the handle, for a caller to carry in a transaction.

        Pass the result to ``handle.end(status, carried=…)`` once the transaction stored
        it (``Ride.carried``); otherwise just drop it.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for values the journal refuses.
        """
        out = dict(handle.outputs)
        value, floats = to_json(dict(outputs))
        out.update(value)
        met = dict(handle.meta)
        value, f2 = to_json(dict(meta))
        met.update(value)
        floats |= f2 | handle.floats
        link = checkpoint_link(checkpoint)
        ended_at = now()
        header, content_json = self._end_record(
            handle, status, None, out, met, link, ended_at, floats
        )
        return PreparedEnd(
            handle=handle,
            ended_at=ended_at,
            header=header,
            content_json=content_json,
            outputs=out,
            meta=met,
            link=link,
            floats=floats,
        )

    def _content_json(
        self, content: dict[str, Any], floats: bool, acyclic: bool = False
    ) -> tuple[str, str]:
        """Return the record's canonical content JSON and its hex SHA-256.

        ``acyclic``: every value in ``content`` was made by ``to_json`` or
        ``encoded_json`` (bounded in depth) or is a str (see ``canonical``).
        """
        if not content:
            return _EMPTY_CONTENT
        content_json = canonical(content, maybe_float=floats, acyclic=acyclic)
        try:
            return content_json, _sha256(content_json)
        except UnicodeEncodeError:
            # A lone surrogate slipped in (an exception message, a file name): mark it.
            content, floats = to_json(content)
            content_json = canonical(content, maybe_float=floats)
            return content_json, _sha256(content_json)

    def _write(self, header: RecordHeader, content_json: str) -> EventRow:
        writer = self._writer
        assert writer is not None
        row = writer.append(header, content_json)
        if self.status != "running":
            # A step that ends after its run closed (another thread): nothing will flush
            # this run again, so write it now.
            writer.flush()
        return row

    def _write_lazy(self, build: Callable[[], tuple[RecordHeader, str]]) -> object:
        writer = self._writer
        assert writer is not None
        token = writer.append_lazy(build)
        if self.status != "running":
            writer.flush()  # as ``_write``
        return token

    def _replace(self, first: object, header: RecordHeader, content_json: str) -> bool:
        """Store an event's one record in place of its start record ``first`` if that is
        still the last one buffered (``ChainWriter.replace_last``); ``False`` otherwise."""
        writer = self._writer
        assert writer is not None
        if not writer.replace_last(first, header, content_json):
            return False
        if self.status != "running":
            writer.flush()  # as ``_write``
        return True

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
        parent: EventHandle | Step | EllipsisType | None = ...,
    ) -> str:
        """Write a one-record event (approval, note, artifact, finish); return its id.

        ``parent`` as for ``begin_event`` (a ``Step`` stands for its event).
        """
        self.require_running()
        check_text(text, "text")
        if parent is ...:
            parent = self._parent()
        elif isinstance(parent, Step):
            parent = parent.handle
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
            "run_id": self.run_id,
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
            span = self.safe_telemetry(
                self.telemetry.event_started,
                event,
                parent.span if parent else None,
                default=span,
            )
        content_json, digest = self._content_json(content, False)
        trace_id, span_id = span_ids(span)
        header = self._headers.header(
            event["event_id"],
            event["parent_id"],
            kind,
            name,
            status,
            "point",
            stamp,
            digest,
            checkpoint,
            None,
            False,
            trace_id,
            span_id,
        )
        self._write(header, content_json)
        self.safe_telemetry(span.end, event, error)
        return str(event["event_id"])

    def record_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None,
        parent: Any,
    ) -> Artifact:
        info = hash_artifact(path_or_bytes, name, media_type)
        event_id = self.record_point(
            "artifact", name, artifact=info, parent=... if parent is None else parent
        )
        return Artifact(event_id=event_id, **info)

    def _parent(self) -> EventHandle | None:
        # An event ended from another context (a thread, a task) may still sit on this
        # context's stack: it is never a parent again.
        for handle in reversed(current_stack()):
            if handle.run is self and not handle.ended:
                return handle
        return None

    def require_running(self) -> None:
        """Raise unless the run is running (inside ``with toolledger.run(...)``).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` otherwise.
        """
        if self.status != "running":
            raise InvalidArgumentError(
                message=f"run {self.run_id} is {self.status}: use it inside "
                "`with toolledger.run(...)`",
                details={"run_id": self.run_id},
            )

    def maybe_flush(self) -> None:
        if self._writer is not None:
            self._writer.maybe_flush()

    # -- failure handling --------------------------------------------------------------

    def record_failure(self, exc: BaseException) -> None:
        """Keep a recording failure in ``run.errors`` (warned once); re-raise when strict."""
        if self.strict:
            raise exc
        self.error_count = getattr(self, "error_count", 0) + 1
        errors = self.errors
        if len(errors) >= MAX_ERRORS:
            # Keep the first failures (usually the cause) and the latest ones.
            del errors[MAX_ERRORS // 2]
        errors.append(exc)
        log.warning("toolledger: journal write for run %s failed: %s", self.run_id, exc)
        if not self._warned:
            self._warned = True
            # warnings-as-errors must not turn recording into a crash
            with contextlib.suppress(Warning):
                warnings.warn(
                    f"toolledger: journal write for run {self.run_id} failed ({exc}); "
                    "the agent goes on, see run.errors",
                    JournalWarning,
                    stacklevel=3,
                )

    def _telemetry_failed(self, exc: BaseException) -> None:
        if not self._telemetry_warned:
            self._telemetry_warned = True
            log.warning("toolledger: telemetry failed (spans may be missing): %r", exc)

    def safe_telemetry(self, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            self._telemetry_failed(exc)
            return default

    def activate(self, handle: EventHandle) -> contextlib.AbstractContextManager[None] | None:
        if type(handle.span) is NoopSpan:
            return None  # nothing to make current: skip the context manager's cost
        try:
            cm = handle.span.activate()
            cm.__enter__()
            return cm
        except Exception as exc:
            self._telemetry_failed(exc)
            return None

    def deactivate(
        self,
        cm: contextlib.AbstractContextManager[None] | None,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if cm is None:
            return
        try:
            cm.__exit__(exc_type, exc, tb)
        except Exception as err:
            self._telemetry_failed(err)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The content text and hash of a record without content.
_EMPTY_CONTENT = ("{}", _sha256("{}"))


def span_ids(span: SpanHandle) -> tuple[str | None, str | None]:
    """Return the span's ``(trace_id, span_id)`` a record keeps: str ids only, and the
    span id only with a trace id."""
    trace_id = getattr(span, "trace_id", None)
    if not isinstance(trace_id, str):
        return None, None
    span_id = getattr(span, "span_id", None)
    return trace_id, span_id if isinstance(span_id, str) else None
