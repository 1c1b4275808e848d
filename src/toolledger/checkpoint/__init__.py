"""The checkpoint: records, the state machine and validation. Pure; no I/O here.

Names imported ``as`` themselves and left out of ``__all__`` are for toolledger's other
packages (the attempt-id format, the exact-JSON encoder, compact and sorted JSON, the
guard's create-and-claim step), not for users.
"""

from ._attempt import new_attempt_id as new_attempt_id
from ._attempt import parse_link as parse_link
from ._encode import encoded_json as encoded_json
from ._encode import exact_floats as exact_floats
from ._encode import stored_result as stored_result
from ._encode import to_json as to_json
from ._encode import unencodable_result as unencodable_result
from ._json import DEFAULT_MAX_PAYLOAD_BYTES, HARD_MAX_PAYLOAD_BYTES, canonical_json
from ._json import check_bounds as check_bounds
from ._json import check_types as check_types
from ._json import compact_json as compact_json
from ._json import copy_json as copy_json
from ._json import sorted_dumps as sorted_dumps
from ._json import sorted_dumps_acyclic as sorted_dumps_acyclic
from .model import (
    Action,
    Binding,
    CheckpointRecord,
    Decision,
    Resolution,
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
    resolve_completed,
    resolve_not_executed,
    transition_between,
)
from .transitions import create_and_claim as create_and_claim
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
    "Resolution",
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
    "resolve_completed",
    "resolve_not_executed",
    "transition_between",
    "validate_checkpoint",
]
