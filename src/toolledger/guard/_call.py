"""The drivers of a guarded call: build it, run its flow with sync or async user code.

Private to the ``guard`` package (``_drivers`` uses it). Rules this module keeps:

- ``start`` validates everything before anything is written or asked (tool, options,
  justification, binding) and builds the flow; the flow opens the ``tool_call`` journal
  event and picks the attempt id once its gate lets the call proceed.
- ``finish`` tells telemetry and ends the event exactly once (if it opened); it never
  raises.
- Sync: once ``execute`` has returned, SIGINT is deferred (``DeferSigint``) until the
  flow has finished, so the completion commit is written before the interruption.
- Async: concurrent ``acall``s on one loop hand their claim ops to ``ClaimBatcher``,
  which commits them in one transaction; a task cancelled while waiting gives its claim
  back when the batch lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..approvals import ApprovalRequest
from ..checkpoint.model import Binding, fingerprint
from ..errors import InvalidArgumentError, InvalidTransitionError, StoreError
from ..journal._content import check_source, check_text
from ..tools import Tool, ToolOutcome
from ._approval_flow import GateFlow
from ._approval_gate import aask, ask, resolve
from ._effect_key import effect_key_for
from ._flow import CallFlow
from ._flow_state import CANCELLATION, Abandoned, Claim, Execute, Recover, join_claims
from ._seams import GuardedRun

try:  # the C functions: ``signal``'s wrappers map every handler to an enum (~20 us a call)
    from _signal import getsignal as _getsignal  # type: ignore[import-not-found,unused-ignore]
    from _signal import signal as _setsignal  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover (another interpreter)
    _getsignal, _setsignal = signal.getsignal, signal.signal

__all__ = [
    "ClaimBatcher",
    "DeferSigint",
    "abandon",
    "begin",
    "claim_batcher",
    "commit_claims",
    "drive_async",
    "drive_sync",
    "finish",
    "flush_journal",
    "start",
    "start_item",
]

_ON_ERROR = ("raise", "result")
_GATE_OPTIONS = frozenset({"approval", "approver"})

#: ``Tool.is_async`` per tool already asked (``inspect`` takes about a microsecond a call):
#: a Tool is frozen, so its answer never changes. Keyed by ``id`` with the tool kept in the
#: entry, so no id is reused while its entry exists; bounded.
_ASYNC_TOOLS: dict[int, tuple[Tool, bool]] = {}
_ASYNC_TOOLS_MAX = 1024


def _is_async(tool: Tool) -> bool:
    """``tool.is_async``, computed once per tool object."""
    hit = _ASYNC_TOOLS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    answer = tool.is_async
    if len(_ASYNC_TOOLS) >= _ASYNC_TOOLS_MAX:
        _ASYNC_TOOLS.clear()
    _ASYNC_TOOLS[id(tool)] = (tool, answer)
    return answer


def start(
    run: GuardedRun,
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
    """Validate a call and build its flow; nothing is written yet.

    ``extra`` may hold the call's ``approval`` and ``approver`` (they win over the tool's).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad tool, option, id or
            justification (before anything is stored or asked).
    """
    if not isinstance(tool, Tool):
        raise InvalidArgumentError(
            message=f"tool must be a toolledger.Tool (see toolledger.tool); got "
            f"{type(tool).__name__}"
        )
    unknown = set(extra) - _GATE_OPTIONS if extra else None
    if unknown:
        raise InvalidArgumentError(
            message=f"unexpected keyword arguments: {', '.join(sorted(unknown))}",
            details={"arguments": sorted(unknown)},
        )
    approval, approver = resolve(tool, extra)
    mode = tool.on_error if on_error is None else on_error
    if mode not in _ON_ERROR:
        raise InvalidArgumentError(
            message='on_error must be "raise" or "result"',
            details={"argument": "on_error", "value": repr(on_error)[:100]},
        )
    if sync and _is_async(tool):
        raise InvalidArgumentError(
            message=f"tool {tool.name} has an async execute/recover; use run.acall",
            details={"tool": tool.name},
        )
    # The journal event opens only once the gate lets the call proceed: check what it
    # would refuse now, before the gate stores or asks anything.
    check_text(justification, "justification")
    check_source(justification_source)
    run.require_running()
    binding = Binding(run.namespace, call_id, tool.name, tool.revision, fingerprint(input))
    # Scoped by the run's conversation when it has one (``toolledger.run(conversation_id=)``).
    effect = effect_key_for(tool, binding, input, getattr(run, "conversation_id", None))
    if effect is not None and not getattr(run.store, "effect_keys", False):
        raise InvalidArgumentError(
            message=f"tool {tool.name} has an effect key but {type(run.store).__name__} does "
            "not store effect keys (Store.effect_keys); refusing to run it without them",
            details={"tool": tool.name},
        )
    gate = GateFlow(run, tool, binding, input, justification, approval, mode, approver)
    return CallFlow(
        run=run,
        tool=tool,
        binding=binding,
        input=input,
        on_error=mode,
        gate=gate,
        justification=justification,
        justification_source=justification_source,
        effect=effect,
    )


def _first_action(flow: CallFlow) -> str:
    return flow.first_action or "execute"


def finish(flow: CallFlow, outcome: ToolOutcome | None, error: BaseException | None) -> None:
    """Tell telemetry and end the journal event; never raises.

    A call its gate stopped (waiting, denied) or that failed before its event opened has
    no event: there is nothing to end.
    """
    rec = flow.last
    handle = flow.handle
    if handle is None:
        if flow.replay_only and outcome is not None:
            _record_replay(flow, outcome)
        return
    facts = _span_facts(flow, outcome)
    with contextlib.suppress(Exception):  # telemetry never breaks a tool call
        handle.span.update(facts)
    try:
        carried = flow.end_carried
        if carried is not None:
            # The completion transaction stored this call's end record: end with exactly
            # what it says (the same fields), without writing it again.
            prepared, (status, _, _, _) = carried
            handle.end(status, carried=prepared)
            return
        # A replayed call changed nothing: its records stay buffered like a step's; any
        # other end is written at once.
        revision = outcome.revision if outcome else (rec.revision if rec else None)
        meta = flow.end_meta(replayed=facts["replayed"], recovered=facts["recovered"])
        handle.update(checkpoint=flow.checkpoint_link(revision))
        if outcome is not None:
            handle.end(
                "replayed" if outcome.replayed else "completed",
                outputs={"result": outcome.payload, "is_error": outcome.is_error},
                meta=meta,
                flush=not outcome.replayed,
            )
        else:
            status = "cancelled" if isinstance(error, CANCELLATION) else "failed"
            handle.end(status, error=error, meta=meta, flush=True)
    except Exception:  # recording never breaks the agent (the journal keeps run.errors)
        pass


def _span_facts(flow: CallFlow, outcome: ToolOutcome | None) -> dict[str, Any]:
    """What the call's span is told when the call is decided (the documented keys)."""
    rec = flow.last
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
    if flow.deduplicated_from is not None:
        facts["deduplicated_from"] = flow.deduplicated_from
    return facts


