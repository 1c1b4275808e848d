"""``toolledger.run(...)``: the Run users get, the journal's run plus guarded tool calls.

Rules this module keeps:

- The run is composed here, a layer above both halves: the journal's ``Run`` records
  (it knows nothing of the guard) and this subclass adds ``call``, ``acall``,
  ``call_many``, ``deliver``, ``adeliver`` and ``deliver_many``, which hand the run to the
  guard's drivers as their journal seam. No import runs up a layer.
- Tool calls a journaled model call requested are remembered here (``remember_request``,
  bounded): the guard makes that model call the parent of the call's ``tool_call`` event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..journal import EventHandle
from ..journal import Run as JournalRun
from ..tools import Tool, ToolOutcome
from . import _drivers

__all__ = ["MAX_REMEMBERED", "Run", "run"]

#: Requested tool-call ids a run remembers (oldest forgotten first); a model turn has few.
MAX_REMEMBERED = 10_000


class Run(JournalRun):
    """A recorded agent run with guarded tool calls; create it with ``toolledger.run(...)``.

    Everything the journal's run records (steps, approvals, notes, artifacts), plus the
    guarded calls below (``toolledger.guard``). See ``journal.Run`` for the attributes.
    """

    def __init__(self, goal: str, **options: Any) -> None:
        super().__init__(goal, **options)
        self._requests: dict[str, EventHandle] = {}

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
        tool: Tool,
        *,
        call_id: str,
        input: Any,
        justification: str | None = None,
        justification_source: str = "developer",
        on_error: str | None = None,
        **gate: Any,
    ) -> ToolOutcome:
        """Run ``tool`` once for ``call_id`` through its checkpoint (``guard.call``).

        ``gate`` takes ``approval=`` and ``approver=`` (see ``toolledger.approvals``).
        """
        return _drivers.call(
            self,
            tool,
            call_id=call_id,
            input=input,
            justification=justification,
            justification_source=justification_source,
            on_error=on_error,
            **gate,
        )

    async def acall(
        self,
        tool: Tool,
        *,
        call_id: str,
        input: Any,
        justification: str | None = None,
        justification_source: str = "developer",
        on_error: str | None = None,
        **gate: Any,
    ) -> ToolOutcome:
        """Async ``call`` (``guard.acall``): ``execute``/``recover``/the approver may be async."""
        return await _drivers.acall(
            self,
            tool,
            call_id=call_id,
            input=input,
            justification=justification,
            justification_source=justification_source,
            on_error=on_error,
            **gate,
        )

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
        return _drivers.call_many(
            self, calls, on_error=on_error, return_exceptions=return_exceptions
        )

    def deliver(self, call_id: str, post: Callable[[Any], Any], *, redeliver: bool = False) -> Any:
        """Post a call's stored result through its checkpoint (``guard.deliver``).

        Returns:
            What ``post`` returned, or ``None`` when the call was delivered already.
        """
        return _drivers.deliver(self, call_id, post, redeliver=redeliver)

    async def adeliver(
        self,
        call_id: str,
        post: Callable[[Any], Awaitable[Any] | Any],
        *,
        redeliver: bool = False,
    ) -> Any:
        """Async ``deliver`` (``guard.adeliver``): ``post`` may be async."""
        return await _drivers.adeliver(self, call_id, post, redeliver=redeliver)

    def deliver_many(
        self,
        call_ids: Sequence[str],
        post: Callable[[dict[str, Any]], Any],
        *,
        redeliver: bool = False,
    ) -> Any:
        """Deliver several calls' results with one post (``guard.deliver_many``)."""
        return _drivers.deliver_many(self, call_ids, post, redeliver=redeliver)


def run(
    goal: str,
    *,
    agent: str | None = None,
    db: Any = None,
    run_id: str | None = None,
    namespace: str = "default",
    strict: bool = False,
    tracer_provider: Any = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: Any = None,
    conversation_id: str | None = None,
    user_id: str | None = None,
    key: str | bytes | None = None,
) -> Run:
    """Return a ``Run`` to use as ``with toolledger.run(goal, ...) as run:``.

    Args:
        goal: What the run is for.
        agent: The agent's name.
        db: A path, a ``sqlite:///`` URL, a ``postgresql://`` DSN or a ``Store``; default
            ``$TOOLLEDGER_DB`` or ``.toolledger.db``.
        run_id: Resume or name the run (default: a new 128-bit id).
        namespace: Checkpoint namespace for the run's tool calls.
        strict: Raise storage failures instead of recording them in ``run.errors``.
        tracer_provider, capture_content, capture_intent, redact: Telemetry options.
        conversation_id: The conversation (session, thread) this run belongs to: telemetry's
            ``gen_ai.conversation.id`` on the run's spans (none when not given; never the
            run id).
        user_id: The end user the run acts for (``user.id`` on the run's spans).
        key: A secret journal key (default ``$TOOLLEDGER_JOURNAL_KEY``): the run's chain is
            then HMAC-SHA256 keyed, so a full re-chain without the key is detected;
            ``verify`` needs the same key. See ``docs/journal.md``.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments.
    """
    return Run(
        goal,
        agent=agent,
        db=db,
        run_id=run_id,
        namespace=namespace,
        strict=strict,
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        capture_intent=capture_intent,
        redact=redact,
        conversation_id=conversation_id,
        user_id=user_id,
        key=key,
    )
