"""``run.call_many``: the parallel tool calls of one model turn, claimed in one transaction.

Rules this module keeps:

- Three phases: every call is gated and decided in order (new ones stop at their claim);
  all the claims are committed in one transaction (``_drivers.commit``); then the calls
  execute one after another in order, each completion its own durable commit.
- A later item for a call id (or an effect key) already in the turn waits for phase 3
  and then decides from what the earlier one stored.
- If a call raises (and errors are not returned), the claims of the calls not executed
  yet are given back before the error propagates; nothing of the turn is claimed when a
  call fails before phase 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import StoreError
from ._call import CANCELLATION, Commit, join_claims
from ._drivers import abandon, begin, commit, drive_sync, finish, start_item
from ._flow import CallFlow
from ._seams import GuardedRun

__all__ = ["call_many"]


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
    turn = _Turn(
        run=run, flows=flows, slots=[None] * len(flows), return_exceptions=return_exceptions
    )
    waiting = _decide_all(turn)
    ready, errors = _claim_all(turn, waiting)
    _execute_in_order(turn, ready, errors)
    return turn.slots


#: A call of a turn waiting for its next step: ``(index, flow generator, its request)``;
#: ``(index, None, None)`` for a call not started yet (it repeats an earlier call).
_Step = tuple[int, Any, Any]


@dataclass(slots=True, kw_only=True)
class _Turn:
    """One ``call_many``: its flows, their result slots, and what happens to an error."""

    run: GuardedRun
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
    """Phase 1: gate and decide every call in order; new ones stop at their claim.

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
            effect = flow.call.effect or flow.action
            if flow.binding.key in seen or effect in seen_effects:
                waiting.append((i, None, None))
                continue
            seen.add(flow.binding.key)
            if effect is not None:
                seen_effects.add(effect)
            try:
                gen, req, done = begin(turn.run, flow, ask_sync=True)
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
            abandon(turn.run, turn.flows[i], gen, req, exc)
        raise
    return waiting


def _claim_all(
    turn: _Turn, waiting: list[_Step]
) -> tuple[list[_Step], list[tuple[int, BaseException]]]:
    """Phase 2: one transaction for every claim of the turn; each flow sees its outcomes.

    Returns:
        The calls ready for phase 3 (in order), and the calls whose flow raised on its
        claim's outcome.
    """
    run = turn.run
    claims = [req for _, _, req in waiting if _is_claim(req)]
    outcomes: Any = []
    if claims:
        try:
            outcomes = commit(run.store, (run,), join_claims(r.ops for r in claims))
        except StoreError as exc:
            outcomes = exc
    ready: list[_Step] = []
    errors: list[tuple[int, BaseException]] = []
    at = 0
    for i, gen, req in waiting:
        if not _is_claim(req):
            ready.append((i, gen, req))
            continue
        n = len(req.ops)
        try:
            if isinstance(outcomes, BaseException):
                ready.append((i, gen, gen.throw(outcomes)))
            else:
                ready.append((i, gen, gen.send(outcomes[at : at + n])))
        except StopIteration as stop:
            turn.slots[i] = stop.value
            finish(run, turn.flows[i], stop.value, None)
        except BaseException as exc:
            finish(run, turn.flows[i], None, exc)
            errors.append((i, exc))
        at += n
    return ready, errors


def _is_claim(req: Any) -> bool:
    return type(req) is Commit and req.claim


def _execute_in_order(
    turn: _Turn, ready: list[_Step], errors: list[tuple[int, BaseException]]
) -> None:
    """Phase 3: execute in order; on a raising call, give back the claims not yet used.

    Raises:
        The first error that is not kept (``return_exceptions``), after the release.
    """
    run = turn.run
    failure: BaseException | None = None
    for i, err in errors:
        if not turn.kept(i, err) and failure is None:
            failure = err
    while ready and failure is None:
        i, gen, req = ready.pop(0)
        try:
            if gen is None:  # a repeated call id: decided now, after the earlier item
                gen, req, done = begin(run, turn.flows[i])
                if done is not None:
                    turn.slots[i] = done
                    continue
            turn.slots[i] = drive_sync(run, turn.flows[i], gen, req)
        except BaseException as exc:
            if not turn.kept(i, exc):
                failure = exc
    if failure is not None:
        for i, gen, req in ready:
            abandon(run, turn.flows[i], gen, req, failure)
        raise failure
