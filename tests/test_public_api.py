"""The public API: ``toolledger.__all__`` is sorted, importable and complete."""

from __future__ import annotations

import importlib
import inspect

import pytest

import toolledger

#: Names issue 2 (the foundation) publishes; other areas add more.
FOUNDATION = {
    "Action",
    "Binding",
    "CheckpointError",
    "CheckpointRecord",
    "Decision",
    "ERROR_CODES",
    "Result",
    "SQLiteStore",
    "Status",
    "Store",
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
    "validate_checkpoint",
    "BindingConflictError",
    "FenceConflictError",
    "InvalidArgumentError",
    "InvalidCheckpointError",
    "InvalidTransitionError",
    "PayloadLimitError",
    "StoreBusyError",
    "StoreError",
    "StoreSchemaTooNewError",
    "UnsupportedSchemaError",
}


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


def test_foundation_names_are_exported() -> None:
    """The checkpoint, store and error names of the foundation are public."""
    assert set(toolledger.__all__) >= FOUNDATION


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

    assert set(DECISIONS) == set(toolledger.Status)
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
    """The class is ApprovalDeniedError; ApprovalDenied (exported) is the very same class."""
    from toolledger.errors import ApprovalDeniedError

    assert toolledger.ApprovalDenied is ApprovalDeniedError
    assert ApprovalDeniedError.__name__ == "ApprovalDeniedError"
    assert "ApprovalDenied" in toolledger.__all__


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
    assert hints["call"] is toolledger.ToolOutcome
    assert hints["acall"] is toolledger.ToolOutcome
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
    """``ApprovalDeniedError`` (what a denial raises) is public; ``ApprovalDenied`` is its alias."""
    assert "ApprovalDeniedError" in toolledger.__all__
    assert toolledger.ApprovalDenied is toolledger.ApprovalDeniedError
    assert toolledger.ApprovalDeniedError.default_code == "APPROVAL_DENIED"
