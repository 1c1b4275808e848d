"""``Event`` is the one field list: its dict form, its reading back and the merge follow it."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import toolledger
from toolledger import Event

from .._internals import from_json_table, to_json_table

_AT = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


def _every_field_set() -> Event:
    """An event whose every field holds a value other than its default."""
    return Event(
        run_id="r" * 32,
        event_id="e" * 32,
        seq=7,
        parent_id="p" * 32,
        kind="tool_call",
        name="charge",
        status="completed",
        goal="pay",
        agent="billing",
        namespace="ns",
        started_at=_AT,
        ended_at=_AT,
        duration_ms=0.0,
        justification=None,
        justification_source="model",
        justification_missing=True,
        inputs={"amount": 1},
        outputs={"ok": True},
        artifacts=({"name": "a.txt"},),
        approval={"granted": True},
        error={"type": "E"},
        text="note",
        meta={"m": 1},
        checkpoint={"namespace": "ns", "call_id": "c1", "revision": 3, "status": "delivered"},
        trace_id="t" * 32,
        span_id="s" * 16,
        erased={"at": "x", "reason": "gc"},
        extra={"newer": 1},
    )


class TestEventFields:
    def test_to_dict_keys_are_the_fields_in_order_with_the_millisecond_times(self) -> None:
        """``to_dict`` has one key per field, in declaration order, plus the derived times."""
        names = [f.name for f in dataclasses.fields(Event)]
        at = names.index("ended_at") + 1
        assert list(_every_field_set().to_dict()) == [
            *names[:at],
            "ts_start_ms",
            "ts_end_ms",
            *names[at:],
        ]

    def test_every_field_round_trips_through_from_dict(self) -> None:
        """A value in any field comes back from ``from_dict(to_dict())`` unchanged."""
        ev = _every_field_set()
        back = Event.from_dict(ev.to_dict())
        for f in dataclasses.fields(Event):
            assert getattr(back, f.name) == getattr(ev, f.name), f.name
        assert back == ev

    def test_a_new_field_needs_only_the_dataclass_edit(self) -> None:
        """A field added to the dataclass is written by ``to_dict`` and read back by
        ``from_dict`` with no other edit (the tables follow the fields)."""
        own: list[Any] = []
        for f in dataclasses.fields(Event):
            kept = dataclasses.field(default=f.default, default_factory=f.default_factory)
            own.append((f.name, f.type, kept))
        grown: Any = dataclasses.make_dataclass(
            "GrownEvent",
            [*own, ("priority", "str | None", dataclasses.field(default=None))],
            frozen=True,
            kw_only=True,
        )
        given = {f.name: getattr(_every_field_set(), f.name) for f in dataclasses.fields(Event)}
        ev = grown(**given, priority="high")
        to_json = to_json_table(grown)
        as_dict = {key: read(ev) for key, read in to_json}
        assert as_dict["priority"] == "high"
        assert list(as_dict)[-1] == "priority"
        back = grown(**{name: read(as_dict.get(name)) for name, read in from_json_table(grown)})
        assert back == ev

    def test_merged_events_have_every_field(self, tmp_path: Path) -> None:
        """Events ``load_run`` merges from records hold every field (defaults where the
        records say nothing), and read back equal from their dict form."""
        with toolledger.run("fields", db=tmp_path / "f.db") as run:
            with run.step("s", justification_source="model", x=1) as step:
                step.record_output(y=2)
            run.note("n")
        view = toolledger.load_run(tmp_path / "f.db", run.run_id)
        assert [ev.kind for ev in view.events] == ["step", "note", "finish"]
        for ev in view.events:
            for f in dataclasses.fields(Event):
                getattr(ev, f.name)  # set (an unset slot raises AttributeError)
            assert Event.from_dict(ev.to_dict()) == ev
        assert view.events[0].justification_missing is True
        assert view.events[1].justification_missing is False
