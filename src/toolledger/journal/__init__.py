"""The execution journal: runs, steps, approvals, artifacts, tamper evidence.

Public names are re-exported by ``toolledger``; see ``docs/journal.md``.
"""

from ._handles import Artifact, EventHandle, Step
from ._import import import_json
from ._reader import list_runs, load_run, search
from ._recorder import JournalWarning
from ._records import erase_content
from ._run import Run, current_run
from ._seam import JournalSeam
from ._traced import traced
from ._verify import VerifyReport, verify, verify_export
from ._view import Event, RunView

__all__ = [
    "Artifact",
    "Event",
    "EventHandle",
    "JournalSeam",
    "JournalWarning",
    "Run",
    "RunView",
    "Step",
    "VerifyReport",
    "current_run",
    "erase_content",
    "import_json",
    "list_runs",
    "load_run",
    "search",
    "traced",
    "verify",
    "verify_export",
]
