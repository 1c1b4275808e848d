"""The drivers of a guarded call: build it, perform what its flow asks, sync or async.

``run.call``/``run.acall`` delegate here (``run.call_many``: ``_batch``; deliveries:
``_deliver``). The flow (``_flow.CallFlow``) does no I/O: it yields requests
(``_call``) and this module performs them.

Rules this module keeps:

- ``start`` validates everything before anything is written or asked (tool, options,
  justification, binding, effect key) and builds the frozen ``Call``.
- ``perform`` is the one place a flow's store reads and writes and its journal event
  happen; ``commit`` is the one journal-riding commit: a claim carries the runs'
  buffered records (the ``tool_call`` start record among them), a completion carries the
  call's end record gated on its CAS, so the journal costs a new call no commit of its
  own. A store error is thrown into the flow where it yielded.
- A new call costs at most two durable commits: create+claim (one transaction, before
  ``execute`` starts) and completion + operation-journal removal (one transaction, before
  anything is delivered).
- ``finish`` tells telemetry and ends the event exactly once (if it opened); it never
  raises. A call the gate finds done (a replay) is one buffered ``tool_call`` record,
  status ``replayed``.
- ``current_call()`` is the ``ExecuteContext`` of the call whose ``execute`` runs in this
  context (set around ``execute`` by both drivers), else ``None``.
- Sync: once ``execute`` has returned, SIGINT is deferred (``DeferSigint``) until the
  flow has finished, so the completion commit is written before the interruption.
- Async: concurrent ``acall``s on one loop hand their claims to ``ClaimBatcher``, which
  commits them in one transaction; a task cancelled while waiting gives its claim back
  when the batch lands. There is no ``await`` between ``execute`` returning and the
  completion commit.

Telemetry: what the guard sends (the telemetry layer maps it to attributes)
---------------------------------------------------------------------------
On the event's span (``handle.span``), in this order:

- ``span.transition(name=, status_from=, status_to=, expected_revision=, revision=, won=,
  at=)`` after every CAS (``create_checkpoint`` has ``status_from=None`` and
  ``expected_revision=-1``; ``won`` is ``False`` for a lost CAS). Transitions whose commit
  raised a store error are not reported (their outcome is learned by re-reading).
- ``span.end(event, error, facts)`` once, when the call ends (through the journal's
  ``handle.end(..., facts=)``; a replay's one record: ``record_event(facts=)``), with a
  frozen ``CallFacts``: the last checkpoint status and revision reached, what
  ``decide_checkpoint`` answered when the call first looked (``execute``, ``deliver``,
  ``reconcile-execution``, ``reconcile-delivery``, ``none``), ``replayed``, ``recovered``,
  ``deduplicated_from``, the tool's description, and ``link`` (``(trace id, span id)`` of
  the span that claimed the call, only when this call found another attempt's claim, i.e.
  resumed after a crash or raced a live worker). Nothing else is told to the span: no
  string-keyed updates.

The ids for ``link`` travel in the attempt id stored on the checkpoint
(``<32 hex>.<trace id>.<span id>``), so no extra write is needed.

Journal event: status ``completed`` (executed or recovered), ``replayed`` (the stored
payload, the tool did not run), ``failed`` (with the error: the tool's exception,
``OUTCOME_UNKNOWN``, ``BINDING_CONFLICT`` …) or ``cancelled`` (an interruption); outputs
``{"result": payload, "is_error": bool}``; meta (written with the end record, and in the
final event the span ends with): ``tool_revision``, ``input_fingerprint``,
``attempt_id``, ``replayed``, ``recovered`` (a replay's one record has no ``attempt_id``:
nothing was claimed).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from ..approvals import APPROVAL_MODES, ApprovalRequest, find_denial
from ..checkpoint.model import Binding, fingerprint
from ..errors import (
    CheckpointError,
    InvalidArgumentError,
    InvalidTransitionError,
    StoreError,
)
from ..journal import EventHandle, check_source, check_text
from ..store.base import capabilities_of
from ..telemetry import CallFacts, NoopSpan
from ..tools import ExecuteContext, OperationJournal, RecoverContext, Tool, ToolOutcome
from ._call import (
    CANCELLATION,
    Abandoned,
    Call,
    Commit,
    CreateReady,
    Execute,
    FindDenial,
    Open,
    PutApproval,
    Read,
    ReadApproval,
    ReadGate,
    ReadHolder,
    ReadOperation,
    ReadTombstone,
    RecordApproval,
    Recover,
    effect_key_for,
    join_claims,
)
from ._flow import CallFlow
from ._seams import LIVE_ATTEMPTS, STATUS_VALUE, GuardedRun, new_attempt_id

try:  # the C functions: ``signal``'s wrappers map every handler to an enum (~20 us a call)
    from _signal import getsignal as _getsignal  # type: ignore[import-not-found,unused-ignore]
    from _signal import signal as _setsignal  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover (another interpreter)
    _getsignal, _setsignal = signal.getsignal, signal.signal

__all__ = [
    "ASYNC_TOOLS",
    "ASYNC_TOOLS_MAX",
    "ClaimBatcher",
    "DeferSigint",
    "abandon",
    "acall",
    "begin",
    "call",
    "call_facts",
    "commit",
    "current_call",
    "drive_sync",
    "finish",
    "perform",
    "refuse",
    "refused",
    "start",
    "start_item",
]

_ON_ERROR = ("raise", "result")
_GATE_OPTIONS = frozenset({"approval", "approver"})

#: ``Tool.is_async`` per tool already asked (``inspect`` takes about a microsecond a call):
#: a Tool is frozen, so its answer never changes. Keyed by ``id`` with the tool kept in the
#: entry, so no id is reused while its entry exists; bounded.
ASYNC_TOOLS: dict[int, tuple[Tool, bool]] = {}
ASYNC_TOOLS_MAX = 1024

_CURRENT: ContextVar[ExecuteContext | None] = ContextVar("toolledger_current_call", default=None)


def current_call() -> ExecuteContext | None:
    """Return the ``ExecuteContext`` of the guarded call executing in this context.

    Set by ``run.call``/``run.acall``/``run.call_many`` (and the framework adapters, which
    go through them) around the tool's ``execute``, sync or async; ``None`` anywhere else
    (outside a tool, in ``recover``, in another thread or task the tool did not start).
    Framework tools whose signature cannot take the context read their call id and
    ``ctx.operation`` here.
    """
    return _CURRENT.get()


def _remember_async(tool: Tool) -> bool:
    """``tool.is_async``, computed on a miss of ``ASYNC_TOOLS`` (``start`` looks it up) and
    remembered there (bounded)."""
    answer = tool.is_async
    if len(ASYNC_TOOLS) >= ASYNC_TOOLS_MAX:
        ASYNC_TOOLS.clear()
    ASYNC_TOOLS[id(tool)] = (tool, answer)
    return answer


# -- build a call ----------------------------------------------------------------------------


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
    record_refusal: bool = False,
) -> CallFlow:
    """Validate a call and build its flow; nothing is written yet.

    ``extra`` may hold the call's ``approval`` and ``approver`` (they win over the tool's).
    With ``record_refusal``, a call refused on its arguments is recorded (``refuse``), then
    raised.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad tool, option, id or
            justification (before anything is stored or asked).
    """
    try:
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
        if extra or tool.approval is not None or tool.approver is not None:
            approval, approver = gate_options(tool, extra)
        else:
            approval, approver = None, None
        mode = tool.on_error if on_error is None else on_error
        if mode not in _ON_ERROR:
            raise InvalidArgumentError(
                message='on_error must be "raise" or "result"',
                details={"argument": "on_error", "value": repr(on_error)[:100]},
            )
        hit = ASYNC_TOOLS.get(id(tool)) if sync else None  # the tool's answer, once asked
        if sync and (hit[1] if hit is not None and hit[0] is tool else _remember_async(tool)):
            raise InvalidArgumentError(
                message=f"tool {tool.name} has an async execute/recover; use run.acall",
                details={"tool": tool.name},
            )
        # The journal event opens only once the gate lets the call proceed: check what it
        # would refuse now, before the gate stores or asks anything.
        if justification is not None:
            check_text(justification, "justification")
        if justification_source != "developer":
            check_source(justification_source)
        run.require_running()
        binding = Binding(run.namespace, call_id, tool.name, tool.revision, fingerprint(input))
        # Scoped by the run's conversation when it has one (``toolledger.run(conversation_id=)``).
        effect = conversation = None
        caps = capabilities_of(run.store)
        if tool.effect_key is not None:
            effect = effect_key_for(tool, binding, input, getattr(run, "conversation_id", None))
        elif not tool.independent and caps.effect_keys:
            # The same action under a new id (see ``_flow``): blocked while the namespace's
            # latest call of it is unknown; served while the conversation's is unseen. The
            # conversation: the run's, else the run itself (a resumed run id is the same one).
            conversation = getattr(run, "conversation_id", None) or run.run_id
        if effect is not None and not caps.effect_keys:
            raise InvalidArgumentError(
                message=f"tool {tool.name} has an effect key but {type(run.store).__name__} does "
                "not store effect keys (Capabilities.effect_keys); refusing to run it without them",
                details={"tool": tool.name},
            )
        call = Call(
            tool=tool,
            binding=binding,
            input=input,
            on_error=mode,
            run_id=run.run_id,
            justification=justification,
            justification_source=justification_source,
            approval=approval,
            approver=approver,
            effect=effect,
            conversation=conversation,
            approval_scope=(
                None if approval is None else getattr(run, "conversation_id", None) or run.run_id
            ),
        )
        return CallFlow(call, store_capabilities=caps)
    except InvalidArgumentError as exc:
        if record_refusal:
            refuse(run, None, exc, tool=tool, call_id=call_id, input=input)
        raise


def start_item(
    run: GuardedRun, item: Mapping[str, Any], on_error: str | None, *, sync: bool
) -> CallFlow:
    """``start`` for one item of ``call_many``."""
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


def gate_options(
    tool: Tool, extra: Mapping[str, Any]
) -> tuple[str | None, Callable[..., Any] | None]:
    """Return the call's ``(approval mode, approver)``: the call's keywords win over the tool's.

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


