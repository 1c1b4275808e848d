"""Value conversion always yields exact JSON; unknown fields from newer writers are kept."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

import toolledger
from toolledger.checkpoint import canonical_json
from toolledger.testing import stored_run

from .._internals import content_json, encoded_json, exact_floats, record_header, to_json
from .._internals import journal_now as now

anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=8)
    | st.datetimes()
    | st.just(object()),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.frozensets(st.integers(), max_size=3)
        | st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), children, max_size=3)
    ),
    max_leaves=15,
)


class TestToJson:
    @settings(max_examples=200, deadline=None)
    @given(anything)
    def test_any_value_converts_to_exact_json(self, value):
        converted, floats = to_json(value)
        canonical_json(converted)  # raises on anything that is not exact JSON
        has_float = any(type(x) is float for x in _leaves(converted))
        assert floats == has_float

    @settings(max_examples=300, deadline=None)
    @given(anything)
    def test_exact_floats_is_none_unless_to_json_copies_unchanged(self, value):
        """A value ``exact_floats`` accepts is what ``to_json`` returns, floats flag included."""
        floats = exact_floats(value)
        converted, converted_floats = to_json(value)
        assert (floats is not None) == _same(value, converted)
        if floats is not None:
            assert floats == converted_floats
            assert canonical_json(value) == canonical_json(converted)

    @settings(max_examples=300, deadline=None)
    @given(anything)
    def test_encoded_json_is_to_json_without_copying_exact_json(self, value):
        """``encoded_json`` hands back exact JSON itself and converts the rest as ``to_json``."""
        converted, floats = encoded_json(value)
        expected, expected_floats = to_json(value)
        assert _same(converted, expected)
        assert floats == expected_floats
        assert (converted is value) == _same(value, expected)

    def test_exact_floats_refuses_what_to_json_marks(self):
        """Markers are never skipped: each value ``to_json`` rewrites is refused."""
        deep: list = []
        for _ in range(64):
            deep = [deep]
        for value in ({"s": "a\ud800b"}, {"a\udfffb": 1}, [math.nan], [2**53], (1,), deep):
            assert exact_floats(value) is None
        assert exact_floats({"a": [1, {"b": 2.5}], "é": "😀"}) is True
        assert exact_floats({"a": [1, {"b": None}], "c": True}) is False

    def test_lone_surrogates_are_marked_not_written(self):
        converted, _ = to_json({"s": "a\ud800b"})
        assert converted == {"s": {"$str": "a\\ud800b"}}

    def test_deep_nesting_is_truncated_without_recursion_errors(self):
        value: list = []
        for _ in range(5000):
            value = [value]
        converted, _ = to_json(value)
        depth = 0
        while isinstance(converted, list):
            converted = converted[0]
            depth += 1
        assert converted == {"$truncated": "depth"}
        assert depth == 64

    def test_infinities_are_marked(self):
        converted, _ = to_json([math.inf, -math.inf])
        assert converted == [{"$float": "Infinity"}, {"$float": "-Infinity"}]


def _same(a, b):
    """Equal, with the same types all the way down (a tuple is not its list)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _leaves(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        else:
            yield item


class TestNewerWriters:
    def test_unknown_fields_and_kinds_are_kept_and_verify(self, store, tmp_path):
        with toolledger.run("g", db=store) as run:
            header = {
                "v": 2,
                "run_id": run.run_id,
                "event_id": "e" * 32,
                "parent_id": None,
                "kind": "plan",
                "name": "future",
                "status": "drafted",
                "phase": "point",
                "at": now(),
                "priority": 7,
            }
            text, digest = content_json({"text": "hello", "cost": {"usd": 1}}, False)
            run.append(record_header({**header, "content_sha256": digest}), text)
        assert toolledger.verify(store, run.run_id).ok
        (ev, _finish) = stored_run(store, run.run_id).events
        assert ev["kind"] == "plan"
        assert ev["status"] == "drafted"
        assert ev["extra"] == {"priority": 7, "cost": {"usd": 1}}
        assert ev["text"] == "hello"
        md = toolledger.export_markdown(store, run.run_id, tmp_path / "r.md")
        assert "cost" in md.path.read_text()
