"""Every (status x transition) pair, the order of checks, fences, times and identifiers."""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    DECISIONS,
    TRANSITIONS,
    Action,
    Decision,
    Result,
    Status,
    claim_delivery,
    claim_execution,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
    validate_checkpoint,
)
from toolledger.checkpoint.transitions import check_binding

from ._ckpt_records import (
    REASON,
    RECORDS,
    RESULT,
    TRANSITION_FUNCTIONS,
    at,
    binding,
    owner_kwargs,
)

LATER = at(10)

# The documented result of every legal move: the fields that change (besides revision and
# updated_at, checked for every move) and the returned action. Written out by hand from
# the issue, not derived from TRANSITIONS, so that a wrong table fails here.
LEGAL: dict[tuple[str, str], tuple[dict[str, Any], str]] = {
    ("ready", "claim_execution"): (
        {"status": "executing", "execution_fence": "a1", "execution_claimed_at": LATER},
        "execute",
    ),
    ("ready-released", "claim_execution"): (
        {"status": "executing", "execution_fence": "a1", "execution_claimed_at": LATER},
        "execute",
    ),
    ("executing", "complete_execution"): (
        {
            "status": "completed",
            "result": {"payload": RESULT, "is_error": False},
            "completed_at": LATER,
        },
        "deliver",
    ),
    ("uncertain", "complete_execution"): (
        {
            "status": "completed",
            "uncertain_reason": None,
            "result": {"payload": RESULT, "is_error": False},
            "completed_at": LATER,
        },
        "deliver",
    ),
    ("executing", "mark_execution_uncertain"): (
        {"status": "uncertain", "uncertain_reason": REASON},
        "reconcile-execution",
    ),
    ("executing", "release_execution"): (
        {"status": "ready", "execution_fence": None, "execution_claimed_at": None},
        "execute",
    ),
    ("completed", "claim_delivery"): (
        {"status": "delivering", "delivery_fence": "d1", "delivery_attempts": 1},
        "deliver",
    ),
    ("completed-redelivery", "claim_delivery"): (
        {"status": "delivering", "delivery_fence": "d1", "delivery_attempts": 2},
        "deliver",
    ),
    ("delivering", "release_delivery"): (
        {"status": "completed", "delivery_fence": None},
        "deliver",
    ),
    ("delivering", "complete_delivery"): (
        {"status": "delivered", "delivered_at": LATER},
        "none",
    ),
    ("executing", "resolve_not_executed"): (
        {
            "status": "ready",
            "execution_fence": None,
            "execution_claimed_at": None,
            "resolution": {
                "outcome": "not_executed",
                "by": "ana",
                "reason": REASON,
                "at": LATER,
                "forced": True,
            },
        },
        "execute",
    ),
    ("uncertain", "resolve_not_executed"): (
        {
            "status": "ready",
            "execution_fence": None,
            "execution_claimed_at": None,
            "uncertain_reason": None,
            "resolution": {
                "outcome": "not_executed",
                "by": "ana",
                "reason": REASON,
                "at": LATER,
                "forced": False,
            },
        },
        "execute",
    ),
    ("executing", "resolve_completed"): (
        {
            "status": "completed",
            "result": {"payload": RESULT, "is_error": False},
            "completed_at": LATER,
            "resolution": {
                "outcome": "completed",
                "by": "ana",
                "reason": REASON,
                "at": LATER,
                "forced": True,
            },
        },
        "deliver",
    ),
    ("uncertain", "resolve_completed"): (
        {
            "status": "completed",
            "uncertain_reason": None,
            "result": {"payload": RESULT, "is_error": False},
            "completed_at": LATER,
            "resolution": {
                "outcome": "completed",
                "by": "ana",
                "reason": REASON,
                "at": LATER,
                "forced": False,
            },
        },
        "deliver",
    ),
}

FENCE_CONFLICT_PAIRS = {("executing", "claim_execution"), ("delivering", "claim_delivery")}

ALL_PAIRS = [(r, t) for r in sorted(RECORDS) for t in sorted(TRANSITION_FUNCTIONS)]
ILLEGAL_PAIRS = [p for p in ALL_PAIRS if p not in LEGAL]