# -- the calls -------------------------------------------------------------------------------


def call(
    run: GuardedRun,
    tool: Tool,
    *,
    call_id: str,
    input: object,
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
        record_refusal=True,
    )
    return drive_sync(run, flow, flow.run())


async def acall(
    run: GuardedRun,
    tool: Tool,
    *,
    call_id: str,
    input: object,
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
        record_refusal=True,
    )
    gen, req, done = begin(run, flow, sync=False)
    if done is not None:
        return done
    return await _drive_async(run, flow, gen, req)


# -- performing a flow's requests ------------------------------------------------------------


def perform(run: GuardedRun, flow: CallFlow, req: Any) -> Any:
    """Perform one store or journal request of ``flow``; return its answer.

    The one place a flow's reads and writes happen (the user-code requests, ``Execute``,
    ``Recover`` and ``ApprovalRequest``, are the drivers' own). Raises what the store
    raised (the driver throws it into the flow).
    """
    store = run.store
    kind = type(req)
    if kind is Read:
        return store.get(*req.key)
    if kind is Commit:
        if req.claim:
            return commit(store, (run,), req.ops)
        if req.end is not None:
            return _commit_with_end(run, flow, req)
        return store.apply(list(req.ops), durable=req.durable)
    if kind is ReadGate:
        if flow.store_capabilities.read_with_approval:  # declared: it has the method
            reads_both: Any = store
            return reads_both.get_with_approval(*req.key)
        return store.get(*req.key), None
    if kind is Open:
        return _open_event(run, flow)
    if kind is ReadOperation:
        return OperationJournal(store, *req.key).read()
    if kind is ReadHolder:
        return store.effect_key_holder(req.namespace, req.key)
    if kind is ReadApproval:
        return store.approval_get(*req.key)
    if kind is FindDenial:
        return find_denial(store, req.binding, req.conversation)
    if kind is PutApproval:
        return store.approval_put(req.record, expected_revision=req.expected_revision)
    if kind is CreateReady:
        return store.create_if_absent(req.record, durable=True)[1]
    if kind is ReadTombstone:
        return store.tombstone(*req.key)
    if kind is RecordApproval:
        try:
            run.record_point(
                "approval",
                req.tool_name,
                status=req.status,
                approval=req.approval,
                checkpoint=req.checkpoint,
                parent=None,
            )
            if req.flush:
                run.flush()
        except Exception:
            if run.strict:
                raise
            # recording never breaks the agent (the journal keeps run.errors)
        return None
    raise AssertionError(f"not a store request: {kind.__name__}")  # pragma: no cover


