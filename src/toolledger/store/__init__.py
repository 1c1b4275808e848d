"""Stores: where checkpoints, the operation journal, runs and journal events live."""

from ._open import DEFAULT_DB, NewLedgerWarning, open_store
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
    "Store",
    "SwapCheckpoint",
    "NewLedgerWarning",
    "WriteOperation",
    "open_store",
]
