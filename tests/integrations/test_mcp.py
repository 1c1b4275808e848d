"""``guarded_session``: MCP tools through the guard, against a real MCP server over stdio."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger.checkpoint import fingerprint
from toolledger.testing import stored_run

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from toolledger.integrations.mcp import guarded_session, policy_for  # noqa: E402

#: The MCP server used by every test: each tool records its effect in EFFECTS (one line
#: per run of a tool), so "sent once" is counted by the server itself, not by the client.
SERVER = '''
import json, os, sys, anyio
from pathlib import Path
try:
    from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x
from mcp.types import ToolAnnotations

EFFECTS = Path(os.environ["FX_EFFECTS"])
app = Server("fx server")

def effect(line):
    with EFFECTS.open("a") as fh:
        fh.write(line + "\\n")
        fh.flush()
        os.fsync(fh.fileno())

async def hang_once():
    marker = Path(os.environ["FX_EFFECTS"] + ".ran")
    if not marker.exists():  # only the first time: the client is killed meanwhile
        marker.write_text("ran")
        await anyio.sleep(120)

def notes(**hints):
    return ToolAnnotations.model_validate(hints)

@app.tool(annotations=notes(readOnlyHint=True))
def count_effects() -> int:
    """Count the effects so far."""
    return len(EFFECTS.read_text().splitlines()) if EFFECTS.exists() else 0

@app.tool(annotations=notes(destructiveHint=False, idempotentHint=False))
async def append_line(text: str) -> str:
    """Append one line to the effects file."""
    effect("append " + text)
    if text == "hang":  # the effect happened; the answer never comes back
        await hang_once()
    return "appended " + text

@app.tool(annotations=notes(destructiveHint=False, idempotentHint=True))
async def set_value(key: str, value: str) -> str:
    """Set a key (idempotent, not destructive)."""
    effect("set " + key)
    if value == "hang":
        await hang_once()
    return key + "=" + value

@app.tool(annotations=notes(destructiveHint=True, idempotentHint=True))
def delete_all() -> str:
    """Delete everything (destructive, idempotent)."""
    effect("delete")
    return "deleted"

@app.tool()
def plain(x: int) -> int:
    """No annotations at all."""
    effect("plain")
    return x

if __name__ == "__main__":
    Path(os.environ["FX_EFFECTS"] + ".pids").open("a").write(f"{os.getpid()}\\n")
    app.run("stdio")
'''


class Fixture:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.server = tmp / "fx_server.py"
        self.server.write_text(SERVER)
        self.effects = tmp / "effects.txt"
        self.db = tmp / "mcp.db"
        self.log = tmp / "server.log"

    def params(self) -> Any:
        return mcp.StdioServerParameters(
            command=sys.executable,
            args=[str(self.server)],
            env={"FX_EFFECTS": str(self.effects)},
        )

    def effect_lines(self) -> list[str]:
        return self.effects.read_text().splitlines() if self.effects.exists() else []

    def kill_servers(self) -> None:
        pids = self.tmp / "effects.txt.pids"
        for line in pids.read_text().split() if pids.exists() else []:
            with suppress(ProcessLookupError):
                os.kill(int(line), signal.SIGKILL)


@pytest.fixture
def fx(tmp_path: Path) -> Any:
    f = Fixture(tmp_path)
    yield f
    f.kill_servers()


@asynccontextmanager
async def session(fx: Fixture) -> AsyncIterator[Any]:
    with fx.log.open("a") as errlog:
        async with (
            mcp.stdio_client(fx.params(), errlog=errlog) as streams,
            mcp.ClientSession(*streams) as s,
        ):
            await s.initialize()
            yield s


def run_async(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def wire(result: Any) -> Any:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def tool_events(db: Path, run_id: str) -> list[dict[str, Any]]:
    return [e for e in stored_run(db, run_id).events if e["kind"] == "tool_call"]


class TestGuardedCalls:
    def test_call_tool_same_call_id_sent_once_replayed_result(self, fx: Fixture) -> None:
        """The second call with the same id returns the stored result; the server ran once."""

        async def main() -> tuple[Any, Any, str]:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    g = guarded_session(s, run)
                    first = await g.call_tool("append_line", {"text": "a"}, call_id="toolu_1")
                    again = await g.call_tool("append_line", {"text": "a"}, call_id="toolu_1")
                    return first, again, run.run_id

        first, again, run_id = run_async(main)
        assert fx.effect_lines() == ["append a"]
        assert type(again) is type(first)
        assert wire(again) == wire(first)
        assert wire(first)["structuredContent"] == {"result": "appended a"}
        events = tool_events(fx.db, run_id)
        assert [(e["name"], e["meta"]["replayed"]) for e in events] == [
            ("fx_server:append_line", False),
            ("fx_server:append_line", True),
        ]
        assert events[0]["checkpoint"]["call_id"] == "toolu_1"
        rec = toolledger.SQLiteStore(fx.db).get("default", "toolu_1")
        assert rec is not None
        assert rec.binding.tool_name == "fx_server:append_line"
        assert rec.binding.tool_revision == "mcp"
        assert rec.binding.input_fingerprint == fingerprint({"text": "a"})

    def test_call_tool_read_only_no_checkpoint_journaled(self, fx: Fixture) -> None:
        """A ``readOnlyHint`` tool needs no call id, is sent every time and only journaled."""

        async def main() -> tuple[list[Any], str]:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    g = guarded_session(s, run, server_name="files")
                    out = [await g.call_tool("count_effects") for _ in range(2)]
                    out.append(await g.call_tool("count_effects", {}, call_id="toolu_r"))
                    return out, run.run_id

        results, run_id = run_async(main)
        assert [wire(r)["structuredContent"] for r in results] == [{"result": 0}] * 3
        events = tool_events(fx.db, run_id)
        assert [e["name"] for e in events] == ["files:count_effects"] * 3
        assert all(e["checkpoint"] is None and e["status"] == "completed" for e in events)
        assert events[0]["meta"]["policy"] == "read_only"
        assert events[2]["meta"]["call_id"] == "toolu_r"
        assert toolledger.SQLiteStore(fx.db).get("default", "toolu_r") is None

    def test_call_tool_without_call_id_not_read_only_invalid_argument(self, fx: Fixture) -> None:
        """A side-effecting tool without the model's call id is refused before sending."""

        async def main() -> Any:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    with pytest.raises(toolledger.InvalidArgumentError) as info:
                        await guarded_session(s, run).call_tool("append_line", {"text": "x"})
                    return info.value

        err = run_async(main)
        assert err.code == "INVALID_ARGUMENT"
        assert "call_id" in err.message
        assert fx.effect_lines() == []

    def test_call_tool_same_id_other_arguments_binding_conflict(self, fx: Fixture) -> None:
        """A call id reused for other arguments is ``BINDING_CONFLICT``, never a cache hit."""

        async def main() -> Any:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    g = guarded_session(s, run)
                    await g.call_tool("append_line", {"text": "a"}, call_id="toolu_1")
                    with pytest.raises(toolledger.BindingConflictError) as info:
                        await g.call_tool("append_line", {"text": "b"}, call_id="toolu_1")
                    return info.value

        assert run_async(main).code == "BINDING_CONFLICT"
        assert fx.effect_lines() == ["append a"]

    def test_call_tool_other_server_name_is_another_binding(self, fx: Fixture) -> None:
        """The server name is part of the binding: the same id on another server conflicts."""

        async def main() -> Any:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    await guarded_session(s, run, server_name="one").call_tool(
                        "append_line", {"text": "a"}, call_id="toolu_1"
                    )
                    with pytest.raises(toolledger.BindingConflictError):
                        await guarded_session(s, run, server_name="two").call_tool(
                            "append_line", {"text": "a"}, call_id="toolu_1"
                        )

        run_async(main)
        assert fx.effect_lines() == ["append a"]

    def test_list_tools_policies_follow_annotations(self, fx: Fixture) -> None:
        """readOnly → read_only; idempotent and not destructive → idempotent; else guarded."""

        async def main() -> dict[str, str]:
            async with session(fx) as s:
                with toolledger.run("mcp", db=fx.db) as run:
                    g = guarded_session(s, run, policies={"plain": "read_only"})
                    listing = await g.list_tools()
                    got = {t.name: policy_for(t) for t in listing.tools}
                    got["plain (override)"] = await g.policy("plain")
                    got["unlisted"] = await g.policy("unlisted")
                    return got

        assert run_async(main) == {
            "count_effects": "read_only",
            "append_line": "guarded",
            "set_value": "idempotent",
            "delete_all": "guarded",
            "plain": "guarded",
            "plain (override)": "read_only",
            "unlisted": "guarded",
        }

    def test_guarded_session_unknown_policy_invalid_argument(self, tmp_path: Path) -> None:
        """An override outside read_only/idempotent/guarded is refused."""
        with (
            toolledger.run("mcp", db=tmp_path / "x.db") as run,
            pytest.raises(toolledger.InvalidArgumentError) as info,
        ):
            guarded_session(object(), run, policies={"t": "sometimes"})  # type: ignore[dict-item]
        assert info.value.code == "INVALID_ARGUMENT"