def commit(
    store: Any,
    runs: Sequence[GuardedRun],
    ops: Sequence[Any],
    *,
    durable: bool = True,
    end: Any = None,
    carried: list[bool] | None = None,
) -> Any:
    """Apply ``ops`` in one transaction with the runs' journal records riding it.

    Each run's buffered records (the calls' ``tool_call`` start records and whatever was
    recorded before them) ride as one ``AppendEvents`` op, so they are stored before
    ``execute`` starts at no extra commit. With ``end`` (one run's prepared end record),
    the append is gated on op 0 winning (a completion's CAS), and ``carried`` gets whether
    the end record is in the chain. If the transaction fails, or an append loses the
    race, the journal writes the records itself. Recording never breaks the call.

    Returns:
        The ops' outcomes.

    Raises:
        StoreError: what the commit raised (its outcome may be unknown).
    """
    rides: list[Any] = []
    all_ops = list(ops)
    n = len(all_ops)
    won = settled = False
    requires = None if end is None else 0  # an end record is gated on the completion's CAS
    try:
        seen: set[int] = set()
        for run in runs:
            if id(run) in seen:
                continue
            seen.add(id(run))
            try:
                ride = run.ride(store, end, requires)
            except Exception:  # recording never breaks the call
                ride = None
            if ride is not None:
                rides.append(ride)
                all_ops.append(ride.op)
        try:
            out = store.apply(all_ops, durable=durable)
        except StoreError as exc:
            for ride in rides:
                ride.settle(exc, keep_extra=False)
            raise
        won = bool(out[0]) if n else False
        for ride, appended in zip(rides, out[n:], strict=True):
            ride.settle(bool(appended), keep_extra=won)
        settled = True
        return out[:n]
    finally:
        if not settled:  # an unexpected error: the records go back (settle is idempotent)
            for ride in rides:
                ride.settle(False, keep_extra=won)
        if carried is not None:
            carried.append(bool(rides) and rides[0].carried)


