"""The execution journal: runs, steps, approvals, artifacts, tamper evidence.

Public names are re-exported by ``toolledger``; see ``docs/journal.md``.
"""

from ._events import erase_content
from ._handles import Artifact, EventHandle, Step
from ._run import JournalWarning, Run, current_run, run, traced

__all__ = [
    "Artifact",
    "EventHandle",
    "JournalWarning",
    "Run",
    "Step",
    "current_run",
    "erase_content",
    "run",
    "traced",
]
