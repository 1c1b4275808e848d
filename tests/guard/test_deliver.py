"""run.deliver / adeliver / deliver_many: fenced, stored payload, at-least-once on request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import Status
from toolledger.guard import deliver_many


class TestDeliver:
    def test_deliver_posts_stored_payload_and_marks_delivered(self, run, db, effects) -> None:
        """post gets the stored payload; the checkpoint ends delivered; post's value returns."""
        out = run.call(effects.tool(), call_id="c1", input={"a": 1})
        posted: list[Any] = []
        assert run.deliver("c1", lambda p: posted.append(p) or "accepted") == "accepted"
        assert posted == [out.payload]
        rec = db.get("default", "c1")
        assert (rec.status, rec.delivery_attempts) == (Status.DELIVERED, 1)

    def test_deliver_uses_relaxed_commits(self, tmp_path, effects) -> None:
        """Delivery transitions never fsync."""
        from .conftest import CountingStore

        store = CountingStore(tmp_path / "full.db", durability="full")
        with toolledger.run("g", db=store) as r:
            r.call(effects.tool(), call_id="c1", input={})
            store.reset()
            r.deliver("c1", lambda p: None)
            assert store.commits
            assert store.durable_commits == 0
        store.close()

    def test_deliver_again_after_delivered_does_not_post(self, run, effects) -> None:
        """A delivered call is not posted again; deliver returns None."""
        run.call(effects.tool(), call_id="c1", input={})
        run.deliver("c1", lambda p: None)
        posted: list[Any] = []
        assert run.deliver("c1", posted.append) is None
        assert posted == []

    def test_deliver_post_raises_releases_and_reraises(self, run, db, effects) -> None:
        """post fails: the claim is released, the error re-raised; the next post is identical."""
        out = run.call(effects.tool(), call_id="c1", input={})
        boom = ConnectionError("down")

        def fail(p: Any) -> None:
            raise boom

        with pytest.raises(ConnectionError) as err:
            run.deliver("c1", fail)
        assert err.value is boom
        assert db.get("default", "c1").status is Status.COMPLETED
        posted: list[Any] = []
        run.deliver("c1", posted.append)
        assert posted == [out.payload]

    def test_deliver_left_delivering_is_delivery_uncertain(self, run, db, effects) -> None:
        """A crash after the delivery claim: DELIVERY_UNCERTAIN unless redeliver=True."""
        from datetime import datetime, timezone

        from toolledger.checkpoint import claim_delivery

        out = run.call(effects.tool(), call_id="c1", input={})
        rec = db.get("default", "c1")
        t = claim_delivery(rec, delivery_id="dead", at=datetime.now(timezone.utc))
        assert db.compare_and_swap(t.expected_revision, t.next)
        posted: list[Any] = []
        with pytest.raises(toolledger.DeliveryUncertainError) as err:
            run.deliver("c1", posted.append)
        assert err.value.code == "DELIVERY_UNCERTAIN"
        assert posted == []
        run.deliver("c1", posted.append, redeliver=True)
        assert posted == [out.payload]
        rec = db.get("default", "c1")
        assert (rec.status, rec.delivery_attempts) == (Status.DELIVERED, 2)

    def test_deliver_unknown_call_is_not_found(self, run) -> None:
        """No checkpoint: NOT_FOUND."""
        with pytest.raises(toolledger.NotFoundError):
            run.deliver("nope", lambda p: None)

    @pytest.mark.parametrize("post", [None, "not callable", 17])
    def test_deliver_post_not_callable_is_invalid_argument_nothing_claimed(
        self, run, db, effects, post
    ) -> None:
        """``post=None`` (or any non-callable): INVALID_ARGUMENT, the call stays completed."""
        run.call(effects.tool(), call_id="c1", input={})
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            run.deliver("c1", post)
        assert info.value.code == "INVALID_ARGUMENT"
        assert info.value.details == {"argument": "post"}
        with pytest.raises(toolledger.InvalidArgumentError):
            run.deliver_many(["c1"], post)
        assert db.get("default", "c1").status is Status.COMPLETED
        assert run.deliver("c1", lambda p: "posted") == "posted"

    def test_adeliver_post_not_callable_is_invalid_argument(self, run, db, effects) -> None:
        """The async path refuses a non-callable ``post`` the same way."""
        run.call(effects.tool(), call_id="c1", input={})
        with pytest.raises(toolledger.InvalidArgumentError):
            asyncio.run(run.adeliver("c1", None))
        assert db.get("default", "c1").status is Status.COMPLETED

    def test_deliver_uncertain_call_has_nothing_to_deliver(self, run, db, effects) -> None:
        """An uncertain call has no result: INVALID_TRANSITION, post not called."""
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(effects.tool(journal=True, raises=OSError("x")), call_id="c1", input={})
        with pytest.raises(toolledger.InvalidTransitionError):
            run.deliver("c1", lambda p: pytest.fail("posted"))

    def test_deliver_many_posts_all_payloads_once(self, run, db, effects) -> None:
        """One post carries every result; all calls end delivered."""
        a = run.call(effects.tool(), call_id="a", input={"n": 1})
        b = run.call(effects.tool(), call_id="b", input={"n": 2})
        posted: list[Any] = []
        deliver_many(run, ["a", "b"], posted.append)
        assert posted == [{"a": a.payload, "b": b.payload}]
        assert {db.get("default", c).status for c in "ab"} == {Status.DELIVERED}
        assert deliver_many(run, ["a", "b"], posted.append) is None
        assert len(posted) == 1

    def test_adeliver_awaits_async_post(self, run, effects) -> None:
        """adeliver awaits an async post and records the delivery."""
        out = run.call(effects.tool(), call_id="c1", input={})
        posted: list[Any] = []

        async def post(p: Any) -> str:
            await asyncio.sleep(0)
            posted.append(p)
            return "ok"

        assert asyncio.run(run.adeliver("c1", post)) == "ok"
        assert posted == [out.payload]