def _commit_with_end(run: GuardedRun, flow: CallFlow, req: Commit) -> Any:
    """A completion: its end record rides gated on the CAS (when the store gates appends)."""
    end = req.end
    assert end is not None
    prepared = None
    handle = flow.handle
    store = run.store
    if (
        flow.store_capabilities.gated_append
        and isinstance(handle, EventHandle)
        and not handle.ended
    ):
        try:
            prepared = run.prepare_end(
                handle,
                end.status,
                outputs=end.outputs,
                meta=end.meta,
                checkpoint=end.checkpoint,
                checked=True,  # the flow's own meta and link (``CallFlow.end_fields``)
            )
        except Exception:  # a payload the journal refuses: the normal end path says so
            prepared = None
    if prepared is None:
        return store.apply(list(req.ops), durable=req.durable)
    carried: list[bool] = []
    try:
        return commit(store, (run,), req.ops, durable=req.durable, end=prepared, carried=carried)
    finally:
        if carried and carried[0]:
            flow.end_carried = (prepared, end)


def _open_event(run: GuardedRun, flow: CallFlow) -> tuple[str, Any]:
    """Start the call's ``tool_call`` journal event; answer ``(attempt id, span)``."""
    call = flow.call
    binding = call.binding
    flow.handle = handle = run.begin_event(
        "tool_call",
        call.tool.name,
        justification=call.justification,
        justification_source=call.justification_source,
        inputs=call.input if isinstance(call.input, dict) else {"input": call.input},
        meta={"tool_revision": call.tool.revision, "input_fingerprint": binding.input_fingerprint},
        checkpoint={"namespace": binding.namespace, "call_id": binding.call_id, "revision": None},
        # Requested by a journaled model call: that call's child.
        parent=run.requested_by(binding.call_id) or ...,
        flush=False,  # the start record rides in the claim transaction (``commit``)
        # ``start`` checked the justification and source, a tool's name is valid, and the
        # meta and link are built here from the checked binding and tool.
        checked=True,
    )
    span = getattr(handle, "span", None)
    attempt = new_attempt_id(getattr(span, "trace_id", None), getattr(span, "span_id", None))
    LIVE_ATTEMPTS.add(attempt)  # until ``finish``: a live attempt holds its claim
    return attempt, None if type(span) is NoopSpan else span