class _RefusingSession:
    """A session whose server refuses the request with a JSON-RPC error (``code``)."""

    server_info = None

    def __init__(self, code: int) -> None:
        self.code = code
        self.sent = 0
        self.listed = 0

    async def list_tools(self) -> Any:
        self.listed += 1
        return mcp.types.ListToolsResult(tools=[])

    async def call_tool(self, name: str, arguments: Any, **kw: Any) -> Any:
        self.sent += 1
        raise mcp.MCPError(code=self.code, message="refused")


@pytest.mark.parametrize(("code", "retry_sends"), [(-32602, True), (-32603, False)])
def test_call_tool_jsonrpc_error_pre_effect_only_for_request_errors(
    tmp_path: Path, code: int, retry_sends: bool
) -> None:
    """Invalid params proves pre-effect (a retry sends); an internal error is unknown."""
    s = _RefusingSession(code)

    async def main() -> list[str]:
        seen = []
        with toolledger.run("mcp", db=tmp_path / "e.db") as run:
            g = guarded_session(s, run, server_name="srv")
            for _ in range(2):
                try:
                    await g.call_tool("t", {"a": 1}, call_id="toolu_e")
                except toolledger.OutcomeUnknownError:
                    seen.append("OUTCOME_UNKNOWN")
                except mcp.MCPError:
                    seen.append("MCPError")
        return seen

    seen = run_async(main)
    assert s.listed == 1  # an unlisted tool is guarded; the listing is not repeated
    if retry_sends:
        assert (seen, s.sent) == (["MCPError", "MCPError"], 2)
    else:
        assert (seen, s.sent) == (["OUTCOME_UNKNOWN", "OUTCOME_UNKNOWN"], 1)


