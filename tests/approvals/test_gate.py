"""The approval gate of run.call: every row of the table, binding, expiry, on_error, async."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.checkpoint import Binding, Status, fingerprint
from toolledger.store import SQLiteStore

from .conftest import ANSWERS, Approver, Effects, approval_events, kinds, leave_executing

INPUT = {"to": "ana@example.com", "subject": "Your order shipped"}
OUTCOME = {"approved": "allow", "denied": "deny", "pending": "require_approval"}


def _binding(namespace: str = "default", call_id: str = "c1", input: Any = INPUT) -> Binding:
    return Binding(namespace, call_id, "send_email", "1", fingerprint(input))


def _prepare(situation: str, store: SQLiteStore, effects: Effects) -> None:
    """Put the call in the situation: new (nothing), replayed (completed), recovered."""
    if situation == "replayed":
        plain = effects.tool(None, None)
        with toolledger.run("setup", db=store) as run:
            assert run.call(plain, call_id="c1", input=INPUT).status == "completed"
        effects.sent.clear()
    elif situation == "recovered":
        leave_executing(store, _binding())


class TestTable:
    """always / effect-only x approved / denied / pending x new / replayed / recovered."""

    @pytest.mark.parametrize("situation", ["new", "replayed", "recovered"])
    @pytest.mark.parametrize("answer", ["approved", "denied", "pending"])
    @pytest.mark.parametrize("mode", ["always", "effect-only"])
    def test_gate_row_behaves_as_documented(
        self, db: Path, effects: Effects, mode: str, answer: str, situation: str
    ) -> None:
        """Each cell: who is asked, what executes, what is returned, and asking only once."""
        store = SQLiteStore(db)
        _prepare(situation, store, effects)
        before = store.get("default", "c1")
        approver = Approver(ANSWERS[answer])
        gated = effects.tool(mode, approver)
        asks = situation == "new" or mode == "always"
        with toolledger.run("send it", db=store) as run:
            for attempt in range(2):  # the second call must not ask again
                if asks and answer == "denied":
                    with pytest.raises(toolledger.ApprovalDeniedError) as info:
                        run.call(gated, call_id="c1", input=INPUT, justification="shipped")
                    assert info.value.code == "APPROVAL_DENIED"
                    assert info.value.details["by"] == "bob"
                    assert "denied by bob: wrong recipient" in info.value.message
                    continue
                out = run.call(gated, call_id="c1", input=INPUT, justification="shipped")
                if asks and answer == "pending":
                    assert out.status == "awaiting_approval"
                    assert out.payload is None
                elif situation == "new":
                    assert out.payload == {"sent_to": INPUT["to"]}
                    assert out.replayed is (attempt == 1)
                elif situation == "replayed":
                    assert (out.replayed, out.recovered) == (True, False)
                    assert out.payload == {"sent_to": INPUT["to"]}
                else:
                    assert out.payload == {"sent_to": "recovered"}
                    assert out.recovered is (attempt == 0)
        assert len(approver.requests) == (1 if asks else 0)
        if asks:
            request = approver.requests[0]
            assert request.binding == _binding()
            assert (request.tool_name, request.description) == ("send_email", "Send one email.")
            assert request.input == INPUT
            assert request.input_fingerprint == fingerprint(INPUT)
            assert request.justification == "shipped"
            assert request.replay is (situation != "new")
        executed = situation == "new" and answer == "approved"
        assert effects.sent == ([INPUT] if executed else [])
        rec = store.get("default", "c1")
        if asks and answer != "approved":
            if situation == "new":
                # pending: the checkpoint waits in ready, never claimed; denied: no checkpoint
                if answer == "denied":
                    assert rec is None
                else:
                    assert (rec.status, rec.revision) == (Status.READY, 0)
            else:
                assert rec == before  # untouched: nothing claimed, released or completed
        stored = store.approval_get("default", "c1")
        events = approval_events(store, run.run_id)
        if not asks:
            assert stored is None
            assert events == []
        else:
            assert stored is not None
            assert stored.binding == _binding()
            assert stored.status.value == answer
            assert [e["approval"]["outcome"] for e in events][:1] == [OUTCOME[answer]]
            assert events[0]["approval"]["for_call"] == "c1"
            assert events[0]["approval"]["input_fingerprint"] == fingerprint(INPUT)
        if asks and answer != "approved":
            assert "tool_call" not in kinds(store, run.run_id)
        store.close()


class TestDecisions:
    def test_pending_then_decided_by_api_proceeds_once_without_asking(
        self, db: Path, effects: Effects
    ) -> None:
        """A pending call proceeds after decide_approval; the approver is not asked again."""
        approver = Approver(Pending("T-1"))
        gated = effects.tool("effect-only", approver)
        with toolledger.run("g", db=db) as run:
            assert run.call(gated, call_id="c1", input=INPUT).status == "awaiting_approval"
            assert run.call(gated, call_id="c1", input=INPUT).status == "awaiting_approval"
            rec = toolledger.decide_approval(db, "default", "c1", True, "alice", "fine")
            assert (rec.status.value, rec.by, rec.ticket) == ("approved", "alice", "T-1")
            first = run.call(gated, call_id="c1", input=INPUT)
            again = run.call(gated, call_id="c1", input=INPUT)
        assert (first.replayed, again.replayed) == (False, True)
        assert effects.sent == [INPUT]
        assert len(approver.requests) == 1
        events = approval_events(SQLiteStore(db), run.run_id)
        assert [e["approval"]["outcome"] for e in events] == ["require_approval", "allow"]
        assert [e["approval"]["source"] for e in events] == ["approver", "stored"]
        assert events[1]["approval"]["by"] == "alice"

    def test_pending_then_denied_raises_and_never_executes(
        self, db: Path, effects: Effects
    ) -> None:
        """A denial decided later is final: the call raises, then raises again."""
        gated = effects.tool("always", None)  # no approver: every new call waits
        with toolledger.run("g", db=db) as run:
            assert run.call(gated, call_id="c1", input=INPUT).status == "awaiting_approval"
            toolledger.decide_approval(db, "default", "c1", False, "bob", "no")
            for _ in range(2):
                with pytest.raises(toolledger.ApprovalDeniedError):
                    run.call(gated, call_id="c1", input=INPUT)
        assert effects.sent == []
        store = SQLiteStore(db)
        assert store.get("default", "c1").status is Status.READY  # never claimed

    def test_changed_input_after_approval_asks_again(self, db: Path, effects: Effects) -> None:
        """An approval never authorizes another input: a new call id with it asks again."""
        approver = Approver(Approved("alice"))
        gated = effects.tool("always", approver)
        other = {**INPUT, "to": "mallory@example.com"}
        with toolledger.run("g", db=db) as run:
            run.call(gated, call_id="c1", input=INPUT)
            approver.answer = Denied("alice", "not that one")
            with pytest.raises(toolledger.ApprovalDeniedError):
                run.call(gated, call_id="c2", input=other)
            with pytest.raises(toolledger.BindingConflictError):
                run.call(gated, call_id="c1", input=other)  # same id, other input
        assert [r.input for r in approver.requests] == [INPUT, other]
        assert effects.sent == [INPUT]

    def test_stored_approval_for_another_binding_never_authorizes(
        self, db: Path, effects: Effects
    ) -> None:
        """A stored decision whose binding differs is BINDING_CONFLICT, never an approval."""
        store = SQLiteStore(db)
        pending = toolledger.approvals.ApprovalRecord(
            binding=_binding(input={"to": "x"}),
            status="pending",
            revision=0,
            requested_at=datetime.now(timezone.utc),
        )
        assert store.approval_put(pending, expected_revision=-1)
        toolledger.decide_approval(store, "default", "c1", True, "alice")
        approver = Approver(Approved("alice"))
        with toolledger.run("g", db=store) as run, pytest.raises(toolledger.BindingConflictError):
            run.call(effects.tool("always", approver), call_id="c1", input=INPUT)
        assert effects.sent == []
        assert approver.requests == []

    def test_expired_approval_asks_again(self, db: Path, effects: Effects) -> None:
        """An approval past its expiry no longer counts; the approver is asked again."""
        approver = Approver(Pending())
        gated = effects.tool("always", approver)
        with toolledger.run("g", db=db) as run:
            run.call(gated, call_id="c1", input=INPUT)
            # Taken just before the decision (a loaded machine may spend 300 ms in the call).
            soon = datetime.now(timezone.utc) + timedelta(milliseconds=300)
            toolledger.decide_approval(db, "default", "c1", True, "alice", expires_at=soon)
            store = SQLiteStore(db)
            # wait (bounded) until the stored approval has expired
            deadline = datetime.now(timezone.utc) + timedelta(seconds=5)
            while not store.approval_get("default", "c1").expired(datetime.now(timezone.utc)):
                assert datetime.now(timezone.utc) < deadline
                time.sleep(0.02)  # a deadline-bounded poll on the stored row
            approver.answer = Denied("carol", "expired, and now no")
            with pytest.raises(toolledger.ApprovalDeniedError) as info:
                run.call(gated, call_id="c1", input=INPUT)
        assert info.value.details["by"] == "carol"
        assert len(approver.requests) == 2
        assert effects.sent == []
        assert store.approval_get("default", "c1").revision == 2

    def test_denied_with_on_error_result_tells_the_model(self, db: Path, effects: Effects) -> None:
        """on_error="result": the denial is the tool result, stable, and nothing executes."""
        approver = Approver(Denied("bob", "wrong recipient"))
        gated = effects.tool("effect-only", approver)
        with toolledger.run("g", db=db) as run:
            outs = [run.call(gated, call_id="c1", input=INPUT, on_error="result") for _ in range(2)]
        assert [o.payload for o in outs] == ["denied by bob: wrong recipient"] * 2
        assert all(o.is_error and o.status == "denied" for o in outs)
        assert effects.sent == []
        assert len(approver.requests) == 1
        assert SQLiteStore(db).get("default", "c1") is None

    def test_call_keywords_override_the_tool(self, db: Path, effects: Effects) -> None:
        """run.call(approval=, approver=) gates an ungated tool; the call's approver wins."""
        tool_approver = Approver(Approved("tool"))
        call_approver = Approver(Denied("call", "no"))
        plain = effects.tool(None, tool_approver)
        with toolledger.run("g", db=db) as run:
            with pytest.raises(toolledger.ApprovalDeniedError):
                run.call(
                    plain, call_id="c1", input=INPUT, approval="always", approver=call_approver
                )
            assert run.call(plain, call_id="c2", input=INPUT).replayed is False  # ungated
        assert tool_approver.requests == []
        assert len(call_approver.requests) == 1

    @pytest.mark.parametrize(
        ("kw", "match"),
        [({"approval": "sometimes"}, "approval must be"), ({"approver": 3}, "callable")],
    )
    def test_bad_gate_options_are_refused(
        self, db: Path, effects: Effects, kw: dict[str, Any], match: str
    ) -> None:
        """A bad mode or approver is INVALID_ARGUMENT, before anything is stored."""
        gated = effects.tool("always", Approver(Approved("a")))
        with toolledger.run("g", db=db) as run, pytest.raises(toolledger.InvalidArgumentError):
            run.call(gated, call_id="c1", input=INPUT, **kw)
        with pytest.raises(toolledger.InvalidArgumentError, match=match):
            effects.tool(*(("sometimes", None) if "approval" in kw else ("always", 3)))
        assert effects.sent == []

    def test_bad_approver_answer_is_refused(self, db: Path, effects: Effects) -> None:
        """An approver answering True (not Approved/Denied/Pending) stores nothing."""
        gated = effects.tool("always", Approver(True))
        with toolledger.run("g", db=db) as run, pytest.raises(toolledger.InvalidArgumentError):
            run.call(gated, call_id="c1", input=INPUT)
        assert SQLiteStore(db).approval_get("default", "c1") is None
        assert effects.sent == []

    def test_approver_raising_stores_nothing(self, db: Path, effects: Effects) -> None:
        """An approver that raises: the error propagates, nothing is stored or executed."""

        def broken(request: Any) -> Any:
            raise ConnectionError("ticket system down")

        with toolledger.run("g", db=db) as run, pytest.raises(ConnectionError):
            run.call(effects.tool("always", broken), call_id="c1", input=INPUT)
        store = SQLiteStore(db)
        assert store.approval_get("default", "c1") is None
        assert store.get("default", "c1") is None

    def test_call_many_gates_each_item_before_claiming(self, db: Path, effects: Effects) -> None:
        """call_many asks per gated item first; allowed and ungated calls run, others stop."""
        approved = effects.tool("always", Approver(Approved("alice")))
        waiting = effects.tool("effect-only", Approver(Pending("T")))
        plain = effects.tool(None, None)
        denier = Approver(Denied("bob", "no"))
        items = [
            {"tool": plain, "call_id": "c0", "input": {"to": "zero"}},
            {"tool": approved, "call_id": "c1", "input": {"to": "one"}},
            {"tool": waiting, "call_id": "c2", "input": {"to": "two"}},
            {
                "tool": plain,
                "call_id": "c3",
                "input": {"to": "three"},
                "approval": "always",
                "approver": denier,
            },
        ]
        with toolledger.run("g", db=db) as run:
            outs = run.call_many(items, return_exceptions=True)
            with pytest.raises(toolledger.ApprovalDeniedError):
                run.call_many(items)  # the denial is raised before anything is claimed
        assert [o.payload for o in outs[:2]] == [{"sent_to": "zero"}, {"sent_to": "one"}]
        assert outs[2].status == "awaiting_approval"
        assert isinstance(outs[3], toolledger.ApprovalDeniedError)
        assert effects.sent == [{"to": "zero"}, {"to": "one"}]
        assert len(denier.requests) == 1