def _record_replay(flow: CallFlow, outcome: ToolOutcome) -> None:
    """Journal a replay as one ``tool_call`` record (status ``replayed``); never raises.

    It holds what a start and an end record would (inputs, justification, the stored
    result, meta, the checkpoint link) and stays buffered: the replay commits nothing.
    """
    rec = flow.last
    assert rec is not None
    assert rec.result is not None
    binding = flow.binding
    with contextlib.suppress(Exception):  # recording never breaks the agent (run.errors)
        flow.run.record_event(
            "tool_call",
            flow.tool.name,
            "replayed",
            justification=flow.justification,
            justification_source=flow.justification_source,
            inputs=flow.input if isinstance(flow.input, dict) else {"input": flow.input},
            outputs={"result": rec.result.payload, "is_error": rec.result.is_error},
            meta={
                "tool_revision": flow.tool.revision,
                "input_fingerprint": binding.input_fingerprint,
                "replayed": True,
                "recovered": False,
            },
            checkpoint=flow.checkpoint_link(rec.revision),
            parent=flow.run.requested_by(binding.call_id) or ...,
            facts=lambda: _span_facts(flow, outcome),  # asked only with telemetry
        )


# -- SIGINT deferral (sync finalization) ---------------------------------------------------


class DeferSigint:
    """Hold SIGINT while the completion is written, then hand it to the previous handler.

    Only in the main thread, and only when SIGINT has a Python handler (the default one
    raises ``KeyboardInterrupt``); an ignored SIGINT stays ignored.
    """

    __slots__ = ("_old", "pending")

    def __init__(self) -> None:
        self._old: Any = None
        self.pending = False

    def __enter__(self) -> DeferSigint:
        if threading.current_thread() is threading.main_thread():
            try:
                old = _getsignal(signal.SIGINT)
                if callable(old):
                    _setsignal(signal.SIGINT, self._handler)
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
        _setsignal(signal.SIGINT, old)
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


