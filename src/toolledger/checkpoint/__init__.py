"""The checkpoint: records, the state machine and validation. Pure; no I/O here."""

from ._json import DEFAULT_MAX_PAYLOAD_BYTES, HARD_MAX_PAYLOAD_BYTES, canonical_json
from .model import (
    Action,
    Binding,
    CheckpointRecord,
    Decision,
    Result,
    Status,
    Transition,
    fingerprint,
)
from .transitions import (
    DECISIONS,
    TRANSITIONS,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
    transition_between,
)
from .validate import validate_checkpoint

__all__ = [
    "DECISIONS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "HARD_MAX_PAYLOAD_BYTES",
    "TRANSITIONS",
    "Action",
    "Binding",
    "CheckpointRecord",
    "Decision",
    "Result",
    "Status",
    "Transition",
    "canonical_json",
    "claim_delivery",
    "claim_execution",
    "complete_delivery",
    "complete_execution",
    "create_checkpoint",
    "decide_checkpoint",
    "fingerprint",
    "mark_execution_uncertain",
    "release_delivery",
    "release_execution",
    "transition_between",
    "validate_checkpoint",
]
