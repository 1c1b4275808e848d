"""Tool definitions and what a guarded call gives and gets back. No I/O here.

Rules this module keeps:

- A ``Tool`` is a frozen record: its ``name`` and ``revision`` go into every call's
  binding, so changing what a tool does means bumping ``revision`` (an old checkpoint then
  refuses the new code with ``BINDING_CONFLICT`` instead of replaying a stale result).
- ``execute(input, ctx)`` and ``recover(ctx)`` may be plain functions or ``async``
  functions; ``run.call`` needs plain ones, ``run.acall`` takes both.
- ``recover`` answers with ``Recovered(output)`` only when the outcome is *proven* (for
  example, the order id in the operation journal was found at the provider); anything
  else is ``NotRecovered(reason)`` or ``None``.
- The operation journal (``ctx.operation``) holds small correlation data written just
  before the irreversible effect. It must never hold secrets or full outputs: it is
  stored in plain text beside the checkpoint and read back by ``recover``.
- ``approval`` and ``approver`` gate the tool (``toolledger.approvals``): the guard asks
  before it runs the call (``run.call``, ``run.acall`` and ``run.call_many`` alike). A
  decision stored for a call binds it whatever tool object is passed later.
- ``input_schema`` and ``effects`` describe the tool; the guard never reads them.
  ``check_tool`` (``toolledger.readiness``) does: an open or unbounded schema, or declared
  side effects without a ``recover`` hook, is a diagnostic.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, Union, overload

from .checkpoint.model import Binding, check_identifier
from .errors import InvalidArgumentError

__all__ = [
    "ApprovalMode",
    "ExecuteContext",
    "NotRecovered",
    "OperationJournal",
    "OperationStore",
    "RecoverContext",
    "Recovered",
    "Tool",
    "ToolDecorator",
    "ToolOutcome",
    "tool",
]

OnError = Literal["raise", "result"]
ApprovalMode = Literal["always", "effect-only"]
"""The values of ``approval=`` (``None``: no gate): ``"always"`` (every call, replays
included, needs a decision) or ``"effect-only"`` (only a call that would execute asks).
See ``toolledger.approvals``."""
#: ``"input"`` or a function of the tool input returning the effect key (a str).
EffectKey = Union[Literal["input"], Callable[[Any], str]]  # noqa: UP007 (runtime alias)
_ON_ERROR = ("raise", "result")

# A tool's input type (what ``execute`` takes, ``run.call(input=...)`` passes) and its
# result type (what ``execute`` returns, the outcome's ``payload``). Both default to
# ``Any`` (PEP 696), so a bare ``Tool`` or ``ToolOutcome`` still means any tool; the
# defaults are the type checker's alone (typing.TypeVar takes none before 3.13).
if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultTypeVar

    InT = DefaultTypeVar("InT", default=Any)
    OutT = DefaultTypeVar("OutT", default=Any)
    OutT_co = DefaultTypeVar("OutT_co", covariant=True, default=Any)
else:
    InT = TypeVar("InT")
    OutT = TypeVar("OutT")
    OutT_co = TypeVar("OutT_co", covariant=True)


class OperationStore(Protocol):
    """What an ``OperationJournal`` needs of its store (every ``Store`` has it)."""

    def operation_write(
        self, namespace: str, call_id: str, data: Mapping[str, Any], *, durable: bool = True
    ) -> None: ...

    def operation_read(self, namespace: str, call_id: str) -> dict[str, Any] | None: ...

    def operation_remove(self, namespace: str, call_id: str, *, durable: bool = True) -> bool: ...


class OperationJournal:
    """The operation-journal handle of one call: ``write``, ``read``, ``remove``.

    Write small correlation data (``{"order_id": "o-17"}``) just *before* the irreversible
    effect. When ``execute`` then fails, a non-empty journal means the effect may have
    happened (the call becomes ``uncertain`` and ``recover`` gets a chance); an empty one
    proves the failure was pre-effect (the claim is released so a retry may execute).
    Entries are at most 16,384 bytes of JSON and must hold no secrets or full outputs.
    The guard removes the entry in the same commit that stores the result.

    Args:
        store: The run's store.
        namespace: The call's namespace.
        call_id: The call's id.
    """

    __slots__ = ("_call_id", "_namespace", "_store")

    def __init__(self, store: OperationStore, namespace: str, call_id: str) -> None:
        self._store = store
        self._namespace = namespace
        self._call_id = call_id

    def write(self, data: Mapping[str, Any]) -> None:
        """Set the entry (durably: it must survive a crash that follows the effect).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when ``data`` is not a JSON object.
            PayloadLimitError: ``PAYLOAD_LIMIT`` when it exceeds 16,384 bytes.
            StoreError: storage failure (the effect must then not be attempted).
        """
        self._store.operation_write(self._namespace, self._call_id, data, durable=True)

    def read(self) -> dict[str, Any] | None:
        """Return the entry, or ``None`` when the journal is empty."""
        return self._store.operation_read(self._namespace, self._call_id)

    def remove(self) -> bool:
        """Remove the entry; return whether one existed."""
        return bool(self._store.operation_remove(self._namespace, self._call_id, durable=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteContext:
    """What ``execute(input, ctx)`` gets besides its input.

    ``attempt_id`` is this attempt's execution fence; ``operation`` the call's
    operation-journal handle.
    """

    binding: Binding
    attempt_id: str
    operation: OperationJournal
    run_id: str
    justification: str | None = None

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.binding.call_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoverContext:
    """What ``recover(ctx)`` gets: the call, the attempt it acts for, and why.

    ``attempt_id`` is the attempt recorded on the checkpoint (possibly another process's);
    ``reason`` is the checkpoint's ``uncertain_reason``; ``error`` is the exception
    ``execute`` raised in this process, or ``None`` when the call was found interrupted.
    """

    binding: Binding
    attempt_id: str
    operation: OperationJournal
    run_id: str
    reason: str | None = None
    error: BaseException | None = None

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.binding.call_id


#: ``execute(input, ctx) -> result``: a plain or an ``async`` function.
Execute = Union[  # noqa: UP007 (runtime alias)
    Callable[[InT, ExecuteContext], Awaitable[OutT]],
    Callable[[InT, ExecuteContext], OutT],
]
#: What a tool does to the world (``check_tool`` reads it): one of the kinds, or
#: ``{"kind": ..., "explanation": ...}``.
Effects = Union[Literal["none", "idempotent", "side-effect"], Mapping[str, str]]  # noqa: UP007


@dataclass(frozen=True, slots=True)
class Recovered:
    """``recover``'s answer when the outcome is proven: ``output`` becomes the result.

    Set ``is_error`` when the proven outcome is a failure to tell the model about.
    """

    output: Any
    is_error: bool = field(default=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class NotRecovered:
    """``recover``'s answer when the outcome cannot be proven (same as returning ``None``)."""

    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome(Generic[OutT_co]):
    """The result of a guarded call (``ToolOutcome[R]`` for a ``Tool[I, R]``).

    ``payload`` is the exact JSON result (what is delivered, and re-delivered byte for
    byte); ``is_error`` says it reports a handler error (the payload is then the error
    report, not an ``R``: check ``is_error`` before using it as the tool's result).
    ``status`` is the checkpoint's status (``completed``, ``delivering``, ``delivered``);
    ``revision`` its revision.
    ``replayed``: the payload came from the checkpoint and the tool did not run in this
    call. ``recovered``: the payload was proven by ``recover`` after a lost outcome.
    ``deduplicated_from``: the call id of another call with the same effect key whose
    stored result this call returned (``replayed`` is then true too); ``None`` otherwise.
    """

    call_id: str
    tool_name: str
    payload: OutT_co
    is_error: bool
    status: str
    revision: int
    replayed: bool = False
    recovered: bool = False
    deduplicated_from: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool(Generic[InT, OutT]):
    """A tool definition: ``Tool[I, R]`` takes an ``I`` and returns an ``R``.

    Build one with :func:`tool`, which reads ``I`` and ``R`` from ``execute``'s annotations,
    or with ``Tool(...)``; ``Tool[I, R]`` is for annotations (before Python 3.13, calling the
    subscripted class fails: a frozen, slotted dataclass refuses ``__orig_class__``).

    Args:
        name: The tool's name (an identifier: 1-128 of ``[A-Za-z0-9._:-]``).
        revision: The code revision; bump it when the tool's behaviour changes.
        execute: ``execute(input, ctx) -> output`` (sync or async); ``output`` is JSON.
        recover: ``recover(ctx) -> Recovered | NotRecovered | None`` (sync or async).
        description: Shown to telemetry and approvers.
        on_error: ``"raise"`` (default) or ``"result"``: store a pre-effect failure as an
            ``is_error`` result instead of raising (``run.call``'s ``on_error`` wins).
        max_result_bytes: Bound on the stored result (default 65,536; at most 10 MB).
        approval: ``None`` (no gate), ``"always"`` (every call, replays included, needs a
            decision) or ``"effect-only"`` (only a call that would execute asks); see
            ``toolledger.approvals``.
        approver: ``approver(request) -> Approved | Denied | Pending`` (sync or async).
        effect_key: ``None`` (default), ``"input"`` (tool name + revision + input
            fingerprint) or ``effect_key(input) -> str`` (1-1024 characters): a call
            under a new call id whose effect key another call of the namespace (and
            conversation) holds returns that call's result instead of executing (see
            docs/guard.md, "Re-plan safety").
        input_schema: The JSON Schema of the input (read by ``check_tool``, not enforced).
        effects: ``"none"``, ``"idempotent"``, ``"side-effect"``, or a mapping
            ``{"kind": ..., "explanation": ...}`` (read by ``check_tool``).
        independent: ``True`` for a tool whose identical calls are independent actions
            (polling, a read, "roll a die"): the guard's same-action rules (an unknown
            outcome blocks the same action under a new call id; an unseen result is served
            to a re-plan) do not apply to it (see docs/guard.md, "The same action").
    """

    name: str
    revision: str
    execute: Execute[InT, OutT]
    recover: Callable[..., Any] | None = None
    description: str | None = None
    on_error: OnError = "raise"
    max_result_bytes: int | None = None
    input_schema: Mapping[str, Any] | None = None
    effects: Effects | None = None
    approval: ApprovalMode | None = None
    approver: Callable[..., Any] | None = None
    effect_key: EffectKey | None = None
    independent: bool = False

    def __post_init__(self) -> None:
        check_identifier(self.name, "tool name")
        check_identifier(self.revision, "tool revision")
        if not callable(self.execute):
            raise InvalidArgumentError(message=f"tool {self.name}: execute must be callable")
        if self.recover is not None and not callable(self.recover):
            raise InvalidArgumentError(message=f"tool {self.name}: recover must be callable")
        if self.on_error not in _ON_ERROR:
            raise InvalidArgumentError(
                message=f'tool {self.name}: on_error must be "raise" or "result"',
                details={"argument": "on_error", "value": repr(self.on_error)[:100]},
            )
        if self.approval not in (None, "always", "effect-only"):
            raise InvalidArgumentError(
                message=f'tool {self.name}: approval must be None, "always" or "effect-only"',
                details={"argument": "approval", "value": repr(self.approval)[:100]},
            )
        if self.approver is not None and not callable(self.approver):
            raise InvalidArgumentError(message=f"tool {self.name}: approver must be callable")
        if not (self.effect_key is None or self.effect_key == "input" or callable(self.effect_key)):
            raise InvalidArgumentError(
                message=f'tool {self.name}: effect_key must be None, "input" or a function '
                "of the input returning a str",
                details={"argument": "effect_key", "value": repr(self.effect_key)[:100]},
            )
        if type(self.independent) is not bool:
            raise InvalidArgumentError(
                message=f"tool {self.name}: independent must be True or False",
                details={"argument": "independent", "value": repr(self.independent)[:100]},
            )

    @property
    def is_async(self) -> bool:
        """Whether ``execute`` or ``recover`` is a coroutine function (needs ``acall``)."""
        return inspect.iscoroutinefunction(self.execute) or (
            self.recover is not None and inspect.iscoroutinefunction(self.recover)
        )


class ToolDecorator(Protocol):
    """What ``@toolledger.tool(revision=...)`` returns: it makes a ``Tool[I, R]`` of a
    function ``execute(input: I, ctx) -> R`` (or ``async``: ``-> Awaitable[R]``)."""

    @overload
    def __call__(
        self, fn: Callable[[InT, ExecuteContext], Awaitable[OutT]], /
    ) -> Tool[InT, OutT]: ...

    @overload
    def __call__(self, fn: Callable[[InT, ExecuteContext], OutT], /) -> Tool[InT, OutT]: ...


@overload
def tool(
    name: str,
    *,
    revision: str,
    execute: Callable[[InT, ExecuteContext], Awaitable[OutT]],
    recover: Callable[..., Any] | None = None,
    description: str | None = None,
    on_error: OnError = "raise",
    max_result_bytes: int | None = None,
    input_schema: Mapping[str, Any] | None = None,
    effects: Effects | None = None,
    approval: ApprovalMode | None = None,
    approver: Callable[..., Any] | None = None,
    effect_key: EffectKey | None = None,
    independent: bool = False,
) -> Tool[InT, OutT]: ...


@overload
def tool(
    name: str,
    *,
    revision: str,
    execute: Callable[[InT, ExecuteContext], OutT],
    recover: Callable[..., Any] | None = None,
    description: str | None = None,
    on_error: OnError = "raise",
    max_result_bytes: int | None = None,
    input_schema: Mapping[str, Any] | None = None,
    effects: Effects | None = None,
    approval: ApprovalMode | None = None,
    approver: Callable[..., Any] | None = None,
    effect_key: EffectKey | None = None,
    independent: bool = False,
) -> Tool[InT, OutT]: ...


@overload
def tool(
    name: str | None = None,
    *,
    revision: str,
    execute: None = None,
    recover: Callable[..., Any] | None = None,
    description: str | None = None,
    on_error: OnError = "raise",
    max_result_bytes: int | None = None,
    input_schema: Mapping[str, Any] | None = None,
    effects: Effects | None = None,
    approval: ApprovalMode | None = None,
    approver: Callable[..., Any] | None = None,
    effect_key: EffectKey | None = None,
    independent: bool = False,
) -> ToolDecorator: ...


def tool(
    name: str | None = None,
    *,
    revision: str | None = None,
    execute: Execute[Any, Any] | None = None,
    recover: Callable[..., Any] | None = None,
    description: str | None = None,
    on_error: OnError = "raise",
    max_result_bytes: int | None = None,
    input_schema: Mapping[str, Any] | None = None,
    effects: Effects | None = None,
    approval: ApprovalMode | None = None,
    approver: Callable[..., Any] | None = None,
    effect_key: EffectKey | None = None,
    independent: bool = False,
) -> Tool[Any, Any] | Callable[[Execute[Any, Any]], Tool[Any, Any]]:
    """Define a tool, directly or as a decorator.

    ``toolledger.tool("send_email", revision="3", execute=send)`` returns a ``Tool``;
    ``@toolledger.tool(revision="3")`` above ``def send_email(input, ctx)`` does the same,
    taking the name from the function and the description from its docstring.

    Args:
        name: The tool's name (defaults to the decorated function's name).
        revision: The code revision (required): part of every call's binding.
        execute: ``execute(input, ctx)``; omit it to get a decorator.
        recover: ``recover(ctx)``, called when a call's outcome was lost.
        description: Free text (defaults to the decorated function's docstring).
        on_error: ``"raise"`` or ``"result"``.
        max_result_bytes: Bound on the stored result.
        approval: ``None``, ``"always"`` or ``"effect-only"`` (see ``Tool``).
        approver: ``approver(request) -> Approved | Denied | Pending``.
        effect_key: ``None``, ``"input"`` or ``effect_key(input) -> str`` (see ``Tool``).
        independent: ``True`` when identical calls are independent actions (see ``Tool``).
        input_schema: The input's JSON Schema (see ``Tool``).
        effects: What the tool does to the world (see ``Tool``).

    Returns:
        A ``Tool``, or a decorator that makes one.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad name, revision or option,
            and for a missing ``revision`` (a bare ``@toolledger.tool`` included).
    """
    if callable(name) or revision is None:
        # ``@toolledger.tool`` without parentheses, or no revision: say what and why.
        raise InvalidArgumentError(
            message=(
                'toolledger.tool needs revision=, e.g. @toolledger.tool(revision="1"): the '
                "revision is part of every call's binding, so a changed tool (bump it) never "
                "receives a result stored by the old code"
            ),
            details={"argument": "revision"},
        )

    def build(fn: Execute[Any, Any], tool_name: str | None, doc: str | None) -> Tool[Any, Any]:
        if tool_name is None:
            raise InvalidArgumentError(message="tool() needs a name when execute is given")
        return Tool(
            name=tool_name,
            revision=revision,
            execute=fn,
            recover=recover,
            description=description if description is not None else doc,
            on_error=on_error,
            max_result_bytes=max_result_bytes,
            input_schema=input_schema,
            effects=effects,
            approval=approval,
            approver=approver,
            effect_key=effect_key,
            independent=independent,
        )

    if execute is not None:
        return build(execute, name, None)

    def decorate(fn: Execute[Any, Any]) -> Tool[Any, Any]:
        doc = inspect.getdoc(fn)
        return build(fn, name if name is not None else getattr(fn, "__name__", None), doc)

    return decorate
