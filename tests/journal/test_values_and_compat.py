"""Value conversion always yields exact JSON; unknown fields from newer writers are kept."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

import toolledger
from toolledger.checkpoint import canonical_json
from toolledger.testing import journal_now as now
from toolledger.testing import record_header, stored_run, to_json

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
            content_json, digest = run._content_json({"text": "hello", "cost": {"usd": 1}}, False)
            run._write(record_header({**header, "content_sha256": digest}), content_json)
        assert toolledger.verify(store, run.run_id).ok
        (ev, _finish) = stored_run(store, run.run_id).events
        assert ev["kind"] == "plan"
        assert ev["status"] == "drafted"
        assert ev["extra"] == {"priority": 7, "cost": {"usd": 1}}
        assert ev["text"] == "hello"
        md = toolledger.export_markdown(store, run.run_id, tmp_path / "r.md")
        assert "cost" in md.path.read_text()
