"""What the framework adapters share: per-tool options, one guarded call, the lazy import.

A framework adapter (``anthropic`` tool runners, ``openai_agents``, ``langgraph``,
``pydantic_ai``) finds the place where its framework runs one tool call, and sends that
call through ``run.call``/``run.acall`` keyed by the framework's own call id. This module
holds the part that does not depend on the framework.

Rules this module keeps:

- No framework is imported here; each adapter module imports its framework at its own
  import, and raises :func:`missing` (naming the extra to install) when it is not there.
- The framework's tools are not ``toolledger.Tool`` objects: each call gets a ``Tool``
  named after the framework's tool, with the revision from ``revisions`` (default
  ``"1"``: bump it when the tool's behaviour changes) and the gate from ``gates``.
- ``recover(input, ctx)`` gets the call's bound input (a copy) besides the guard's
  ``RecoverContext``; a one-parameter ``recover(ctx)`` keeps working.
- The binding's input is the model's arguments without ``justification`` (recorded as the
  model's justification when the tool's schema carries one); the tool itself gets the
  arguments exactly as the framework would have passed them.
- The framework's own conversation id (LangGraph's ``thread_id``, the Agents SDK's session
  id) scopes the run when the app gave none (``toolledger.run(conversation_id=...)``): the
  run takes it at the first call that carries it (:meth:`FrameworkGuard.conversation`), so
  that a re-plan in the same thread is recognized in a new process. A conversation the app
  named wins; calls from a second thread on a run bound to a first keep the first, with
  one ``ConversationWarning``.
- A result is *seen* once a model turn that carried it completed: each adapter reports the
  framework's completed turns through :meth:`FrameworkGuard.seen` (``run.mark_seen``), so
  the same action asked again afterwards executes again instead of being served the
  stored result.
- A ``BINDING_CONFLICT`` for a call id this run had not made (an earlier run made it with
  another call: a model with fixed ids) also warns ``CallIdReuseWarning`` with the fix.
- What the guard answers besides a result is a typed :class:`Answer`: ``unknown``
  (``OUTCOME_UNKNOWN``: never re-run; the model is told the action may already have happened
  and not to retry it), ``awaiting_approval`` or ``denied``; each adapter
  turns it into what its framework shows the model. Other errors propagate unchanged
  (``BINDING_CONFLICT``; the tool's own exception with ``on_error="raise"``, the claim
  released when the operation journal is empty).
"""

from __future__ import annotations

import copy
import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import (
    ApprovalDenied,
    BindingConflictError,
    CheckpointError,
    InvalidArgumentError,
    OutcomeUnknownError,
    warn_at_caller,
)
from ..guard import Run
from ..journal import current_run
from ..tools import ApprovalMode, EffectKey, OnError, Tool, ToolOutcome
from ._common import AWAITING_APPROVAL, AWAITING_APPROVAL_TEXT, split_args, unknown_text

__all__ = [
    "DEFAULT_REVISION",
    "Answer",
    "CallIdReuseWarning",
    "ConversationWarning",
    "FrameworkGuard",
    "ToolGate",
    "active_run",
    "denied_text",
    "missing",
]

#: The revision of a framework tool that ``revisions`` does not name.
DEFAULT_REVISION = "1"
#: ``ToolOutcome.status`` of a call denied with ``on_error="result"``.
DENIED = "denied"

Kind = Literal["result", "unknown", "awaiting_approval", "denied"]


class ConversationWarning(UserWarning):
    """The framework's conversation is not the run's: calls stay scoped by the run's."""


class CallIdReuseWarning(UserWarning):
    """A call id from an earlier run came back with another call (a model with fixed ids)."""