def _execute_context(run: GuardedRun, flow: CallFlow, req: Execute) -> ExecuteContext:
    return ExecuteContext(
        binding=req.binding,
        attempt_id=req.attempt_id,
        operation=OperationJournal(run.store, *flow.key),
        run_id=flow.call.run_id,
        justification=flow.call.justification,
    )


def _recover_context(run: GuardedRun, flow: CallFlow, req: Recover) -> RecoverContext:
    with contextlib.suppress(Exception):  # the start record is stored before recover runs
        run.flush()
    return RecoverContext(
        binding=req.binding,
        attempt_id=req.attempt_id,
        operation=OperationJournal(run.store, *req.binding.key),
        run_id=flow.call.run_id,
        reason=req.reason,
        error=req.error,
    )


# -- ending a call ---------------------------------------------------------------------------


def finish(
    run: GuardedRun, flow: CallFlow, outcome: ToolOutcome | None, error: BaseException | None
) -> None:
    """Tell telemetry and end the journal event; never raises.

    A call its gate stopped (waiting, denied) or that failed before its event opened has
    no event: there is nothing to end.
    """
    LIVE_ATTEMPTS.discard(flow.attempt_id)
    handle = flow.handle
    if handle is None:
        if flow.replay_only and outcome is not None:
            _record_replay(run, flow, outcome)
        elif refused(error):
            assert isinstance(error, CheckpointError)
            refuse(run, flow.call, error)
        return
    try:
        carried = flow.end_carried
        if carried is not None:
            # The completion transaction stored this call's end record: end with exactly
            # what it says (the same fields), without writing it again. Without a span
            # (telemetry off) nobody is told the facts: they are not derived.
            prepared, fields = carried
            facts = None if flow.span is None else call_facts(flow, outcome)
            handle.end(fields.status, carried=prepared, facts=facts)
            return
        facts = call_facts(flow, outcome)
        # A replayed call changed nothing: its records stay buffered like a step's; any
        # other end is written at once.
        rec = flow.last
        revision = outcome.revision if outcome else (rec.revision if rec else None)
        meta = flow.end_meta(replayed=facts.replayed, recovered=facts.recovered)
        link = flow.checkpoint_link(revision)
        if outcome is not None:
            handle.end(
                "replayed" if outcome.replayed else "completed",
                outputs={"result": outcome.payload, "is_error": outcome.is_error},
                meta=meta,
                checkpoint=link,
                facts=facts,
                flush=not outcome.replayed,
            )
        elif refused_after_open(flow, error):
            # Decided after its event opened, yet never run: refused like the others.
            assert isinstance(error, CheckpointError)
            meta = {**meta, "refused": error.code}
            if "same_action_as" in error.details:
                meta["same_action_as"] = error.details["same_action_as"]
            handle.end("refused", error=error, meta=meta, checkpoint=link, facts=facts, flush=True)
        else:
            status = "cancelled" if isinstance(error, CANCELLATION) else "failed"
            handle.end(status, error=error, meta=meta, checkpoint=link, facts=facts, flush=True)
    except Exception:  # recording never breaks the agent (the journal keeps run.errors)
        return  # (a ``try``, not ``contextlib.suppress``: a replay's path is kept short)


def call_facts(flow: CallFlow, outcome: ToolOutcome | None) -> CallFacts:
    """What the call's span is told, once, when the call ends."""
    rec = flow.last
    link = flow.link
    return CallFacts(
        status=outcome.status if outcome else (STATUS_VALUE[rec.status] if rec else "none"),
        revision=outcome.revision if outcome else (rec.revision if rec else -1),
        action=flow.first_action or "execute",
        replayed=bool(outcome and outcome.replayed),
        recovered=bool(outcome and outcome.recovered),
        deduplicated_from=flow.deduplicated_from,
        description=flow.call.tool.description or None,
        link=None if link is None else (link["trace_id"], link["span_id"]),
    )


