"""``toolledger.current_call()``: the context of the guarded call executing here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolledger


def _seeing(seen: list[Any], output: Any = None) -> toolledger.Tool:
    def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        seen.append(toolledger.current_call())
        return {"call_id": ctx.call_id}

    return toolledger.tool("t", revision="1", execute=execute)


class TestCurrentCall:
    def test_sync_call_sees_its_own_context_and_none_after(self, run) -> None:
        """Inside ``execute``: the call's ``ExecuteContext``; outside: ``None``."""
        seen: list[Any] = []
        assert toolledger.current_call() is None
        run.call(_seeing(seen), call_id="c1", input={})
        assert len(seen) == 1
        ctx = seen[0]
        assert isinstance(ctx, toolledger.ExecuteContext)
        assert (ctx.call_id, ctx.run_id) == ("c1", run.run_id)
        ctx.operation.write({"order": "o-1"})  # the call's own operation journal
        assert run.store.operation_read("default", "c1") == {"order": "o-1"}
        assert toolledger.current_call() is None

    def test_replay_does_not_execute_so_nothing_is_set(self, run) -> None:
        """A replayed call runs no tool code."""
        seen: list[Any] = []
        run.call(_seeing(seen), call_id="c1", input={})
        run.call(_seeing(seen), call_id="c1", input={})
        assert len(seen) == 1

    def test_reset_after_execute_raises(self, run) -> None:
        """A raising tool leaves no context behind."""

        def execute(input: Any, ctx: Any) -> Any:
            assert toolledger.current_call() is ctx
            raise ValueError("no")

        with pytest.raises(ValueError):
            run.call(toolledger.tool("t", revision="1", execute=execute), call_id="c1", input={})
        assert toolledger.current_call() is None

    def test_call_many_each_call_sees_its_own(self, run) -> None:
        """The calls of one turn see their own ids, in order."""
        seen: list[Any] = []
        tool = _seeing(seen)
        run.call_many([{"tool": tool, "call_id": f"c{i}", "input": {"i": i}} for i in range(3)])
        assert [c.call_id for c in seen] == ["c0", "c1", "c2"]

    def test_concurrent_acalls_each_see_their_own(self, run) -> None:
        """Concurrent async calls on one loop never see each other's context."""
        seen: dict[str, str] = {}

        async def execute(input: Any, ctx: toolledger.ExecuteContext) -> Any:
            await asyncio.sleep(0)
            current = toolledger.current_call()
            assert current is not None
            seen[ctx.call_id] = current.call_id
            return {}

        tool = toolledger.tool("t", revision="1", execute=execute)

        async def main() -> None:
            await asyncio.gather(
                *(run.acall(tool, call_id=f"a{i}", input={"i": i}) for i in range(4))
            )
            assert toolledger.current_call() is None

        asyncio.run(main())
        assert seen == {f"a{i}": f"a{i}" for i in range(4)}

    def test_recover_is_not_execute(self, run) -> None:
        """``recover`` runs with no current call (it proves an outcome, it does not act)."""
        seen: list[Any] = []

        def execute(input: Any, ctx: Any) -> Any:
            ctx.operation.write({"o": 1})
            raise OSError("timeout")

        def recover(ctx: Any) -> Any:
            seen.append(toolledger.current_call())
            return toolledger.Recovered({"ok": True})

        tool = toolledger.tool("t", revision="1", execute=execute, recover=recover)
        out = run.call(tool, call_id="c1", input={})
        assert out.recovered
        assert seen == [None]
