"""Settle stuck tool calls: a person's decision (``resolve``), the tools' proofs (``reconcile``).

A call whose outcome is unknown stays ``executing`` or ``uncertain`` (``OUTCOME_UNKNOWN``)
until something proves what happened. ``reconcile`` asks each tool's own ``recover``;
``resolve`` records what a person found out.

Rules this module keeps:

- Only ``executing``/``uncertain`` calls are settled. An ``executing`` call may be held by
  a live attempt: refused (``FENCE_CONFLICT``, "a live attempt may hold it") unless
  ``force=True``.
- A settlement is one compare-and-swap along a decision rule of the transition table
  (``resolve_not_executed`` or ``resolve_completed``: the new record carries the
  ``resolution``, who, why, when, so the checkpoint history keeps it), in one transaction
  with the removal of the call's operation-journal entry, the release of effect keys the
  call holds (``not_executed`` only: the next call of that action may execute), and the
  decision's journal record: a ``resolution`` event under the call's ``tool_call`` event
  in its run, when a run's journal holds the call (another writer's append in between is
  retried on its own).
- Telemetry is told after the commit (a span, a log record, a count) and never blocks or
  fails a settlement.
- ``reconcile`` never executes a tool: it calls ``recover(input, ctx)`` (or ``recover(ctx)``
  for a one-parameter hook) with the input the journal recorded, and acts on a proof
  only: ``Recovered`` completes the call; ``NotRecovered``/``None`` with an empty operation
  journal releases it (proven pre-effect); anything else stays for a person.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .checkpoint import stored_result
from .checkpoint.model import RESOLUTION_OUTCOMES, CheckpointRecord, Status, fingerprint
from .checkpoint.transitions import resolve_completed, resolve_not_executed
from .errors import CheckpointError, InvalidArgumentError, NotFoundError, StoreBusyError
from .journal import find_call, point_row
from .store import StoreLike, store_for
from .store.base import AppendEvents, Op, ReleaseEffectKey, RemoveOperation, Store, SwapCheckpoint
from .telemetry import attributes as a
from .telemetry import report_resolution
from .tools import NotRecovered, OperationJournal, RecoverContext, Recovered, Tool

__all__ = ["ReconcileItem", "Settled", "reconcile", "resolve"]

#: Rounds of re-reading when another writer moves the record (or the run) meanwhile.
_ROUNDS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Settled:
    """What ``resolve`` did: the call's new status and where the decision was recorded.

    ``run_id``/``event_id``: the ``resolution`` journal event (``None`` when no run's
    journal holds the call, or the journal could not take it: ``journal_error`` says why).
    """

    namespace: str
    call_id: str
    tool_name: str
    outcome: str
    status: str
    revision: int
    by: str
    reason: str
    forced: bool
    run_id: str | None = None
    event_id: str | None = None
    journal_error: str | None = None


def resolve(
    db: StoreLike | None,
    call_id: str,
    *,
    namespace: str = "default",
    outcome: str,
    result: object = None,
    error: str | None = None,
    by: str,
    reason: str,
    force: bool = False,
    key: str | bytes | None = None,
) -> Settled:
    """Settle a stuck call by a person's decision; record who, why and when.

    Args:
        db: A ``Store``, a path or a URL.
        call_id, namespace: The call.
        outcome: ``"not_executed"`` (the claim is released: the next call of that id, or
            of the same action under a new id, executes), ``"completed"`` (``result`` is
            stored and delivered like any result) or ``"failed"`` (``error``, a text, is
            stored as an ``is_error`` result).
        by, reason: Who decided and why (1-1024 characters each).
        force: Settle an ``executing`` call (a live attempt may hold it).
        key: The journal key of a keyed run (default ``TOOLLEDGER_JOURNAL_KEY``).

    Raises:
        NotFoundError: ``NOT_FOUND``: no checkpoint for the call.
        InvalidTransitionError: ``INVALID_TRANSITION``: the call is not executing/uncertain.
        FenceConflictError: ``FENCE_CONFLICT``: executing without ``force``.
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
    """
    payload, is_error = _outcome_payload(outcome, result, error)
    store, owned = store_for(db)
    try:
        return _settle(
            store, namespace, call_id, outcome, payload, is_error, by, reason, force, key
        )
    finally:
        if owned:
            store.close()


def _outcome_payload(outcome: str, result: Any, error: str | None) -> tuple[Any, bool]:
    if outcome not in RESOLUTION_OUTCOMES:
        raise InvalidArgumentError(
            message=f"outcome must be one of {', '.join(RESOLUTION_OUTCOMES)}; got {outcome!r:.40}",
            details={"argument": "outcome"},
        )
    if outcome == "failed":
        if result is not None or not isinstance(error, str) or not error:
            raise InvalidArgumentError(
                message='outcome "failed" takes error (a text) and no result',
                details={"argument": "error"},
            )
        return error, True
    if error is not None:
        raise InvalidArgumentError(
            message=f'outcome "{outcome}" takes no error', details={"argument": "error"}
        )
    if outcome == "not_executed" and result is not None:
        raise InvalidArgumentError(
            message='outcome "not_executed" takes no result', details={"argument": "result"}
        )
    return result, False


def _settle(
    store: Store,
    namespace: str,
    call_id: str,
    outcome: str,
    payload: Any,
    is_error: bool,
    by: str,
    reason: str,
    force: bool,
    key: str | bytes | None,
) -> Settled:
    rec = store.get(namespace, call_id)
    if rec is None:
        raise NotFoundError(
            message=f"no checkpoint for call {namespace}/{call_id}",
            details={"namespace": namespace, "call_id": call_id},
        )
    located = find_call(store, namespace, call_id, created_at=_text(rec.created_at))
    for _ in range(_ROUNDS):
        when = max(datetime.now(timezone.utc), rec.updated_at)
        if outcome == "not_executed":
            t = resolve_not_executed(rec, at=when, by=by, reason=reason, force=force)
        else:
            t = resolve_completed(
                rec, at=when, by=by, reason=reason, result=payload, is_error=is_error, force=force
            )
        ops: list[Op] = [SwapCheckpoint(t.expected_revision, t.next)]
        ops.append(RemoveOperation(namespace, call_id, requires=0))
        if outcome == "not_executed":
            ops.extend(
                ReleaseEffectKey(namespace, row.key, call_id, requires=0)
                for row in store.list_effect_keys(namespace=namespace)
                if row.call_id == call_id
            )
        journal_error = None
        event_id = None
        content = _content(rec, t.next, store.operation_read(namespace, call_id))
        try:
            appended = _journal_op(store, located, rec, t.next, content, key)
        except CheckpointError as exc:
            appended, journal_error = None, exc.message
        if appended is not None:
            ops.append(appended[0])
            event_id = appended[1]
        outcomes = store.apply(ops, durable=True)
        if not outcomes[0]:
            fresh = store.get(namespace, call_id)
            if fresh is None:
                raise NotFoundError(
                    message=f"call {namespace}/{call_id} was erased meanwhile",
                    details={"namespace": namespace, "call_id": call_id},
                )
            rec = fresh
            continue  # moved meanwhile: decide again on what it is now
        if appended is not None and not outcomes[-1]:
            event_id, journal_error = _append_alone(store, located, rec, t.next, content, key)
        settled = Settled(
            namespace=namespace,
            call_id=call_id,
            tool_name=rec.binding.tool_name,
            outcome=outcome,
            status=t.next.status.value,
            revision=t.next.revision,
            by=by,
            reason=reason,
            forced=rec.status is Status.EXECUTING,
            run_id=located[0] if located and event_id else None,
            event_id=event_id,
            journal_error=journal_error,
        )
        _tell(rec, settled)
        return settled
    raise StoreBusyError(
        message=f"call {namespace}/{call_id} kept changing while it was being settled",
        details={"namespace": namespace, "call_id": call_id},
    )


def _text(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _content(
    before: CheckpointRecord, after: CheckpointRecord, operation: dict[str, Any] | None
) -> dict[str, Any]:
    res = after.resolution
    assert res is not None
    meta: dict[str, Any] = {
        "outcome": res.outcome,
        "by": res.by,
        "forced": res.forced,
        "status_from": before.status.value,
        "status_to": after.status.value,
        "uncertain_reason": before.uncertain_reason,
        "attempt_id": before.execution_fence,
    }
    if operation is not None:
        meta["operation"] = operation  # the entry the settlement removes, kept here
    content: dict[str, Any] = {"justification": res.reason, "meta": meta}
    if after.result is not None:
        content["outputs"] = {"result": after.result.payload, "is_error": after.result.is_error}
    return content


def _journal_op(
    store: Store,
    located: tuple[str, str] | None,
    before: CheckpointRecord,
    after: CheckpointRecord,
    content: Mapping[str, Any],
    key: str | bytes | None,
) -> tuple[AppendEvents, str] | None:
    if located is None:
        return None
    row, count = _row(store, located, before, after, content, key)
    return AppendEvents(located[0], (row,), expected_count=count, requires=0), row.event_id


def _row(
    store: Store,
    located: tuple[str, str],
    before: CheckpointRecord,
    after: CheckpointRecord,
    content: Mapping[str, Any],
    key: str | bytes | None,
) -> Any:
    ns, call_id = after.key
    return point_row(
        store,
        located[0],
        kind="resolution",
        name=before.binding.tool_name,
        status=after.resolution.outcome if after.resolution else "settled",
        parent_id=located[1],
        content=content,
        checkpoint={"namespace": ns, "call_id": call_id, "revision": after.revision},
        key=key,
    )


def _append_alone(
    store: Store,
    located: tuple[str, str] | None,
    before: CheckpointRecord,
    after: CheckpointRecord,
    content: Mapping[str, Any],
    key: str | bytes | None,
) -> tuple[str | None, str | None]:
    """The run moved under the settlement's append: append the record on its own."""
    assert located is not None
    for _ in range(_ROUNDS):
        try:
            row, count = _row(store, located, before, after, content, key)
            if store.append_events(located[0], [row], expected_count=count, durable=True):
                return row.event_id, None
        except CheckpointError as exc:
            return None, exc.message
    return None, "other writers kept appending to the run first"