def _stored(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat(timespec="microseconds")
    if isinstance(value, dict):
        return {k: _stored(v) for k, v in value.items()}
    return value


def test_legal_table_matches_transitions_table() -> None:
    """The hand-written expectations cover exactly the moves in TRANSITIONS."""
    from_table = {
        (source.value, name) for name, rule in TRANSITIONS.items() for source in rule.sources
    }
    assert {(r.split("-")[0], t) for r, t in LEGAL} == from_table


@pytest.mark.parametrize(("record_name", "name"), sorted(LEGAL))
def test_transition_legal_pair_gives_documented_record(record_name: str, name: str) -> None:
    """A legal move changes exactly the documented fields and returns its action."""
    rec = RECORDS[record_name]()
    before = copy.deepcopy(rec.to_dict())
    t = TRANSITION_FUNCTIONS[name](rec, **owner_kwargs(name, LATER))
    changes, action = LEGAL[(record_name, name)]

    expected = dict(before)
    expected.update({k: _stored(v) for k, v in changes.items()})
    expected["revision"] = rec.revision + 1
    expected["updated_at"] = _stored(LATER)
    assert t.next.to_dict() == expected
    assert t.next.revision == rec.revision + 1
    assert t.next.updated_at == LATER
    assert t.expected_revision == rec.revision
    assert t.action is Action(action)
    assert t.name == name
    assert rec.to_dict() == before  # the input is never changed
    assert validate_checkpoint(t.next.to_dict()) == t.next


@pytest.mark.parametrize(("record_name", "name"), ILLEGAL_PAIRS)
def test_transition_illegal_pair_raises_documented_code(record_name: str, name: str) -> None:
    """An illegal move raises FENCE_CONFLICT or INVALID_TRANSITION and changes nothing."""
    rec = RECORDS[record_name]()
    before = copy.deepcopy(rec.to_dict())
    expected = (
        "FENCE_CONFLICT" if (record_name, name) in FENCE_CONFLICT_PAIRS else "INVALID_TRANSITION"
    )
    with pytest.raises(tl.CheckpointError) as info:
        TRANSITION_FUNCTIONS[name](rec, **owner_kwargs(name, LATER))
    assert info.value.code == expected
    assert info.value.details["status"] == rec.status.value
    assert info.value.details["transition"] == name
    assert rec.to_dict() == before


def test_claim_execution_same_attempt_on_executing_is_fence_conflict() -> None:
    """The execution fence is held even against the id that holds it."""
    with pytest.raises(tl.FenceConflictError):
        claim_execution(RECORDS["executing"](), attempt_id="a1", at=LATER)


def test_claim_delivery_same_delivery_on_delivering_is_fence_conflict() -> None:
    """The delivery fence is held even against the id that holds it."""
    with pytest.raises(tl.FenceConflictError):
        claim_delivery(RECORDS["delivering"](), delivery_id="d1", at=LATER)


# -- fences ------------------------------------------------------------------------------

FENCED = [
    ("executing", "complete_execution"),
    ("uncertain", "complete_execution"),
    ("executing", "mark_execution_uncertain"),
    ("executing", "release_execution"),
    ("delivering", "release_delivery"),
    ("delivering", "complete_delivery"),
]


@pytest.mark.parametrize(("record_name", "name"), FENCED)
def test_transition_by_non_owner_is_fence_conflict(record_name: str, name: str) -> None:
    """Only the owning attempt/delivery may finish or give back its claim."""
    rec = RECORDS[record_name]()
    before = rec.to_dict()
    kwargs = owner_kwargs(name, LATER)
    for key in ("attempt_id", "delivery_id"):
        if key in kwargs:
            kwargs[key] = "someone-else"
    with pytest.raises(tl.CheckpointError) as info:
        TRANSITION_FUNCTIONS[name](rec, **kwargs)
    assert info.value.code == "FENCE_CONFLICT"
    assert rec.to_dict() == before


# -- order of checks: validation -> arguments -> status -> fence -> payload bounds ---------

NAIVE = datetime(2026, 1, 2)


def test_order_unsupported_schema_before_arguments() -> None:
    """A record of another schema version fails first, whatever the arguments."""
    rec = dataclasses.replace(RECORDS["ready"](), schema_version=2)
    with pytest.raises(tl.CheckpointError) as info:
        claim_execution(rec, attempt_id="bad id", at=NAIVE)
    assert info.value.code == "UNSUPPORTED_SCHEMA"


def test_order_invalid_record_before_arguments() -> None:
    """An invalid record fails with INVALID_CHECKPOINT before its arguments are looked at."""
    rec = dataclasses.replace(RECORDS["executing"](), execution_fence=None)
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(rec, attempt_id="bad id", at=NAIVE, result=float("nan"))
    assert info.value.code == "INVALID_CHECKPOINT"


@pytest.mark.parametrize(
    ("record_name", "name", "override"),
    [
        ("delivered", "claim_execution", {"attempt_id": "bad id"}),
        ("delivered", "claim_execution", {"at": NAIVE}),
        ("delivered", "claim_execution", {"at": at(-1)}),
        ("ready", "complete_execution", {"result": float("nan")}),
        ("ready", "complete_execution", {"result": 2**53}),
        ("ready", "complete_execution", {"max_payload_bytes": 0}),
        ("ready", "complete_execution", {"is_error": "yes"}),
        ("ready", "mark_execution_uncertain", {"reason": ""}),
        ("completed", "release_execution", {"evidence": "journal_empty"}),
        ("ready", "claim_delivery", {"delivery_id": "é"}),
        ("ready", "release_delivery", {"delivery_id": ""}),
        ("ready", "complete_delivery", {"at": "2026-01-02T00:00:00Z"}),
    ],
)
def test_order_arguments_before_status(
    record_name: str, name: str, override: dict[str, Any]
) -> None:
    """A bad argument is INVALID_ARGUMENT even when the move is illegal anyway."""
    kwargs = {**owner_kwargs(name, LATER), **override}
    with pytest.raises(tl.CheckpointError) as info:
        TRANSITION_FUNCTIONS[name](RECORDS[record_name](), **kwargs)
    assert info.value.code == "INVALID_ARGUMENT"


def test_order_arguments_before_fence() -> None:
    """A bad argument from a non-owner is INVALID_ARGUMENT, not FENCE_CONFLICT."""
    with pytest.raises(tl.CheckpointError) as info:
        release_execution(RECORDS["executing"](), attempt_id="other", at=LATER, evidence="guess")
    assert info.value.code == "INVALID_ARGUMENT"


def test_order_status_before_fence() -> None:
    """A non-owner on the wrong status gets INVALID_TRANSITION."""
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(RECORDS["completed"](), attempt_id="other", at=LATER, result=1)
    assert info.value.code == "INVALID_TRANSITION"


def test_order_status_before_payload_bounds() -> None:
    """An oversized result on the wrong status is INVALID_TRANSITION."""
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(RECORDS["ready"](), attempt_id="a1", at=LATER, result="x" * 70_000)
    assert info.value.code == "INVALID_TRANSITION"


def test_order_fence_before_payload_bounds() -> None:
    """An oversized result from a non-owner is FENCE_CONFLICT."""
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(
            RECORDS["executing"](), attempt_id="other", at=LATER, result="x" * 70_000
        )
    assert info.value.code == "FENCE_CONFLICT"


def test_order_payload_bounds_last() -> None:
    """The owner with an oversized result gets PAYLOAD_LIMIT."""
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(RECORDS["executing"](), attempt_id="a1", at=LATER, result="x" * 70_000)
    assert info.value.code == "PAYLOAD_LIMIT"


def test_order_payload_types_before_bounds() -> None:
    """A payload both too deep and not JSON is a type error (INVALID_ARGUMENT)."""
    deep: Any = [float("inf")]
    for _ in range(40):
        deep = [deep]
    with pytest.raises(tl.CheckpointError) as info:
        complete_execution(RECORDS["executing"](), attempt_id="a1", at=LATER, result=deep)
    assert info.value.code == "INVALID_ARGUMENT"


# -- times -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TRANSITION_FUNCTIONS))
def test_transition_naive_at_is_invalid_argument(name: str) -> None:
    """Every transition refuses a naive datetime."""
    with pytest.raises(tl.InvalidArgumentError):
        TRANSITION_FUNCTIONS[name](RECORDS["executing"](), **owner_kwargs(name, NAIVE))


@pytest.mark.parametrize("record_name", sorted(RECORDS))
def test_transition_at_before_updated_at_is_invalid_argument(record_name: str) -> None:
    """A move may not go back in time, by even one microsecond."""
    rec = RECORDS[record_name]()
    legal = [n for (r, n) in sorted(LEGAL) if r == record_name]
    name = legal[0] if legal else "claim_execution"  # illegal moves check arguments first
    earlier = rec.updated_at - timedelta(microseconds=1)
    with pytest.raises(tl.InvalidArgumentError) as info:
        TRANSITION_FUNCTIONS[name](rec, **owner_kwargs(name, earlier))
    assert info.value.details["argument"] == "at"


def test_transition_at_equal_to_updated_at_is_allowed() -> None:
    """``at == updated_at`` is not backwards."""
    rec = RECORDS["ready"]()
    t = claim_execution(rec, attempt_id="a1", at=rec.updated_at)
    assert t.next.updated_at == rec.updated_at


def test_transition_other_timezone_is_stored_as_utc() -> None:
    """An aware time in another zone is the same instant, stored in UTC."""
    plus2 = timezone(timedelta(hours=2))
    when = LATER.astimezone(plus2)
    t = claim_execution(RECORDS["ready"](), attempt_id="a1", at=when)
    assert t.next.updated_at == LATER
    assert t.next.to_dict()["updated_at"] == "2026-01-01T00:00:10.000000+00:00"


@pytest.mark.parametrize("bad", [NAIVE, "2026-01-01T00:00:00+00:00", 0, None])
def test_create_checkpoint_bad_at_is_invalid_argument(bad: Any) -> None:
    """create_checkpoint needs an aware datetime."""
    with pytest.raises(tl.InvalidArgumentError):
        create_checkpoint(binding(), at=bad)


def test_create_checkpoint_returns_ready_revision_zero() -> None:
    """A new record is ready at revision 0, created_at == updated_at, nothing else set."""
    rec = create_checkpoint(binding(), at=at(0))
    assert rec.to_dict() == {
        "schema_version": 1,
        "binding": binding().to_dict(),
        "status": "ready",
        "revision": 0,
        "created_at": "2026-01-01T00:00:00.000000+00:00",
        "updated_at": "2026-01-01T00:00:00.000000+00:00",
        "execution_fence": None,
        "execution_claimed_at": None,
        "uncertain_reason": None,
        "result": None,
        "completed_at": None,
        "delivery_fence": None,
        "delivery_attempts": 0,
        "delivered_at": None,
    }


def test_create_checkpoint_non_binding_is_invalid_argument() -> None:
    """The binding must be a Binding, not its dict."""
    with pytest.raises(tl.InvalidArgumentError):
        create_checkpoint(binding().to_dict(), at=at(0))  # type: ignore[arg-type]


# -- identifiers -------------------------------------------------------------------------

GOOD_IDS = ["a", "A-z_0.9:x", "x" * 128, "toolu_01ABC", "ns:sub.name-1"]
# Bad in every identifier, fingerprints included.
BAD_EVERYWHERE: list[Any] = [
    "",
    "x" * 257,
    "abc\n",
    "\nabc",
    "a b",
    "é",
    "\u0661\u0662\u0663",  # Arabic-Indic digits: \d and \w would accept them
    "\uff41",  # fullwidth a
    "abc\x00",
    1,
    None,
    b"abc",
]
# Bad in plain identifiers (fingerprints allow 256 characters and + / =).
BAD_IDS: list[Any] = [*BAD_EVERYWHERE, "x" * 129, "a/b", "a+b", "a=b"]
FIELDS = ["namespace", "call_id", "tool_name", "tool_revision"]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 20 else f"{text[:8]}...len{len(value)}"


@pytest.mark.parametrize("field", [*FIELDS, "input_fingerprint"])
@pytest.mark.parametrize("value", GOOD_IDS, ids=_short)
def test_binding_good_identifier_is_accepted(field: str, value: str) -> None:
    """Identifiers of 1-128 of [A-Za-z0-9._:-] are accepted in every field."""
    assert getattr(binding(**{field: value}), field) == value


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD_IDS, ids=_short)
def test_binding_bad_identifier_is_invalid_argument(field: str, value: Any) -> None:
    """Anything else (full match, ASCII only) is INVALID_ARGUMENT naming the field."""
    with pytest.raises(tl.InvalidArgumentError) as info:
        binding(**{field: value})
    assert info.value.details["argument"] == field


