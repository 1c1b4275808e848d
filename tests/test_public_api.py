"""The public API: ``toolledger.__all__`` is sorted, importable and complete."""

from __future__ import annotations

import importlib
import inspect

import pytest

import toolledger
from toolledger.checkpoint import Status

#: The public surface, pinned: what a user of ``toolledger.run``, ``@toolledger.tool``, the
#: framework adapters, approvals, replay, export, settling, ``configure`` and the errors
#: needs. The checkpoint's machinery lives in ``toolledger.checkpoint`` (``CHECKPOINT``).
PUBLIC = {
    # Running guarded calls and defining tools.
    "__version__",
    "run",
    "Run",
    "current_call",
    "configure",
    "tool",
    "Tool",
    "ToolOutcome",
    "ExecuteContext",
    "RecoverContext",
    "Recovered",
    "NotRecovered",
    "check_tool",
    "Diagnostic",
    "traced",
    "Step",
    # Approvals (ApprovalMode: the values of approval=, for annotations).
    "ApprovalMode",
    "Approved",
    "Denied",
    "Pending",
    "decide_approval",
    # Reading, verifying and exporting runs.
    "load_run",
    "list_runs",
    "search",
    "RunView",
    "Event",
    "verify",
    "verify_export",
    "VerifyReport",
    "import_json",
    "export_html",
    "export_json",
    "export_markdown",
    "export_site",
    "ExportInfo",
    "SiteInfo",
    "reexport",
    # Replay, settling, retention, copies.
    "Replayer",
    "ReplayReport",
    "ReplayDivergence",
    "resolve",
    "reconcile",
    "Settled",
    "ReconcileItem",
    "gc",
    "GcReport",
    "copy_ledger",
    "CopyReport",
    # Stores.
    "Store",
    "SQLiteStore",
    "open_store",
    # Warnings.
    "JournalWarning",
    "NewLedgerWarning",
    "SearchWarning",
    "UndeliveredWarning",
    # Errors: the whole tree of ``toolledger.errors`` and its codes.
    "ERROR_CODES",
    "CheckpointError",
    "ApprovalDeniedError",
    "BindingConflictError",
    "DeliveryUncertainError",
    "FenceConflictError",
    "InvalidArgumentError",
    "InvalidCheckpointError",
    "InvalidTransitionError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PayloadLimitError",
    "ReplayDivergedError",
    "ReplayUnavailableError",
    "StoreError",
    "StoreBusyError",
    "StoreSchemaTooNewError",
    "StoreUnavailableError",
    "TombstonedError",
    "UnsupportedSchemaError",
}

#: The checkpoint's records and transitions, public under ``toolledger.checkpoint``.
CHECKPOINT = {
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
}

#: Names ``toolledger`` exported before, each with where it is imported from now.
MOVED = {
    **{name: f"toolledger.checkpoint.{name}" for name in CHECKPOINT},
    "ApprovalDenied": "toolledger.ApprovalDeniedError",
    "Tombstone": "toolledger.store.base.Tombstone",
}


def test_all_is_the_pinned_public_surface() -> None:
    """``__all__`` is exactly the pinned surface: a name added or dropped is a decision."""
    assert set(toolledger.__all__) == PUBLIC


def test_checkpoint_names_are_public_under_toolledger_checkpoint() -> None:
    """Every checkpoint record and transition is in ``toolledger.checkpoint.__all__``."""
    import toolledger.checkpoint

    assert set(toolledger.checkpoint.__all__) >= CHECKPOINT
    assert not CHECKPOINT & set(toolledger.__all__)


def _resolve(path: str) -> object:
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_name_warns_once_naming_its_new_home(name: str) -> None:
    """``toolledger.<moved>`` is the same object as its new home, with one warning naming it."""
    with pytest.warns(DeprecationWarning, match="is deprecated") as caught:
        value = getattr(toolledger, name)
    assert [str(w.message) for w in caught] == [
        f"toolledger.{name} is deprecated and will be removed: use {MOVED[name]}"
    ]
    assert caught[0].filename == __file__
    assert value is _resolve(MOVED[name])


@pytest.mark.parametrize("name", ["Binding", "ApprovalDenied", "Tombstone"])
def test_moved_name_from_import_warns_once_at_the_import(name: str) -> None:
    """``from toolledger import <moved>`` warns once (not again for importlib's probe)."""
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match=f"use {MOVED[name]}$") as caught:
        exec(compile(f"from toolledger import {name}", __file__, "exec"), namespace)
    assert len(caught) == 1
    assert MOVED[name] in str(caught[0].message)
    assert namespace[name] is _resolve(MOVED[name])


