"""Asking the approver: what a guarded call's gate yields, answered sync or async.

Rules this module keeps:

- The gate (``_approval_flow.GateFlow``) is the first phase of every call's flow
  (``CallFlow.run_flow``); it yields an ``ApprovalRequest`` only when the call has a gate
  (the tool's or the call's ``approval``), no stored decision counts and no request is
  pending. The drivers answer it with ``ask`` (sync) or ``aask`` (async).
- A sync call refuses an async approver (``INVALID_ARGUMENT``, nothing stored); ``acall``
  awaits it. Whatever the approver raises propagates; nothing is stored.
- The gate runs *before* the call's ``tool_call`` event starts, so a denied or pending
  call has no ``execute_tool`` span; its decision is an ``approval`` journal event (span
  ``approval {tool}``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..approvals import APPROVAL_MODES, ApprovalRequest
from ..errors import InvalidArgumentError
from ..tools import Tool
from ._approval_flow import AWAITING_APPROVAL, DENIED, GateFlow

__all__ = ["AWAITING_APPROVAL", "DENIED", "aask", "ask", "resolve"]


def resolve(tool: Tool, extra: Mapping[str, Any]) -> tuple[str | None, Callable[..., Any] | None]:
    """Return the call's ``(mode, approver)``: the call's keywords win over the tool's.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an unknown mode or a non-callable
            approver.
    """
    mode = extra.get("approval")
    mode = tool.approval if mode is None else mode
    approver = extra.get("approver")
    approver = tool.approver if approver is None else approver
    if mode is not None and mode not in APPROVAL_MODES:
        raise InvalidArgumentError(
            message='approval must be None, "always" or "effect-only"',
            details={"argument": "approval", "value": repr(mode)[:100]},
        )
    if approver is not None and not callable(approver):
        raise InvalidArgumentError(message="approver must be callable")
    return mode, approver


def ask(gate: GateFlow, request: ApprovalRequest) -> Any:
    """Return the gate's approver's answer to ``request`` (sync calls).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an async approver (use ``acall``).
        Exception: whatever the approver raised.
    """
    answer = gate.approver(request) if gate.approver is not None else None
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()
        raise InvalidArgumentError(
            message=f"the approver of {gate.tool.name} is async; use run.acall",
            details={"tool": gate.tool.name},
        )
    return answer


async def aask(gate: GateFlow, request: ApprovalRequest) -> Any:
    """Return the approver's answer to ``request``, awaited when it is awaitable."""
    answer = gate.approver(request) if gate.approver is not None else None
    if inspect.isawaitable(answer):
        answer = await answer
    return answer