# -- a crash of the client -------------------------------------------------------------------

CLIENT = """
import json, sys, anyio
from pathlib import Path
import mcp, toolledger
from toolledger.integrations.mcp import guarded_session

server, effects, db, tool, args, call_id, out, hold = sys.argv[1:9]

async def main():
    params = mcp.StdioServerParameters(command=sys.executable, args=[server],
                                       env={"FX_EFFECTS": effects})
    with open(effects + ".log", "a") as errlog:
        async with mcp.stdio_client(params, errlog=errlog) as streams:
            async with mcp.ClientSession(*streams) as s:
                await s.initialize()
                with toolledger.run("crash", db=db) as run:
                    g = guarded_session(s, run)
                    try:
                        res = await g.call_tool(tool, json.loads(args), call_id=call_id)
                        got = {"result": res.model_dump(mode="json", by_alias=True,
                                                        exclude_none=True)}
                    except toolledger.CheckpointError as exc:
                        got = {"code": exc.code}
                    Path(out).write_text(json.dumps(got))
                    if hold == "hold":  # the result is stored: wait to be killed
                        await anyio.sleep(120)

anyio.run(main)
"""


def _client(fx: Fixture, tool: str, args: dict[str, Any], out: Path, hold: bool) -> list[str]:
    script = fx.tmp / "fx_client.py"
    script.write_text(textwrap.dedent(CLIENT))
    return [
        sys.executable,
        str(script),
        str(fx.server),
        str(fx.effects),
        str(fx.db),
        tool,
        json.dumps(args),
        "toolu_crash",
        str(out),
        "hold" if hold else "no",
    ]


def _wait_for(path: Path, proc: subprocess.Popen[bytes], deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while not path.exists():
        assert proc.poll() is None, f"client exited early with {proc.returncode}"
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)


def _crash_then_restart(fx: Fixture, tool: str, args: dict[str, Any], *, when: str) -> Any:
    """Kill a client (SIGKILL) at ``when``; run a fresh client process; return its answer."""
    first = fx.tmp / "first.json"
    proc = subprocess.Popen(_client(fx, tool, args, first, hold=when == "stored"))
    try:
        _wait_for(first if when == "stored" else Path(f"{fx.effects}.ran"), proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    fx.kill_servers()  # the first server may still be inside the tool
    second = fx.tmp / "second.json"
    subprocess.run(_client(fx, tool, args, second, hold=False), check=True, timeout=120)
    return json.loads(first.read_text()) if first.exists() else None, json.loads(second.read_text())


@pytest.mark.slow
def test_client_killed_after_server_ran_tool_call_not_sent_again(fx: Fixture) -> None:
    """Response lost in a crash: the restarted client reports OUTCOME_UNKNOWN, never re-sends."""
    first, second = _crash_then_restart(fx, "append_line", {"text": "hang"}, when="sent")
    assert first is None
    assert second == {"code": "OUTCOME_UNKNOWN"}
    assert fx.effect_lines() == ["append hang"]
    rec = toolledger.SQLiteStore(fx.db).get("default", "toolu_crash")
    assert rec is not None
    assert rec.status.value == "uncertain"


@pytest.mark.slow
def test_client_killed_after_result_stored_replays_without_sending(fx: Fixture) -> None:
    """Crash after the result was stored: the restart returns it; the server ran once."""
    first, second = _crash_then_restart(fx, "append_line", {"text": "b"}, when="stored")
    assert first == second
    assert second["result"]["structuredContent"] == {"result": "appended b"}
    assert fx.effect_lines() == ["append b"]


@pytest.mark.slow
def test_client_killed_idempotent_tool_recovered_by_sending_again(fx: Fixture) -> None:
    """An idempotent, non-destructive tool is the one case a lost outcome is re-sent."""
    first, second = _crash_then_restart(fx, "set_value", {"key": "k", "value": "hang"}, when="sent")
    assert first is None
    assert fx.effect_lines() == ["set k", "set k"]
    assert "code" not in second
    rec = toolledger.SQLiteStore(fx.db).get("default", "toolu_crash")
    assert rec is not None
    assert rec.status.value == "completed"
