"""The journal seam: what the guard and the integrations record through. No I/O here.

A ``Run`` is one (``journal._run.Run``); the guard and the integrations take this type,
never the run's private methods. The journal knows none of its callers' concepts: a
caller says which event is the parent, whether a record is written at once, and carries
buffered records in its own transaction when it has one.

Rules of the seam:

- ``begin_event`` writes an event's start record and starts its span; the returned
  ``EventHandle`` is ended exactly once (``handle.end(status, ..., flush=)``).
- ``ride(store, end)`` hands every buffered record (and, optionally, a prepared end
  record, appended only if the caller's transaction gates it in) to one transaction of
  the caller's; ``Ride.settle`` says what the transaction stored.
- ``prepare_end`` builds the end record ``handle.end`` would write, for a caller to carry;
  ``handle.end(status, carried=prepared)`` then ends the event without writing it again.
  Once the journal knows a transaction put that record in the chain, it is the event's
  end whatever the caller passes later (a caller interrupted before it heard so ends the
  event with it; no second end record is written).
- ``record_point`` writes a one-record event (an approval decision, a note);
  ``record_event`` one that began and ended at once with inputs and outputs (a replayed
  tool call), buffered like a step's records; ``record_checked_event`` the same record
  of a name, justification, source and link the caller checked already (the guard's
  replay), which it does not check again.
- Recording never breaks the caller: failures go to ``record_failure`` (``run.errors``)
  unless ``strict``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..store.base import Store
    from ..telemetry import CallFacts, SpanHandle
    from ._lifecycle import EventHandle, PreparedEnd
    from ._step import Step
    from ._writer import Ride

__all__ = ["JournalSeam"]


class JournalSeam(Protocol):
    """A run as its callers record through it (``toolledger.Run`` is one).

    Attributes:
        run_id: The run's id (stored with what the callers write).
        namespace: The checkpoint namespace of the run's tool calls.
        store: The store holding the journal (and the callers' checkpoints).
        strict: Whether recording failures are raised instead of kept.
        span: The run's span (a no-op span without telemetry).
    """

    run_id: str
    namespace: str
    store: Store
    strict: bool
    span: SpanHandle

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
        """Write an event's start record; ``parent=...``: the current context's event;
        ``checked``: the caller checked the kind, name, justification and source already,
        and ``meta`` and the ``checkpoint`` link are its own (``Recorder.begin_event``).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
        """
        ...

    def ride(
        self, store: Store, end: PreparedEnd | None = None, requires: int | None = None
    ) -> Ride | None:
        """Hand the buffered records (and ``end``'s) to one transaction on ``store``, the
        op gated on op ``requires`` of it if given."""
        ...

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
        """Build the end record of ``handle`` for a caller's transaction to carry
        (``checked``: ``meta`` and the ``checkpoint`` link are the caller's own)."""
        ...

    def record_event(
        self,
        kind: str,
        name: str,
        status: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: object = None,
        outputs: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
        facts: Callable[[], CallFacts] | None = None,
        error: BaseException | None = None,
    ) -> str:
        """Write an event that began and ended at once as one buffered record (a replay,
        a refused call).

        ``facts()`` is what its span ends with (a tool call's ``CallFacts``), asked only
        with telemetry;
        ``error``: the event's error (its span ends with status ERROR).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
        """
        ...

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
        """``record_event`` of names, justification, source and link the caller checked
        already (a replayed tool call's one record): the same record, not checked again."""
        ...

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
        """Write a one-record event; return its id."""
        ...

    def flush(self) -> bool:
        """Write every buffered record now; return whether nothing is left buffered."""
        ...

    def require_running(self) -> None:
        """Raise ``INVALID_ARGUMENT`` unless the run is running."""
        ...

    def record_failure(self, exc: BaseException) -> None:
        """Keep a recording failure (``run.errors``); re-raise it when ``strict``."""
        ...
