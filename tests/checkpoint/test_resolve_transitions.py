"""The ``resolve_*`` transitions: a person's decision, its guard on live claims, its record."""

from __future__ import annotations

import copy
import dataclasses

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    CheckpointRecord,
    Result,
    Status,
    claim_delivery,
    claim_execution,
    resolve_completed,
    resolve_not_executed,
    validate_checkpoint,
)
from toolledger.checkpoint.transitions import transition_between

from .._internals import compact_json, dump_record
from ._ckpt_records import RECORDS, at


def test_resolve_executing_without_force_says_a_live_attempt_may_hold_it() -> None:
    """An executing call is refused (FENCE_CONFLICT) unless forced; the record is unchanged."""
    rec = RECORDS["executing"]()
    before = copy.deepcopy(rec.to_dict())
    for move in (
        lambda: resolve_not_executed(rec, at=at(9), by="ana", reason="r"),
        lambda: resolve_completed(rec, at=at(9), by="ana", reason="r", result=1),
    ):
        with pytest.raises(tl.FenceConflictError) as info:
            move()
        assert "a live attempt may hold it" in info.value.message
        assert info.value.details["attempt_id"] == rec.execution_fence
    assert rec.to_dict() == before


def test_resolve_failed_stores_an_error_result() -> None:
    """``is_error=True`` is the outcome ``failed``: an is_error result, delivered like any."""
    t = resolve_completed(
        RECORDS["uncertain"](), at=at(9), by="ana", reason="bank refused", result="declined",
        is_error=True,
    )  # fmt: skip
    assert t.next.result == Result(payload="declined", is_error=True)
    assert t.next.resolution is not None
    assert t.next.resolution.outcome == "failed"
    assert validate_checkpoint(t.next.to_dict()) == t.next


@pytest.mark.parametrize("name", ["ready", "completed", "delivering", "delivered"])
def test_resolve_only_acts_on_executing_or_uncertain(name: str) -> None:
    """From any settled status both moves are INVALID_TRANSITION."""
    rec = RECORDS[name]()
    with pytest.raises(tl.InvalidTransitionError):
        resolve_not_executed(rec, at=at(9), by="ana", reason="r", force=True)
    with pytest.raises(tl.InvalidTransitionError):
        resolve_completed(rec, at=at(9), by="ana", reason="r", result=1, force=True)


@pytest.mark.parametrize(
    ("by", "reason"), [("", "r"), ("ana", ""), (None, "r"), ("ana", "x" * 1025), (3, "r")]
)
def test_resolve_bad_who_or_why_is_invalid_argument(by: object, reason: object) -> None:
    """Who and why are required text (1-1024 characters)."""
    with pytest.raises(tl.InvalidArgumentError):
        resolve_not_executed(
            RECORDS["uncertain"](),
            at=at(9),
            by=by,  # type: ignore[arg-type]
            reason=reason,  # type: ignore[arg-type]
        )


def test_resolution_is_cleared_by_the_next_transition() -> None:
    """A decision belongs to the revision that made it; the next move drops it."""
    released = resolve_not_executed(RECORDS["uncertain"](), at=at(9), by="ana", reason="r")
    again = claim_execution(released.next, attempt_id="a2", at=at(10)).next
    assert released.next.resolution is not None
    assert again.resolution is None
    done = resolve_completed(RECORDS["uncertain"](), at=at(9), by="a", reason="r", result=2)
    claimed = claim_delivery(done.next, delivery_id="d", at=at(10)).next
    assert claimed.resolution is None
    assert claimed.result == done.next.result


def test_record_without_resolution_keeps_its_stored_form() -> None:
    """No ``resolution`` key unless set; the stored text matches ``to_dict`` either way."""
    plain = RECORDS["completed"]()
    assert "resolution" not in plain.to_dict()
    settled = resolve_completed(
        RECORDS["uncertain"](), at=at(9), by="ana", reason="why", result={"a": 1}
    ).next
    assert settled.to_dict()["resolution"] == {
        "outcome": "completed",
        "by": "ana",
        "reason": "why",
        "at": "2026-01-01T00:00:09.000000+00:00",
        "forced": False,
    }
    for rec in (plain, settled):
        assert dump_record(rec) == compact_json(rec.to_dict())
        assert CheckpointRecord.from_dict(rec.to_dict()) == rec


@pytest.mark.parametrize(
    "change",
    [
        {"outcome": "completed"},  # on a ready record
        {"at": "2026-01-01T00:00:08.000000+00:00"},  # not the record's own revision
        {"outcome": "maybe"},
        {"by": ""},
        {"forced": 1},
    ],
)
def test_validate_refuses_a_resolution_that_does_not_fit(change: dict[str, object]) -> None:
    """A stored resolution must fit its record: outcome vs status, time, shape."""
    rec = resolve_not_executed(RECORDS["uncertain"](), at=at(9), by="a", reason="r").next
    data = rec.to_dict()
    data["resolution"] = {**data["resolution"], **change}
    with pytest.raises(tl.InvalidCheckpointError):
        validate_checkpoint(data)


def test_validate_refuses_failed_resolution_on_a_success_result() -> None:
    """A ``failed`` resolution goes with an ``is_error`` result only."""
    rec = resolve_completed(RECORDS["uncertain"](), at=at(9), by="a", reason="r", result=1)
    bad = dataclasses.replace(
        rec.next,
        resolution=dataclasses.replace(rec.next.resolution, outcome="failed"),  # type: ignore[arg-type]
    )
    with pytest.raises(tl.InvalidCheckpointError):
        validate_checkpoint(bad)


def test_transition_between_tells_decisions_from_machine_moves() -> None:
    """The same edge names the guard's move or the person's, by ``decision``."""
    e, r, u, c = (Status(s) for s in ("executing", "ready", "uncertain", "completed"))
    assert transition_between(e, r)[0] == "release_execution"
    assert transition_between(e, r, decision=True)[0] == "resolve_not_executed"
    assert transition_between(u, r, decision=True)[0] == "resolve_not_executed"
    assert transition_between(u, c)[0] == "complete_execution"
    assert transition_between(u, c, decision=True)[0] == "resolve_completed"
    with pytest.raises(tl.InvalidTransitionError):
        transition_between(u, r)
    with pytest.raises(tl.InvalidTransitionError):
        transition_between(None, r, decision=True)