@pytest.mark.parametrize("value", BAD_EVERYWHERE, ids=_short)
def test_binding_bad_fingerprint_is_invalid_argument(value: Any) -> None:
    """257 characters, a newline suffix, spaces, non-ASCII and non-str are refused."""
    with pytest.raises(tl.InvalidArgumentError) as info:
        binding(input_fingerprint=value)
    assert info.value.details["argument"] == "input_fingerprint"


@pytest.mark.parametrize("value", ["x" * 256, "sha256:ab+/=", "A=", "+/"], ids=_short)
def test_binding_fingerprint_allows_base64_characters(value: str) -> None:
    """Fingerprints take 1-256 characters and also + / =."""
    assert binding(input_fingerprint=value).input_fingerprint == value


@pytest.mark.parametrize("value", BAD_IDS, ids=_short)
@pytest.mark.parametrize(
    ("record_name", "name", "key"),
    [
        ("ready", "claim_execution", "attempt_id"),
        ("executing", "complete_execution", "attempt_id"),
        ("executing", "mark_execution_uncertain", "attempt_id"),
        ("executing", "release_execution", "attempt_id"),
        ("completed", "claim_delivery", "delivery_id"),
        ("delivering", "release_delivery", "delivery_id"),
        ("delivering", "complete_delivery", "delivery_id"),
    ],
)
def test_transition_bad_actor_id_is_invalid_argument(
    record_name: str, name: str, key: str, value: Any
) -> None:
    """Attempt and delivery ids follow the identifier rules."""
    kwargs = {**owner_kwargs(name, LATER), key: value}
    with pytest.raises(tl.InvalidArgumentError) as info:
        TRANSITION_FUNCTIONS[name](RECORDS[record_name](), **kwargs)
    assert info.value.details["argument"] == key


