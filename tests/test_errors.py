"""Error codes are API: the set is pinned, documented in the README and survives pickling."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import toolledger as tl
from toolledger import errors

README = Path(__file__).resolve().parents[1] / "README.md"

PINNED = {
    "BINDING_CONFLICT",
    "FENCE_CONFLICT",
    "INVALID_TRANSITION",
    "INVALID_ARGUMENT",
    "PAYLOAD_LIMIT",
    "INVALID_CHECKPOINT",
    "UNSUPPORTED_SCHEMA",
    "NOT_FOUND",
    "OUTCOME_UNKNOWN",
    "DELIVERY_UNCERTAIN",
    "TOMBSTONED",
    "APPROVAL_DENIED",
    "REPLAY_DIVERGED",
    "REPLAY_UNAVAILABLE",
    "STORE_BUSY",
    "STORE_UNAVAILABLE",
    "STORE_SCHEMA_TOO_NEW",
}

ERROR_CLASSES = list(  # each class once (ApprovalDenied is an alias of ApprovalDeniedError)
    dict.fromkeys(
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, tl.CheckpointError) and obj.default_code
    )
)


def test_error_codes_are_pinned() -> None:
    """Adding, renaming or removing a code is an API change: update this set on purpose."""
    assert tl.ERROR_CODES == PINNED


def test_every_code_has_exactly_one_class() -> None:
    """Each code belongs to one leaf class, and error_for_code builds it."""
    assert sorted(c.default_code for c in ERROR_CLASSES) == sorted(PINNED)
    for cls in ERROR_CLASSES:
        err = errors.error_for_code(cls.default_code, "m", {"k": 1})
        assert type(err) is cls
        assert (err.code, err.message, err.details) == (cls.default_code, "m", {"k": 1})


def test_error_for_unknown_code_is_plain_checkpoint_error() -> None:
    """An unknown code still gives a CheckpointError carrying that code."""
    err = errors.error_for_code("SOMETHING_NEW", "m")
    assert type(err) is tl.CheckpointError
    assert err.code == "SOMETHING_NEW"


def test_store_errors_share_the_store_base() -> None:
    """STORE_* codes can be caught as StoreError; the others cannot."""
    for cls in ERROR_CLASSES:
        assert issubclass(cls, tl.CheckpointError)
        assert issubclass(cls, tl.StoreError) == cls.default_code.startswith("STORE_")


def test_errors_module_docstring_draws_every_code() -> None:
    """The hierarchy drawn in errors.py names every class and its code."""
    doc = errors.__doc__ or ""
    for cls in ERROR_CLASSES:
        assert re.search(rf"{cls.__name__}\s+{cls.default_code}\b", doc), cls.__name__


def _readme_rows() -> dict[str, tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:errors -->", 1)[1].split("<!-- /section:errors -->", 1)[0]
    rows = {}
    for match in re.finditer(r"^\| `([A-Z_]+)` \| (.+?) \| (.+?) \|$", section, re.MULTILINE):
        rows[match.group(1)] = (match.group(2).strip(), match.group(3).strip())
    return rows


def test_readme_error_table_matches_error_codes() -> None:
    """The README lists every code exactly once, with its meaning and what to do."""
    rows = _readme_rows()
    assert set(rows) == set(tl.ERROR_CODES)
    for code, (meaning, todo) in rows.items():
        assert meaning, code
        assert todo, code


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_pickles_with_code_message_details(cls: type[tl.CheckpointError]) -> None:
    """Errors cross process boundaries (multiprocessing) intact."""
    err = cls(message="what happened; what to do", details={"namespace": "ns", "n": [1, 2]})
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cls
    assert again.code == cls.default_code
    assert again.message == "what happened; what to do"
    assert again.details == {"namespace": "ns", "n": [1, 2]}
    assert str(again) == str(err) == f"{cls.default_code}: what happened; what to do"


def test_checkpoint_error_takes_code_message_details_positionally() -> None:
    """CheckpointError(code, message, details); details are copied."""
    details = {"k": 1}
    err = tl.CheckpointError("FENCE_CONFLICT", "held", details)
    details["k"] = 2
    assert (err.code, err.message, err.details) == ("FENCE_CONFLICT", "held", {"k": 1})
    assert str(tl.CheckpointError("X")) == "X"
    plain = pickle.loads(pickle.dumps(err))
    assert (type(plain), plain.code, plain.details) == (
        tl.CheckpointError,
        "FENCE_CONFLICT",
        {"k": 1},
    )


def test_leaf_error_default_code_can_be_raised_and_caught_by_base() -> None:
    """Leaves carry their code by default and are caught by the base class."""
    with pytest.raises(tl.CheckpointError) as info:
        raise tl.StoreBusyError(message="locked")
    assert info.value.code == "STORE_BUSY"
    assert isinstance(info.value, tl.StoreError)