class TestAsync:
    def test_async_approver_with_acall(self, db: Path) -> None:
        """acall awaits an async approver; run.call refuses it (nothing stored)."""
        sent: list[Any] = []

        async def approver(request: Any) -> Any:
            await asyncio.sleep(0)
            return Approved("async-alice")

        async def send(input: Any, ctx: Any) -> Any:
            sent.append(input)
            return {"ok": True}

        gated = toolledger.tool(
            "send_email", revision="1", execute=send, approval="always", approver=approver
        )
        sync_tool = dataclasses.replace(gated, execute=lambda i, c: {"ok": True})

        async def main() -> Any:
            with toolledger.run("g", db=db) as run:
                return await run.acall(gated, call_id="c1", input=INPUT)

        out = asyncio.run(main())
        assert out.payload == {"ok": True}
        assert sent == [INPUT]
        with toolledger.run("g", db=db) as run, pytest.raises(toolledger.InvalidArgumentError):
            run.call(sync_tool, call_id="c2", input=INPUT)
        assert SQLiteStore(db).approval_get("default", "c2") is None


def test_long_justification_is_clipped_in_the_request_not_refused(
    db: Path, effects: Effects
) -> None:
    """A justification over 4,096 characters is kept whole in the journal, clipped in the row."""
    long = "why " * 2000
    with toolledger.run("g", db=db) as run:
        out = run.call(effects.tool("always", None), call_id="c1", input=INPUT, justification=long)
    assert out.status == "awaiting_approval"
    stored = SQLiteStore(db).approval_get("default", "c1")
    assert len(stored.justification) == 4096
    assert stored.justification.endswith("…")


