"""Errors raised by toolledger, each with a stable ``code``.

Every error toolledger raises on purpose is a :class:`CheckpointError`. Catch the base
class to handle them all, a layer base (:class:`StoreError`) to handle one layer, or a leaf
to handle one condition. Codes are API: they never change meaning and are pinned by
``tests/test_errors.py``::

    CheckpointError                     (abstract in spirit: carries any code)
    ├── BindingConflictError            BINDING_CONFLICT
    ├── FenceConflictError              FENCE_CONFLICT
    ├── InvalidTransitionError          INVALID_TRANSITION
    ├── InvalidArgumentError            INVALID_ARGUMENT
    ├── PayloadLimitError               PAYLOAD_LIMIT
    ├── InvalidCheckpointError          INVALID_CHECKPOINT
    ├── UnsupportedSchemaError          UNSUPPORTED_SCHEMA
    ├── NotFoundError                   NOT_FOUND
    ├── OutcomeUnknownError             OUTCOME_UNKNOWN
    ├── DeliveryUncertainError          DELIVERY_UNCERTAIN
    ├── TombstonedError                 TOMBSTONED
    ├── ApprovalDeniedError             APPROVAL_DENIED (alias ApprovalDenied)
    ├── ReplayDivergedError             REPLAY_DIVERGED
    ├── ReplayUnavailableError          REPLAY_UNAVAILABLE
    └── StoreError
        ├── StoreBusyError              STORE_BUSY
        ├── StoreUnavailableError       STORE_UNAVAILABLE
        └── StoreSchemaTooNewError      STORE_SCHEMA_TOO_NEW

Backends never leak driver exceptions: they re-raise them as a ``StoreError`` ``from`` the
original, so ``__cause__`` keeps the driver's detail.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "ERROR_CODES",
    "SETTLE_HINT",
    "ApprovalDenied",
    "ApprovalDeniedError",
    "BindingConflictError",
    "CheckpointError",
    "DeliveryUncertainError",
    "FenceConflictError",
    "InvalidArgumentError",
    "InvalidCheckpointError",
    "InvalidTransitionError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PayloadLimitError",
    "ReplayDivergedError",
    "ReplayDivergence",
    "ReplayUnavailableError",
    "StoreBusyError",
    "StoreError",
    "StoreSchemaTooNewError",
    "StoreUnavailableError",
    "TombstonedError",
    "UnsupportedSchemaError",
    "error_for_code",
    "warn_at_caller",
]


class CheckpointError(Exception):
    """A toolledger error with a stable machine-readable ``code``.

    Args:
        code: Stable UPPER_SNAKE code (see ``ERROR_CODES``).
        message: Human-readable explanation, including what to do.
        details: JSON-ready facts (keys, revisions, limits) for programs and logs.
    """

    default_code: ClassVar[str] = ""

    def __init__(
        self,
        code: str | None = None,
        message: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.code: str = code or self.default_code
        self.message: str = message
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(f"{self.code}: {message}" if message else self.code)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep code/message/details across pickling (multiprocessing ships errors back).
        return (_rebuild, (type(self), self.code, self.message, self.details))


def _rebuild(
    cls: type[CheckpointError], code: str, message: str, details: dict[str, Any]
) -> CheckpointError:
    err = cls.__new__(cls)
    CheckpointError.__init__(err, code, message, details)
    return err


class BindingConflictError(CheckpointError):
    """A record exists under the key but was made for a different binding."""

    default_code = "BINDING_CONFLICT"


class FenceConflictError(CheckpointError):
    """Another attempt or delivery holds the fence; this caller may not act."""

    default_code = "FENCE_CONFLICT"


class InvalidTransitionError(CheckpointError):
    """The transition is not legal from the record's current status."""

    default_code = "INVALID_TRANSITION"


class InvalidArgumentError(CheckpointError):
    """An argument is malformed: identifier, time, payload type, option."""

    default_code = "INVALID_ARGUMENT"


class PayloadLimitError(CheckpointError):
    """A payload exceeds a size, depth or value-count bound."""

    default_code = "PAYLOAD_LIMIT"


class InvalidCheckpointError(CheckpointError):
    """A record (or stored row) fails validation; it is quarantined, never reset."""

    default_code = "INVALID_CHECKPOINT"


class UnsupportedSchemaError(CheckpointError):
    """A record carries a schema version this code does not understand, or a reader (which
    never migrates) opened a database written by an older toolledger."""

    default_code = "UNSUPPORTED_SCHEMA"


class NotFoundError(CheckpointError):
    """A run, event or checkpoint named by the caller does not exist, or a reader (which
    never creates one) found no database where it was pointed."""

    default_code = "NOT_FOUND"


class OutcomeUnknownError(CheckpointError):
    """A tool call may or may not have taken effect; it must not be retried blindly."""

    default_code = "OUTCOME_UNKNOWN"


