"""The one door from toolledger's tests to its private modules.

Tests import internals from here (``from .._internals import dump_record``), never from a
``_private`` module themselves: ``tests/test_private_imports.py`` fails on any other file
that reaches one (but for the pairs it lists). So moving an internal changes one line here,
not the tests that use it. None of this is API: ``toolledger.testing`` is what users test
with.
"""

from __future__ import annotations

from toolledger.checkpoint._encode import encode_result as encode_result
from toolledger.checkpoint._encode import stored_result as stored_result
from toolledger.checkpoint._encode import unencodable_result as unencodable_result
from toolledger.checkpoint._json import _walk_types
from toolledger.checkpoint._json import check_types as check_types
from toolledger.checkpoint._json import compact_json as compact_json
from toolledger.checkpoint._json import copy_json as copy_json
from toolledger.checkpoint._json import take_proof as take_proof
from toolledger.checkpoint.model import _parse_iso_310
from toolledger.cli._common import clean as clean
from toolledger.cli._common import json_line as json_line
from toolledger.guard import _call as _guard_call
from toolledger.guard._call import EffectKey as EffectKey
from toolledger.guard._call import RecoveryFailed as RecoveryFailed
from toolledger.guard._call import join_claims as join_claims
from toolledger.guard._call import outcome as _outcome
from toolledger.guard._drivers import ASYNC_TOOLS as ASYNC_TOOLS
from toolledger.guard._drivers import ASYNC_TOOLS_MAX as ASYNC_TOOLS_MAX
from toolledger.guard._flow import CallFlow as CallFlow
from toolledger.guard._seams import now as _guard_now
from toolledger.journal._content import new_id as _journal_new_id
from toolledger.journal._content import now as _journal_now
from toolledger.journal._header import PHASES as PHASES
from toolledger.journal._header import HeaderFormat as HeaderFormat
from toolledger.journal._header import point_event as point_event
from toolledger.journal._header import record_header as record_header
from toolledger.journal._recorder import MAX_ERRORS as MAX_ERRORS
from toolledger.journal._records import FORMAT_VERSION as FORMAT_VERSION
from toolledger.journal._records import canonical as canonical
from toolledger.journal._records import chain_hash as chain_hash
from toolledger.journal._records import content_hash as content_hash
from toolledger.journal._records import content_json as content_json
from toolledger.journal._records import header_json as header_json
from toolledger.journal._records import run_genesis as run_genesis
from toolledger.journal._records import stored_header as stored_header
from toolledger.journal._values import encoded_json as encoded_json
from toolledger.journal._values import exact_floats as exact_floats
from toolledger.journal._values import to_json as to_json
from toolledger.journal._view import from_json_table as from_json_table
from toolledger.journal._view import to_json_table as to_json_table
from toolledger.journal._writer import _LIVE as _LIVE_WRITERS
from toolledger.journal._writer import FLUSH_INTERVAL as FLUSH_INTERVAL
from toolledger.journal._writer import flush_all as flush_all
from toolledger.store import _search as _store_search
from toolledger.store import _sqlite_conn as _sqlite_conn
from toolledger.store import _sqlite_search
from toolledger.store import contract as _store_contract
from toolledger.store._approval_record import dump_approval as dump_approval
from toolledger.store._rows import OP_TABLES as OP_TABLES
from toolledger.store._rows import dump_record as dump_record
from toolledger.store._rows import forget_proven as forget_proven
from toolledger.store._rows import load_record as load_record
from toolledger.store._rows import op_table as op_table
from toolledger.store._rows import swap_facts as swap_facts
from toolledger.store._sqlite_checkpointer import BACKSTOP_PAGES as BACKSTOP_PAGES
from toolledger.store._sqlite_checkpointer import CHECKPOINT_EVERY as CHECKPOINT_EVERY
from toolledger.store._sqlite_checkpointer import CHECKPOINT_EVERY_FULL as CHECKPOINT_EVERY_FULL
from toolledger.store._sqlite_checkpointer import PRESYNC_FRAMES as PRESYNC_FRAMES
from toolledger.store._sqlite_checkpointer import sync_file as sync_file
from toolledger.store._sqlite_ops import _facts_sql
from toolledger.store._tombstone import build_tombstone as build_tombstone
from toolledger.telemetry._configure import make_exporter as make_exporter
from toolledger.telemetry._configure import resolve_endpoint as resolve_endpoint
from toolledger.telemetry._model import SPAN_ATTRIBUTES as SPAN_ATTRIBUTES
from toolledger.telemetry._model import TRANSITION_ATTRIBUTES as TRANSITION_ATTRIBUTES
from toolledger.telemetry._policy import DEFAULTS as _TELEMETRY_DEFAULTS
from toolledger.telemetry._policy import content_from_env as content_from_env
from toolledger.telemetry._reexport import call_facts as call_facts
from toolledger.telemetry._resolution import RESOLUTION_ATTRIBUTES as RESOLUTION_ATTRIBUTES
from toolledger.telemetry._spans import decision_record as decision_record

# -- named here where the private name alone would be ambiguous or private -----------------

#: The store contract: every check, and the checks a given store must pass.
STORE_CHECKS = _store_contract.CHECKS
store_checks_for = _store_contract.checks_for
#: The guard's clock (aware UTC ``datetime``).
guard_now = _guard_now
#: The journal's clock (ISO 8601 text, as records store it).
journal_now = _journal_now
#: The journal's ids (event and run ids: 32 hex digits).
journal_new_id = _journal_new_id
#: ``check_types``' full walk (tests pin its quick walk to it).
walk_types = _walk_types
parse_iso_310 = _parse_iso_310
#: The SQLite search-index module (tests switch FTS5 off or shrink its limits on it).
sqlite_search = _sqlite_search
#: The backends' shared search module (tokens, index literals, ``EventQuery``).
store_search = _store_search
#: The process-wide telemetry defaults ``configure()`` sets (``.reset()`` undoes it).
TELEMETRY_DEFAULTS = _TELEMETRY_DEFAULTS
#: The journal's registry of live writers (the flusher lists it; tests fill it).
LIVE_WRITERS = _LIVE_WRITERS
#: The guard's one constructor of a ``ToolOutcome`` from a checkpoint record.
outcome_of = _outcome
#: The module of the frozen ``Call`` a guard flow (``CallFlow``) runs over and of the
#: requests it yields (``guard_requests.Read``, ``.Commit`` ...): a test drives a flow by
#: answering its requests, with no store.
guard_requests = _guard_call
#: SQLite's expression for a swap's history facts (``swap_facts`` is pinned to it).
sqlite_facts_sql = _facts_sql
