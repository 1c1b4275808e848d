"""``guarded_session`` and stored approval decisions: every policy honours them.

A stored decision binds every later attempt at the call (``docs/approvals.md``): a pending
request returns an ``isError`` result naming the ticket, a denial raises
``ApprovalDenied``, and neither sends anything, whether the tool is guarded or read-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolledger

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from toolledger.integrations.mcp import guarded_session  # noqa: E402

SERVER = "srv"


class _CountingSession:
    """An MCP session (the ``ClientSession`` methods the wrapper uses) that counts sends."""

    server_info = None

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        return mcp.types.ListToolsResult.model_validate(
            {
                "tools": [
                    {"name": "send", "inputSchema": {"type": "object"}},
                    {
                        "name": "lookup",
                        "inputSchema": {"type": "object"},
                        "annotations": {"readOnlyHint": True},
                    },
                    {"name": "peek", "inputSchema": {"type": "object"}},
                ]
            }
        )

    async def call_tool(self, name: str, arguments: Any, **kwargs: Any) -> Any:
        self.sent.append((name, arguments))
        return mcp.types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": f"{name} ran"}], "isError": False}
        )


async def _ask(run: Any, tool_name: str, call_id: str, args: dict[str, Any], ticket: str) -> None:
    """Store a pending request for the MCP call's binding, as a gated caller would."""
    gated = toolledger.tool(
        f"{SERVER}:{tool_name}",
        revision="mcp",
        execute=lambda _input, _ctx: None,
        approval="effect-only",
        approver=lambda _request: toolledger.Pending(ticket),
    )
    outcome = await run.acall(gated, call_id=call_id, input=args)
    assert outcome.status == "awaiting_approval"


def _text(result: Any) -> str:
    return " ".join(part.text for part in result.content)


#: read-only by annotation, read-only by override, and guarded (no annotations).
POLICIES = [
    pytest.param("lookup", {}, id="readOnlyHint"),
    pytest.param("peek", {"peek": "read_only"}, id="policies-read_only"),
    pytest.param("send", {}, id="guarded"),
]


@pytest.mark.parametrize(("tool_name", "policies"), POLICIES)
def test_pending_request_returns_an_error_result_with_the_ticket_and_sends_nothing(
    tmp_path: Path, tool_name: str, policies: dict[str, Any]
) -> None:
    session = _CountingSession()

    async def main() -> tuple[Any, Any, Any]:
        with toolledger.run("mcp", db=tmp_path / "a.db") as run:
            g = guarded_session(session, run, server_name=SERVER, policies=policies)
            await _ask(run, tool_name, "toolu_p", {"to": "ana"}, "T-7")
            pending = await g.call_tool(tool_name, {"to": "ana"}, call_id="toolu_p")
            again = await g.call_tool(tool_name, {"to": "ana"}, call_id="toolu_p")
            assert session.sent == []
            toolledger.decide_approval(run.store, run.namespace, "toolu_p", True, by="alice")
            done = await g.call_tool(tool_name, {"to": "ana"}, call_id="toolu_p")
            return pending, again, done

    pending, again, done = anyio.run(main)
    for result in (pending, again):
        assert isinstance(result, mcp.types.CallToolResult)
        assert result.is_error is True
        assert _text(result) == "awaiting approval; not executed yet (ticket T-7)"
        assert result.meta == {
            "toolledger": {"status": "awaiting_approval", "call_id": "toolu_p", "ticket": "T-7"}
        }
    assert session.sent == [(tool_name, {"to": "ana"})]  # sent once, after the approval
    assert done.is_error is False
    assert _text(done) == f"{tool_name} ran"


@pytest.mark.parametrize(("tool_name", "policies"), POLICIES)
def test_stored_denial_raises_approval_denied_and_sends_nothing(
    tmp_path: Path, tool_name: str, policies: dict[str, Any]
) -> None:
    session = _CountingSession()

    async def main() -> toolledger.CheckpointError:
        with toolledger.run("mcp", db=tmp_path / "d.db") as run:
            g = guarded_session(session, run, server_name=SERVER, policies=policies)
            await _ask(run, tool_name, "toolu_d", {"to": "ana"}, "T-8")
            toolledger.decide_approval(
                run.store, run.namespace, "toolu_d", False, by="bob", reason="no"
            )
            with pytest.raises(toolledger.ApprovalDeniedError) as info:
                await g.call_tool(tool_name, {"to": "ana"}, call_id="toolu_d")
            return info.value

    err = anyio.run(main)
    assert err.code == "APPROVAL_DENIED"
    assert "bob" in err.message
    assert session.sent == []


@pytest.mark.parametrize(("tool_name", "policies"), POLICIES[:2])
def test_read_only_call_with_a_decision_for_another_binding_is_a_conflict(
    tmp_path: Path, tool_name: str, policies: dict[str, Any]
) -> None:
    session = _CountingSession()

    async def main() -> None:
        with toolledger.run("mcp", db=tmp_path / "c.db") as run:
            g = guarded_session(session, run, server_name=SERVER, policies=policies)
            await _ask(run, tool_name, "toolu_c", {"to": "ana"}, "T-9")
            with pytest.raises(toolledger.BindingConflictError):
                await g.call_tool(tool_name, {"to": "eve"}, call_id="toolu_c")

    anyio.run(main)
    assert session.sent == []


def test_read_only_call_without_a_stored_decision_is_sent_every_time(tmp_path: Path) -> None:
    """Unchanged: no decision stored for the call id (or no call id): sent, journaled only."""
    session = _CountingSession()

    async def main() -> None:
        with toolledger.run("mcp", db=tmp_path / "r.db") as run:
            g = guarded_session(session, run, server_name=SERVER)
            await g.call_tool("lookup", {"q": 1}, call_id="toolu_r")
            await g.call_tool("lookup", {"q": 1}, call_id="toolu_r")
            await g.call_tool("lookup", {"q": 1})
            assert run.store.get(run.namespace, "toolu_r") is None  # no checkpoint

    anyio.run(main)
    assert session.sent == [("lookup", {"q": 1})] * 3
