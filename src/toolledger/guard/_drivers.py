"""Guarded tool calls: execute once, deliver safely, recover lost outcomes.

``run.call``/``run.acall``/``run.call_many``/``run.deliver``/``run.adeliver`` delegate here.
The state machine is ``_flow.CallFlow`` (its concerns in ``_flow_*``); ``_call`` builds
the call (binding, gate, effect key) and drives the flow with sync or async user code.

Rules this module keeps:

- A new call costs at most two durable commits: create+claim (one transaction, before
  ``execute`` starts) and completion + operation-journal removal (one transaction, before
  anything is delivered). Delivery transitions use relaxed commits (``durable=False``):
  losing one can only repeat a delivery, never an execution.
- Parallel calls of one model turn claim in one transaction: ``call_many`` does it
  explicitly; concurrent ``acall``s on one event loop are batched by ``_call.ClaimBatcher``.
- Once ``execute`` has returned, the completion write happens before any interruption
  propagates (SIGINT is deferred in the main thread; the async path has no ``await``
  between ``execute`` returning and the completion commit).
- Every call is a ``tool_call`` journal event linked to its checkpoint. Its start record
  rides in the create+claim transaction and its end record in the completion transaction
  (gated on the completion CAS), so the journal costs a new call no commit of its own
  (``commit_claims``, ``FlowCommits._swap``). A call the gate finds done (a replay) is one
  buffered ``tool_call`` record, status ``replayed`` (``_call.finish``, ``record_event``).

Telemetry: what this module sends (the telemetry layer maps it to attributes)
-----------------------------------------------------------------------------
On the event's span (``handle.span``), in this order:

- ``span.transition(name=, status_from=, status_to=, expected_revision=, revision=, won=,
  at=)`` after every CAS (``create_checkpoint`` has ``status_from=None`` and
  ``expected_revision=-1``; ``won`` is ``False`` for a lost CAS). Transitions whose commit
  raised a store error are not reported (their outcome is learned by re-reading).
- ``span.update({...})`` once, when the call is decided (just before the event ends), with
  exactly these keys:

  ``checkpoint.status`` (str, the last status reached), ``checkpoint.revision`` (int, the
  last revision reached), ``checkpoint.action`` (str, what ``decide_checkpoint`` answered
  when the call first looked: ``execute``, ``deliver``, ``reconcile-execution``,
  ``reconcile-delivery``, ``none``), ``replayed`` (bool), ``recovered`` (bool),
  ``tool.description`` (str, only when the tool has one), and ``link``
  (``{"trace_id", "span_id"}`` of the span that claimed the call, only when this call
  found another attempt's claim, i.e. resumed after a crash or raced a live worker).

The ids for ``link`` travel in the attempt id stored on the checkpoint
(``<32 hex>.<trace id>.<span id>``), so no extra write is needed.

Journal event: status ``completed`` (executed or recovered), ``replayed`` (the stored
payload, the tool did not run), ``failed`` (with the error: the tool's exception,
``OUTCOME_UNKNOWN``, ``BINDING_CONFLICT`` …) or ``cancelled`` (an interruption); outputs
``{"result": payload, "is_error": bool}``; meta (written with the end record; the journal
passes meta to ``span.update`` too): ``tool_revision``, ``input_fingerprint``,
``attempt_id``, ``replayed``, ``recovered`` (a replay's one record has no ``attempt_id``:
nothing was claimed).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..tools import Tool, ToolOutcome
from ._call import (
    abandon,
    begin,
    commit_claims,
    drive_async,
    drive_sync,
    finish,
    start,
    start_item,
)
from ._deliver import Delivery
from ._flow import CallFlow
from ._flow_state import CANCELLATION, Claim, join_claims
from ._seams import GuardedRun

__all__ = ["acall", "adeliver", "call", "call_many", "deliver", "deliver_many"]


def call(
    run: GuardedRun,
    tool: Tool,
    *,
    call_id: str,
    input: Any,
    justification: str | None = None,
    justification_source: str = "developer",
    on_error: str | None = None,
    **kw: Any,
) -> ToolOutcome:
    """Run ``tool`` once for ``call_id`` through its checkpoint (``run.call``).

    See the README's semantics table. A new call executes once (claim and completion are
    durable); the same call again returns the stored payload (``replayed=True``).

    Args:
        run: The run (its ``namespace`` scopes ``call_id``).
        tool: The ``Tool``.
        call_id: The call's id (the provider's tool-call id for model calls).
        input: The tool input (exact JSON); its fingerprint is part of the binding.
        justification: Why the call is made (recorded in the journal).
        justification_source: ``"developer"`` or ``"model"``.
        on_error: ``"raise"`` or ``"result"``; overrides the tool's.

    Returns:
        The ``ToolOutcome``.

    Raises:
        BindingConflictError: ``BINDING_CONFLICT``: the id was used for another call.
        OutcomeUnknownError: ``OUTCOME_UNKNOWN``: the call may have taken effect and could
            not be recovered; reconcile it, never retry under a new call id.
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad id, input or option.
        StoreError: the store failed before anything executed.
        Exception: whatever ``execute`` raised before any effect (``on_error="raise"``).
        ApprovalDeniedError: ``APPROVAL_DENIED``: a gated call was denied (a call waiting for
            a decision returns ``status="awaiting_approval"``; see ``toolledger.approvals``).
    """
    flow = start(
        run,
        tool,
        call_id=call_id,
        input=input,
        justification=justification,
        justification_source=justification_source,
        on_error=on_error,
        extra=kw,
        sync=True,
    )
    gen, req, done = begin(flow)
    if done is not None:
        return done
    return drive_sync(flow, gen, req)


def call_many(
    run: GuardedRun,
    calls: Sequence[Mapping[str, Any]],
    *,
    on_error: str | None = None,
    return_exceptions: bool = False,
) -> list[Any]:
    """Run the parallel tool calls of one model turn; new calls claim in one transaction.

    Each item is a mapping with ``tool``, ``call_id``, ``input`` and optionally
    ``justification``, ``justification_source``, ``on_error``, ``approval`` and
    ``approver``. Calls execute one after another in order; each completion is its own
    durable commit. Approval gates run first, one by one, before anything is claimed (a
    waiting call's slot is its ``awaiting_approval`` outcome; see ``toolledger.approvals``).

    Args:
        run: The run.
        calls: The calls.
        on_error: Default ``on_error`` for items that do not set one.
        return_exceptions: Put a failing call's exception in its slot instead of raising
            (interruptions still propagate).

    Returns:
        One ``ToolOutcome`` (or exception) per call, in order.

    Raises:
        The first call's error when ``return_exceptions`` is false; the claims of calls
        that did not execute yet are released first.
    """
    flows = [start_item(run, item, on_error, sync=True) for item in calls]
    turn = _Turn(flows=flows, slots=[None] * len(flows), return_exceptions=return_exceptions)
    waiting = _decide_all(turn)
    ready, errors = _claim_all(run, turn, waiting)
    _execute_in_order(turn, ready, errors)
    return turn.slots


#: A call of a turn waiting for its next step: ``(index, flow generator, its request)``;
#: ``(index, None, None)`` for a call not started yet (it repeats an earlier call).
_Step = tuple[int, Any, Any]


@dataclass(slots=True, kw_only=True)
class _Turn:
    """One ``call_many``: its flows, their result slots, and what happens to an error."""

    flows: list[CallFlow]
    slots: list[Any]
    return_exceptions: bool

    def kept(self, i: int, exc: BaseException) -> bool:
        """Put ``exc`` in slot ``i`` if errors are returned (never an interruption)."""
        if self.return_exceptions and not isinstance(exc, CANCELLATION):
            self.slots[i] = exc
            return True
        return False


def _decide_all(turn: _Turn) -> list[_Step]:
    """Phase 1: gate and decide every call in order; new ones stop at their Claim request.

    A later item for a call id already in this turn waits for phase 3 (it then decides
    from what the earlier one stored: a replay, or BINDING_CONFLICT for another input); so
    does a later item with an effect key already in this turn (it then returns the earlier
    one's result instead of finding its claim not yet executed). If a call raises (and is
    not kept), the calls decided so far are abandoned: nothing of the turn was claimed.
    """
    waiting: list[_Step] = []
    seen: set[tuple[str, str]] = set()
    seen_effects: set[Any] = set()
    try:
        for i, flow in enumerate(turn.flows):
            if flow.binding.key in seen or flow.effect in seen_effects:
                waiting.append((i, None, None))
                continue
            seen.add(flow.binding.key)
            if flow.effect is not None:
                seen_effects.add(flow.effect)
            try:
                gen, req, done = begin(flow, ask_sync=True)
            except BaseException as exc:
                if turn.kept(i, exc):
                    continue
                raise
            if done is not None:
                turn.slots[i] = done
            else:
                waiting.append((i, gen, req))
    except BaseException as exc:
        for i, gen, req in waiting:
            abandon(turn.flows[i], gen, req, exc)
        raise
    return waiting


def _claim_all(
    run: GuardedRun, turn: _Turn, waiting: list[_Step]
) -> tuple[list[_Step], list[tuple[int, BaseException]]]:
    """Phase 2: one transaction for every claim of the turn; each flow sees its outcomes.

    Returns:
        The calls ready for phase 3 (in order), and the calls whose flow raised on its
        claim's outcome.
    """
    claims = [req for _, _, req in waiting if isinstance(req, Claim)]
    outcomes: Any = []
    if claims:
        outcomes = commit_claims(run.store, (run,), join_claims(r.ops for r in claims))
    ready: list[_Step] = []
    errors: list[tuple[int, BaseException]] = []
    at = 0
    for i, gen, req in waiting:
        if not isinstance(req, Claim):
            ready.append((i, gen, req))
            continue
        n = len(req.ops)
        reply = outcomes if isinstance(outcomes, BaseException) else outcomes[at : at + n]
        at += n
        try:
            ready.append((i, gen, gen.send(reply)))
        except StopIteration as stop:
            turn.slots[i] = stop.value
            finish(turn.flows[i], stop.value, None)
        except BaseException as exc:
            finish(turn.flows[i], None, exc)
            errors.append((i, exc))
    return ready, errors


def _execute_in_order(
    turn: _Turn, ready: list[_Step], errors: list[tuple[int, BaseException]]
) -> None:
    """Phase 3: execute in order; on a raising call, give back the claims not yet used.

    Raises:
        The first error that is not kept (``return_exceptions``), after the release.
    """
    failure: BaseException | None = None
    for i, err in errors:
        if not turn.kept(i, err) and failure is None:
            failure = err
    while ready and failure is None:
        i, gen, req = ready.pop(0)
        try:
            if gen is None:  # a repeated call id: decided now, after the earlier item
                gen, req, done = begin(turn.flows[i])
                if done is not None:
                    turn.slots[i] = done
                    continue
            turn.slots[i] = drive_sync(turn.flows[i], gen, req)
        except BaseException as exc:
            if not turn.kept(i, exc):
                failure = exc
    if failure is not None:
        for i, gen, req in ready:
            abandon(turn.flows[i], gen, req, failure)
        raise failure


async def acall(
    run: GuardedRun,
    tool: Tool,
    *,
    call_id: str,
    input: Any,
    justification: str | None = None,
    justification_source: str = "developer",
    on_error: str | None = None,
    **kw: Any,
) -> ToolOutcome:
    """Async ``call`` (``run.acall``): ``execute``/``recover`` may be async.

    Concurrent ``acall``s on one event loop claim in one transaction. Once ``execute``
    has returned, the completion commit happens before a cancellation can propagate
    (there is no ``await`` in between). Same arguments, returns and errors as ``call``.
    """
    flow = start(
        run,
        tool,
        call_id=call_id,
        input=input,
        justification=justification,
        justification_source=justification_source,
        on_error=on_error,
        extra=kw,
        sync=False,
    )
    gen, req, done = begin(flow)
    if done is not None:
        return done
    return await drive_async(flow, gen, req)


def deliver(
    run: GuardedRun, call_id: str, post: Callable[[Any], Any], *, redeliver: bool = False
) -> Any:
    """Post a call's stored result exactly through its checkpoint (``run.deliver``).

    Claims delivery (fenced), calls ``post(payload)`` with the *stored* payload, then
    records the delivery. If ``post`` raises, the claim is released (the next delivery
    posts the same payload) and the error re-raised; an interruption (``KeyboardInterrupt``,
    cancellation) leaves the claim, since the post may have been accepted.

    Args:
        run: The run.
        call_id: The call to deliver.
        post: Called with the stored payload.
        redeliver: Release a claim left by a deliverer that stopped and post again
            (at-least-once: the receiver may see the payload twice).

    Returns:
        What ``post`` returned, or ``None`` when the call was already delivered (``post``
        is not called).

    Raises:
        DeliveryUncertainError: ``DELIVERY_UNCERTAIN``: a previous delivery was interrupted
            after its claim (unless ``redeliver=True``).
        NotFoundError: ``NOT_FOUND``: no checkpoint for ``call_id``.
        InvalidTransitionError: ``INVALID_TRANSITION``: the call has no result yet.
        Exception: whatever ``post`` raised.
    """
    return post_once(Delivery(run, [call_id], redeliver), lambda payloads: post(payloads[call_id]))


def deliver_many(
    run: GuardedRun,
    call_ids: Sequence[str],
    post: Callable[[dict[str, Any]], Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Deliver several calls' results with one post (one model request carrying them all).

    ``post`` gets ``{call_id: stored payload}`` for every call (delivered ones included,
    since the request carries them all); it is not called when all are delivered.
    Same errors as ``deliver``.
    """
    return post_once(Delivery(run, call_ids, redeliver), post)


async def adeliver(
    run: GuardedRun,
    call_id: str,
    post: Callable[[Any], Awaitable[Any] | Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Async ``deliver`` (``run.adeliver``): ``post`` may be async. Same semantics."""
    d = Delivery(run, [call_id], redeliver)
    return await apost_once(d, lambda payloads: post(payloads[call_id]))


# -- one post through a delivery (also used by the adapters' deliver_results) -------------


def post_once(d: Delivery, post: Callable[[dict[str, Any]], Any]) -> Any:
    """Claim ``d``, call ``post(payloads)``, record the delivery; ``None`` if all delivered.

    If ``post`` raises, the claims are released (the next delivery posts the same
    payloads) and the error re-raised; an interruption leaves them (the post may have
    been accepted).
    """
    if not d.claim():
        return None
    try:
        result = post(d.payloads())
    except CANCELLATION:
        raise
    except BaseException:
        d.release()
        raise
    d.complete()
    return result


async def apost_once(d: Delivery, post: Callable[[dict[str, Any]], Any]) -> Any:
    """Async ``post_once``: what ``post`` returns is awaited when it is awaitable."""
    if not d.claim():
        return None
    try:
        result = post(d.payloads())
        if inspect.isawaitable(result):
            result = await result
    except CANCELLATION:
        raise
    except BaseException:
        d.release()
        raise
    d.complete()
    return result