def test_binding_is_frozen() -> None:
    """Bindings cannot be changed in place."""
    b = binding()
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.call_id = "other"  # type: ignore[misc]


# -- mark_execution_uncertain / release_execution arguments -------------------------------


@pytest.mark.parametrize("reason", ["x", "r" * 1024])
def test_mark_uncertain_reason_bounds_accepted(reason: str) -> None:
    """Reasons of 1 and 1024 characters are kept as given."""
    t = mark_execution_uncertain(RECORDS["executing"](), attempt_id="a1", at=LATER, reason=reason)
    assert t.next.uncertain_reason == reason


@pytest.mark.parametrize("reason", ["", "r" * 1025, None, 5, "half \ud800 surrogate"])
def test_mark_uncertain_bad_reason_is_invalid_argument(reason: Any) -> None:
    """An empty, too long or non-str reason is refused."""
    with pytest.raises(tl.InvalidArgumentError):
        mark_execution_uncertain(RECORDS["executing"](), attempt_id="a1", at=LATER, reason=reason)


@pytest.mark.parametrize("evidence", ["", "journal_empty", "JOURNAL-EMPTY", "journal-empty ", None])
def test_release_execution_needs_journal_empty_evidence(evidence: Any) -> None:
    """Only evidence="journal-empty" releases a claim."""
    rec = RECORDS["executing"]()
    with pytest.raises(tl.InvalidArgumentError) as info:
        release_execution(rec, attempt_id="a1", at=LATER, evidence=evidence)
    assert info.value.details["argument"] == "evidence"
    assert rec.status is Status.EXECUTING


