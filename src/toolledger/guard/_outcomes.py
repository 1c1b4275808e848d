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

import dataclasses
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


# A frozen dataclass's __init__ sets each field through object.__setattr__; the slots' own
# descriptors set them at about a third of the cost (ToolOutcome has no __post_init__:
# nothing is skipped). Every call and every replay builds one.
(
    _SET_CALL_ID,
    _SET_TOOL_NAME,
    _SET_PAYLOAD,
    _SET_IS_ERROR,
    _SET_STATUS,
    _SET_REVISION,
    _SET_REPLAYED,
    _SET_RECOVERED,
    _SET_DEDUPLICATED_FROM,
) = (vars(ToolOutcome)[f.name].__set__ for f in dataclasses.fields(ToolOutcome))
if tuple(f.name for f in dataclasses.fields(ToolOutcome)) != (  # pragma: no cover
    "call_id", "tool_name", "payload", "is_error", "status", "revision", "replayed",
    "recovered", "deduplicated_from",
) or hasattr(ToolOutcome, "__post_init__"):  # fmt: skip
    raise AssertionError("the setters above must follow ToolOutcome's fields in order")
_new_object = object.__new__


def outcome(record: CheckpointRecord, *, replayed: bool, recovered: bool = False) -> ToolOutcome:
    """Return the ``ToolOutcome`` of a call whose checkpoint ``record`` holds a result.

    The same object as ``ToolOutcome(call_id=..., ..., recovered=recovered)`` of the
    record's fields (``deduplicated_from`` ``None``).
    """
    result = record.result
    assert result is not None
    binding = record.binding
    out: ToolOutcome = _new_object(ToolOutcome)
    _SET_CALL_ID(out, binding.call_id)
    _SET_TOOL_NAME(out, binding.tool_name)
    _SET_PAYLOAD(out, handed_out(record))
    _SET_IS_ERROR(out, result.is_error)
    _SET_STATUS(out, record.status.value)
    _SET_REVISION(out, record.revision)
    _SET_REPLAYED(out, replayed)
    _SET_RECOVERED(out, recovered)
    _SET_DEDUPLICATED_FROM(out, None)
    return out