#: The codes of a call the guard refuses before its event opens (it never ran): journaled
#: as a ``tool_call`` event with status ``refused`` and the error, its span an error with
#: ``error.type`` = the code; one decided after its event opened ends that event as
#: ``refused`` (``refused_after_open``). A denial is not among them: its ``approval`` event (outcome
#: ``deny``) is the journal's record of it, as it always was.
REFUSED_CODES = frozenset({"BINDING_CONFLICT", "TOMBSTONED", "OUTCOME_UNKNOWN", "INVALID_ARGUMENT"})


def refused(error: BaseException | None) -> bool:
    """Whether ``error`` is the guard refusing a call (a code of ``REFUSED_CODES``)."""
    return (
        isinstance(error, CheckpointError)
        and not isinstance(error, StoreError)
        and error.code in REFUSED_CODES
    )


def refused_after_open(flow: CallFlow, error: BaseException | None) -> bool:
    """Whether a call whose event opened was refused without running in this attempt.

    A code of ``REFUSED_CODES`` decided on the store's records (``TOMBSTONED`` on creating
    the checkpoint, ``BINDING_CONFLICT``, ``OUTCOME_UNKNOWN`` of the same-action rule,
    ``details["same_action_as"]``). An ``OUTCOME_UNKNOWN`` about the call's own earlier
    attempt (it may have happened) stays a failure.
    """
    if flow.executed or not refused(error):
        return False
    assert isinstance(error, CheckpointError)
    if error.code != "OUTCOME_UNKNOWN":
        return True
    return isinstance(error.details, Mapping) and isinstance(
        error.details.get("same_action_as"), str
    )


def refuse(
    run: GuardedRun,
    call: Call | None,
    error: CheckpointError,
    *,
    tool: Tool | None = None,
    call_id: Any = None,
    input: Any = None,
) -> None:
    """Journal a call the guard refused before its event opened; never raises.

    One ``tool_call`` record, status ``refused``, with the error (its code), the input
    when it is JSON, and the checkpoint link; its span ends with ``error.type`` = the code.
    Buffered like a replay's record: the refusal commits nothing of its own.
    ``call`` is the built call, else ``tool``/``call_id``/``input`` as given (``start``
    refused them).
    """
    if call is not None:
        tool, call_id, input = call.tool, call.binding.call_id, call.input
    if not isinstance(tool, Tool):
        return
    meta: dict[str, Any] = {"tool_revision": tool.revision, "refused": error.code}
    if call is not None:
        meta["input_fingerprint"] = call.binding.input_fingerprint
    link = None
    if isinstance(call_id, str) and call_id:
        link = {"namespace": run.namespace, "call_id": call_id, "revision": None}
    parent = run.requested_by(call_id) if isinstance(call_id, str) else None
    inputs = input if isinstance(input, dict) else {"input": input}
    for given in (inputs, None):  # an input the journal cannot store: recorded without it
        try:
            run.record_event(
                "tool_call",
                tool.name,
                "refused",
                justification=None if call is None else call.justification,
                justification_source="developer" if call is None else call.justification_source,
                inputs=given,
                meta=meta,
                checkpoint=link,
                parent=parent or ...,
                error=error,
            )
            return
        except Exception:  # recording never breaks the agent (the journal keeps run.errors)
            continue