def test_release_execution_from_uncertain_is_invalid_transition() -> None:
    """An uncertain outcome can never be released back to ready."""
    with pytest.raises(tl.InvalidTransitionError):
        release_execution(
            RECORDS["uncertain"](), attempt_id="a1", at=LATER, evidence="journal-empty"
        )


def test_release_execution_then_new_attempt_may_claim() -> None:
    """After a proven pre-effect failure another attempt can claim the call."""
    rec = RECORDS["ready-released"]()
    t = claim_execution(rec, attempt_id="a2", at=LATER)
    assert t.next.execution_fence == "a2"
    assert t.next.revision == 3


def test_complete_execution_error_result_is_kept() -> None:
    """A handler error is a result too, flagged is_error."""
    t = complete_execution(
        RECORDS["executing"](), attempt_id="a1", at=LATER, result={"error": "x"}, is_error=True
    )
    assert t.next.result == Result(payload={"error": "x"}, is_error=True)


def test_release_delivery_keeps_result() -> None:
    """A failed post keeps the result for the next delivery."""
    rec = RECORDS["delivering"]()
    t = release_delivery(rec, delivery_id="d1", at=LATER)
    assert t.next.result == rec.result
    assert t.next.delivery_attempts == 1


# -- decide_checkpoint -------------------------------------------------------------------