def test_moved_names_are_not_listed() -> None:
    """Neither ``__all__`` nor ``dir(toolledger)`` lists a moved name (no completion offers it)."""
    assert not set(MOVED) & set(toolledger.__all__)
    assert not set(MOVED) & set(dir(toolledger))


def test_unknown_name_is_an_attribute_error() -> None:
    """A name that never existed raises ``AttributeError``, with no warning."""
    with pytest.raises(AttributeError, match="'Bindings'"):
        toolledger.Bindings  # type: ignore[attr-defined]  # noqa: B018


def test_all_is_sorted() -> None:
    """``__all__`` is in plain sorted() order."""
    assert toolledger.__all__ == sorted(toolledger.__all__)


def test_all_has_no_duplicates() -> None:
    """Each name is exported once."""
    assert len(toolledger.__all__) == len(set(toolledger.__all__))


def test_every_name_in_all_is_importable() -> None:
    """Every exported name resolves, including via ``from toolledger import name``."""
    for name in toolledger.__all__:
        assert hasattr(toolledger, name), name
        exec(f"from toolledger import {name}", {})


def test_every_public_class_and_function_is_exported() -> None:
    """A public class or function of toolledger reachable from the package is in __all__."""
    missing = [
        name
        for name, value in vars(toolledger).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith("toolledger")
        and name not in toolledger.__all__
    ]
    assert missing == []


def test_current_call_is_public() -> None:
    """``toolledger.current_call`` (the framework adapters' way to a call's context)."""
    assert "current_call" in toolledger.__all__
    assert toolledger.current_call() is None


def test_version_is_a_string() -> None:
    """``__version__`` is exported and matches the package metadata."""
    from importlib.metadata import version

    assert toolledger.__version__ == version("toolledger")


@pytest.mark.parametrize(
    "module",
    [
        "toolledger.errors",
        "toolledger.checkpoint",
        "toolledger.checkpoint.model",
        "toolledger.checkpoint.transitions",
        "toolledger.checkpoint.validate",
        "toolledger.checkpoint._json",
        "toolledger.store",
        "toolledger.store.base",
        "toolledger.store.sqlite",
        "toolledger.store._rows",
        "toolledger.testing",
    ],
)
def test_foundation_module_all_is_accurate(module: str) -> None:
    """Each foundation module declares __all__; every entry exists, once."""
    mod = importlib.import_module(module)
    names = mod.__all__
    assert [n for n in names if not hasattr(mod, n)] == []
    assert len(names) == len(set(names))


def test_checkpoint_package_exports_transitions_table() -> None:
    """The transition table and decisions are reachable for docs and tools."""
    from toolledger.checkpoint import DECISIONS, TRANSITIONS

    assert set(DECISIONS) == set(Status)
    assert set(TRANSITIONS) == {
        "claim_execution",
        "complete_execution",
        "mark_execution_uncertain",
        "release_execution",
        "claim_delivery",
        "release_delivery",
        "complete_delivery",
        "resolve_not_executed",
        "resolve_completed",
    }


#: The journal's read API: reading a run back and searching across runs.
READ_API = {
    "Event",
    "RunView",
    "SearchWarning",
    "SiteInfo",
    "export_site",
    "list_runs",
    "load_run",
    "search",
}


def test_read_api_names_are_exported() -> None:
    """load_run, list_runs, search and their types are public."""
    assert set(toolledger.__all__) >= READ_API


def test_read_api_types_have_the_documented_fields() -> None:
    """``Event`` and ``RunView`` are frozen dataclasses with the documented fields."""
    import dataclasses

    event_fields = {f.name for f in dataclasses.fields(toolledger.Event)}
    assert event_fields >= {
        "run_id",
        "event_id",
        "parent_id",
        "kind",
        "name",
        "goal",
        "justification",
        "justification_source",
        "justification_missing",
        "status",
        "started_at",
        "ended_at",
        "duration_ms",
        "inputs",
        "outputs",
        "artifacts",
        "approval",
        "error",
        "meta",
        "checkpoint",
        "erased",
    }
    assert {"ts_start_ms", "ts_end_ms"} <= set(dir(toolledger.Event))
    run_fields = {f.name for f in dataclasses.fields(toolledger.RunView)}
    assert run_fields >= {
        "run_id",
        "namespace",
        "agent",
        "goal",
        "status",
        "started_at",
        "ended_at",
        "head_hash",
        "event_count",
        "events",
    }
    for cls in (toolledger.Event, toolledger.RunView):
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert {"children", "roots", "to_dict"} <= set(dir(toolledger.RunView))
    params = inspect.signature(toolledger.search).parameters
    assert list(params) == [
        "db",
        "text",
        "kind",
        "name",
        "status",
        "agent",
        "namespace",
        "run_id",
        "since",
        "until",
        "limit",
    ]
    assert list(inspect.signature(toolledger.list_runs).parameters) == [
        "db",
        "status",
        "agent",
        "namespace",
        "since",
        "until",
        "limit",
    ]


