"""The recording machinery behind ``Run``: the journal seam, the chain, failure guards.

Rules this module keeps:

- ``begin_event``, ``prepare_end``, ``record_point``, ``ride``, ``flush``,
  ``require_running`` and ``record_failure`` are the journal seam
  (``journal._seam.JournalSeam``) the guard and the integrations record through. The
  journal knows no caller's concept: the caller passes the parent and whether a record
  is flushed at once. The event lifecycle itself is ``journal._lifecycle`` (``Events``):
  a ``Recorder`` hands it its calls and is its ``RecordSink``.
- Every record is chained by the run's ``ChainWriter``; once the run is closed, a record
  still arriving (a step ending on another thread) is flushed at once.
- Telemetry calls are wrapped (``safe_telemetry``): an exception from a hook is logged
  once and never reaches the caller. Storage failures go to ``run.errors`` (non-strict).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, warn_at_caller
from ..telemetry import SpanHandle, TelemetryHooks
from ._header import RecordHeader
from ._lifecycle import EventHandle, Events, PreparedEnd
from ._step import Step
from ._writer import ChainWriter, Ride

if TYPE_CHECKING:
    from ..store import Store
    from ..store.base import EventRow

__all__ = [
    "MAX_ERRORS",
    "JournalWarning",
    "Recorder",
]

log = logging.getLogger("toolledger.journal")

#: ``run.errors`` keeps at most this many failures: the first half and the latest ones
#: (``run.error_count`` counts every failure).
MAX_ERRORS = 100


class JournalWarning(RuntimeWarning):
    """A journal write failed; the agent goes on (see ``run.errors``)."""


class Recorder:
    """Base of ``Run``: the journal seam, the run's ``RecordSink`` and the failure guards.

    Attributes:
        events: The run's event lifecycle (``Events``).
    """

    run_id: str
    store: Store
    strict: bool
    status: str
    errors: list[BaseException]
    error_count: int
    telemetry: TelemetryHooks
    span: SpanHandle
    events: Events
    _writer: ChainWriter | None
    _warned: bool
    _telemetry_warned: bool

    def flush(self) -> bool:
        """Write every buffered record now; return whether nothing is left buffered.

        Raises:
            StoreError: only with ``strict=True``.
        """
        return True if self._writer is None else self._writer.flush()

    def ride(
        self, store: Store, end: PreparedEnd | None = None, requires: int | None = None
    ) -> Ride | None:
        """Hand the buffered records (and ``end``'s record, provisional) to a transaction
        on ``store``, the op gated on op ``requires`` of it if given; see
        ``ChainWriter.ride``."""
        if self._writer is None:
            return None
        if end is None:
            return self._writer.ride(store, requires=requires)
        extra = (end.header, end.content_json)
        return self._writer.ride(store, extra, end.on_carried, requires)

    # -- the event API (the journal seam): ``Events`` does the work ------------------------

    def begin_event(
        self,
        kind: str,
        name: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: object = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
        flush: bool = False,
        checked: bool = False,
    ) -> EventHandle:
        """Write an event's start record, start its span, push it as the current parent.

        Args:
            parent: The enclosing event; ``...`` (default): the innermost open event of
                this run in the current context; ``None``: the run's top level.
            flush: Write the start record (with everything buffered) now; otherwise it is
                buffered, and a caller may carry it in its own transaction (``ride``).
            checked: The caller checked ``kind``, ``name``, ``justification`` and
                ``justification_source`` by ``check_event_args``' rules already (the
                guard, when a call starts): they are not checked again; ``meta`` (str,
                bool or ``None`` values) and the ``checkpoint`` link are its own, built
                from values it checked, and are taken as they are.

        Returns:
            An ``EventHandle``; call ``.end(status, ...)`` exactly once.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
            StoreError: only with ``strict=True``.
        """
        return self.events.begin(
            kind,
            name,
            justification=justification,
            justification_source=justification_source,
            inputs=inputs,
            meta=meta,
            checkpoint=checkpoint,
            parent=parent,
            flush=flush,
            checked=checked,
        )

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
        would write, without touching the handle, for a caller to carry in a transaction
        (``Events.prepare_end``). ``checked``: ``meta`` (str, bool or ``None`` values) and
        the ``checkpoint`` link are the caller's own, built from values it checked.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for values the journal refuses.
        """
        return self.events.prepare_end(
            handle, status, outputs=outputs, meta=meta, checkpoint=checkpoint, checked=checked
        )

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
        if isinstance(parent, Step):
            parent = parent.handle
        return self.events.record_point(
            kind,
            name,
            status=status,
            text=text,
            error=error,
            approval=approval,
            artifact=artifact,
            checkpoint=checkpoint,
            parent=parent,
        )

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

    # -- the chain (``RecordSink``) --------------------------------------------------------

    def append(self, header: RecordHeader, content_json: str) -> EventRow:
        """Chain one record (buffered); return its row."""
        writer = self._writer
        assert writer is not None
        row = writer.append(header, content_json)
        if self.status != "running":
            # A step that ends after its run closed (another thread): nothing will flush
            # this run again, so write it now.
            writer.flush()
        return row

    def append_lazy(self, build: Callable[[], tuple[RecordHeader, str]]) -> object:
        """Chain one record built only when the writer needs it (``ChainWriter.append_lazy``);
        return its token."""
        writer = self._writer
        assert writer is not None
        token = writer.append_lazy(build)
        if self.status != "running":
            writer.flush()  # as ``append``
        return token

    def is_last(self, token: object) -> bool:
        """Whether ``token``'s record is the last one chained, still buffered."""
        writer = self._writer
        return writer is not None and writer.is_last(token)

    def replace_last(self, token: object, header: RecordHeader, content_json: str) -> bool:
        """Store a record in place of ``token``'s if that is still the last one buffered
        (``ChainWriter.replace_last``); ``False`` otherwise."""
        writer = self._writer
        assert writer is not None
        if not writer.replace_last(token, header, content_json):
            return False
        if self.status != "running":
            writer.flush()  # as ``append``
        return True

    def maybe_flush(self) -> None:
        """Flush the buffered records if the writer's policy says so."""
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
                warn_at_caller(
                    JournalWarning(
                        f"toolledger: journal write for run {self.run_id} failed ({exc}); "
                        "the agent goes on, see run.errors"
                    )
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