class _RacingStore(SQLiteStore):
    """Lets another caller's write land between the gate's read and its first write."""

    before_put: Any = None

    def approval_put(self, record: Any, *, expected_revision: int) -> bool:
        hook, self.before_put = self.before_put, None
        if hook is not None:
            hook()
        return super().approval_put(record, expected_revision=expected_revision)


@pytest.mark.parametrize(
    ("theirs", "ours", "expected"),
    [
        (Pending("THEIRS"), Pending("OURS"), ("pending", "THEIRS")),  # adopt their ticket
        (Pending("THEIRS"), Approved("alice"), ("approved", None)),  # our decision lands
        (Denied("bob", "no"), Approved("alice"), ("denied", None)),  # a decision is final
    ],
)
def test_gate_losing_a_race_adopts_or_decides_once(
    db: Path, effects: Effects, theirs: Any, ours: Any, expected: tuple[str, Any]
) -> None:
    """Two callers ask at once: one write wins; the other adopts it or decides a pending one."""
    store = _RacingStore(db)

    def another_caller_answers() -> None:
        with toolledger.run("other", db=SQLiteStore(db)) as other:
            out = other.call(
                effects.tool("always", Approver(theirs)),
                call_id="c1",
                input=INPUT,
                on_error="result",
            )
            assert out.status in ("awaiting_approval", "denied", "completed")

    store.before_put = another_caller_answers
    approver = Approver(ours)
    with toolledger.run("g", db=store) as run:
        out = run.call(
            effects.tool("always", approver), call_id="c1", input=INPUT, on_error="result"
        )
    assert out.status == {"pending": "awaiting_approval", "approved": "completed"}.get(
        expected[0], "denied"
    )
    stored = store.approval_get("default", "c1")
    assert (stored.status.value, stored.ticket if expected[1] else None) == expected
    assert len(approver.requests) == 1
    assert len(effects.sent) == (1 if expected[0] == "approved" else 0)
