"""check_types' quick walk answers exactly as its full walk does, or leaves it the tree."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolledger.errors import InvalidArgumentError

from .._internals import check_types, walk_types


class _Int(enum.IntEnum):
    ONE = 1


class _Str(str):
    pass


_BAD = st.sampled_from(
    [float("nan"), float("inf"), 2**53, -(2**53), "\udc80", (1, 2), _Int.ONE, _Str("x"), b"x"]
)
_GOOD = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_LEAF = _GOOD | _BAD
_KEY = st.text(max_size=6) | st.sampled_from(["\udc80", 1, None])
_TREES = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEY, inner, max_size=5),
    max_leaves=40,
)


def _answer(value: Any) -> Any:
    """What a walk says: the shape, or the refusal's message."""
    try:
        return check_types(value, what="payload")
    except InvalidArgumentError as exc:
        return ("refused", str(exc))


def _full(value: Any) -> Any:
    try:
        return walk_types(value, "payload")
    except InvalidArgumentError as exc:
        return ("refused", str(exc))


class TestQuickWalk:
    @settings(max_examples=400, deadline=None)
    @given(_TREES)
    def test_any_tree_gets_the_full_walk_s_answer(self, value: Any) -> None:
        """Shape, or refusal with the path of the first bad value: the same either way."""
        assert _answer(value) == _full(value)

    @settings(max_examples=100, deadline=None)
    @given(_TREES)
    def test_shared_subtrees_count_as_the_full_walk_counts(self, value: Any) -> None:
        """A container occurring twice is measured twice, as the full walk measures it."""
        tree = [value, {"again": value}, [value]]
        assert _answer(tree) == _full(tree)

    def test_a_cycle_is_refused_as_a_cycle(self) -> None:
        """The quick walk stops at its depth bound; the full walk names the cycle."""
        loop: list[Any] = [1]
        loop.append({"back": loop})
        with pytest.raises(InvalidArgumentError, match="cycle"):
            check_types(loop)

    def test_deep_and_wide_trees_pass_the_bounds_to_the_full_walk(self) -> None:
        """Past 64 levels or 4,096 values the full walk measures the same shape."""
        deep: Any = "x"
        for _ in range(100):
            deep = [deep]
        wide = {"rows": [{"i": i, "s": "v"} for i in range(2000)]}
        for value in (deep, wide):
            assert check_types(value) == walk_types(value, "payload")
        assert check_types(deep).depth == 100
        assert check_types(wide).values == 6002
