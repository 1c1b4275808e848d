"""How a guarded call ends when it does not end on a fresh result: outcomes and errors.

Rules this module keeps:

- ``_outcome`` is the flow's one way to end on a stored result (it goes through
  ``_outcomes.outcome``); every error that leaves the flow names the call's namespace,
  call id and stored status in ``details``.
- A call that may have taken effect ends ``OUTCOME_UNKNOWN`` (``_unknown``, ``_unstored``),
  never with a guess; the record it stays on is ``last``.
- Free text from user code (an exception, a reason) is bounded before it is stored.
"""

from __future__ import annotations

import builtins
from typing import Any

from ..checkpoint.model import CheckpointRecord
from ..errors import OutcomeUnknownError
from ..tools import ToolOutcome
from ._flow_state import FlowState
from ._outcomes import outcome

__all__ = [
    "FlowOutcomes",
    "RecoveryFailed",
    "clip_reason",
    "describe",
    "error_payload",
    "group_errors",
]

_REASON_MAX = 1024


def clip_reason(text: str) -> str:
    """Bound a reason stored on a record (``uncertain_reason``)."""
    return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1] + "…"


def describe(exc: BaseException) -> str:
    """One line naming an exception (its type and the start of its message)."""
    return f"{type(exc).__qualname__}: {str(exc)[:300]}"


def error_payload(exc: BaseException) -> dict[str, str]:
    """The stored result of a pre-effect failure with ``on_error="result"``."""
    return {"error": type(exc).__qualname__, "message": str(exc)[:2000]}


def group_errors(message: str, errors: builtins.list[BaseException]) -> BaseException:
    """An ``ExceptionGroup`` of ``errors`` (``RecoveryFailed`` where there is none)."""
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None and all(isinstance(e, Exception) for e in errors):
        result: BaseException = group(message, errors)
        return result
    fallback = RecoveryFailed(message)
    fallback.exceptions = tuple(errors)
    return fallback


class RecoveryFailed(Exception):
    """Python 3.10 stand-in for ``ExceptionGroup``: ``.exceptions`` holds both errors."""

    exceptions: tuple[BaseException, ...] = ()


class FlowOutcomes(FlowState):
    """The outcomes and errors a flow ends with."""

    def _details(self, rec: CheckpointRecord) -> dict[str, Any]:
        return {
            "namespace": self.binding.namespace,
            "call_id": self.binding.call_id,
            "tool_name": self.binding.tool_name,
            "status": rec.status.value,
            "revision": rec.revision,
            "attempt_id": rec.execution_fence,
            "reason": rec.uncertain_reason,
        }

    def _unknown(self, rec: CheckpointRecord, why: str) -> OutcomeUnknownError:
        self.last = rec
        return OutcomeUnknownError(
            message=f"call {self.binding.namespace}/{self.binding.call_id} "
            f"({self.binding.tool_name}) may have taken effect and its outcome could not be "
            f"recovered ({why}); the checkpoint stays {rec.status.value}. Reconcile it; do "
            "not retry under a new call id",
            details={**self._details(rec), "why": why},
        )

    def _unstored(self, rec: CheckpointRecord) -> OutcomeUnknownError:
        """The result is known here but could not be stored: the checkpoint still says so."""
        self.last = rec
        return OutcomeUnknownError(
            message=f"call {self.binding.call_id}: the tool ran but its result could not be "
            f"stored; the checkpoint still says {rec.status.value}. Reconcile it; do not "
            "retry under a new call id",
            details=self._details(rec),
        )

    def _outcome(
        self, rec: CheckpointRecord, *, replayed: bool, recovered: bool = False
    ) -> ToolOutcome:
        self.last = rec
        self.recovered = recovered
        return outcome(rec, replayed=replayed, recovered=recovered)

    def outcome_of(self, rec: CheckpointRecord, *, replayed: bool) -> ToolOutcome:
        """The outcome of this call ending on ``rec``."""
        return self._outcome(rec, replayed=replayed)