#: How an ``OUTCOME_UNKNOWN`` message tells a person to settle the call (its last words).
SETTLE_HINT = (
    "settle it with `toolledger reconcile --tools MODULE:ATTR --apply` (the tool's own "
    "recover) or `toolledger resolve CALL_ID` (a person's decision); do not retry "
    "under a new call id"
)


class DeliveryUncertainError(CheckpointError):
    """A delivery was interrupted after its claim; the post may have been accepted."""

    default_code = "DELIVERY_UNCERTAIN"


class TombstonedError(CheckpointError):
    """The call's content was erased by retention; it will not be executed again."""

    default_code = "TOMBSTONED"


class ApprovalDeniedError(CheckpointError):
    """A gated tool call was denied by its approver; nothing was executed.

    ``details`` holds ``namespace``, ``call_id``, ``tool_name``, ``by`` and ``reason``.
    """

    default_code = "APPROVAL_DENIED"


#: The name this error was published under first; the same class.
ApprovalDenied = ApprovalDeniedError


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayDivergence:
    """Where a replayed run first asked for something its record does not hold.

    ``index``: the position of the request among the run's model calls (``llm_call``) or
    tool calls (``tool_call``), from 0; ``kind`` and ``name``: the event kind and name
    (the model, the tool); ``field``: what differs (``model``, ``system``,
    ``messages[2]``, ``tools``, ``parameters.temperature``, ``input``, ``call_id``, or
    ``event`` when the record holds no such request); ``recorded`` and ``now``: both values.
    """

    index: int
    kind: str
    name: str | None
    field: str
    recorded: Any
    now: Any


class ReplayDivergedError(CheckpointError):
    """A replayed run made a request that differs from its record; nothing was sent.

    ``divergence`` (a ``ReplayDivergence``) names the request and the field; ``details``
    holds the same facts (``index``, ``kind``, ``name``, ``field``, ``recorded``, ``now``).
    Use ``on_divergence="live"`` to go live from there instead.
    """

    default_code = "REPLAY_DIVERGED"

    @property
    def divergence(self) -> ReplayDivergence:
        """The first divergence, from ``details``."""
        d = self.details
        index = d.get("index")
        return ReplayDivergence(
            index=index if isinstance(index, int) else -1,
            kind=str(d.get("kind")),
            name=d.get("name"),
            field=str(d.get("field")),
            recorded=d.get("recorded"),
            now=d.get("now"),
        )


class ReplayUnavailableError(CheckpointError):
    """A run cannot be replayed: its record lacks what replay needs.

    ``details`` holds ``run_id`` and ``event_id`` (the first event lacking its content,
    e.g. a run recorded with ``journal_content=False``).
    """

    default_code = "REPLAY_UNAVAILABLE"


class StoreError(CheckpointError):
    """Base for storage-layer failures."""


class StoreBusyError(StoreError):
    """The store stayed locked past its timeout. Retry later."""

    default_code = "STORE_BUSY"


class StoreUnavailableError(StoreError):
    """The store could not be reached, or a commit's outcome could not be resolved."""

    default_code = "STORE_UNAVAILABLE"


class StoreSchemaTooNewError(StoreError):
    """The database was written by a newer toolledger. Upgrade toolledger."""

    default_code = "STORE_SCHEMA_TOO_NEW"


_BY_CODE: dict[str, type[CheckpointError]] = {
    cls.default_code: cls
    for cls in (
        BindingConflictError,
        FenceConflictError,
        InvalidTransitionError,
        InvalidArgumentError,
        PayloadLimitError,
        InvalidCheckpointError,
        UnsupportedSchemaError,
        NotFoundError,
        OutcomeUnknownError,
        DeliveryUncertainError,
        TombstonedError,
        ApprovalDeniedError,
        ReplayDivergedError,
        ReplayUnavailableError,
        StoreBusyError,
        StoreUnavailableError,
        StoreSchemaTooNewError,
    )
}

#: Every published error code. Codes are API; ``tests/test_errors.py`` pins this set.
ERROR_CODES: frozenset[str] = frozenset(_BY_CODE)


def error_for_code(
    code: str, message: str = "", details: Mapping[str, Any] | None = None
) -> CheckpointError:
    """Build the error class that owns ``code`` (a plain ``CheckpointError`` if unknown)."""
    cls = _BY_CODE.get(code, CheckpointError)
    return cls(code, message, details)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_caller(warning: Warning) -> None:
    """Issue ``warning`` at the first frame outside toolledger: the user's line.

    A fixed ``stacklevel`` names a toolledger line when the warning is raised a different
    number of calls deep (``toolledger.run`` vs ``open_store``), or ``sys:1`` when it
    overshoots; this walks up to the application's (or the framework's) frame instead.
    """
    frame = sys._getframe(1)
    level = 2  # stacklevel 2 is this function's caller
    while frame.f_back is not None and _inside(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(warning, stacklevel=level)


def _inside(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE)
