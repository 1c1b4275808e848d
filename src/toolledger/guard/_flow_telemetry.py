"""What a guarded call tells its journal event and the event's span (telemetry).

Rules this module keeps:

- The call's ``tool_call`` event opens once the gate lets the call proceed; its start
  record rides in the claim transaction (``flush=False``), and the attempt id is derived
  from the event's span (so telemetry can link the attempt to its trace).
- The end record's fields are built here once (``end_fields``), for the completion
  transaction that carries them and for ``finish`` that ends the event otherwise.
- Reporting a transition to the span never raises (``_seams.report_transition``).
"""

from __future__ import annotations

from typing import Any

from ..checkpoint.model import Transition
from ._flow_state import FlowState
from ._seams import new_attempt_id, report_transition

__all__ = ["FlowTelemetry"]


class FlowTelemetry(FlowState):
    """The call's journal event and its span."""

    def open_event(self) -> None:
        """Start the call's ``tool_call`` journal event and pick the attempt id."""
        binding = self.binding
        self.handle = handle = self.run.begin_event(
            "tool_call",
            self.tool.name,
            justification=self.justification,
            justification_source=self.justification_source,
            inputs=self.input if isinstance(self.input, dict) else {"input": self.input},
            meta={
                "tool_revision": self.tool.revision,
                "input_fingerprint": binding.input_fingerprint,
            },
            checkpoint={
                "namespace": binding.namespace,
                "call_id": binding.call_id,
                "revision": None,
            },
            # Requested by a journaled model call: that call's child.
            parent=self.run.requested_by(binding.call_id) or ...,
            flush=False,  # the start record rides in the claim transaction (commit_claims)
        )
        span = getattr(handle, "span", None)
        self.attempt_id = new_attempt_id(
            getattr(span, "trace_id", None), getattr(span, "span_id", None)
        )

    def end_fields(
        self,
        payload: Any,
        is_error: bool,
        revision: int | None,
        *,
        replayed: bool,
        recovered: bool,
    ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """``(status, outputs, meta, checkpoint)`` of the journal end record of an outcome."""
        return (
            "replayed" if replayed else "completed",
            {"result": payload, "is_error": is_error},
            self.end_meta(replayed=replayed, recovered=recovered),
            self.checkpoint_link(revision),
        )

    def end_meta(self, *, replayed: bool, recovered: bool) -> dict[str, Any]:
        """The meta the end record carries (``deduplicated_from`` only when set)."""
        meta: dict[str, Any] = {
            "tool_revision": self.tool.revision,
            "attempt_id": self.attempt_id,
            "replayed": replayed,
            "recovered": recovered,
        }
        if self.deduplicated_from is not None:
            meta["deduplicated_from"] = self.deduplicated_from
        return meta

    def checkpoint_link(self, revision: int | None) -> dict[str, Any]:
        """The event's checkpoint link at ``revision``."""
        return {
            "namespace": self.binding.namespace,
            "call_id": self.binding.call_id,
            "revision": revision,
        }

    def _transition(self, t: Transition, status_from: str | None, won: bool) -> None:
        report_transition(getattr(self.handle, "span", None), t, status_from, won)

    def report_transition(self, t: Transition, status_from: str | None, won: bool) -> None:
        """Tell the event's span about a CAS (won or lost)."""
        self._transition(t, status_from, won)