def commit_claims(store: Any, runs: Sequence[GuardedRun], ops: Sequence[Any]) -> Any:
    """Commit claim ops durably in one transaction, with the runs' buffered journal records.

    Each run's buffered records (the calls' ``tool_call`` start records and whatever was
    recorded before them) ride in the same transaction as one ``AppendEvents`` op, so the
    start record is stored before ``execute`` starts at no extra commit. If the
    transaction fails, or an append loses the race, the journal writes them itself.

    Returns:
        The claim ops' outcomes, or the ``StoreError`` the commit raised.
    """
    rides: list[Any] = []
    seen: set[int] = set()
    try:
        for run in runs:
            if id(run) in seen:
                continue
            seen.add(id(run))
            r = run.ride(store)
            if r is not None:
                rides.append(r)
        n = len(ops)
        try:
            out = store.apply([*ops, *(r.op for r in rides)], durable=True)
        except StoreError as exc:
            for r in rides:
                r.settle(exc)
            return exc
        for r, appended in zip(rides, out[n:], strict=True):
            r.settle(bool(appended))
        return out[:n]
    finally:
        for r in rides:  # an unexpected error: the records go back (settle is idempotent)
            r.settle(False)


def _perform_sync(flow: CallFlow, req: Any, shield: DeferSigint) -> Any:
    if isinstance(req, ApprovalRequest):
        return ask(flow.gate, req)
    if isinstance(req, Claim):
        return commit_claims(flow.store, (flow.run,), req.ops)
    if isinstance(req, Execute):
        ok, value = _call_user(flow.tool.execute, flow.input, req.ctx)
        if ok:
            shield.__enter__()
        return ok, value
    assert isinstance(req, Recover)
    recover = flow.tool.recover
    assert recover is not None
    flush_journal(flow)
    return _call_user(recover, req.ctx)


def flush_journal(flow: CallFlow) -> None:
    """Store the call's start record before ``recover`` runs (no claim carried it)."""
    with contextlib.suppress(Exception):  # recording never breaks the agent
        flow.run.flush()


def drive_sync(flow: CallFlow, gen: Any, req: Any) -> ToolOutcome:
    shield = DeferSigint()
    try:
        while True:
            reply = _perform_sync(flow, req, shield)
            try:
                req = gen.send(reply)
            except StopIteration as stop:
                outcome: ToolOutcome = stop.value
                finish(flow, outcome, None)
                return outcome
    except BaseException as exc:
        finish(flow, None, exc)
        raise
    finally:
        shield.__exit__()


def begin(flow: CallFlow, *, ask_sync: bool = False) -> tuple[Any, Any, ToolOutcome | None]:
    """Start the flow; return ``(gen, first request, outcome if it finished at once)``.

    With ``ask_sync`` the gate's approval requests are answered here (sync approvers), so
    the first request returned is past the gate (``call_many`` asks before it claims).
    """
    gen = flow.run_flow()
    try:
        req = next(gen)
        while ask_sync and isinstance(req, ApprovalRequest):
            req = gen.send(ask(flow.gate, req))
    except StopIteration as stop:
        outcome: ToolOutcome = stop.value
        finish(flow, outcome, None)
        return gen, None, outcome
    except BaseException as exc:
        finish(flow, None, exc)
        raise
    return gen, req, None