def missing(adapter: str, package: str, extra: str) -> ImportError:
    """The ``ImportError`` an adapter raises (``from`` the original) when its framework is
    not installed: it names the extra to install."""
    return ImportError(
        f"toolledger.integrations.{adapter} needs the {package!r} package: "
        f"pip install 'toolledger[{extra}]'"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolGate:
    """An approval gate for a framework tool (see ``toolledger.approvals``).

    Args:
        approval: ``"effect-only"`` (a call that would execute asks) or ``"always"``.
        approver: ``approver(request) -> Approved | Denied | Pending`` (sync or async);
            ``None`` asks the store (a decision made with ``toolledger approve``).
    """

    approval: ApprovalMode = "effect-only"
    approver: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.approval not in ("always", "effect-only"):
            raise InvalidArgumentError(
                message='ToolGate.approval must be "always" or "effect-only"',
                details={"argument": "approval", "value": repr(self.approval)[:100]},
            )


@dataclass(frozen=True, slots=True)
class Answer:
    """What a guarded framework call gives back.

    ``kind`` is ``result`` (``payload`` is the stored result, ``is_error`` its flag),
    ``unknown`` (the call may have taken effect and is not re-run), ``awaiting_approval``
    (nothing ran yet) or ``denied`` (nothing ran); for the last three ``payload`` is the
    text to show the model.
    """

    kind: Kind
    payload: Any
    is_error: bool
    outcome: ToolOutcome | None = None


class FrameworkGuard:
    """The adapters' settings and their one way through the guard.

    Args:
        run: The ``toolledger.Run``, or ``None``: the run active where a tool is called
            (``with toolledger.run(...)``; ``toolledger.journal.current_run()``), so the
            framework's agent may be built before the run exists.
        revisions: Tool name -> revision (default ``"1"``).
        gates: Tool name -> :class:`ToolGate`.
        on_error: ``"raise"`` (the tool's exception reaches the framework, which handles
            it its own way; the claim is released when the operation journal is empty)
            or ``"result"`` (stored as an ``is_error`` result, the same on every replay).
        recover: Tool name -> ``recover(input, ctx)`` (proves a lost outcome; see
            ``Tool``): ``input`` is the model's arguments as bound (without
            ``justification``). A one-parameter ``recover(ctx)`` works too.
        effect_keys: Tool name -> ``"input"`` or ``effect_key(input) -> str``: a call the
            framework re-plans under a new call id (after a crash lost the model's turn)
            returns the first call's result instead of executing (see ``Tool``).
    """

    __slots__ = (
        "_bound",
        "_effect_keys",
        "_gates",
        "_recover",
        "_revisions",
        "_run",
        "_seen",
        "_warned_conversation",
        "on_error",
    )

    def __init__(
        self,
        run: Run | None,
        *,
        revisions: Mapping[str, str] | None = None,
        gates: Mapping[str, ToolGate] | None = None,
        on_error: OnError = "raise",
        recover: Mapping[str, Callable[..., Any]] | None = None,
        effect_keys: Mapping[str, EffectKey] | None = None,
    ) -> None:
        if on_error not in ("raise", "result"):
            raise InvalidArgumentError(
                message='on_error must be "raise" or "result"',
                details={"argument": "on_error", "value": repr(on_error)[:100]},
            )
        for name, gate in (gates or {}).items():
            if not isinstance(gate, ToolGate):
                raise InvalidArgumentError(
                    message=f"gates[{name!r}] must be a toolledger.integrations.ToolGate",
                    details={"tool": name},
                )
        if run is not None and not isinstance(run, Run):
            raise InvalidArgumentError(
                message=f"run must be a toolledger.Run (or None: the active run); got "
                f"{type(run).__name__}",
                details={"argument": "run"},
            )
        self._run = run
        self._revisions = dict(revisions or {})
        self._gates = dict(gates or {})
        self._recover = dict(recover or {})
        self._effect_keys = dict(effect_keys or {})
        self._bound: tuple[str, str] | None = None
        self._seen: set[str] = set()
        self._warned_conversation = False
        self.on_error = on_error

    def conversation(self, conversation_id: Any) -> None:
        """Scope the run by the framework's conversation (thread, session) id, if it has none.

        A run the app named a conversation keeps it (the app's name wins). A run this
        adapter bound to a thread keeps that thread; a call from another thread gets one
        ``ConversationWarning`` (use one run per thread, or name the conversation).
        """
        if not isinstance(conversation_id, str) or not conversation_id:
            return
        run = self.run
        current = run.conversation_id
        if current is None:
            run.conversation_id = conversation_id
            self._bound = (run.run_id, conversation_id)
        elif (
            self._bound == (run.run_id, current)
            and current != conversation_id
            and not self._warned_conversation
        ):
            self._warned_conversation = True
            warn_at_caller(
                ConversationWarning(
                    f"toolledger: the framework's conversation {conversation_id!r:.80} is not "
                    f"the run's ({current!r:.80}); its calls are scoped by the run's "
                    "conversation. Use one toolledger.run per thread or session."
                )
            )

    def seen(self, call_ids: Iterable[Any]) -> None:
        """Record that a completed model turn carried these calls' results (``run.mark_seen``).

        Each adapter calls it when it observes the framework's next completed model turn
        after results were posted; ids already marked by this adapter are skipped, others
        (not completed, not this run's) are left as they are by ``mark_seen``. A store
        failure is recorded in ``run.errors`` (raised with ``strict=True``): a result left
        unseen can only be served to a re-plan, never run twice.
        """
        todo = [c for c in dict.fromkeys(call_ids) if isinstance(c, str) and c not in self._seen]
        if not todo:
            return
        run = self.run
        try:
            run.mark_seen(todo)
        except CheckpointError as exc:
            if run.strict:
                raise
            run.record_failure(exc)
            return
        self._seen.update(todo)

    @property
    def run(self) -> Run:
        """The run calls go through: the one given, else the one active now.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when no run was given and none is
                active (a tool called outside ``with toolledger.run(...)``).
        """
        return active_run(self._run)

    def revision(self, name: str) -> str:
        """The revision bound to tool ``name``."""
        return self._revisions.get(name, DEFAULT_REVISION)

    def gate(self, name: str) -> ToolGate | None:
        """The toolledger gate of tool ``name``, if any."""
        return self._gates.get(name)

    def tool(
        self,
        name: str,
        execute: Callable[..., Any],
        gate: ToolGate | None = None,
        input: Any = None,
    ) -> Tool:
        """A ``Tool`` for one call of the framework tool ``name`` with ``input`` (``gate``
        overrides its gate)."""
        gate = gate if gate is not None else self._gates.get(name)
        recover = self._recover.get(name)
        return Tool(
            name=name,
            revision=self.revision(name),
            execute=execute,
            recover=None if recover is None else _with_input(recover, input),
            on_error="raise",
            approval=gate.approval if gate else None,
            approver=gate.approver if gate else None,
            effect_key=self._effect_keys.get(name),
        )

    def call(
        self,
        name: str,
        *,
        call_id: str,
        arguments: Any,
        execute: Callable[[], Any],
        gate: ToolGate | None = None,
    ) -> Answer:
        """Run one framework tool call through ``run.call``; ``execute()`` does the effect.

        Args:
            name: The framework tool's name.
            call_id: The framework's call id.
            arguments: The model's arguments (JSON).
            execute: Runs the framework's tool (with the arguments as the framework
                passes them); raising is a tool error.
            gate: A gate for this call instead of the tool's (a decision the framework
                made, as an approver that answers it).

        Raises:
            BindingConflictError: the id was used for another call.
            Exception: the tool's error (``on_error="raise"``), ``ApprovalDenied``.
        """
        bound, why = split_args(arguments)
        tool = self.tool(name, lambda _input, _ctx: execute(), gate, bound)
        made_before = self._calling(call_id)
        try:
            outcome = self.run.call(
                tool,
                call_id=call_id,
                input=bound,
                justification=why,
                justification_source="model",
                on_error=self.on_error,
            )
        except OutcomeUnknownError as unknown:
            return Answer("unknown", unknown_text(unknown), True)
        except BindingConflictError as conflict:
            if not made_before:
                self._warn_reused(conflict)
            raise
        self.run.mark_posted([call_id])  # the framework posts the result, not the app
        return _answer(outcome)

    async def acall(
        self,
        name: str,
        *,
        call_id: str,
        arguments: Any,
        execute: Callable[[], Any],
        gate: ToolGate | None = None,
    ) -> Answer:
        """Async :meth:`call`: ``execute()`` returns an awaitable."""
        bound, why = split_args(arguments)

        async def run_it(_input: Any, _ctx: Any) -> Any:
            return await execute()

        tool = self.tool(name, run_it, gate, bound)
        made_before = self._calling(call_id)
        try:
            outcome = await self.run.acall(
                tool,
                call_id=call_id,
                input=bound,
                justification=why,
                justification_source="model",
                on_error=self.on_error,
            )
        except OutcomeUnknownError as unknown:
            return Answer("unknown", unknown_text(unknown), True)
        except BindingConflictError as conflict:
            if not made_before:
                self._warn_reused(conflict)
            raise
        self.run.mark_posted([call_id])  # the framework posts the result, not the app
        return _answer(outcome)

    def _calling(self, call_id: str) -> bool:
        """Note ``call_id`` as this run's (through any adapter); whether it had made it."""
        made = _CALLED.setdefault(self.run, set())
        before = call_id in made
        made.add(call_id)
        return before

    def _warn_reused(self, conflict: BindingConflictError) -> None:
        """A ``BINDING_CONFLICT`` for an id this run had not made: an earlier run made it."""
        call_id = str(conflict.details.get("call_id"))
        warn_at_caller(
            CallIdReuseWarning(
                f"toolledger: call id {call_id!r:.80} came back with another call "
                f"(differs in {', '.join(conflict.details.get('differs') or ['?'])}) after an "
                "earlier run used it: the model gives fixed call ids (test models such as "
                "FunctionModel or a scripted model do). Give each run its own namespace "
                "(toolledger.run(..., namespace=...)) or the model unique ids."
            )
        )


#: The call ids each run made through the adapters in this process (for CallIdReuseWarning).
_CALLED: weakref.WeakKeyDictionary[Run, set[str]] = weakref.WeakKeyDictionary()


def active_run(run: Run | None) -> Run:
    """``run``, else the run active now (``with toolledger.run(...)``).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when ``run`` is ``None`` and no run is
            active (a tool called outside ``with toolledger.run(...)``).
    """
    if run is not None:
        return run
    active = current_run()
    if not isinstance(active, Run):
        raise InvalidArgumentError(
            message="no toolledger run is active: call the framework inside "
            "`with toolledger.run(...)`, or give the adapter its run",
            details={"argument": "run"},
        )
    return active


def denied_text(denied: ApprovalDenied) -> str:
    """What the model is told of a denied call (the text ``on_error="result"`` stores)."""
    by = denied.details.get("by")
    reason = denied.details.get("reason")
    return f"denied by {by}" + (f": {reason}" if reason else "")


def _with_input(recover: Callable[..., Any], input: Any) -> Callable[..., Any]:
    """``recover(input, ctx)`` as the guard calls it, ``recover(ctx)``; a one-parameter
    ``recover(ctx)`` is returned as it is. An async ``recover`` stays async."""
    try:
        params = inspect.signature(recover).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the guard's form
        return recover
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    if len(positional) < 2 and not varargs:
        return recover
    if inspect.iscoroutinefunction(recover):

        async def arecover(ctx: Any) -> Any:
            return await recover(copy.deepcopy(input), ctx)

        return arecover
    return lambda ctx: recover(copy.deepcopy(input), ctx)


def _answer(outcome: ToolOutcome) -> Answer:
    if outcome.status == AWAITING_APPROVAL:
        return Answer("awaiting_approval", AWAITING_APPROVAL_TEXT, True, outcome)
    if outcome.status == DENIED:
        return Answer("denied", outcome.payload, True, outcome)
    return Answer("result", outcome.payload, outcome.is_error, outcome)