def test_approval_denied_is_an_alias_of_approval_denied_error() -> None:
    """The class is ApprovalDeniedError; ``toolledger.errors.ApprovalDenied`` is the same class,
    and the package exports it by its own name only."""
    from toolledger.errors import ApprovalDenied, ApprovalDeniedError

    assert ApprovalDenied is ApprovalDeniedError
    assert ApprovalDeniedError.__name__ == "ApprovalDeniedError"
    assert "ApprovalDenied" not in toolledger.__all__


def test_testing_exports_the_crash_hook() -> None:
    """toolledger.testing.crash_at names the guard's crash points; others are refused."""
    from toolledger import testing

    assert {"MemoryStore", "check_store", "crash_at", "CRASH_POINTS"} <= set(testing.__all__)
    assert "after-execute" in testing.CRASH_POINTS
    with pytest.raises(toolledger.InvalidArgumentError), testing.crash_at("after-exec"):
        pass


def test_run_guarded_calls_have_typed_signatures() -> None:
    """Run.call/acall/... are real methods of toolledger.Run, typed for a user's mypy."""
    import typing

    hints = {
        name: typing.get_type_hints(getattr(toolledger.Run, name))["return"]
        for name in ("call", "acall", "call_many", "deliver", "adeliver", "deliver_many")
    }
    # ToolOutcome[R] of the Tool[I, R] passed (tests/typing/api.py checks it with mypy).
    for name in ("call", "acall"):
        assert typing.get_origin(hints[name]) is toolledger.ToolOutcome
        tool_hint = typing.get_type_hints(getattr(toolledger.Run, name))["tool"]
        assert typing.get_origin(tool_hint) is toolledger.Tool
        assert typing.get_args(hints[name]) == typing.get_args(tool_hint)[1:]
    assert typing.get_origin(hints["call_many"]) is list
    params = list(inspect.signature(toolledger.Run.call).parameters)
    assert params[:7] == [
        "self",
        "tool",
        "call_id",
        "input",
        "justification",
        "justification_source",
        "on_error",
    ]
    with toolledger.run("typed", db=toolledger.testing.MemoryStore()) as run:
        assert type(run) is toolledger.Run  # __enter__ keeps the subclass


def test_journal_seam_is_one_protocol_the_run_implements() -> None:
    """The journal seam names public methods only, and toolledger.Run has each of them."""
    from toolledger.journal import JournalSeam

    methods = {"begin_event", "ride", "prepare_end", "record_point", "flush"}
    assert methods <= set(dir(JournalSeam))
    assert all(callable(getattr(toolledger.Run, m)) for m in methods)


#: The guard layer's own options of ``toolledger.run`` (model-call content and replay).
RUN_GUARD_OPTIONS = [
    ("journal_content", True),
    ("replay_of", None),
    ("fork_at", None),
    ("on_divergence", None),
    ("resume_turns", True),
]


def test_run_factory_takes_exactly_the_journal_runs_options() -> None:
    """toolledger.run(...) (guard layer) mirrors journal.Run's constructor, option for option,
    then adds its own; its namespace defaults to None (a replay's source's, else default)."""
    from toolledger.journal import Run as JournalRun

    factory = inspect.signature(toolledger.run).parameters
    init = inspect.signature(JournalRun.__init__).parameters
    journal = [
        (p.name, None if p.name == "namespace" else p.default) for p in list(init.values())[1:]
    ]
    assert [(p.name, p.default) for p in factory.values()] == journal + RUN_GUARD_OPTIONS


#: Replay, fork and resume from a run's record (``docs/replay.md``).
REPLAY_API = {
    "ReplayDivergedError",
    "ReplayDivergence",
    "ReplayReport",
    "ReplayUnavailableError",
    "Replayer",
}


def test_replay_names_are_exported() -> None:
    """Replay's error, its divergence, the report and the unavailable error are public."""
    assert set(toolledger.__all__) >= REPLAY_API
    assert toolledger.ReplayDivergedError("REPLAY_DIVERGED").code == "REPLAY_DIVERGED"


def test_the_class_raised_for_a_denial_is_exported_by_its_own_name() -> None:
    """``ApprovalDeniedError`` (what a denial raises) is public by that name."""
    assert "ApprovalDeniedError" in toolledger.__all__
    assert toolledger.ApprovalDeniedError.default_code == "APPROVAL_DENIED"
