"""Stores: where checkpoints, the operation journal, runs and journal events live.

Names imported ``as`` themselves and left out of ``__all__`` are for toolledger's other
packages (opening a store from a path or a ``Store``, the approval-record codec, the search
query, the checkpoint row codec and tombstones), not for users.
"""

from ._approval_record import CAS_ROUNDS as CAS_ROUNDS
from ._approval_record import TEXT_MAX as TEXT_MAX
from ._approval_record import ApprovalRecord as ApprovalRecord
from ._approval_record import ApprovalStatus as ApprovalStatus
from ._approval_record import binding_fingerprint as binding_fingerprint
from ._approval_record import latest_denial as latest_denial
from ._open import DEFAULT_DB, NewLedgerWarning, StoreLike, open_store
from ._open import store_for as store_for
from ._open import using_store as using_store
from ._rows import dump_record as dump_record
from ._search import EventQuery as EventQuery
from ._search import SearchWarning
from ._search import parse_query as parse_query
from ._sqlcommon import RECORD_FIELDS as RECORD_FIELDS
from ._tombstone import build_tombstone as build_tombstone
from ._tombstone import tombstoned_error as tombstoned_error
from .base import (
    AppendEvents,
    CreateCheckpoint,
    EventRow,
    HistoryEntry,
    Op,
    QuarantinedRow,
    RemoveOperation,
    RunRow,
    Store,
    SwapCheckpoint,
    WriteOperation,
)
from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_DB",
    "AppendEvents",
    "CreateCheckpoint",
    "EventRow",
    "HistoryEntry",
    "Op",
    "QuarantinedRow",
    "RemoveOperation",
    "RunRow",
    "SQLiteStore",
    "SearchWarning",
    "Store",
    "StoreLike",
    "SwapCheckpoint",
    "NewLedgerWarning",
    "WriteOperation",
    "open_store",
]
