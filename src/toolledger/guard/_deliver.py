"""Delivery through the checkpoint: claim (fenced), post the stored payload, record it.

``run.deliver``/``run.adeliver``/``run.deliver_many`` delegate here (and the adapters'
``deliver_results`` through ``post_once``/``apost_once``). Rules this module keeps:

- Every delivery transition is a relaxed commit (``durable=False``): losing one to a
  power failure can only repeat a delivery, never an execution.
- A store error is answered by re-reading (the delivery fence tells whether our claim
  landed); a claim the store keeps refusing raises that error (``post`` was not called).
- Only the claim holder completes or releases its claim, except ``redeliver=True``, which
  releases a stale claim on purpose (at-least-once).
- ``post`` gets private copies of the stored payloads (``_outcomes.handed_out``).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..checkpoint.model import CheckpointRecord, Status, Transition
from ..checkpoint.transitions import claim_delivery, complete_delivery, release_delivery
from ..errors import (
    DeliveryUncertainError,
    InvalidArgumentError,
    InvalidTransitionError,
    NotFoundError,
    StoreError,
)
from ..store.base import SwapCheckpoint
from ._call import CANCELLATION, handed_out
from ._seams import (
    DELIVERY_CLAIM_ROUNDS,
    DELIVERY_COMPLETE_ROUNDS,
    STORE_RETRIES,
    GuardedRun,
    after,
    reached,
    report_transition,
)

__all__ = [
    "Delivery",
    "adeliver",
    "apost_once",
    "deliver",
    "deliver_many",
    "mark_seen",
    "post_once",
]


class Delivery:
    """Claim/post/complete for several calls with one relaxed commit per step."""

    def __init__(self, run: GuardedRun, call_ids: Sequence[str], redeliver: bool) -> None:
        self.run = run
        self.store = run.store
        self.namespace = run.namespace
        self.call_ids = list(call_ids)
        self.redeliver = redeliver
        self.delivery_id = os.urandom(16).hex()
        self.claimed: dict[str, CheckpointRecord] = {}
        self.records: dict[str, CheckpointRecord] = {}
        self._store_errors: list[StoreError] = []

    def _get(self, call_id: str) -> CheckpointRecord:
        rec: CheckpointRecord | None = self.store.get(self.namespace, call_id)
        if rec is None:
            raise NotFoundError(
                message=f"no checkpoint {self.namespace}/{call_id}: nothing to deliver",
                details={"namespace": self.namespace, "call_id": call_id},
            )
        return rec

    def _swap_all(self, moves: list[tuple[Transition, CheckpointRecord]]) -> list[bool]:
        if not moves:
            return []
        try:
            won = self.store.apply(
                [SwapCheckpoint(t.expected_revision, t.next) for t, _ in moves], durable=False
            )
        except StoreError as exc:
            self._store_errors.append(exc)
            return [False] * len(moves)  # outcome unknown: the re-read tells
        for (t, src), w in zip(moves, won, strict=True):
            report_transition(self.run.span, t, src.status.value, bool(w))
        return [bool(w) for w in won]

    def claim(self) -> bool:
        """Claim every call that is completed; return whether anything must be posted."""
        todo = set(self.call_ids)
        for _ in range(DELIVERY_CLAIM_ROUNDS):
            moves: list[tuple[Transition, CheckpointRecord]] = []
            for call_id in sorted(todo):
                rec = self._get(call_id)
                self.records[call_id] = rec
                at = after(rec)
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
            if todo and len(self._store_errors) > STORE_RETRIES:
                # The store keeps refusing the claim (e.g. STORE_BUSY under another
                # writer's lock): nothing was posted, so that is the error, not
                # DELIVERY_UNCERTAIN. A claim that landed anyway is given back first.
                self._give_back_landed(todo)
                raise self._store_errors[-1]
            if not todo:
                reached("after-delivery-claim")
                return bool(self.claimed)
        raise DeliveryUncertainError(message="the store kept refusing the delivery claim")

    def _give_back_landed(self, todo: set[str]) -> None:
        """Before raising a claim failure: release what this delivery claimed after all."""
        with contextlib.suppress(StoreError):
            for call_id in sorted(todo):
                rec = self._get(call_id)
                if rec.status is Status.DELIVERING and rec.delivery_fence == self.delivery_id:
                    self.claimed[call_id] = rec
        self.release()

    def release(self) -> None:
        moves = []
        for rec in self.claimed.values():
            at = after(rec)
            moves.append((release_delivery(rec, delivery_id=self.delivery_id, at=at), rec))
        self._swap_all(moves)

    def complete(self) -> None:
        reached("after-post")
        for _ in range(DELIVERY_COMPLETE_ROUNDS):
            moves = []
            for rec in list(self.claimed.values()):
                at = after(rec)
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
        """``{call_id: a private copy of its stored payload}`` for ``post``."""
        out = {}
        for call_id in self.call_ids:
            out[call_id] = handed_out(self.claimed.get(call_id) or self.records[call_id])
        return out


def _check_post(post: object) -> None:
    if not callable(post):
        raise InvalidArgumentError(
            message=f"post must be callable (it is called with the stored payload); got "
            f"{type(post).__name__}; nothing was delivered",
            details={"argument": "post"},
        )


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
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``post`` is not callable (nothing
            is claimed).
        DeliveryUncertainError: ``DELIVERY_UNCERTAIN``: a previous delivery was interrupted
            after its claim (unless ``redeliver=True``).
        NotFoundError: ``NOT_FOUND``: no checkpoint for ``call_id``.
        InvalidTransitionError: ``INVALID_TRANSITION``: the call has no result yet.
        Exception: whatever ``post`` raised.
    """
    _check_post(post)
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
    _check_post(post)
    return post_once(Delivery(run, call_ids, redeliver), post)


