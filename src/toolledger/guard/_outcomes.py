"""What a guarded call hands back to caller code: outcomes and payload copies. No I/O here.

Rules this module keeps:

- A stored payload never leaves the guard as the object the checkpoint record holds.
  Every path that hands a payload to caller code (``ToolOutcome.payload`` of a call or a
  replay, the payloads ``post`` gets from ``deliver``/``adeliver``/``deliver_many`` and the
  adapters) takes it from ``handed_out``, which returns a private copy. So whatever a
  caller does with the object (a ``post`` that adds a key, a caller that clears a list),
  the record the guard writes next (``claim_delivery``, ``release_delivery``,
  ``complete_delivery``) still holds what ``complete_execution`` stored, byte for byte.
- ``outcome`` is the one constructor of a ``ToolOutcome`` from a checkpoint record.
"""

from __future__ import annotations

from typing import Any

from ..checkpoint._json import copy_json
from ..checkpoint.model import CheckpointRecord
from ..tools import ToolOutcome

__all__ = ["handed_out", "outcome"]


def handed_out(record: CheckpointRecord) -> Any:
    """Return a private copy of ``record``'s stored payload (exact JSON, key order kept).

    Raises:
        AssertionError: the record has no result (callers check the status first).
    """
    assert record.result is not None
    return copy_json(record.result.payload)


def outcome(record: CheckpointRecord, *, replayed: bool, recovered: bool = False) -> ToolOutcome:
    """Return the ``ToolOutcome`` of a call whose checkpoint ``record`` holds a result."""
    assert record.result is not None
    return ToolOutcome(
        call_id=record.binding.call_id,
        tool_name=record.binding.tool_name,
        payload=handed_out(record),
        is_error=record.result.is_error,
        status=record.status.value,
        revision=record.revision,
        replayed=replayed,
        recovered=recovered,
    )
