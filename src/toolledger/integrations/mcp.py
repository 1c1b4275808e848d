"""MCP tools through the guard: ``guarded_session(session, run)``.

Tools served over the Model Context Protocol are where agents do real side effects. The
wrapper sends every ``call_tool`` through ``run.acall`` so a call that reached the server
is never sent again by accident, even across a crash of the client.

Rules this module keeps:

- No ``mcp`` import at import time; the ``mcp`` package (1.x or 2.x) is needed only to
  rebuild a stored result as a ``CallToolResult``. Works on any object with the
  ``ClientSession`` methods ``call_tool`` and ``list_tools``.
- The binding is ``(run namespace, call_id, "<server>:<tool>", "mcp", fingerprint(arguments))``:
  the server name, the tool name, the model's tool-call id and the input. MCP has no call
  id of its own: ``call_id`` is required for every tool not annotated ``readOnlyHint``.
- The policy comes from the tool's annotations (as listed by the server, or ``policies=``):

  ============================================  ==========  ===========================
  annotations                                   policy      a lost outcome (crash, or a
                                                            transport error after send)
  ============================================  ==========  ===========================
  ``readOnlyHint: true``                        read_only   no checkpoint; journaled only
  ``idempotentHint: true`` and
  ``destructiveHint: false``                    idempotent  recovered by sending again
  anything else (the MCP defaults included)     guarded     ``OUTCOME_UNKNOWN``, never
                                                            sent again
  ============================================  ==========  ===========================

  A destructive idempotent tool (``delete X``) is ``guarded``: sending it again may
  answer differently ("not found"), so the second answer is not proof of the first.
- The operation journal is written just before the request is sent: a failure after that
  point may have reached the server. A JSON-RPC error the server answered with for a
  malformed request (parse error, invalid request, method not found, invalid params) is
  proven pre-effect: the entry is removed and the error re-raised (a retry may send).
- The stored result is the ``CallToolResult`` in its wire form (``isError`` included):
  a replayed call returns the same result, rebuilt, with the tool not called.
- A stored approval decision binds every path (``docs/approvals.md``): a read-only call
  whose call id has a stored approval request or decision goes through the guard like a
  guarded call (denied: ``APPROVAL_DENIED``; pending: not sent; another binding:
  ``BINDING_CONFLICT``; approved: sent once and checkpointed, recovered by sending again).
- A call waiting for a decision is not an exception: ``call_tool`` returns a
  ``CallToolResult`` with ``isError`` true, the text ``awaiting approval; not executed yet
  (ticket T)`` (what a model reads, as the framework adapters answer), and
  ``_meta["toolledger"] = {"status": "awaiting_approval", "call_id", "ticket"}`` for code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..approvals import get_approval
from ..errors import InvalidArgumentError
from ..tools import Recovered, Tool, ToolOutcome
from ._common import AWAITING_APPROVAL, AWAITING_APPROVAL_TEXT

if TYPE_CHECKING:
    from ..guard import Run

__all__ = ["POLICIES", "GuardedSession", "guarded_session", "policy_for"]

Policy = Literal["read_only", "idempotent", "guarded"]
#: The policies, from the least to the most careful.
POLICIES: tuple[Policy, ...] = ("read_only", "idempotent", "guarded")
#: Revision of every MCP tool binding (MCP tools carry no code revision).
REVISION = "mcp"
#: JSON-RPC errors that prove the request was refused before the tool ran.
_PRE_EFFECT_CODES = frozenset({-32700, -32600, -32601, -32602})
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _annotations(tool: Any) -> dict[str, Any]:
    """A listed tool's annotations as a wire dict (camelCase), mcp 1.x/2.x or a dict."""
    found = (
        tool.get("annotations") if isinstance(tool, Mapping) else getattr(tool, "annotations", None)
    )
    if found is None:
        return {}
    if isinstance(found, Mapping):
        return dict(found)
    dump = getattr(found, "model_dump", None)
    if callable(dump):
        value = dump(by_alias=True, exclude_none=True, mode="json")
        return dict(value) if isinstance(value, Mapping) else {}
    return {}


def policy_for(tool: Any) -> Policy:
    """Return the policy for a listed MCP tool (object or listing dict) from its annotations.

    Returns:
        ``"read_only"``, ``"idempotent"`` or ``"guarded"`` (see the module's table).
    """
    notes = _annotations(tool)
    if notes.get("readOnlyHint") is True:
        return "read_only"
    if notes.get("idempotentHint") is True and notes.get("destructiveHint") is False:
        return "idempotent"
    return "guarded"


def _wire(result: Any) -> Any:
    """The JSON form of a ``CallToolResult`` (what is stored and replayed)."""
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return result


def _rebuild(payload: Any) -> Any:
    """A stored result as a ``CallToolResult`` (the payload itself without ``mcp``)."""
    try:
        from mcp.types import CallToolResult
    except ImportError:  # pragma: no cover - the extra is installed wherever sessions exist
        return payload
    return CallToolResult.model_validate(payload)