def start_item(
    run: GuardedRun, item: Mapping[str, Any], on_error: str | None, *, sync: bool
) -> CallFlow:
    if not isinstance(item, Mapping) or not {"tool", "call_id", "input"} <= set(item):
        raise InvalidArgumentError(
            message="each call must be a mapping with tool, call_id and input"
        )
    return start(
        run,
        item["tool"],
        call_id=item["call_id"],
        input=item["input"],
        justification=item.get("justification"),
        justification_source=item.get("justification_source", "developer"),
        on_error=item.get("on_error", on_error),
        extra={k: item[k] for k in ("approval", "approver") if k in item},
        sync=sync,
    )


def abandon(flow: CallFlow | None, gen: Any, req: Any, why: BaseException | None) -> None:
    """Give back a claim that will not execute (its flow waits at ``Execute``)."""
    with contextlib.suppress(BaseException):
        if gen is None:  # never started (a repeated call id waiting its turn)
            pass
        elif isinstance(req, Execute):
            gen.throw(Abandoned())
        else:
            gen.close()
    if flow is not None:
        error = InvalidTransitionError(
            message="not executed: another call of the same batch failed first "
            f"({type(why).__qualname__ if why else 'cancelled'}); the claim was released",
            details={"call_id": flow.binding.call_id},
        )
        finish(flow, None, error)


# -- async driver --------------------------------------------------------------------------


class ClaimBatcher:
    """Coalesce the claims of concurrent ``acall``s on one loop into one transaction."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: dict[
            int, tuple[Any, list[tuple[tuple[Any, ...], asyncio.Future[Any]]], list[Any]]
        ] = {}

    def submit(
        self, store: Any, ops: tuple[Any, ...], run: GuardedRun | None = None
    ) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.loop.create_future()
        key = id(store)
        entry = self.pending.get(key)
        if entry is None:
            entry = (store, [], [])
            self.pending[key] = entry
            self.loop.call_soon(self._flush, key)
        entry[1].append((ops, fut))
        if run is not None:
            entry[2].append(run)
        return fut

    def _flush(self, key: int) -> None:
        store, items, runs = self.pending.pop(key)
        ops = join_claims(batch for batch, _ in items)
        try:
            outcomes: Any = commit_claims(store, runs, ops)
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


_BATCHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ClaimBatcher] = (
    weakref.WeakKeyDictionary()
)


def claim_batcher() -> ClaimBatcher:
    loop = asyncio.get_running_loop()
    batcher = _BATCHERS.get(loop)
    if batcher is None:
        batcher = ClaimBatcher(loop)
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
    abandon(None, gen, req, None)


async def drive_async(flow: CallFlow, gen: Any, req: Any) -> ToolOutcome:
    try:
        while True:
            if isinstance(req, Claim):
                fut = claim_batcher().submit(flow.store, req.ops, flow.run)
                try:
                    reply: Any = await asyncio.shield(fut)
                except asyncio.CancelledError:
                    fut.add_done_callback(lambda f: _finish_abandoned_claim(gen, f))
                    raise
            elif isinstance(req, ApprovalRequest):
                reply = await aask(flow.gate, req)
            elif isinstance(req, Execute):
                reply = await _call_user_async(flow.tool.execute, flow.input, req.ctx)
            else:
                recover = flow.tool.recover
                assert recover is not None
                flush_journal(flow)
                reply = await _call_user_async(recover, req.ctx)
            try:
                req = gen.send(reply)
            except StopIteration as stop:
                outcome: ToolOutcome = stop.value
                finish(flow, outcome, None)
                return outcome
    except BaseException as exc:
        finish(flow, None, exc)
        raise
