"""``toolledger.run(...)``: the Run users get, the journal's run plus guarded tool calls.

Rules this module keeps:

- The run is composed here, a layer above both halves: the journal's ``Run`` records
  (it knows nothing of the guard) and this subclass adds ``call``, ``acall``,
  ``call_many``, ``deliver``, ``adeliver`` and ``deliver_many``, which hand the run to the
  guard's drivers as their journal seam. No import runs up a layer.
- Tool calls a journaled model call requested are remembered here (``remember_request``,
  bounded): the guard makes that model call the parent of the call's ``tool_call`` event.
- Replay, fork and resume (``guard._replay``): the run holds the controller the journaled
  clients ask before a model call is sent; a guarded call is checked against the record
  before the guard runs it, and its checkpoint answers a call id the record holds.
- ``run()`` reads ``TOOLLEDGER_REPLAY_OF``, ``TOOLLEDGER_FORK_AT`` and
  ``TOOLLEDGER_ON_DIVERGENCE`` when the arguments are not given.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from opentelemetry.trace import TracerProvider

from ..checkpoint import Status
from ..errors import CheckpointError, InvalidArgumentError, ReplayUnavailableError, warn_at_caller
from ..journal import EventHandle
from ..journal import Run as JournalRun
from ..store import StoreLike
from ..telemetry import DEFAULTS, Redactor
from ..tools import ApprovalMode, OnError, OutT, Tool, ToolOutcome
from . import _batch, _deliver, _drivers
from ._replay import ON_DIVERGENCE, ReplayController, ReplayReport

__all__ = ["MAX_REMEMBERED", "Run", "UndeliveredWarning", "run"]

#: Requested tool-call ids a run remembers (oldest forgotten first); a model turn has few.
MAX_REMEMBERED = 10_000
#: A completed outcome's ``status`` (the stored string).
_COMPLETED = Status.COMPLETED.value


def _gate(
    gate: dict[str, Any], approval: ApprovalMode | None, approver: Callable[..., Any] | None
) -> dict[str, Any]:
    """The call's gate keywords as the drivers take them (``None``: the tool's own)."""
    if approval is not None:
        gate["approval"] = approval
    if approver is not None:
        gate["approver"] = approver
    return gate


class UndeliveredWarning(UserWarning):
    """A run closed with completed calls whose results were never delivered (see
    ``Run.deliver``): a hand-written loop that forgot to post a result."""


class Run(JournalRun):
    """A recorded agent run with guarded tool calls; create it with ``toolledger.run(...)``.

    Everything the journal's run records (steps, approvals, notes, artifacts), plus the
    guarded calls below (``toolledger.guard``). See ``journal.Run`` for the attributes.
    """

    def __init__(
        self,
        goal: str,
        *,
        journal_content: bool = True,
        replay_of: str | None = None,
        fork_at: str | None = None,
        on_divergence: str = "raise",
        resume_turns: bool = True,
        inherit_namespace: bool = False,
        **options: Any,
    ) -> None:
        if on_divergence not in ON_DIVERGENCE:
            raise InvalidArgumentError(
                message=f"on_divergence must be 'raise' or 'live'; got {on_divergence!r}"
            )
        if fork_at is not None and replay_of is None:
            raise InvalidArgumentError(message="fork_at needs replay_of (the run to fork)")
        super().__init__(goal, **options)
        #: Model calls through journaled clients store their content (request, response).
        self.journal_content = bool(journal_content)
        #: The hook that content passes through before it is stored: the run's
        #: ``redact=``, else ``configure()``'s (the same hook telemetry applies).
        self.journal_redact: Redactor | None = options.get("redact") or DEFAULTS.redact
        self._requests: dict[str, EventHandle] = {}
        self._replay_args = (replay_of, fork_at, on_divergence, resume_turns)
        self._controller: ReplayController | None = None
        self._resume_pending = False  # a resumed run reads its record at its first model call
        #: Completed calls this run handed to its caller, not yet delivered, seen or posted
        #: by a framework: named by an ``UndeliveredWarning`` when the run closes.
        self._owed: dict[str, None] = {}
        self._owed_lock = threading.Lock()
        self._replay_lock = threading.Lock()
        if replay_of is not None and inherit_namespace:
            try:
                source = self.store.get_run(replay_of)
            except BaseException:
                self.release_store()
                raise
            if source is not None:
                self.namespace = source.namespace

    # -- replay, fork, resume ------------------------------------------------------------

    def start(self) -> None:
        """Store (or resume) the run; a replay reads its source first (``guard._replay``).

        Raises:
            NotFoundError: ``NOT_FOUND`` for an unknown ``replay_of`` run or ``fork_at``.
            ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` for a source recorded without
                content.
        """
        replay_of, fork_at, on_divergence, resume_turns = self._replay_args
        if replay_of is not None:
            self._controller = ReplayController(
                self.store,
                replay_of,
                mode="replay" if fork_at is None else "fork",
                on_divergence=on_divergence,
                fork_at=fork_at,
            )
        elif resume_turns and self.status == "created":
            try:
                self._resume_pending = self.store.get_run(self.run_id) is not None
            except CheckpointError as exc:  # a resume without its record: live, as before
                self.record_failure(exc)
        super().start()

    @property
    def replay(self) -> ReplayController | None:
        """Answers model calls from a recorded run (replay, fork, resume), or ``None``.

        A resumed run reads its own record when this is first asked (by the first model
        call through a journaled client), so a resume that makes none reads nothing.
        """
        if self._resume_pending:
            with self._replay_lock:
                if self._resume_pending:
                    self._resume_pending = False
                    try:
                        self._controller = ReplayController(self.store, self.run_id, mode="resume")
                    except CheckpointError as exc:  # unreadable: the run stays live
                        self.record_failure(exc)
        return self._controller

    def close(self, error: BaseException | None = None) -> None:
        """Record the replay report (a ``replay`` event), then finish the run (see
        ``journal.Run.close``)."""
        self._warn_undelivered()
        ctl = self._controller
        if ctl is not None and self.status == "running":
            report = ctl.report()
            if ctl.mode != "resume" or report.served_model_calls or report.live_from:
                try:
                    self.record_event(
                        "replay",
                        ctl.mode,
                        "diverged" if report.divergence is not None else "completed",
                        outputs=report.as_dict(),
                        parent=None,
                    )
                except CheckpointError as exc:  # recording never breaks the run
                    self.record_failure(exc)
        super().close(error)

    def header_facts(self) -> dict[str, Any]:
        """``replay_of`` or ``forked_from`` (``run_id``, ``event_id``) in the hashed header."""
        ctl = self._controller
        if ctl is None or ctl.mode == "resume":
            return {}
        if ctl.mode == "fork":
            return {"forked_from": {"run_id": ctl.source_run_id, "event_id": ctl.fork_at}}
        return {"replay_of": {"run_id": ctl.source_run_id}}

    def span_links(self) -> list[dict[str, str]]:
        """The source run's span (its stored trace ids), for a replayed or forked run."""
        ctl = self._controller
        if ctl is None or ctl.mode == "resume" or ctl.source_span is None:
            return []
        return [dict(ctl.source_span)]

    @property
    def replay_report(self) -> ReplayReport | None:
        """What the run took from its record (``None``: not replayed, forked or resumed)."""
        ctl = self._controller
        return None if ctl is None else ctl.report()

    def _before_call(self, call_id: Any, tool: Any) -> None:
        ctl = self._controller
        if ctl is None or not isinstance(call_id, str):
            return
        ctl.tool_call(call_id, getattr(tool, "name", "?"))
        if ctl.live or ctl.mode == "resume" or not ctl.holds_call(call_id):
            return
        record = self.store.get(self.namespace, call_id)
        if record is None and ctl.gated_call(call_id):
            return  # the stored approval decision answers it again
        if record is None or record.status is Status.READY:
            # No checkpoint (gc, another namespace), or a failure before the effect whose
            # claim was released: the guard would run the tool. A replay never does.
            raise ReplayUnavailableError(
                message=f"run {ctl.source_run_id}'s tool call {call_id!r} has no checkpoint "
                f"that answers it in namespace {self.namespace!r} (erased, another "
                "namespace, or it failed before its effect): replaying it would execute it",
                details={"run_id": ctl.source_run_id, "call_id": call_id},
            )

    def _paid(self, call_ids: Sequence[str]) -> None:
        with self._owed_lock:
            for call_id in call_ids:
                self._owed.pop(call_id, None)

    def mark_posted(self, call_ids: Sequence[str]) -> None:
        """Record that a framework posts these calls' results to the model itself.

        The checkpoint is unchanged (a model turn that completes with the results marks
        them seen: ``mark_seen``); the run only stops counting them as owed, so it does not
        warn about them when it closes. The framework adapters call this.
        """
        self._paid(call_ids)

    def _warn_undelivered(self) -> None:
        """Warn once, at close, about completed calls whose results nobody delivered."""
        if self.status != "running":
            return
        with self._owed_lock:
            owed = list(self._owed)
            self._owed.clear()
        if not owed:
            return
        try:
            still = [
                call_id
                for call_id in owed
                if (rec := self.store.get(self.namespace, call_id)) is not None
                and rec.status is Status.COMPLETED
            ]
        except CheckpointError as exc:  # a warning never breaks the close
            self.record_failure(exc)
            return
        if still:
            shown = ", ".join(still[:5]) + (f" and {len(still) - 5} more" if len(still) > 5 else "")
            warn_at_caller(
                UndeliveredWarning(
                    f"run {self.run_id} ends with {len(still)} completed call(s) never "
                    f"delivered: {shown}. Post each result with run.deliver(call_id, post) "
                    "(or run.mark_seen(ids) when the model saw it another way); until then "
                    "the same action asked again in this conversation is served the stored "
                    "result instead of running"
                )
            )

    def _after_call(self, outcome: Any) -> None:
        if isinstance(outcome, ToolOutcome) and outcome.status == _COMPLETED:
            with self._owed_lock:  # owed a delivery until run.deliver/mark_seen/mark_posted
                self._owed[outcome.call_id] = None
        if self._controller is not None:
            self._served(outcome)

    def _served(self, outcome: Any) -> None:
        """Tell the replay controller a recorded call was served from its checkpoint."""
        ctl = self._controller
        if (
            ctl is not None
            and isinstance(outcome, ToolOutcome)
            and outcome.replayed
            and ctl.holds_call(outcome.call_id)
        ):
            ctl.served_tool()

    # -- who requested a tool call -------------------------------------------------------

    def remember_request(self, call_id: str, handle: EventHandle) -> None:
        """Remember that the event ``handle`` (a model call) requested tool call ``call_id``."""
        self._requests.pop(call_id, None)
        self._requests[call_id] = handle
        while len(self._requests) > MAX_REMEMBERED:
            self._requests.pop(next(iter(self._requests)))

    def requested_by(self, call_id: str) -> EventHandle | None:
        """The event that requested tool call ``call_id``, if this run remembers one."""
        return self._requests.get(call_id)

    # -- guarded tool calls --------------------------------------------------------------

    def call(
        self,
        tool: Tool[Any, OutT],
        *,
        call_id: str,
        input: object,
        justification: str | None = None,
        justification_source: str = "developer",
        on_error: OnError | None = None,
        approval: ApprovalMode | None = None,
        approver: Callable[..., Any] | None = None,
        **gate: Any,
    ) -> ToolOutcome[OutT]:
        """Run ``tool`` once for ``call_id`` through its checkpoint (``guard.call``).

        ``approval=`` and ``approver=`` gate this call (they win over the tool's; see
        ``toolledger.approvals``).
        """
        if approval is not None or approver is not None:
            gate = _gate(gate, approval, approver)
        if self._controller is not None:  # replaying a recorded run
            self._before_call(call_id, tool)
        outcome = _drivers.call(
            self,
            tool,
            call_id=call_id,
            input=input,
            justification=justification,
            justification_source=justification_source,
            on_error=on_error,
            **gate,
        )
        if outcome.status == _COMPLETED:
            with self._owed_lock:  # owed a delivery until run.deliver/mark_seen/mark_posted
                self._owed[outcome.call_id] = None
        if self._controller is not None:  # replaying a recorded run
            self._served(outcome)
        return outcome

    async def acall(
        self,
        tool: Tool[Any, OutT],
        *,
        call_id: str,
        input: object,
        justification: str | None = None,
        justification_source: str = "developer",
        on_error: OnError | None = None,
        approval: ApprovalMode | None = None,
        approver: Callable[..., Any] | None = None,
        **gate: Any,
    ) -> ToolOutcome[OutT]:
        """Async ``call`` (``guard.acall``): ``execute``/``recover``/the approver may be async."""
        if approval is not None or approver is not None:
            gate = _gate(gate, approval, approver)
        if self._controller is not None:  # replaying a recorded run
            self._before_call(call_id, tool)
        outcome = await _drivers.acall(
            self,
            tool,
            call_id=call_id,
            input=input,
            justification=justification,
            justification_source=justification_source,
            on_error=on_error,
            **gate,
        )
        self._after_call(outcome)
        return outcome

    def call_many(
        self,
        calls: Sequence[Mapping[str, Any]],
        *,
        on_error: str | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Run the parallel tool calls of one model turn (``guard.call_many``).

        Returns:
            One ``ToolOutcome`` per call (or its exception with ``return_exceptions``).
        """
        for spec in calls:
            self._before_call(spec.get("call_id"), spec.get("tool"))
        outcomes = _batch.call_many(
            self, calls, on_error=on_error, return_exceptions=return_exceptions
        )
        for outcome in outcomes:
            self._after_call(outcome)
        return outcomes

    def deliver(self, call_id: str, post: Callable[[Any], Any], *, redeliver: bool = False) -> Any:
        """Post a call's stored result through its checkpoint (``guard.deliver``).

        Returns:
            What ``post`` returned, or ``None`` when the call was delivered already.
        """
        self._paid([call_id])
        return _deliver.deliver(self, call_id, post, redeliver=redeliver)

    async def adeliver(
        self,
        call_id: str,
        post: Callable[[Any], Awaitable[Any] | Any],
        *,
        redeliver: bool = False,
    ) -> Any:
        """Async ``deliver`` (``guard.adeliver``): ``post`` may be async."""
        self._paid([call_id])
        return await _deliver.adeliver(self, call_id, post, redeliver=redeliver)

    def mark_seen(self, call_ids: Sequence[str]) -> list[str]:
        """Record that a model turn saw these calls' results, without posting them.

        Moves each ``completed`` call to ``delivered`` in one relaxed commit (see
        ``guard._deliver.mark_seen``): once seen, the same action asked again under a new
        call id executes again instead of being served the stored result. Idempotent.

        Returns:
            The ids moved by this call.
        """
        self._paid(call_ids)
        return _deliver.mark_seen(self, call_ids)

    def deliver_many(
        self,
        call_ids: Sequence[str],
        post: Callable[[dict[str, Any]], Any],
        *,
        redeliver: bool = False,
    ) -> Any:
        """Deliver several calls' results with one post (``guard.deliver_many``)."""
        self._paid(call_ids)
        return _deliver.deliver_many(self, call_ids, post, redeliver=redeliver)


def run(
    goal: str,
    *,
    agent: str | None = None,
    db: StoreLike | None = None,
    run_id: str | None = None,
    namespace: str | None = None,
    strict: bool = False,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: Redactor | None = None,
    conversation_id: str | None = None,
    user_id: str | None = None,
    key: str | bytes | None = None,
    journal_content: bool = True,
    replay_of: str | None = None,
    fork_at: str | None = None,
    on_divergence: str | None = None,
    resume_turns: bool = True,
) -> Run:
    """Return a ``Run`` to use as ``with toolledger.run(goal, ...) as run:``.

    Args:
        goal: What the run is for.
        agent: The agent's name.
        db: A path, a ``sqlite:///`` URL, a ``postgresql://`` DSN or a ``Store``; default
            ``$TOOLLEDGER_DB`` or ``.toolledger.db``.
        run_id: Resume or name the run (default: a new 128-bit id). A resumed run answers
            a model request equal to the next recorded, unanswered one from its record
            (``resume_turns``).
        namespace: Checkpoint namespace for the run's tool calls (default ``default``; a
            replay or fork: its source run's).
        strict: Raise storage failures instead of recording them in ``run.errors``.
        tracer_provider, capture_content, capture_intent, redact: Telemetry options;
            ``redact`` (else ``configure()``'s) also runs on journaled model content
            before it is stored (``docs/replay.md``).
        conversation_id: The conversation (session, thread) this run belongs to: telemetry's
            ``gen_ai.conversation.id`` on the run's spans (none when not given; never the
            run id).
        user_id: The end user the run acts for (``user.id`` on the run's spans).
        key: A secret journal key (default ``$TOOLLEDGER_JOURNAL_KEY``): the run's chain is
            then HMAC-SHA256 keyed, so a full re-chain without the key is detected;
            ``verify`` needs the same key. See ``docs/journal.md``.
        journal_content: Store what journaled model clients send and receive (messages,
            system, tools, parameters; the response), local to the journal like tool
            inputs and outputs; ``False`` keeps ids, names and usage only (such a run
            cannot be replayed). Telemetry content is ``capture_content``'s alone.
        replay_of: Re-drive this code from that run's record (default
            ``$TOOLLEDGER_REPLAY_OF``): model calls through journaled clients are
            answered from it, guarded tool calls by their checkpoints. See
            ``docs/replay.md``.
        fork_at: With ``replay_of``: answer up to that event of the source, then go live
            (default ``$TOOLLEDGER_FORK_AT``).
        on_divergence: ``raise`` (``ReplayDivergedError``) or ``live`` (go live) at the
            first request that differs from the record (default
            ``$TOOLLEDGER_ON_DIVERGENCE``, else ``raise``).
        resume_turns: A resumed run answers recorded model turns from its record (default);
            ``False``: it asks the model again.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments.
        NotFoundError: ``NOT_FOUND`` (on entering) for an unknown ``replay_of``/``fork_at``.
        ReplayUnavailableError: ``REPLAY_UNAVAILABLE`` (on entering) for a source recorded
            with ``journal_content=False``.
    """
    if replay_of is None:
        replay_of = os.environ.get("TOOLLEDGER_REPLAY_OF") or None
        if fork_at is None:
            fork_at = os.environ.get("TOOLLEDGER_FORK_AT") or None
    if on_divergence is None:
        on_divergence = os.environ.get("TOOLLEDGER_ON_DIVERGENCE") or "raise"
    return Run(
        goal,
        journal_content=journal_content,
        replay_of=replay_of,
        fork_at=fork_at,
        on_divergence=on_divergence,
        resume_turns=resume_turns,
        inherit_namespace=namespace is None,
        agent=agent,
        db=db,
        run_id=run_id,
        namespace="default" if namespace is None else namespace,
        strict=strict,
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        capture_intent=capture_intent,
        redact=redact,
        conversation_id=conversation_id,
        user_id=user_id,
        key=key,
    )