def _tell(before: CheckpointRecord, settled: Settled) -> None:
    report_resolution(
        {
            a.GEN_AI_TOOL_NAME: settled.tool_name,
            a.GEN_AI_TOOL_CALL_ID: settled.call_id,
            a.TL_CHECKPOINT_NAMESPACE: settled.namespace,
            a.TL_CHECKPOINT_STATUS_FROM: before.status.value,
            a.TL_CHECKPOINT_STATUS: settled.status,
            a.TL_CHECKPOINT_REVISION: settled.revision,
            a.TL_RESOLUTION_OUTCOME: settled.outcome,
            a.TL_RESOLUTION_BY: settled.by,
            a.TL_RESOLUTION_FORCED: settled.forced,
            a.TL_RUN_ID: settled.run_id,
            a.TL_EVENT_ID: settled.event_id,
        }
    )


# -- reconcile: the tools' own proofs ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileItem:
    """One call of the reconcile queue and what reconcile did (or would do) with it.

    ``action``: ``complete`` (``recover`` proved the outcome), ``release`` (not proven,
    and the operation journal is empty: proven pre-effect), ``keep`` (left for a person),
    ``skip`` (executing: a live attempt may hold it; ``--force`` to act). ``applied`` is
    whether it was done (``False`` in a dry run). ``why`` says why, in words.
    """

    namespace: str
    call_id: str
    tool_name: str
    status: str
    action: str
    why: str
    applied: bool = False
    settled: Settled | None = None