DECIDE = {
    "ready": "execute",
    "executing": "reconcile-execution",
    "uncertain": "reconcile-execution",
    "completed": "deliver",
    "delivering": "reconcile-delivery",
    "delivered": "none",
    "ready-released": "execute",
    "completed-redelivery": "deliver",
}


@pytest.mark.parametrize("record_name", sorted(RECORDS))
def test_decide_checkpoint_each_status_gives_documented_action(record_name: str) -> None:
    """decide answers the documented action with the status and revision it saw."""
    rec = RECORDS[record_name]()
    d = decide_checkpoint(rec, binding())
    assert d == Decision(
        action=Action(DECIDE[record_name]), status=rec.status, revision=rec.revision
    )
    assert DECISIONS[rec.status].value == DECIDE[record_name]


#: One binding field changed at a time (a conflict names exactly that field).
DIFFERING_FIELDS = [
    ("namespace", "ns2"),
    ("call_id", "call-2"),
    ("tool_name", "send_sms"),
    ("tool_revision", "2"),
    ("input_fingerprint", "sha256:other"),
]


@pytest.mark.parametrize(("field", "value"), DIFFERING_FIELDS)
@pytest.mark.parametrize("record_name", ["ready", "completed", "delivered"])
def test_decide_checkpoint_differing_binding_is_binding_conflict(
    record_name: str, field: str, value: str
) -> None:
    """A binding differing in any single field is BINDING_CONFLICT, never a cache hit."""
    with pytest.raises(tl.BindingConflictError) as info:
        decide_checkpoint(RECORDS[record_name](), binding(**{field: value}))
    assert info.value.code == "BINDING_CONFLICT"
    assert info.value.details["differs"] == [field]


def test_decide_checkpoint_validates_record_first() -> None:
    """An invalid record is INVALID_CHECKPOINT even with a conflicting binding."""
    rec = dataclasses.replace(RECORDS["delivered"](), delivered_at=None)
    with pytest.raises(tl.InvalidCheckpointError):
        decide_checkpoint(rec, binding(tool_name="other"))


def test_decide_checkpoint_unsupported_schema() -> None:
    """A record of another schema version is UNSUPPORTED_SCHEMA."""
    rec = dataclasses.replace(RECORDS["ready"](), schema_version=3)
    with pytest.raises(tl.UnsupportedSchemaError):
        decide_checkpoint(rec, binding())


def test_decide_checkpoint_non_binding_is_invalid_argument() -> None:
    """The binding argument must be a Binding."""
    with pytest.raises(tl.InvalidArgumentError):
        decide_checkpoint(RECORDS["ready"](), binding().to_dict())  # type: ignore[arg-type]


@pytest.mark.parametrize("record_name", sorted(RECORDS))
def test_check_binding_same_binding_returns_record(record_name: str) -> None:
    """check_binding passes the record decide_checkpoint decides on, unchanged."""
    rec = RECORDS[record_name]()
    assert check_binding(rec, binding()) is rec


@pytest.mark.parametrize(("field", "value"), DIFFERING_FIELDS)
@pytest.mark.parametrize("record_name", ["ready", "completed", "delivered"])
def test_check_binding_differing_binding_raises_as_decide_checkpoint(
    record_name: str, field: str, value: str
) -> None:
    """check_binding raises decide_checkpoint's BINDING_CONFLICT, with the same details."""
    other = binding(**{field: value})
    with pytest.raises(tl.BindingConflictError) as fast:
        check_binding(RECORDS[record_name](), other)
    with pytest.raises(tl.BindingConflictError) as full:
        decide_checkpoint(RECORDS[record_name](), other)
    assert (fast.value.message, fast.value.details) == (full.value.message, full.value.details)


