"""MCP tools through the guard: a tool call the model made once is sent to the server once.

Offline: this script is both the MCP server (``--server``, over stdio, with the ``mcp``
package's server side) and the agent. The agent calls ``send_invoice`` for the model's
tool-call id ``toolu_01``; then, as after a crash or a retried turn, it makes the same call
again: toolledger returns the stored result and the server is not called a second time.
A read-only tool (``count_sent``) is sent every time, with no checkpoint.

Run: ``python examples/mcp_guarded.py`` (needs ``pip install 'toolledger[mcp]'``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SENT = Path("mcp_invoices_sent.log")


def serve() -> None:
    """The MCP server: two tools, annotated."""
    try:
        from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server
    from mcp.types import ToolAnnotations

    app = Server("billing")

    @app.tool(annotations=ToolAnnotations.model_validate({"destructiveHint": False}))
    def send_invoice(customer: str, amount_cents: int) -> str:
        """Send one invoice to a customer."""
        with SENT.open("a") as fh:
            fh.write(f"{customer} {amount_cents}\n")
        return f"invoice sent to {customer}"

    @app.tool(annotations=ToolAnnotations.model_validate({"readOnlyHint": True}))
    def count_sent() -> int:
        """Count the invoices sent so far."""
        return len(SENT.read_text().splitlines()) if SENT.exists() else 0

    app.run("stdio")


async def agent() -> int:
    """The agent side: a guarded session over stdio."""
    import mcp

    import toolledger
    from toolledger.integrations.mcp import guarded_session

    params = mcp.StdioServerParameters(
        command=sys.executable, args=[os.path.abspath(__file__), "--server"], cwd=os.getcwd()
    )
    with open(os.devnull, "w") as quiet:
        async with (
            mcp.stdio_client(params, errlog=quiet) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            with toolledger.run("Bill ACME for March", db="mcp_guarded.db") as run:
                tools = guarded_session(session, run)
                args = {"customer": "ACME", "amount_cents": 12_000}
                first = await tools.call_tool("send_invoice", args, call_id="toolu_01")
                again = await tools.call_tool("send_invoice", args, call_id="toolu_01")
                count = await tools.call_tool("count_sent")
    print("first call :", first.content[0].text)
    print("same call  :", again.content[0].text, "(stored result, not sent again)")
    sent = getattr(count, "structured_content", None) or getattr(count, "structuredContent", {})
    print("server says:", count.content[0].text, "invoice(s) sent")
    return 0 if sent.get("result") == 1 and len(SENT.read_text().splitlines()) == 1 else 1


def main() -> int:
    if "--server" in sys.argv:
        serve()
        return 0
    import anyio

    return int(anyio.run(agent))


if __name__ == "__main__":
    sys.exit(main())