def reconcile(
    db: StoreLike | None,
    tools: Iterable[Tool],
    *,
    namespace: str | None = None,
    apply: bool = False,
    force: bool = False,
    by: str = "toolledger reconcile",
    limit: int | None = None,
    key: str | bytes | None = None,
) -> list[ReconcileItem]:
    """Run each tool's ``recover`` over its ``executing``/``uncertain`` calls.

    A dry run (nothing written) unless ``apply``. ``Recovered(output)`` completes the call
    with ``output`` (``is_error`` kept); ``NotRecovered``/``None`` with an empty operation
    journal releases it (``not_executed``); anything else (not proven, a journal entry,
    ``recover`` raised, no ``recover``) keeps it for a person (``toolledger resolve``).
    ``executing`` calls are skipped unless ``force``. Every settlement is a ``resolve``
    decision by ``by``, its reason naming the proof.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``tools`` holds a non-Tool.
    """
    by_name: dict[str, Tool] = {}
    for tool in tools:
        if not isinstance(tool, Tool):
            raise InvalidArgumentError(
                message=f"reconcile takes Tool objects; got {type(tool).__name__}",
                details={"argument": "tools"},
            )
        by_name[tool.name] = tool
    store, owned = store_for(db)
    try:
        queue = store.list(status=["executing", "uncertain"], namespace=namespace, limit=None)
        out: list[ReconcileItem] = []
        for rec in queue:
            found = by_name.get(rec.binding.tool_name)
            if found is None or found.revision != rec.binding.tool_revision:
                continue
            out.append(_reconcile_one(store, found, rec, apply, force, by, key))
            if limit is not None and len(out) >= limit:
                break
        return out
    finally:
        if owned:
            store.close()