def _error_code(exc: BaseException) -> Any:
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    return getattr(getattr(exc, "error", None), "code", None)


class GuardedSession:
    """An MCP client session whose ``call_tool`` goes through the guard.

    Everything but ``call_tool`` and ``list_tools`` is the wrapped session's own attribute.
    Build it with :func:`guarded_session`.
    """

    def __init__(
        self,
        session: Any,
        run: Run,
        *,
        server_name: str | None = None,
        policies: Mapping[str, Policy] | None = None,
        max_result_bytes: int | None = None,
    ) -> None:
        for name, value in (policies or {}).items():
            if value not in POLICIES:
                raise InvalidArgumentError(
                    message=f"policy for {name!r} must be one of {', '.join(POLICIES)}; "
                    f"got {value!r}",
                    details={"tool": name},
                )
        self.session = session
        self.run = run
        self._server_name = server_name
        self._overrides: dict[str, Policy] = dict(policies or {})
        self._listed: dict[str, Policy] = {}
        self._listed_all = False
        self._max_result_bytes = max_result_bytes

    def __getattr__(self, name: str) -> Any:
        if name == "session":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.session, name)

    @property
    def server_name(self) -> str:
        """The server part of every binding: ``server_name=``, else the server's own name.

        Characters outside ``[A-Za-z0-9._-]`` become ``_``.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when neither is known (pass
                ``server_name=``, or initialize the session first).
        """
        name = self._server_name
        if name is None:
            info = getattr(self.session, "server_info", None)
            name = getattr(info, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError(
                message="the MCP server's name is unknown: initialize the session first or "
                "pass guarded_session(..., server_name=...)"
            )
        return _UNSAFE.sub("_", name.strip())[:64]

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        """List the server's tools (the session's ``list_tools``) and remember their policies."""
        result = await self.session.list_tools(*args, **kwargs)
        for tool in getattr(result, "tools", None) or []:
            name = getattr(tool, "name", None)
            if isinstance(name, str):
                self._listed[name] = policy_for(tool)
        return result

    async def _list_all(self) -> None:
        cursor: Any = None
        for _ in range(1000):  # a misbehaving server cannot page forever
            if cursor is None:
                result = await self.list_tools()
            else:
                try:
                    from mcp.types import PaginatedRequestParams  # mcp 2.x

                    result = await self.list_tools(params=PaginatedRequestParams(cursor=cursor))
                except (ImportError, TypeError):
                    result = await self.list_tools(cursor=cursor)  # mcp 1.x
            cursor = getattr(result, "next_cursor", None) or getattr(result, "nextCursor", None)
            if not cursor:
                return

    async def policy(self, name: str) -> Policy:
        """Return the policy for tool ``name`` (listing the server's tools once if needed).

        A tool the server does not list is ``guarded`` (the listing is not repeated for it;
        call ``list_tools()`` to refresh after the server's tools changed).
        """
        if name in self._overrides:
            return self._overrides[name]
        if name not in self._listed and not self._listed_all:
            await self._list_all()
            self._listed_all = True  # a tool the server did not list stays guarded
        return self._listed.get(name, "guarded")

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        justification: str | None = None,
        justification_source: str = "developer",
        **kwargs: Any,
    ) -> Any:
        """Call an MCP tool through the guard; return its ``CallToolResult``.

        A new call is sent once; the same call again (same ``call_id`` and arguments)
        returns the stored result without sending anything. Read-only tools are sent every
        time and only journaled, unless an approval is stored for their ``call_id`` (it
        binds them as it binds a guarded call).

        Args:
            name: The tool's name on the server.
            arguments: The tool's arguments (exact JSON); part of the binding.
            call_id: The tool-call id the model gave; required unless the tool is
                annotated ``readOnlyHint``.
            justification: Why the call is made (recorded in the journal).
            justification_source: ``"developer"`` or ``"model"``.
            **kwargs: Passed to the session's ``call_tool`` (``read_timeout_seconds``, …).

        Returns:
            The server's ``CallToolResult`` (rebuilt from the store when replayed); for a
            call waiting for an approval decision, nothing is sent and the result has
            ``isError`` true, the text ``awaiting approval; not executed yet (ticket T)``
            and ``_meta["toolledger"]`` ``{"status": "awaiting_approval", "call_id",
            "ticket"}``.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT``: no ``call_id`` for a tool that is
                not read-only, or a name that is not a valid identifier.
            BindingConflictError: ``BINDING_CONFLICT``: ``call_id`` was used for another
                tool or other arguments (or its stored approval was).
            ApprovalDeniedError: ``APPROVAL_DENIED``: the call's approval was denied.
            OutcomeUnknownError: ``OUTCOME_UNKNOWN``: the request may have reached the
                server and its outcome was lost (never re-sent unless ``idempotent``).
            Exception: the session's error for a request refused before the tool ran.
        """
        args: dict[str, Any] = dict(arguments or {})
        policy = await self.policy(name)
        label = f"{self.server_name}:{name}"
        if policy == "read_only" and (call_id is None or self._approval(call_id) is None):
            return await self._read_only(
                name, label, args, call_id, justification, justification_source, kwargs
            )
        if call_id is None:
            raise InvalidArgumentError(
                message=f"MCP tool {name!r} is not annotated readOnlyHint: call_tool needs the "
                "model's tool-call id (call_id=...) so a repeated call is recognized",
                details={"tool": name, "policy": policy},
            )
        session = self.session

        async def execute(input: Any, ctx: Any) -> Any:
            ctx.operation.write({"mcp_server": self.server_name, "tool": name, "sent": True})
            try:
                result = await session.call_tool(name, input, **kwargs)
            except Exception as exc:
                if _error_code(exc) in _PRE_EFFECT_CODES:
                    ctx.operation.remove()  # the server refused the request: pre-effect
                raise
            return _wire(result)

        async def resend(ctx: Any) -> Any:
            # idempotent and not destructive: the same arguments have no further effect
            return Recovered(_wire(await session.call_tool(name, args, **kwargs)))

        tool = Tool(
            name=label,
            revision=REVISION,
            execute=execute,
            recover=resend if policy != "guarded" else None,
            description=f"MCP tool {name} on {self.server_name} ({policy})",
            max_result_bytes=self._max_result_bytes,
        )
        outcome: ToolOutcome = await self.run.acall(
            tool,
            call_id=call_id,
            input=args,
            justification=justification,
            justification_source=justification_source,
        )
        if outcome.status == AWAITING_APPROVAL:
            return self._awaiting(call_id)
        return _rebuild(outcome.payload)

    def _approval(self, call_id: str) -> Any:
        """The approval stored for ``call_id`` in the run's namespace (``None``: none)."""
        return get_approval(self.run.store, self.run.namespace, call_id)

    def _awaiting(self, call_id: str) -> Any:
        """The ``CallToolResult`` of a call waiting for a decision: an error naming the ticket."""
        stored = self._approval(call_id)
        ticket = None if stored is None else stored.ticket
        text = AWAITING_APPROVAL_TEXT + ("" if ticket is None else f" (ticket {ticket})")
        return _rebuild(
            {
                "content": [{"type": "text", "text": text}],
                "isError": True,
                "_meta": {
                    "toolledger": {
                        "status": AWAITING_APPROVAL,
                        "call_id": call_id,
                        "ticket": ticket,
                    }
                },
            }
        )

    async def _read_only(
        self,
        name: str,
        label: str,
        args: dict[str, Any],
        call_id: str | None,
        justification: str | None,
        justification_source: str,
        kwargs: Mapping[str, Any],
    ) -> Any:
        meta: dict[str, Any] = {"mcp_server": self.server_name, "policy": "read_only"}
        if call_id is not None:
            meta["call_id"] = call_id
        requested = None if call_id is None else self.run.requested_by(call_id)
        handle = self.run.begin_event(
            "tool_call",
            label,
            justification=justification,
            justification_source=justification_source,
            inputs=args,
            meta=meta,
            parent=requested or ...,  # requested by a journaled model call: its child
            flush=True,
        )
        try:
            result = await self.session.call_tool(name, args, **kwargs)
        except BaseException as exc:
            handle.end(
                "failed" if isinstance(exc, Exception) else "cancelled", error=exc, flush=True
            )
            raise
        payload = _wire(result)
        is_error = bool(payload.get("isError")) if isinstance(payload, Mapping) else False
        handle.end("completed", outputs={"result": payload, "is_error": is_error}, flush=True)
        return result


def guarded_session(
    session: Any,
    run: Run,
    *,
    server_name: str | None = None,
    policies: Mapping[str, Policy] | None = None,
    max_result_bytes: int | None = None,
) -> GuardedSession:
    """Wrap an MCP ``ClientSession`` so every ``call_tool`` goes through the guard.

    Args:
        session: An initialized MCP client session (``mcp.ClientSession``).
        run: The ``toolledger`` run (its store and namespace hold the checkpoints).
        server_name: The server part of the binding (default: the server's own name).
            Keep it stable across restarts: a call is recognized by it.
        policies: ``{tool name: "read_only" | "idempotent" | "guarded"}`` overriding the
            server's annotations (annotations are hints from the server; use this when
            the server is not trusted).
        max_result_bytes: Bound on a stored result (default 65,536 bytes).

    Returns:
        A ``GuardedSession``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown policy.
    """
    return GuardedSession(
        session,
        run,
        server_name=server_name,
        policies=policies,
        max_result_bytes=max_result_bytes,
    )