def _record_replay(run: GuardedRun, flow: CallFlow, outcome: ToolOutcome) -> None:
    """Journal a replay as one ``tool_call`` record (status ``replayed``); never raises.

    It holds what a start and an end record would (inputs, justification, the stored
    result, meta, the checkpoint link) and stays buffered: the replay commits nothing.
    """
    rec = flow.last
    assert rec is not None
    assert rec.result is not None
    call = flow.call
    binding = call.binding
    try:
        # The name, justification, source and link were checked when the call started.
        run.record_checked_event(
            "tool_call",
            call.tool.name,
            "replayed",
            justification=call.justification,
            justification_source=call.justification_source,
            inputs=call.input if isinstance(call.input, dict) else {"input": call.input},
            outputs={"result": rec.result.payload, "is_error": rec.result.is_error},
            meta={
                "tool_revision": call.tool.revision,
                "input_fingerprint": binding.input_fingerprint,
                "replayed": True,
                "recovered": False,
            },
            checkpoint=flow.checkpoint_link(rec.revision),
            parent=run.requested_by(binding.call_id) or ...,
            facts=lambda: call_facts(flow, outcome),  # asked only with telemetry
        )
    except Exception:  # recording never breaks the agent (the journal keeps run.errors)
        return  # (a ``try``, not ``contextlib.suppress``: a replay's path is kept short)


# -- SIGINT deferral (sync finalization) ---------------------------------------------------


class DeferSigint:
    """Hold SIGINT while the completion is written, then hand it to the previous handler.

    Only in the main thread, and only when SIGINT has a Python handler (the default one
    raises ``KeyboardInterrupt``); an ignored SIGINT stays ignored.
    Holding starts when it is made; ``__exit__`` (or leaving a ``with`` block) ends it.
    """

    __slots__ = ("_old", "pending")

    def __init__(self) -> None:
        self._old: Any = None
        self.pending = False
        try:
            old = _getsignal(signal.SIGINT)
            if callable(old):
                # Raises ValueError outside the main thread of the main interpreter.
                _setsignal(signal.SIGINT, self._handler)
                self._old = old
        except (ValueError, OSError):  # another thread or interpreter: nothing to hold
            self._old = None

    def __enter__(self) -> DeferSigint:
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


#: Result types that are never awaitable (checked by exact type, before ``inspect``).
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


