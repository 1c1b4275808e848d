"""Test helpers users can rely on: an in-memory store, the store contract suite, crashes.

``MemoryStore`` keeps the same contract as ``SQLiteStore`` within one process (records
are kept as their stored JSON, so nothing a caller mutates leaks in). ``check_store``
runs toolledger's store contract suite against any backend. ``crash_at`` stops a process
at a named boundary of a guarded call, to test what a restart finds there.
``stored_run`` reads a run as stored (its row, document and merged event dicts), for
assertions on exactly what the journal wrote.

Rules this module keeps:

- It is the one door from tests to private modules: toolledger's own tests import
  internals from here, never from a ``_private`` module (``tests/test_private_imports.py``
  pins that), so moving an internal changes one line here. Those names sit in the block
  at the end, outside ``__all__``: they are not API and may change in any release.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

from .checkpoint._encode import encode_result as encode_result
from .checkpoint._encode import stored_result as stored_result
from .checkpoint._encode import unencodable_result as unencodable_result
from .checkpoint._json import _walk_types
from .checkpoint._json import check_types as check_types
from .checkpoint._json import compact_json as compact_json
from .checkpoint._json import copy_json as copy_json
from .checkpoint.model import _KNOWN_VALID
from .guard import _call as _guard_call
from .guard._call import EffectKey as EffectKey
from .guard._call import RecoveryFailed as RecoveryFailed
from .guard._call import join_claims as join_claims
from .guard._call import outcome as _outcome
from .guard._drivers import ASYNC_TOOLS as _ASYNC_TOOLS
from .guard._drivers import ASYNC_TOOLS_MAX as _ASYNC_TOOLS_MAX
from .guard._flow import CallFlow as CallFlow
from .guard._seams import CRASH_POINTS
from .guard._seams import crash_at as _crash_at
from .guard._seams import now as _guard_now
from .journal._content import new_id as _journal_new_id
from .journal._content import now as _journal_now
from .journal._header import PHASES as PHASES
from .journal._header import HeaderFormat as HeaderFormat
from .journal._header import record_header as record_header
from .journal._read import StoredRun
from .journal._read import load_stored_run as _load_stored_run
from .journal._recorder import MAX_ERRORS as MAX_ERRORS
from .journal._records import FORMAT_VERSION as FORMAT_VERSION
from .journal._records import canonical as canonical
from .journal._records import chain_hash as chain_hash
from .journal._records import content_hash as content_hash
from .journal._records import header_json as header_json
from .journal._records import run_genesis as run_genesis
from .journal._records import stored_header as stored_header
from .journal._values import encoded_json as encoded_json
from .journal._values import exact_floats as exact_floats
from .journal._values import to_json as to_json
from .journal._writer import FLUSH_INTERVAL as FLUSH_INTERVAL
from .store import _contract as _store_contract
from .store import _search as _store_search
from .store import _sqlite_search
from .store._rows import OP_TABLES as OP_TABLES
from .store._rows import dump_record as dump_record
from .store._rows import forget_proven as forget_proven
from .store._rows import load_record as load_record
from .store._rows import op_table as op_table
from .store._rows import swap_facts as swap_facts
from .store._sqlite_checkpointer import BACKSTOP_PAGES as BACKSTOP_PAGES
from .store._sqlite_checkpointer import CHECKPOINT_EVERY as CHECKPOINT_EVERY
from .store._sqlite_checkpointer import CHECKPOINT_EVERY_FULL as CHECKPOINT_EVERY_FULL
from .store._sqlite_checkpointer import PRESYNC_FRAMES as PRESYNC_FRAMES
from .store._sqlite_checkpointer import sync_file as sync_file
from .store._sqlite_ops import _facts_sql
from .store._tombstone import build_tombstone as build_tombstone
from .store.base import Store
from .store.memory import MemoryStore
from .telemetry._configure import make_exporter as make_exporter
from .telemetry._configure import resolve_endpoint as resolve_endpoint
from .telemetry._model import SPAN_ATTRIBUTES as SPAN_ATTRIBUTES
from .telemetry._model import TRANSITION_ATTRIBUTES as TRANSITION_ATTRIBUTES
from .telemetry._policy import DEFAULTS as _TELEMETRY_DEFAULTS
from .telemetry._policy import content_from_env as content_from_env
from .telemetry._reexport import call_facts as call_facts
from .telemetry._resolution import RESOLUTION_ATTRIBUTES as RESOLUTION_ATTRIBUTES
from .telemetry._spans import decision_record as decision_record

#: The store contract: every check, the checks by capability, those a store must pass.
STORE_CHECKS = _store_contract.CHECKS
STORE_CHECK_GROUPS = _store_contract.CHECK_GROUPS
store_checks_for = _store_contract.checks_for

__all__ = ["CRASH_POINTS", "MemoryStore", "check_store", "crash_at", "stored_run"]


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def crash_at(point: str, action: Callable[[], Any] | None = None) -> Iterator[None]:
    """Stop at ``point`` each time a guarded call passes it, inside the ``with`` block.

    ``point`` is one of ``CRASH_POINTS``: ``after-approval`` (a decision was stored),
    ``before-claim``, ``after-claim`` (claimed, ``execute`` not called), ``after-execute``
    (``execute`` returned, result not stored), ``after-completion``,
    ``after-delivery-claim`` (``post`` not called) and ``after-post`` (``post`` returned,
    delivery not recorded). The default ``action`` SIGKILLs the process, as a crash does
    (run the code under test in a child process, then look at what it left); pass another
    ``action`` (raise, send a signal) to stop differently.

    Example::

        with toolledger.testing.crash_at("after-execute"):
            run.call(send_email, call_id="toolu_01", input={"to": "ana@example.com"})

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown point.
    """
    with _crash_at(point, action or _sigkill):
        yield


def check_store(factory: Callable[[], Store]) -> None:
    """Run the store contract suite against stores made by ``factory``.

    Args:
        factory: Returns a fresh, empty store each time it is called.

    Raises:
        AssertionError: listing every failed check by name.
    """
    first = factory()
    try:
        checks = store_checks_for(first)  # the core checks and those of its capabilities
    finally:
        first.close()
    failures = []
    for check in checks:
        store = factory()
        try:
            check(store)
        except Exception as exc:
            failures.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
        finally:
            store.close()
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(checks)} store checks failed:\n" + "\n".join(failures)
        )


def stored_run(db: Any, run_id: str) -> StoredRun:
    """Read run ``run_id`` as stored: its row, document, records and merged event dicts.

    ``toolledger.load_run`` gives the ``RunView`` users read; this gives the raw shape the
    journal merged (``.events`` are dicts, ``.row`` the runs row, ``.doc`` its document,
    ``.facts`` the hashed facts readers display), to assert on exactly what was written.

    Args:
        db: A ``Store``, path or URL.
        run_id: The run.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run id.
    """
    return _load_stored_run(db, run_id)


# -- internals toolledger's own tests reach (not API: they may change in any release) -------
# The ``import x as x`` lines above re-export most of them (outside ``__all__``); these are
# named here where the private name alone would be ambiguous or private.

#: The guard's clock (aware UTC ``datetime``).
guard_now = _guard_now
#: The journal's clock (ISO 8601 text, as records store it).
journal_now = _journal_now
#: The journal's ids (event and run ids: 32 hex digits).
journal_new_id = _journal_new_id
#: ``check_types``' full walk (tests pin its quick walk to it).
walk_types = _walk_types
#: The SQLite search-index module (tests switch FTS5 off or shrink its limits on it).
sqlite_search = _sqlite_search
#: The backends' shared search module (tokens, index literals, ``EventQuery``).
store_search = _store_search
#: The process-wide telemetry defaults ``configure()`` sets (``.reset()`` undoes it).
TELEMETRY_DEFAULTS = _TELEMETRY_DEFAULTS
#: The guard's ``Tool.is_async`` answers, kept per tool object, and their bound.
ASYNC_TOOLS = _ASYNC_TOOLS
ASYNC_TOOLS_MAX = _ASYNC_TOOLS_MAX
#: The registry of records known valid (``checkpoint.model.remember_valid``): id -> weakref.
KNOWN_VALID = _KNOWN_VALID
#: The guard's one constructor of a ``ToolOutcome`` from a checkpoint record.
outcome_of = _outcome
#: The module of the frozen ``Call`` a guard flow (``CallFlow``) runs over and of the
#: requests it yields (``guard_requests.Read``, ``.Commit`` ...): a test drives a flow by
#: answering its requests, with no store.
guard_requests = _guard_call
#: SQLite's expression for a swap's history facts (``swap_facts`` is pinned to it).
sqlite_facts_sql = _facts_sql
