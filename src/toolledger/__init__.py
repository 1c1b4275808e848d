"""toolledger: checkpointed, journaled, observable tool calls for AI agents.

This module only re-exports the public API; ``tests/test_public_api.py`` pins ``__all__``.
The checkpoint's records and transitions live in ``toolledger.checkpoint``; names that
moved there (or elsewhere) still resolve here, with a ``DeprecationWarning`` naming their
new home (``_MOVED``).
"""

import sys as _sys
import typing as _typing
import warnings as _warnings
from importlib import import_module as _import_module

from ._version import __version__
from .approvals import Approved, Denied, Pending, decide_approval
from .copy import CopyReport, copy_ledger
from .errors import (
    ERROR_CODES,
    ApprovalDeniedError,
    BindingConflictError,
    CheckpointError,
    DeliveryUncertainError,
    FenceConflictError,
    InvalidArgumentError,
    InvalidCheckpointError,
    InvalidTransitionError,
    NotFoundError,
    OutcomeUnknownError,
    PayloadLimitError,
    ReplayDivergedError,
    ReplayDivergence,
    ReplayUnavailableError,
    StoreBusyError,
    StoreError,
    StoreSchemaTooNewError,
    StoreUnavailableError,
    TombstonedError,
    UnsupportedSchemaError,
)
from .export import (
    ExportInfo,
    SiteInfo,
    export_html,
    export_json,
    export_markdown,
    export_site,
    reexport,
)
from .guard import ReplayReport, Run, UndeliveredWarning, current_call, run
from .journal import (
    Event,
    JournalWarning,
    RunView,
    Step,
    VerifyReport,
    import_json,
    list_runs,
    load_run,
    search,
    traced,
    verify,
    verify_export,
)
from .readiness import Diagnostic, check_tool
from .replay import Replayer
from .retention import GcReport, gc
from .settle import ReconcileItem, Settled, reconcile, resolve
from .store import NewLedgerWarning, SearchWarning, SQLiteStore, Store, open_store
from .telemetry import configure
from .tools import (
    ApprovalMode,
    ExecuteContext,
    NotRecovered,
    RecoverContext,
    Recovered,
    Tool,
    ToolOutcome,
    tool,
)

__all__ = [
    "ApprovalDeniedError",
    "ApprovalMode",
    "Approved",
    "BindingConflictError",
    "CheckpointError",
    "CopyReport",
    "DeliveryUncertainError",
    "Denied",
    "Diagnostic",
    "ERROR_CODES",
    "Event",
    "ExecuteContext",
    "ExportInfo",
    "FenceConflictError",
    "GcReport",
    "InvalidArgumentError",
    "InvalidCheckpointError",
    "InvalidTransitionError",
    "JournalWarning",
    "NewLedgerWarning",
    "NotFoundError",
    "NotRecovered",
    "OutcomeUnknownError",
    "PayloadLimitError",
    "Pending",
    "ReconcileItem",
    "RecoverContext",
    "Recovered",
    "ReplayDivergedError",
    "ReplayDivergence",
    "ReplayReport",
    "ReplayUnavailableError",
    "Replayer",
    "Run",
    "RunView",
    "SQLiteStore",
    "SearchWarning",
    "Settled",
    "SiteInfo",
    "Step",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreSchemaTooNewError",
    "StoreUnavailableError",
    "TombstonedError",
    "Tool",
    "ToolOutcome",
    "UndeliveredWarning",
    "UnsupportedSchemaError",
    "VerifyReport",
    "__version__",
    "check_tool",
    "configure",
    "copy_ledger",
    "current_call",
    "decide_approval",
    "export_html",
    "export_json",
    "export_markdown",
    "export_site",
    "gc",
    "import_json",
    "list_runs",
    "load_run",
    "open_store",
    "reconcile",
    "reexport",
    "resolve",
    "run",
    "search",
    "tool",
    "traced",
    "verify",
    "verify_export",
]

#: Names this package exported before, each with the path to import it from now.
_MOVED: dict[str, str] = {
    **{
        name: f"toolledger.checkpoint.{name}"
        for name in (
            "Action",
            "Binding",
            "CheckpointRecord",
            "Decision",
            "Resolution",
            "Result",
            "Status",
            "Transition",
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
            "validate_checkpoint",
        )
    },
    "ApprovalDenied": "toolledger.ApprovalDeniedError",
    "Tombstone": "toolledger.store.base.Tombstone",
}

if not _typing.TYPE_CHECKING:  # type checkers see only __all__: a moved name is an error there

    def __getattr__(name: str) -> object:
        """Resolve a name that moved (``_MOVED``), warning where it lives now."""
        new = _MOVED.get(name)
        if new is None:
            raise AttributeError(f"module 'toolledger' has no attribute {name!r}")
        module, _, attr = new.rpartition(".")
        value = getattr(_import_module(module), attr)
        # ``from toolledger import X`` asks twice: importlib's ``_handle_fromlist`` probes
        # with ``hasattr`` first, then the import itself reads the name. Warn on the read
        # only, so each use warns once, at the user's line.
        if _sys._getframe(1).f_code.co_name != "_handle_fromlist":
            _warnings.warn(
                f"toolledger.{name} is deprecated and will be removed: use {new}",
                DeprecationWarning,
                stacklevel=2,
            )
        return value
