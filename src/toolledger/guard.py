"""Guarded tool calls: execute once, deliver safely, recover lost outcomes.

``run.call``/``run.acall``/``run.call_many``/``run.deliver``/``run.adeliver`` delegate here.
The state machine lives in ``_guard_flow.py``; this module builds the call (binding,
journal event, attempt id) and drives the flow with sync or async user code.

Rules this module keeps:

- A new call costs at most two durable commits: create+claim (one transaction, before
  ``execute`` starts) and completion + operation-journal removal (one transaction, before
  anything is delivered). Delivery transitions use relaxed commits (``durable=False``):
  losing one can only repeat a delivery, never an execution.
- Parallel calls of one model turn claim in one transaction: ``call_many`` does it
  explicitly; concurrent ``acall``s on one event loop are batched by ``_ClaimBatcher``.
- Once ``execute`` has returned, the completion write happens before any interruption
  propagates (SIGINT is deferred in the main thread; the async path has no ``await``
  between ``execute`` returning and the completion commit).
- Every call is a ``tool_call`` journal event linked to its checkpoint.

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
``attempt_id``, ``replayed``, ``recovered``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ._guard_flow import (
    CANCELLATION,
    Abandoned,
    CallFlow,
    Claim,
    Execute,
    Recover,
    new_attempt_id,
    now,
)
from .checkpoint.model import Binding, CheckpointRecord, Status, Transition, fingerprint
from .checkpoint.transitions import (
    DECISIONS,
    claim_delivery,
    complete_delivery,
    release_delivery,
)
from .errors import (
    DeliveryUncertainError,
    InvalidArgumentError,
    InvalidTransitionError,
    NotFoundError,
    StoreError,
)
from .store.base import SwapCheckpoint
from .tools import Tool, ToolOutcome

__all__ = ["acall", "adeliver", "call", "call_many", "deliver", "deliver_many"]

_ON_ERROR = ("raise", "result")


# -- building a call ---------------------------------------------------------------------


def _start(
    run: Any,
    tool: Tool,
    *,
    call_id: str,
    input: Any,
    justification: str | None,
    justification_source: str,
    on_error: str | None,
    extra: Mapping[str, Any],
    sync: bool,
) -> CallFlow:
    if not isinstance(tool, Tool):
        raise InvalidArgumentError(
            message=f"tool must be a toolledger.Tool (see toolledger.tool); got "
            f"{type(tool).__name__}"
        )
    unknown = set(extra) - {"approval", "approver"}
    if unknown:
        raise InvalidArgumentError(
            message=f"unexpected keyword arguments: {', '.join(sorted(unknown))}",
            details={"arguments": sorted(unknown)},
        )
    if tool.approval is not None or extra.get("approval") is not None:
        raise InvalidArgumentError(
            message="approval gates are not available in this version; refusing to run the "
            "call ungated",
            details={"tool": tool.name},
        )
    mode = tool.on_error if on_error is None else on_error
    if mode not in _ON_ERROR:
        raise InvalidArgumentError(
            message='on_error must be "raise" or "result"',
            details={"argument": "on_error", "value": repr(on_error)[:100]},
        )
    if sync and tool.is_async:
        raise InvalidArgumentError(
            message=f"tool {tool.name} has an async execute/recover; use run.acall",
            details={"tool": tool.name},
        )
    binding = Binding(run.namespace, call_id, tool.name, tool.revision, fingerprint(input))
    handle = run._begin_event(
        "tool_call",
        tool.name,
        justification=justification,
        justification_source=justification_source,
        inputs=input if isinstance(input, dict) else {"input": input},
        meta={"tool_revision": tool.revision, "input_fingerprint": binding.input_fingerprint},
        checkpoint={"namespace": binding.namespace, "call_id": call_id, "revision": None},
    )
    span = getattr(handle, "span", None)
    attempt = new_attempt_id(getattr(span, "trace_id", None), getattr(span, "span_id", None))
    return CallFlow(
        run=run,
        tool=tool,
        binding=binding,
        input=input,
        on_error=mode,
        handle=handle,
        attempt_id=attempt,
        justification=justification,
    )


def _first_action(flow: CallFlow) -> str:
    return getattr(flow, "first_action", None) or "execute"


def _finish(flow: CallFlow, outcome: ToolOutcome | None, error: BaseException | None) -> None:
    """Tell telemetry and end the journal event; never raises."""
    rec = flow.last
    handle = flow.handle
    facts: dict[str, Any] = {
        "checkpoint.status": outcome.status if outcome else (rec.status.value if rec else "none"),
        "checkpoint.revision": outcome.revision if outcome else (rec.revision if rec else -1),
        "checkpoint.action": _first_action(flow),
        "replayed": bool(outcome and outcome.replayed),
        "recovered": bool(outcome and outcome.recovered),
    }
    if flow.tool.description:
        facts["tool.description"] = flow.tool.description
    if flow.link is not None:
        facts["link"] = flow.link
    with contextlib.suppress(Exception):  # telemetry never breaks a tool call
        handle.span.update(facts)
    meta = {
        "tool_revision": flow.tool.revision,
        "attempt_id": flow.attempt_id,
        "replayed": facts["replayed"],
        "recovered": facts["recovered"],
    }
    try:
        revision = outcome.revision if outcome else (rec.revision if rec else None)
        handle.update(
            checkpoint={
                "namespace": flow.binding.namespace,
                "call_id": flow.binding.call_id,
                "revision": revision,
            }
        )
        if outcome is not None:
            handle.end(
                "replayed" if outcome.replayed else "completed",
                outputs={"result": outcome.payload, "is_error": outcome.is_error},
                meta=meta,
            )
        else:
            status = "cancelled" if isinstance(error, CANCELLATION) else "failed"
            handle.end(status, error=error, meta=meta)
    except Exception:  # recording never breaks the agent (the journal keeps run.errors)
        pass


# -- SIGINT deferral (sync finalization) ---------------------------------------------------


class _DeferSigint:
    """Hold SIGINT while the completion is written, then hand it to the previous handler.

    Only in the main thread, and only when SIGINT has a Python handler (the default one
    raises ``KeyboardInterrupt``); an ignored SIGINT stays ignored.
    """

    __slots__ = ("_old", "pending")

    def __init__(self) -> None:
        self._old: Any = None
        self.pending = False

    def __enter__(self) -> _DeferSigint:
        if threading.current_thread() is threading.main_thread():
            try:
                old = signal.getsignal(signal.SIGINT)
                if callable(old):
                    signal.signal(signal.SIGINT, self._handler)
                    self._old = old
            except (ValueError, OSError):  # not the main interpreter
                self._old = None
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        self.pending = True

    def __exit__(self, *exc: object) -> None:
        old, self._old = self._old, None
        if old is None:
            return
        signal.signal(signal.SIGINT, old)
        if self.pending:
            self.pending = False
            old(signal.SIGINT, None)  # the default handler raises KeyboardInterrupt


# -- sync driver ---------------------------------------------------------------------------


def _call_user(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    try:
        value = fn(*args)
    except BaseException as exc:
        return False, exc
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        return False, TypeError(f"{getattr(fn, '__name__', fn)!r} returned an awaitable; use acall")
    return True, value


def _perform_sync(flow: CallFlow, req: Any, shield: _DeferSigint) -> Any:
    if isinstance(req, Claim):
        try:
            return flow.store.apply(list(req.ops), durable=True)
        except StoreError as exc:
            return exc
    if isinstance(req, Execute):
        ok, value = _call_user(flow.tool.execute, flow.input, req.ctx)
        if ok:
            shield.__enter__()
        return ok, value
    assert isinstance(req, Recover)
    recover = flow.tool.recover
    assert recover is not None
    return _call_user(recover, req.ctx)


def _drive_sync(flow: CallFlow, gen: Any, req: Any) -> ToolOutcome:
    shield = _DeferSigint()
    try:
        while True:
            reply = _perform_sync(flow, req, shield)
            try:
                req = gen.send(reply)
            except StopIteration as stop:
                outcome: ToolOutcome = stop.value
                _finish(flow, outcome, None)
                return outcome
    except BaseException as exc:
        _finish(flow, None, exc)
        raise
    finally:
        shield.__exit__()


def _begin(flow: CallFlow) -> tuple[Any, Any, ToolOutcome | None]:
    """Start the flow; return ``(gen, first request, outcome if it finished at once)``."""
    gen = flow.run_flow()
    try:
        req = next(gen)
    except StopIteration as stop:
        outcome: ToolOutcome = stop.value
        _note_action(flow)
        _finish(flow, outcome, None)
        return gen, None, outcome
    except BaseException as exc:
        _note_action(flow)
        _finish(flow, None, exc)
        raise
    _note_action(flow)
    return gen, req, None


def _note_action(flow: CallFlow) -> None:
    rec = flow.last
    if rec is None:
        flow.first_action = "execute"  # type: ignore[attr-defined]
    else:
        flow.first_action = DECISIONS[rec.status].value  # type: ignore[attr-defined]


def call(
    run: Any,
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
    """
    flow = _start(
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
    gen, req, done = _begin(flow)
    if done is not None:
        return done
    return _drive_sync(flow, gen, req)


def call_many(
    run: Any,
    calls: Sequence[Mapping[str, Any]],
    *,
    on_error: str | None = None,
    return_exceptions: bool = False,
) -> list[Any]:
    """Run the parallel tool calls of one model turn; new calls claim in one transaction.

    Each item is a mapping with ``tool``, ``call_id``, ``input`` and optionally
    ``justification``, ``justification_source`` and ``on_error``. Calls execute one after
    another in order; each completion is its own durable commit.

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
    flows = [_start_item(run, item, on_error, sync=True) for item in calls]
    slots: list[Any] = [None] * len(flows)
    # Phase 1: decide every call; new ones stop at their Claim request.
    waiting: list[tuple[int, Any, Any]] = []
    try:
        for i, flow in enumerate(flows):
            try:
                gen, req, done = _begin(flow)
            except BaseException as exc:
                if return_exceptions and not isinstance(exc, CANCELLATION):
                    slots[i] = exc
                    continue
                raise
            if done is not None:
                slots[i] = done
            else:
                waiting.append((i, gen, req))
    except BaseException as exc:
        for i, gen, req in waiting:
            _abandon(flows[i], gen, req, exc)
        raise
    # Phase 2: one transaction for every claim of this turn; each flow sees its outcomes.
    claims = [(i, gen, req) for i, gen, req in waiting if isinstance(req, Claim)]
    outcomes: Any = []
    if claims:
        try:
            outcomes = run.store.apply([op for _, _, r in claims for op in r.ops], durable=True)
        except StoreError as exc:
            outcomes = exc
    ready: list[tuple[int, Any, Any]] = []
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
            slots[i] = stop.value
            _finish(flows[i], stop.value, None)
        except BaseException as exc:
            _finish(flows[i], None, exc)
            errors.append((i, exc))
    # Phase 3: execute in order; on a raising call, give back the claims not yet used.
    failure: BaseException | None = None
    for i, err in errors:
        if return_exceptions and not isinstance(err, CANCELLATION):
            slots[i] = err
        elif failure is None:
            failure = err
    while ready and failure is None:
        i, gen, req = ready.pop(0)
        try:
            slots[i] = _drive_sync(flows[i], gen, req)
        except BaseException as exc:
            if return_exceptions and not isinstance(exc, CANCELLATION):
                slots[i] = exc
            else:
                failure = exc
    if failure is not None:
        for i, gen, req in ready:
            _abandon(flows[i], gen, req, failure)
        raise failure
    return slots


def _start_item(run: Any, item: Mapping[str, Any], on_error: str | None, *, sync: bool) -> CallFlow:
    if not isinstance(item, Mapping) or not {"tool", "call_id", "input"} <= set(item):
        raise InvalidArgumentError(
            message="each call must be a mapping with tool, call_id and input"
        )
    return _start(
        run,
        item["tool"],
        call_id=item["call_id"],
        input=item["input"],
        justification=item.get("justification"),
        justification_source=item.get("justification_source", "developer"),
        on_error=item.get("on_error", on_error),
        extra={},
        sync=sync,
    )


def _abandon(flow: CallFlow | None, gen: Any, req: Any, why: BaseException | None) -> None:
    """Give back a claim that will not execute (its flow waits at ``Execute``)."""
    with contextlib.suppress(BaseException):
        if isinstance(req, Execute):
            gen.throw(Abandoned())
        else:
            gen.close()
    if flow is not None:
        error = InvalidTransitionError(
            message="not executed: another call of the same batch failed first "
            f"({type(why).__qualname__ if why else 'cancelled'}); the claim was released",
            details={"call_id": flow.binding.call_id},
        )
        _finish(flow, None, error)


# -- async driver --------------------------------------------------------------------------


class _ClaimBatcher:
    """Coalesce the claims of concurrent ``acall``s on one loop into one transaction."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: dict[int, tuple[Any, list[tuple[tuple[Any, ...], asyncio.Future[Any]]]]] = {}

    def submit(self, store: Any, ops: tuple[Any, ...]) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.loop.create_future()
        key = id(store)
        entry = self.pending.get(key)
        if entry is None:
            entry = (store, [])
            self.pending[key] = entry
            self.loop.call_soon(self._flush, key)
        entry[1].append((ops, fut))
        return fut

    def _flush(self, key: int) -> None:
        store, items = self.pending.pop(key)
        ops = [op for batch, _ in items for op in batch]
        try:
            outcomes: Any = store.apply(ops, durable=True)
        except StoreError as exc:
            outcomes = exc
        except BaseException as exc:  # not a store failure: every waiter sees it
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(exc)
            return
        at = 0
        for batch, fut in items:
            n = len(batch)
            value = outcomes if isinstance(outcomes, BaseException) else outcomes[at : at + n]
            at += n
            if not fut.done():
                fut.set_result(value)


_BATCHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _ClaimBatcher] = (
    weakref.WeakKeyDictionary()
)