async def adeliver(
    run: GuardedRun,
    call_id: str,
    post: Callable[[Any], Awaitable[Any] | Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Async ``deliver`` (``run.adeliver``): ``post`` may be async. Same semantics."""
    _check_post(post)
    d = Delivery(run, [call_id], redeliver)
    return await apost_once(d, lambda payloads: post(payloads[call_id]))


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


def mark_seen(run: GuardedRun, call_ids: Sequence[str]) -> list[str]:
    """Record that a model turn saw these calls' results: ``completed`` → ``delivered``.

    For results the framework posted itself (the adapters and journaled clients call it
    when a model turn that carried the results completed). Nothing is posted; each call
    goes through ``claim_delivery`` and ``complete_delivery`` (its history shows both),
    all in one relaxed commit. Ids that are not ``completed`` (unknown, not finished,
    already delivering or delivered) are left as they are: calling it again is harmless.

    Returns:
        The ids moved to ``delivered`` by this call, in the order given.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``call_ids`` is not a sequence of
            strs (nothing is written).
        StoreError: the store failed (nothing, or all of it, was written).
    """
    if isinstance(call_ids, str) or not all(isinstance(c, str) for c in call_ids):
        raise InvalidArgumentError(
            message="call_ids must be a sequence of call ids (strs)",
            details={"argument": "call_ids"},
        )
    store = run.store
    todo = list(dict.fromkeys(call_ids))
    moved: list[str] = []
    delivery_id = "seen-" + os.urandom(12).hex()
    for _ in range(DELIVERY_CLAIM_ROUNDS):
        ops: list[Any] = []
        moves: list[tuple[str, CheckpointRecord, Transition, Transition]] = []
        for call_id in todo:
            rec = store.get(run.namespace, call_id)
            if rec is None or rec.status is not Status.COMPLETED:
                continue
            claim = claim_delivery(rec, delivery_id=delivery_id, at=after(rec))
            done = complete_delivery(claim.next, delivery_id=delivery_id, at=after(claim.next))
            ops.append(SwapCheckpoint(claim.expected_revision, claim.next))
            ops.append(SwapCheckpoint(done.expected_revision, done.next, requires=len(ops) - 1))
            moves.append((call_id, rec, claim, done))
        if not ops:
            break
        out = store.apply(ops, durable=False)
        lost = []
        for i, (call_id, rec, claim, done) in enumerate(moves):
            report_transition(run.span, claim, rec.status.value, bool(out[2 * i]))
            report_transition(run.span, done, claim.next.status.value, bool(out[2 * i + 1]))
            if out[2 * i + 1]:
                moved.append(call_id)
            else:
                lost.append(call_id)  # another writer moved it: look again
        todo = lost
        if not todo:
            break
    order = {c: i for i, c in enumerate(call_ids)}
    return sorted(moved, key=order.__getitem__)