class TestCallMany:
    def test_call_many_claims_in_one_transaction(self, run, db, effects) -> None:
        """New calls of one turn claim together: 1 claim commit + 1 completion per call."""
        tool = effects.tool()
        db.reset()
        outs = run.call_many(
            [{"tool": tool, "call_id": f"c{i}", "input": {"i": i}} for i in range(3)]
        )
        assert [o.payload["sent"] for o in outs] == [{"i": 0}, {"i": 1}, {"i": 2}]
        claim_commits = [
            h.transition
            for i in range(3)
            for h in db.history("default", f"c{i}")
            if h.transition == "claim_execution"
        ]
        assert len(claim_commits) == 3
        assert outs[0].replayed is False
        again = run.call_many(
            [{"tool": tool, "call_id": f"c{i}", "input": {"i": i}} for i in range(3)]
        )
        assert [o.replayed for o in again] == [True, True, True]
        assert len(effects.executed) == 3

    def test_call_many_claims_share_one_commit(self, tmp_path, effects) -> None:
        """At full durability, a 3-call turn costs 1 + 3 durable commits."""
        from .conftest import CountingStore

        store = CountingStore(tmp_path / "full.db", durability="full")
        tool = effects.tool()
        with toolledger.run("g", db=store) as r:
            store.reset()
            r.call_many([{"tool": tool, "call_id": f"c{i}", "input": i} for i in range(3)])
            assert store.durable_commits == 4
        store.close()

    def test_call_many_failure_releases_unexecuted_claims(self, run, db, effects) -> None:
        """A raising call stops the turn; later claims are released, never executed."""
        ok, bad = effects.tool(), effects.tool(name="bad", raises=ValueError("no"))
        with pytest.raises(ValueError):
            run.call_many(
                [
                    {"tool": ok, "call_id": "a", "input": 1},
                    {"tool": bad, "call_id": "b", "input": 2},
                    {"tool": ok, "call_id": "c", "input": 3},
                ]
            )
        assert effects.executed == [1, 2]
        assert db.get("default", "a").status is Status.COMPLETED
        assert db.get("default", "b").status is Status.READY
        assert db.get("default", "c").status is Status.READY

    def test_call_many_return_exceptions_keeps_going(self, run, effects) -> None:
        """return_exceptions=True: a failing call's error sits in its slot."""
        ok, bad = effects.tool(), effects.tool(name="bad", raises=ValueError("no"))
        outs = run.call_many(
            [
                {"tool": bad, "call_id": "b", "input": 2},
                {"tool": ok, "call_id": "c", "input": 3},
            ],
            return_exceptions=True,
        )
        assert isinstance(outs[0], ValueError)
        assert outs[1].payload["sent"] == 3


