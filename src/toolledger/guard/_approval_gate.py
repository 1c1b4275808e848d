"""The approval gate the guard runs before a gated call (``run.call``/``acall``/``call_many``).

Rules this module keeps:

- The gate runs *before* the call's ``tool_call`` event starts, so a denied or pending
  call has no ``execute_tool`` span; its decision is an ``approval`` journal event (span
  ``approval {tool}``). The state machine is ``_approval_flow.GateFlow``.
- ``None`` from a gate means "proceed": the guard then runs the call with ``ungated``'s
  tool (the same tool without ``approval``/``approver``), so nothing is asked twice.
- A sync call refuses an async approver (``INVALID_ARGUMENT``, nothing stored); ``acall``
  awaits it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..approvals import APPROVAL_MODES
from ..checkpoint.model import Binding, fingerprint
from ..errors import InvalidArgumentError
from ..tools import Tool, ToolOutcome
from ._approval_flow import AWAITING_APPROVAL, DENIED, GateFlow

__all__ = [
    "AWAITING_APPROVAL",
    "DENIED",
    "agate",
    "gate",
    "gate_many",
    "gated_item",
    "resolve",
    "ungated",
]


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


def ungated(tool: Any, extra: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Return the tool and keywords the guard runs once the gate has allowed the call."""
    rest = {k: v for k, v in extra.items() if k not in ("approval", "approver")}
    if isinstance(tool, Tool) and (tool.approval is not None or tool.approver is not None):
        tool = dataclasses.replace(tool, approval=None, approver=None)
    return tool, rest


def _build(
    run: Any,
    tool: Tool,
    *,
    call_id: str,
    input: Any,
    justification: str | None,
    on_error: str | None,
    extra: Mapping[str, Any],
) -> GateFlow | None:
    if not isinstance(tool, Tool):
        return None  # the guard reports the bad argument
    mode, approver = resolve(tool, extra)
    if mode is None:
        return None
    binding = Binding(run.namespace, call_id, tool.name, tool.revision, fingerprint(input))
    g = GateFlow(
        run,
        tool,
        binding,
        input,
        justification,
        mode,
        tool.on_error if on_error is None else on_error,
    )
    g.approver = approver
    return g


def gate(run: Any, tool: Tool, **kw: Any) -> ToolOutcome | None:
    """Run the gate for a sync call; ``None`` means "proceed".

    Returns:
        ``None`` (no gate, or allowed), or the ``ToolOutcome`` of a call that waits
        (``awaiting_approval``) or was denied with ``on_error="result"``.

    Raises:
        ApprovalDenied: ``APPROVAL_DENIED`` (``on_error="raise"``).
        BindingConflictError: ``BINDING_CONFLICT``.
        InvalidArgumentError: ``INVALID_ARGUMENT``: bad options, an async approver, or an
            approver answer that is not ``Approved``/``Denied``/``Pending``.
        Exception: whatever the approver raised (nothing is stored or executed).
    """
    g = _build(run, tool, **kw)
    if g is None:
        return None
    flow = g.flow()
    try:
        request = next(flow)
        while True:
            answer = g.approver(request) if g.approver is not None else None
            if inspect.isawaitable(answer):
                with contextlib.suppress(Exception):
                    answer.close()  # type: ignore[attr-defined]
                raise InvalidArgumentError(
                    message=f"the approver of {tool.name} is async; use run.acall",
                    details={"tool": tool.name},
                )
            request = flow.send(answer)
    except StopIteration as stop:
        result: ToolOutcome | None = stop.value
        return result


async def agate(run: Any, tool: Tool, **kw: Any) -> ToolOutcome | None:
    """Run the gate for an async call (the approver may be async); see ``gate``."""
    g = _build(run, tool, **kw)
    if g is None:
        return None
    flow = g.flow()
    try:
        request = next(flow)
        while True:
            answer = g.approver(request) if g.approver is not None else None
            if inspect.isawaitable(answer):
                answer = await answer
            request = flow.send(answer)
    except StopIteration as stop:
        result: ToolOutcome | None = stop.value
        return result


def gated_item(item: Any) -> bool:
    """Whether a ``call_many`` item needs the gate (its tool or the item sets ``approval``)."""
    if not isinstance(item, Mapping):
        return False
    tool = item.get("tool")
    return item.get("approval") is not None or getattr(tool, "approval", None) is not None


def gate_many(
    run: Any,
    calls: Sequence[Mapping[str, Any]],
    *,
    on_error: str | None,
    return_exceptions: bool,
    call_many: Callable[..., list[Any]],
) -> list[Any]:
    """``run.call_many`` with gates: ask for each gated item first, then run the allowed ones.

    Gates run one by one, in order, before anything is claimed; a denial (with
    ``on_error="raise"`` and without ``return_exceptions``) raises before any call of the
    turn executes. The allowed calls then go through ``call_many`` together (one claim
    transaction), ungated.
    """
    slots: list[Any] = [None] * len(calls)
    rest: list[tuple[int, dict[str, Any]]] = []
    for i, item in enumerate(calls):
        if not gated_item(item):
            rest.append((i, dict(item) if isinstance(item, Mapping) else item))
            continue
        extra = {k: item[k] for k in ("approval", "approver") if k in item}
        try:
            stopped = gate(
                run,
                item["tool"],
                call_id=item["call_id"],
                input=item["input"],
                justification=item.get("justification"),
                on_error=item.get("on_error", on_error),
                extra=extra,
            )
        except Exception as exc:
            if not return_exceptions:
                raise
            slots[i] = exc
            continue
        if stopped is not None:
            slots[i] = stopped
            continue
        tool, _ = ungated(item["tool"], extra)
        rest.append((i, {k: v for k, v in item.items() if k not in extra} | {"tool": tool}))
    if rest:
        outs = call_many(
            run, [item for _, item in rest], on_error=on_error, return_exceptions=return_exceptions
        )
        for (i, _), out in zip(rest, outs, strict=True):
            slots[i] = out
    return slots
