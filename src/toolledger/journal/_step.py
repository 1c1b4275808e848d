"""The user's step: ``with run.step(...) as step`` (sync or async) records one event.

Rules this module keeps:

- A step is an event of kind ``step``, begun when its block is entered and ended when it
  is left (``Events.begin``/``EventHandle.end``): ``completed``, or ``failed`` with the
  exception's type and message (the exception is re-raised unchanged);
  ``KeyboardInterrupt`` and cancellation record ``cancelled``.
- Its span is current inside the block (a no-op span has nothing to make current).
- ``record_output`` merges outputs into the event (written with its end record); notes
  and artifacts are one-record events with the step as their parent.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType
from typing import Any

from ..errors import InvalidArgumentError
from ..telemetry import NoopSpan
from ._content import Artifact
from ._lifecycle import EventHandle, Events
from ._values import to_json

__all__ = ["Step"]


class Step:
    """``with run.step(...) as step`` (sync or async): one recorded step.

    The step starts when the block is entered and ends when it is left: ``completed``, or
    ``failed`` with the exception's type and message (the exception is re-raised).
    """

    __slots__ = ("_activation", "_checked", "_events", "_handle", "_spec")

    def __init__(self, events: Events, spec: dict[str, Any], *, checked: bool = False) -> None:
        self._events = events
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
        events = self._events
        self._handle = events.begin("step", **spec, checked=self._checked)
        # ``activate``'s own test, inline: a no-op span has nothing to make current.
        span = self._handle.span
        self._activation = None if type(span) is NoopSpan else events.activate(self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._activation is not None:
            self._events.deactivate(self._activation, exc_type, exc, tb)
        handle = self._handle
        if handle is None:
            handle = self.handle  # raises: the step has not started
        if exc is None:
            handle.end("completed")
        elif isinstance(exc, Exception):
            handle.end("failed", error=exc)
        else:
            handle.end("cancelled", error=exc)
        self._events.sink.maybe_flush()

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
        handle = self._handle
        if handle is None:
            handle = self.handle  # raises: the step has not started
        if outputs:  # ``handle.update(outputs=outputs)`` of the keyword dict (a mapping)
            value, floats = to_json(outputs)
            handle._outputs.update(value)
            handle._floats |= floats

    def note(self, text: str) -> str:
        """Record a note inside this step; return its event id.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when ``text`` is not a str.
        """
        return self._events.record_point("note", "note", parent=self.handle, text=text)

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
        return self._events.record_artifact(
            path_or_bytes, name=name, media_type=media_type, parent=self.handle
        )