class TestAsync:
    def test_acall_async_execute_and_replay(self, run, effects) -> None:
        """acall runs an async execute once; the same call replays."""
        calls: list[Any] = []

        async def execute(input: Any, ctx: Any) -> dict[str, Any]:
            await asyncio.sleep(0)
            calls.append(input)
            return {"ok": input}

        tool = toolledger.tool("a", revision="1", execute=execute)

        async def main() -> tuple[Any, Any]:
            return await run.acall(tool, call_id="c", input=1), await run.acall(
                tool, call_id="c", input=1
            )

        first, second = asyncio.run(main())
        assert (first.payload, first.replayed, second.replayed) == ({"ok": 1}, False, True)
        assert calls == [1]

    def test_acall_concurrent_calls_claim_in_one_transaction(self, tmp_path) -> None:
        """Concurrent acalls on one loop share one claim commit."""
        from .conftest import CountingStore

        store = CountingStore(tmp_path / "full.db", durability="full")

        async def execute(input: Any, ctx: Any) -> int:
            await asyncio.sleep(0)
            return int(input)

        tool = toolledger.tool("a", revision="1", execute=execute)

        async def main(r: Any) -> list[Any]:
            return await asyncio.gather(
                *(r.acall(tool, call_id=f"c{i}", input=i) for i in range(4))
            )

        with toolledger.run("g", db=store) as r:
            store.reset()
            outs = asyncio.run(main(r))
            assert [o.payload for o in outs] == [0, 1, 2, 3]
            assert store.durable_commits == 1 + 4
        store.close()

    def test_acall_cancel_after_execute_returns_still_completes(self, run, db) -> None:
        """A cancellation landing as execute returns: completion first, then it propagates."""

        async def execute(input: Any, ctx: Any) -> str:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # delivered at the task's next await, after execute returned
            return "done"

        tool = toolledger.tool("a", revision="1", execute=execute)

        async def main() -> None:
            await run.acall(tool, call_id="c", input=1)
            await asyncio.sleep(0)

        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main())
        rec = db.get("default", "c")
        assert (rec.status, rec.result.payload) == (Status.COMPLETED, "done")

    def test_acall_cancelled_inside_execute_never_recovers(self, run, db) -> None:
        """CancelledError inside execute (journal written): uncertain, recover not called."""
        recovered: list[Any] = []

        async def execute(input: Any, ctx: Any) -> str:
            ctx.operation.write({"order": 1})
            raise asyncio.CancelledError

        tool = toolledger.tool("a", revision="1", execute=execute, recover=recovered.append)
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(run.acall(tool, call_id="c", input=1))
        assert recovered == []
        assert db.get("default", "c").status is Status.UNCERTAIN

    def test_acall_async_recover_is_awaited(self, run, db) -> None:
        """An async recover proves a lost outcome."""

        async def execute(input: Any, ctx: Any) -> str:
            ctx.operation.write({"order": "o-1"})
            raise TimeoutError

        async def recover(ctx: toolledger.RecoverContext) -> toolledger.Recovered:
            await asyncio.sleep(0)
            return toolledger.Recovered(ctx.operation.read())

        tool = toolledger.tool("a", revision="1", execute=execute, recover=recover)
        out = asyncio.run(run.acall(tool, call_id="c", input=1))
        assert (out.payload, out.recovered) == ({"order": "o-1"}, True)


class TestWriteLocked:
    def test_deliver_blocked_by_a_write_lock_is_store_busy_and_posts_nothing(
        self, tmp_path, effects
    ) -> None:
        """Another connection holds BEGIN IMMEDIATE: STORE_BUSY, post never called."""
        import sqlite3

        from toolledger.store import SQLiteStore

        path = tmp_path / "locked.db"
        store = SQLiteStore(path, busy_timeout=0.1)
        posted: list[Any] = []
        with toolledger.run("g", db=store) as run:
            run.call(effects.tool(), call_id="c1", input={})
            other = sqlite3.connect(path, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(toolledger.StoreBusyError) as info:
                    run.deliver("c1", posted.append)
            finally:
                other.execute("ROLLBACK")
                other.close()
            assert info.value.code == "STORE_BUSY"
            assert posted == []
            assert store.get("default", "c1").status is Status.COMPLETED
            run.deliver("c1", posted.append)  # the lock is gone: delivered once
        assert len(posted) == 1
        assert store.get("default", "c1").status is Status.DELIVERED
        store.close()
