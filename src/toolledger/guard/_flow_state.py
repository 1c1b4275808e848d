"""What a guarded call's flow yields to its driver, and the state one flow keeps.

Rules this module keeps:

- The requests (``Claim``, ``Execute``, ``Recover``; the gate's ``ApprovalRequest``) are
  all a flow ever asks of its driver; ``Abandoned`` is the one thing a driver throws in.
- ``FlowState`` holds one call's facts (binding, attempt, event handle, what it last
  read) and its store-error budget; the concerns of the flow (``_flow_outcomes``,
  ``_flow_telemetry``, ``_flow_commit``, ``_flow``) build on it. Nothing here writes.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..approvals import ApprovalRequest
from ..checkpoint.model import Binding, CheckpointRecord
from ..errors import InvalidTransitionError, StoreError
from ..tools import ExecuteContext, OperationJournal, RecoverContext, Tool, ToolOutcome
from ._approval_flow import GateFlow
from ._effect_key import EffectKey
from ._seams import STORE_RETRIES, GuardedRun, after

__all__ = [
    "CANCELLATION",
    "Abandoned",
    "Claim",
    "Execute",
    "Flow",
    "FlowState",
    "Recover",
    "Request",
    "join_claims",
]

#: Exceptions that mean "stop", never "the tool failed": no recovery, no error result.
CANCELLATION: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit, GeneratorExit)
try:  # asyncio.CancelledError is a BaseException since 3.8
    import asyncio as _asyncio

    CANCELLATION = (*CANCELLATION, _asyncio.CancelledError)
except ImportError:  # pragma: no cover
    pass


@dataclass(frozen=True, slots=True)
class Claim:
    """Request: commit these ops durably in one transaction; reply with outcomes or the error.

    An op's ``requires`` (an effect-key claim gating the checkpoint ops) indexes into
    ``ops``: batching several claims into one transaction goes through ``join_claims``.
    """

    ops: tuple[Any, ...]


def join_claims(batches: Iterable[tuple[Any, ...]]) -> builtins.list[Any]:
    """Concatenate several claims' ops for one transaction, re-basing each ``requires``."""
    out: builtins.list[Any] = []
    for ops in batches:
        base = len(out)
        for op in ops:
            requires = getattr(op, "requires", None)
            if requires is not None and base:
                op = dataclasses.replace(op, requires=requires + base)
            out.append(op)
    return out


@dataclass(frozen=True, slots=True)
class Execute:
    """Request: call ``tool.execute(input, ctx)``; reply ``(True, output)`` or ``(False, exc)``."""

    ctx: ExecuteContext


@dataclass(frozen=True, slots=True)
class Recover:
    """Request: call ``tool.recover(ctx)``; reply ``(True, answer)`` or ``(False, exc)``."""

    ctx: RecoverContext


class Abandoned(Exception):
    """Thrown into a flow at its ``Execute`` request: give the claim back, do not execute."""


Request = ApprovalRequest | Claim | Execute | Recover
Flow = Generator[Request, Any, ToolOutcome]


class FlowState:
    """One guarded call's facts: binding, attempt, event handle, what it last read.

    Args:
        run: The run (``store``, ``namespace``, ``run_id``).
        tool: The tool.
        binding: The call's binding.
        input: The tool input (exact JSON).
        on_error: ``"raise"`` or ``"result"``.
        gate: The call's approval gate (its first phase).
        justification: Passed to ``ExecuteContext`` and the journal event.
        justification_source: ``"developer"`` or ``"model"``.
        effect: The call's effect key (``_effect_key``), or ``None``.

    ``handle`` (the journal event: ``span``, ``update``, ``end``) and ``attempt_id`` (this
    attempt's execution fence) exist once the gate let the call proceed.
    """

    def __init__(
        self,
        *,
        run: GuardedRun,
        tool: Tool,
        binding: Binding,
        input: Any,
        on_error: str,
        gate: GateFlow,
        justification: str | None,
        justification_source: str = "developer",
        effect: EffectKey | None = None,
    ) -> None:
        self.run = run
        self.store = run.store
        self.tool = tool
        self.binding = binding
        self.input = input
        self.on_error = on_error
        self.gate = gate
        self.handle: Any = None
        self.attempt_id = ""
        self.justification = justification
        self.justification_source = justification_source
        self.effect = effect
        #: The call whose stored result this call returned (same effect key), if any.
        self.deduplicated_from: str | None = None
        self.executed = False
        self.recovered = False
        self.link: dict[str, str] | None = None
        self.last: CheckpointRecord | None = None
        self.first_action: str | None = None
        #: The end record the completion transaction carried (``finish`` reuses it).
        self.end_carried: Any = None
        #: Whether the gate found the call done: a replay, journaled as one record.
        self.replay_only = False
        self._store_errors = 0
        self.operation = OperationJournal(self.store, binding.namespace, binding.call_id)

    # -- store access with outcome-unknown handling --------------------------------------

    def _get(self) -> CheckpointRecord | None:
        rec: CheckpointRecord | None = self.store.get(*self.binding.key)
        return rec

    def _store_failed(self, exc: StoreError) -> None:
        """Count a store error; re-raise it once the budget is spent."""
        self._store_errors += 1
        if self._store_errors > STORE_RETRIES:
            raise exc

    def _reread(self) -> CheckpointRecord:
        rec = self._get()
        if rec is None:
            raise InvalidTransitionError(
                message=f"checkpoint {self.binding.namespace}/{self.binding.call_id} vanished "
                "while this attempt used it",
                details={"namespace": self.binding.namespace, "call_id": self.binding.call_id},
            )
        return rec

    def after(self, rec: CheckpointRecord | None) -> datetime:
        """Now, never earlier than ``rec.updated_at``."""
        return after(rec)

    def count_store_error(self, exc: StoreError) -> None:
        """Count a store error against this flow's budget; re-raise once it is spent."""
        self._store_failed(exc)

    def reread_or_none(self) -> CheckpointRecord | None:
        """This call's stored record, or ``None``."""
        return self._get()