def _batcher() -> _ClaimBatcher:
    loop = asyncio.get_running_loop()
    batcher = _BATCHERS.get(loop)
    if batcher is None:
        batcher = _ClaimBatcher(loop)
        _BATCHERS[loop] = batcher
    return batcher


async def _call_user_async(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except BaseException as exc:
        return False, exc
    return True, value


def _finish_abandoned_claim(gen: Any, fut: asyncio.Future[Any]) -> None:
    """The task was cancelled while its claim was in a batch: give the claim back."""
    try:
        reply = fut.result()
    except BaseException as exc:
        reply = exc
    try:
        req = gen.send(reply)
    except BaseException:
        return
    _abandon(None, gen, req, None)


async def _drive_async(flow: CallFlow, gen: Any, req: Any) -> ToolOutcome:
    try:
        while True:
            if isinstance(req, Claim):
                fut = _batcher().submit(flow.store, req.ops)
                try:
                    reply: Any = await asyncio.shield(fut)
                except asyncio.CancelledError:
                    fut.add_done_callback(lambda f: _finish_abandoned_claim(gen, f))
                    raise
            elif isinstance(req, Execute):
                reply = await _call_user_async(flow.tool.execute, flow.input, req.ctx)
            else:
                recover = flow.tool.recover
                assert recover is not None
                reply = await _call_user_async(recover, req.ctx)
            try:
                req = gen.send(reply)
            except StopIteration as stop:
                outcome: ToolOutcome = stop.value
                _finish(flow, outcome, None)
                return outcome
    except BaseException as exc:
        _finish(flow, None, exc)
        raise


async def acall(
    run: Any,
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
    flow = _start(
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
    gen, req, done = _begin(flow)
    if done is not None:
        return done
    return await _drive_async(flow, gen, req)


# -- delivery ------------------------------------------------------------------------------


def _outcome(rec: CheckpointRecord, *, replayed: bool) -> ToolOutcome:
    assert rec.result is not None
    return ToolOutcome(
        call_id=rec.binding.call_id,
        tool_name=rec.binding.tool_name,
        payload=rec.result.payload,
        is_error=rec.result.is_error,
        status=rec.status.value,
        revision=rec.revision,
        replayed=replayed,
    )


class _Delivery:
    """Claim/post/complete for several calls with one relaxed commit per step."""

    def __init__(self, run: Any, call_ids: Sequence[str], redeliver: bool) -> None:
        self.run = run
        self.store = run.store
        self.namespace = run.namespace
        self.call_ids = list(call_ids)
        self.redeliver = redeliver
        self.delivery_id = os.urandom(16).hex()
        self.claimed: dict[str, CheckpointRecord] = {}
        self.records: dict[str, CheckpointRecord] = {}

    def _get(self, call_id: str) -> CheckpointRecord:
        rec: CheckpointRecord | None = self.store.get(self.namespace, call_id)
        if rec is None:
            raise NotFoundError(
                message=f"no checkpoint {self.namespace}/{call_id}: nothing to deliver",
                details={"namespace": self.namespace, "call_id": call_id},
            )
        return rec

    def _span_transition(self, t: Transition, source: CheckpointRecord, won: bool) -> None:
        span = getattr(self.run, "span", None)
        with contextlib.suppress(Exception):
            if span is not None:
                span.transition(
                    name=t.name,
                    status_from=source.status.value,
                    status_to=t.next.status.value,
                    expected_revision=t.expected_revision,
                    revision=t.next.revision,
                    won=won,
                    at=t.next.updated_at.isoformat(),
                )

    def _swap_all(self, moves: list[tuple[Transition, CheckpointRecord]]) -> list[bool]:
        if not moves:
            return []
        try:
            won = self.store.apply(
                [SwapCheckpoint(t.expected_revision, t.next) for t, _ in moves], durable=False
            )
        except StoreError:
            return [False] * len(moves)  # outcome unknown: the re-read tells
        for (t, src), w in zip(moves, won, strict=True):
            self._span_transition(t, src, bool(w))
        return [bool(w) for w in won]

    def claim(self) -> bool:
        """Claim every call that is completed; return whether anything must be posted."""
        todo = set(self.call_ids)
        for _ in range(64):
            moves: list[tuple[Transition, CheckpointRecord]] = []
            for call_id in sorted(todo):
                rec = self._get(call_id)
                self.records[call_id] = rec
                at = max(now(), rec.updated_at)
                if rec.status is Status.DELIVERED:
                    todo.discard(call_id)
                elif rec.status is Status.DELIVERING:
                    if rec.delivery_fence == self.delivery_id:
                        self.claimed[call_id] = rec
                        todo.discard(call_id)
                    elif not self.redeliver:
                        raise DeliveryUncertainError(
                            message=f"call {self.namespace}/{call_id} was being delivered when "
                            "its deliverer stopped; the post may have been accepted. Check the "
                            "receiver, then deliver with redeliver=True (at-least-once)",
                            details={
                                "namespace": self.namespace,
                                "call_id": call_id,
                                "delivery_attempts": rec.delivery_attempts,
                            },
                        )
                    else:
                        stale = rec.delivery_fence or self.delivery_id
                        moves.append((release_delivery(rec, delivery_id=stale, at=at), rec))
                elif rec.status is Status.COMPLETED:
                    moves.append((claim_delivery(rec, delivery_id=self.delivery_id, at=at), rec))
                else:
                    raise InvalidTransitionError(
                        message=f"call {self.namespace}/{call_id} is {rec.status.value}: it "
                        "has no result to deliver",
                        details={
                            "namespace": self.namespace,
                            "call_id": call_id,
                            "status": rec.status.value,
                        },
                    )
            for (t, _src), won in zip(moves, self._swap_all(moves), strict=True):
                if won and t.next.status is Status.DELIVERING:
                    self.claimed[t.next.binding.call_id] = t.next
                    todo.discard(t.next.binding.call_id)
            if not todo:
                _hook_point("after-delivery-claim")
                return bool(self.claimed)
        raise DeliveryUncertainError(message="the store kept refusing the delivery claim")

    def release(self) -> None:
        moves = []
        for rec in self.claimed.values():
            at = max(now(), rec.updated_at)
            moves.append((release_delivery(rec, delivery_id=self.delivery_id, at=at), rec))
        self._swap_all(moves)

    def complete(self) -> None:
        _hook_point("after-post")
        for _ in range(8):
            moves = []
            for rec in list(self.claimed.values()):
                at = max(now(), rec.updated_at)
                moves.append((complete_delivery(rec, delivery_id=self.delivery_id, at=at), rec))
            for (t, _), won in zip(moves, self._swap_all(moves), strict=True):
                call_id = t.next.binding.call_id
                if won:
                    self.records[call_id] = t.next
                    del self.claimed[call_id]
                else:
                    fresh = self._get(call_id)
                    if (
                        fresh.status is not Status.DELIVERING
                        or fresh.delivery_fence != self.delivery_id
                    ):
                        self.records[call_id] = fresh
                        del self.claimed[call_id]
                    else:
                        self.claimed[call_id] = fresh
            if not self.claimed:
                return

    def payloads(self) -> dict[str, Any]:
        out = {}
        for call_id in self.call_ids:
            rec = self.claimed.get(call_id) or self.records[call_id]
            assert rec.result is not None
            out[call_id] = rec.result.payload
        return out


def _hook_point(name: str) -> None:
    from . import _guard_flow

    if _guard_flow.crash_point is not None:
        _guard_flow.crash_point(name)


def deliver(run: Any, call_id: str, post: Callable[[Any], Any], *, redeliver: bool = False) -> Any:
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
    d = _Delivery(run, [call_id], redeliver)
    if not d.claim():
        return None
    try:
        result = post(d.payloads()[call_id])
    except CANCELLATION:
        raise
    except BaseException:
        d.release()
        raise
    d.complete()
    return result


def deliver_many(
    run: Any,
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
    d = _Delivery(run, call_ids, redeliver)
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


async def adeliver(
    run: Any,
    call_id: str,
    post: Callable[[Any], Awaitable[Any] | Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Async ``deliver`` (``run.adeliver``): ``post`` may be async. Same semantics."""
    d = _Delivery(run, [call_id], redeliver)
    if not d.claim():
        return None
    try:
        result = post(d.payloads()[call_id])
        if inspect.isawaitable(result):
            result = await result
    except CANCELLATION:
        raise
    except BaseException:
        d.release()
        raise
    d.complete()
    return result