def _call_user(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    try:
        value = fn(*args)
    except BaseException as exc:
        return False, exc
    if type(value) not in _PLAIN and inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()
        return False, TypeError(f"{getattr(fn, '__name__', fn)!r} returned an awaitable; use acall")
    return True, value


def ask(call: Call, request: ApprovalRequest) -> Any:
    """Return the call's approver's answer to ``request`` (sync calls).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for an async approver (use ``acall``).
        Exception: whatever the approver raised.
    """
    approver = call.approver if call.approval is not None else None
    answer = approver(request) if approver is not None else None
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()
        raise InvalidArgumentError(
            message=f"the approver of {call.tool.name} is async; use run.acall",
            details={"tool": call.tool.name},
        )
    return answer


async def _aask(call: Call, request: ApprovalRequest) -> Any:
    """Return the approver's answer to ``request``, awaited when it is awaitable."""
    approver = call.approver if call.approval is not None else None
    answer = approver(request) if approver is not None else None
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def drive_sync(run: GuardedRun, flow: CallFlow, gen: Any, req: Any = None) -> ToolOutcome:
    """Perform ``flow``'s requests, from ``req`` on (``None``: from the flow's start),
    until it ends; return its outcome."""
    shield: DeferSigint | None = None
    call = flow.call
    reply: Any = None
    send = gen.send
    try:
        while True:
            if req is None:
                try:
                    req = send(reply)  # the first ``send(None)`` starts the flow
                except StopIteration as stop:
                    outcome: ToolOutcome = stop.value
                    finish(run, flow, outcome, None)
                    return outcome
                send = gen.send
            kind = type(req)
            if kind is Execute:
                ctx = _execute_context(run, flow, req)
                token = _CURRENT.set(ctx)
                try:
                    reply = _call_user(call.tool.execute, call.input, ctx)
                finally:
                    _CURRENT.reset(token)
                if reply[0] and shield is None:
                    shield = DeferSigint()
            elif kind is Recover:
                recover = call.tool.recover
                assert recover is not None
                reply = _call_user(recover, _recover_context(run, flow, req))
            elif kind is ApprovalRequest:
                reply = ask(call, req)
            else:
                try:
                    reply = perform(run, flow, req)
                except StoreError as exc:
                    send, reply = gen.throw, exc
            req = None
    except BaseException as exc:
        finish(run, flow, None, exc)
        raise
    finally:
        if shield is not None:
            shield.__exit__()


def begin(
    run: GuardedRun, flow: CallFlow, *, sync: bool = True, ask_sync: bool = False
) -> tuple[Any, Any, ToolOutcome | None]:
    """Start the flow; return ``(gen, first request, outcome if it finished at once)``.

    The flow's store requests before its first claim, user code or approver request are
    performed here (the gate's reads; a replay ends here). With ``ask_sync`` the gate's
    approval requests are answered here too (``call_many`` asks before it claims).
    """
    gen = flow.run()
    try:
        req = next(gen)
        while True:
            kind = type(req)
            if kind is Execute or kind is Recover or (kind is Commit and req.claim):
                break
            send = gen.send
            if kind is ApprovalRequest:
                if not ask_sync:
                    break
                reply = ask(flow.call, req)
            else:
                try:
                    reply = perform(run, flow, req)
                except StoreError as exc:
                    send, reply = gen.throw, exc
            req = send(reply)
    except StopIteration as stop:
        outcome: ToolOutcome = stop.value
        finish(run, flow, outcome, None)
        return gen, None, outcome
    except BaseException as exc:
        finish(run, flow, None, exc)
        raise
    return gen, req, None


def abandon(
    run: GuardedRun,
    flow: CallFlow,
    gen: Any,
    req: Any,
    why: BaseException | None,
    *,
    end_event: bool = True,
) -> None:
    """Give back a claim that will not execute (its flow waits at ``Execute``)."""
    with contextlib.suppress(BaseException):
        if gen is None:  # never started (a repeated call id waiting its turn)
            pass
        elif isinstance(req, Execute):
            req = gen.throw(Abandoned())
            while True:  # the give-back's own reads and writes
                send = gen.send
                try:
                    reply = perform(run, flow, req)
                except StoreError as exc:
                    send, reply = gen.throw, exc
                req = send(reply)
        else:
            gen.close()
    if end_event:
        error = InvalidTransitionError(
            message="not executed: another call of the same batch failed first "
            f"({type(why).__qualname__ if why else 'cancelled'}); the claim was released",
            details={"call_id": flow.binding.call_id},
        )
        finish(run, flow, None, error)


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
            outcomes: Any = commit(store, runs, ops)
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


def _finish_abandoned_claim(
    run: GuardedRun, flow: CallFlow, gen: Any, fut: asyncio.Future[Any]
) -> None:
    """The task was cancelled while its claim was in a batch: give the claim back."""
    try:
        reply = fut.result()
    except BaseException as exc:
        reply = exc
    try:
        req = gen.throw(reply) if isinstance(reply, BaseException) else gen.send(reply)
    except BaseException:
        return
    abandon(run, flow, gen, req, None, end_event=False)


async def _drive_async(run: GuardedRun, flow: CallFlow, gen: Any, req: Any) -> ToolOutcome:
    try:
        while True:
            kind = type(req)
            send = gen.send
            if kind is Commit and req.claim:
                fut = claim_batcher().submit(run.store, req.ops, run)
                try:
                    reply: Any = await asyncio.shield(fut)
                except asyncio.CancelledError:
                    fut.add_done_callback(lambda f: _finish_abandoned_claim(run, flow, gen, f))
                    raise
                if isinstance(reply, StoreError):
                    send = gen.throw
            elif kind is ApprovalRequest:
                reply = await _aask(flow.call, req)
            elif kind is Execute:
                ctx = _execute_context(run, flow, req)
                token = _CURRENT.set(ctx)
                try:
                    reply = await _call_user_async(flow.call.tool.execute, flow.call.input, ctx)
                finally:
                    _CURRENT.reset(token)
            elif kind is Recover:
                recover = flow.call.tool.recover
                assert recover is not None
                reply = await _call_user_async(recover, _recover_context(run, flow, req))
            else:
                try:
                    reply = perform(run, flow, req)
                except StoreError as exc:
                    send, reply = gen.throw, exc
            try:
                req = send(reply)
            except StopIteration as stop:
                outcome: ToolOutcome = stop.value
                finish(run, flow, outcome, None)
                return outcome
    except BaseException as exc:
        finish(run, flow, None, exc)
        raise
