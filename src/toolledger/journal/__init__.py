"""The execution journal: runs, steps, approvals, artifacts, tamper evidence.

Public names are re-exported by ``toolledger``; see ``docs/journal.md``. Names imported
``as`` themselves and left out of ``__all__`` are for toolledger's other packages (the
record-level read, record parsing, event times, text checks, a decision's record, the key
of a missing justification), not for users.
"""

from ._append import find_call as find_call
from ._append import point_row as point_row
from ._content import JUSTIFICATION_MISSING as JUSTIFICATION_MISSING
from ._content import Artifact
from ._content import check_source as check_source
from ._content import check_text as check_text
from ._facts import describe_source as describe_source
from ._import import import_json
from ._lifecycle import EventHandle
from ._read import StoredRun as StoredRun
from ._read import iter_rows as iter_rows
from ._read import load_stored_run as load_stored_run
from ._reader import events_of as events_of
from ._reader import list_runs, load_run, search
from ._reader import snippet as snippet
from ._reader import to_time as to_time
from ._recorder import JournalWarning
from ._records import erase_content
from ._records import parse_many as parse_many
from ._run import Run, current_run
from ._seam import JournalSeam
from ._step import Step
from ._traced import traced
from ._verify import VerifyReport, verify, verify_export
from ._view import Event, RunView
from ._view import epoch_ms as epoch_ms
from ._view import parse_event_time as parse_event_time

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