def test_check_binding_validates_record_first() -> None:
    """An invalid record is INVALID_CHECKPOINT even with a conflicting binding."""
    rec = dataclasses.replace(RECORDS["delivered"](), delivered_at=None)
    with pytest.raises(tl.InvalidCheckpointError):
        check_binding(rec, binding(tool_name="other"))


def test_check_binding_non_binding_is_invalid_argument() -> None:
    """The binding argument must be a Binding."""
    with pytest.raises(tl.InvalidArgumentError):
        check_binding(RECORDS["ready"](), binding().to_dict())  # type: ignore[arg-type]


# -- records are immutable ----------------------------------------------------------------


def test_record_is_frozen() -> None:
    """Records cannot be changed in place."""
    rec = RECORDS["ready"]()
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.status = Status.EXECUTING  # type: ignore[misc]


def test_complete_execution_keeps_private_copy_of_result() -> None:
    """Mutating the caller's object afterwards does not change the stored result."""
    payload: dict[str, Any] = {"items": [1, 2]}
    t = complete_execution(RECORDS["executing"](), attempt_id="a1", at=LATER, result=payload)
    payload["items"].append(float("nan"))
    payload["extra"] = b"x"
    assert t.next.result is not None
    assert t.next.result.payload == {"items": [1, 2]}
    assert validate_checkpoint(t.next) is t.next


def test_transition_time_is_at_field_of_next() -> None:
    """Transition times are kept with microsecond precision."""
    when = at(1) + timedelta(microseconds=7)
    t = claim_execution(RECORDS["ready"](), attempt_id="a1", at=when)
    assert t.next.execution_claimed_at == when
    assert t.next.to_dict()["execution_claimed_at"].endswith(".000007+00:00")


class TestCreateAndClaim:
    """``create_and_claim`` is ``create_checkpoint`` then ``claim_execution``, in one step."""

    def test_create_and_claim_equals_the_two_transitions(self) -> None:
        """The same new record and the same claim, both known valid."""
        from toolledger.checkpoint import create_and_claim
        from toolledger.checkpoint.model import is_known_valid

        b = binding()
        new, claim = create_and_claim(b, attempt_id="a1", at=LATER)
        assert new == create_checkpoint(b, at=LATER)
        assert claim == claim_execution(new, attempt_id="a1", at=LATER)
        assert claim.expected_revision == 0
        assert is_known_valid(new)
        assert is_known_valid(claim.next)

    @pytest.mark.parametrize(
        ("bad", "argument"),
        [
            ({"binding": {"namespace": "ns"}}, None),
            ({"at": datetime(2026, 1, 1)}, "at"),
            ({"attempt_id": "a b"}, "attempt_id"),
            ({"attempt_id": 7}, "attempt_id"),
            ({"at": datetime(2026, 1, 1), "attempt_id": "a b"}, "at"),
        ],
    )
    def test_create_and_claim_refuses_as_the_two_transitions(
        self, bad: dict[str, Any], argument: str | None
    ) -> None:
        """A bad binding, ``at`` or attempt id raises what the two-step path raises, in
        the same order."""
        from toolledger.checkpoint import create_and_claim

        kwargs: dict[str, Any] = {"binding": binding(), "attempt_id": "a1", "at": LATER, **bad}
        with pytest.raises(tl.CheckpointError) as one:
            create_and_claim(kwargs["binding"], attempt_id=kwargs["attempt_id"], at=kwargs["at"])

        def two_steps() -> None:
            new = create_checkpoint(kwargs["binding"], at=kwargs["at"])
            claim_execution(new, attempt_id=kwargs["attempt_id"], at=kwargs["at"])

        with pytest.raises(tl.CheckpointError) as two:
            two_steps()
        assert one.value.code == two.value.code == "INVALID_ARGUMENT"
        assert one.value.message == two.value.message
        assert one.value.details.get("argument") == argument