def _reconcile_one(
    store: Store,
    tool: Tool,
    rec: CheckpointRecord,
    apply: bool,
    force: bool,
    by: str,
    key: str | bytes | None,
) -> ReconcileItem:
    ns, call_id = rec.key

    def item(
        action: str, why: str, applied: bool = False, settled: Settled | None = None
    ) -> ReconcileItem:
        return ReconcileItem(
            namespace=ns,
            call_id=call_id,
            tool_name=tool.name,
            status=rec.status.value,
            action=action,
            why=why,
            applied=applied,
            settled=settled,
        )

    if rec.status is Status.EXECUTING and not force:
        why = "executing: a live attempt may hold it (--force when no process runs it)"
        return item("skip", why)
    if tool.recover is None:
        return item("keep", "the tool has no recover")
    located = find_call(store, ns, call_id, created_at=_text(rec.created_at))
    ctx = RecoverContext(
        binding=rec.binding,
        attempt_id=rec.execution_fence or "reconcile",
        operation=OperationJournal(store, ns, call_id),
        run_id=located[0] if located else "",
        reason=rec.uncertain_reason,
    )
    try:
        answer = call_recover(tool.recover, _input(store, rec, located), ctx)
    except Exception as exc:
        why = f"recover raised {type(exc).__qualname__}: {str(exc)[:200]}"
        return item("keep", why)
    if isinstance(answer, Recovered):
        outcome = "failed" if answer.is_error else "completed"
        why = "recover proved the outcome"
        if outcome == "failed" and not isinstance(answer.output, str):
            output_text = json.dumps(answer.output, default=str)[:1000]
        else:
            output_text = answer.output
        if not apply:
            return item("complete", why)
        try:
            settled = resolve(
                store, call_id, namespace=ns, outcome=outcome,
                result=None if outcome == "failed" else stored_result(answer.output, False)[0],
                error=output_text if outcome == "failed" else None,
                by=by, reason=why, force=force, key=key,
            )  # fmt: skip
        except CheckpointError as exc:  # moved meanwhile, or an unstorable proof: a person's
            return item("keep", f"{why}, but it was not settled: {exc.code}: {exc.message}")
        return item("complete", why, True, settled)
    if answer is None or isinstance(answer, NotRecovered):
        not_proven = getattr(answer, "reason", None) or "recover could not prove the outcome"
        if store.operation_read(ns, call_id) is not None:
            why = f"{not_proven}; the operation journal has an entry (the effect may have happened)"
            return item("keep", why)
        why = f"{not_proven}; the operation journal is empty (proven pre-effect)"
        if not apply:
            return item("release", why)
        try:
            settled = resolve(
                store, call_id, namespace=ns, outcome="not_executed", by=by, reason=why,
                force=force, key=key,
            )  # fmt: skip
        except CheckpointError as exc:
            return item("keep", f"{why}, but it was not released: {exc.code}: {exc.message}")
        return item("release", why, True, settled)
    why = f"recover answered {type(answer).__name__}, not Recovered/NotRecovered"
    return item("keep", why)


def _input(store: Store, rec: CheckpointRecord, located: tuple[str, str] | None) -> Any:
    """The call's input as its ``tool_call`` event recorded it (when it matches the binding)."""
    if located is None:
        return None
    for row in store.read_events(located[0]):
        if row.event_id != located[1]:
            continue
        try:
            inputs = json.loads(row.data).get("content", {}).get("inputs")
        except (ValueError, AttributeError):
            return None
        try:
            if fingerprint(inputs) == rec.binding.input_fingerprint:
                return inputs
        except CheckpointError:
            return None
        return None
    return None


def call_recover(recover: Any, input: Any, ctx: RecoverContext) -> Any:
    """Call ``recover(input, ctx)``, or ``recover(ctx)`` for a one-parameter hook; an
    ``async`` hook is run to completion here."""
    try:
        params = [
            p
            for p in inspect.signature(recover).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        params = []
    two = len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)
    answer = recover(input, ctx) if two else recover(ctx)
    if inspect.isawaitable(answer):
        return asyncio.run(_await(answer))
    return answer


async def _await(awaitable: Any) -> Any:
    return await awaitable
