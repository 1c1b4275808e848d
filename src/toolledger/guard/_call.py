"""One guarded call as a value, and what its flow asks a driver for. No I/O here.

Rules this module keeps:

- ``Call`` is the call as validated before anything is written: frozen, built once by
  the drivers (``_drivers.start``); the flow (``_flow``) decides over it and never
  changes it.
- The requests below are all a flow ever asks of its driver: every store read and every
  commit, opening the call's journal event, recording an approval decision, asking the
  approver, and running user code (``Execute``, ``Recover``). A driver performs them
  (sync, async or for a batch) and sends back the answer; a store error is thrown into
  the flow where it yielded. ``Abandoned`` is the one other thing a driver throws in.
- A stored payload never leaves the guard as the object a checkpoint record holds:
  ``outcome`` (the one constructor of a ``ToolOutcome`` from a record) and ``handed_out``
  give private copies.
- Free text from user code (an exception, a reason) is bounded before it is stored.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..checkpoint import copy_json
from ..checkpoint.model import Binding, CheckpointRecord, Status, fingerprint
from ..errors import InvalidArgumentError
from ..store import ApprovalRecord
from ..store.base import ClaimEffectKey, ReleaseEffectKey
from ..tools import Tool, ToolOutcome

__all__ = [
    "OPEN",
    "CANCELLATION",
    "EFFECT_KEY_MAX",
    "Abandoned",
    "ActionKeys",
    "Call",
    "Commit",
    "CreateReady",
    "EffectKey",
    "EndFields",
    "Execute",
    "Open",
    "FindDenial",
    "PutApproval",
    "Read",
    "ReadApproval",
    "ReadGate",
    "ReadHolder",
    "ReadOperation",
    "ReadTombstone",
    "RecordApproval",
    "Recover",
    "RecoveryFailed",
    "Request",
    "action_keys",
    "clip_reason",
    "describe",
    "effect_key_for",
    "error_payload",
    "group_errors",
    "handed_out",
    "join_claims",
    "outcome",
]

#: Exceptions that mean "stop", never "the tool failed": no recovery, no error result.
CANCELLATION: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit, GeneratorExit)
try:  # asyncio.CancelledError is a BaseException since 3.8
    import asyncio as _asyncio

    CANCELLATION = (*CANCELLATION, _asyncio.CancelledError)
except ImportError:  # pragma: no cover
    pass

#: Longest effect key a tool's function may return (characters); it is stored hashed.
EFFECT_KEY_MAX = 1024


# -- the call --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EffectKey:
    """A call's effect key as stored: its namespace and fingerprint."""

    namespace: str
    key: str

    def claim(self, call_id: str) -> ClaimEffectKey:
        """The op that binds the key to ``call_id`` (first op of the claim transaction)."""
        return ClaimEffectKey(self.namespace, self.key, call_id)

    def release(self, call_id: str, *, requires: int) -> ReleaseEffectKey:
        """The op that unbinds the key from ``call_id`` iff op ``requires`` won."""
        return ReleaseEffectKey(self.namespace, self.key, call_id, requires=requires)


@dataclass(frozen=True, slots=True)
class ActionKeys:
    """A call's same-action keys (fingerprints): the action's in its namespace, and in its
    conversation.

    The namespace key (``action``) is held by the latest call of the action: while that
    call is ``executing``/``uncertain``, the action is blocked under any other call id.
    The conversation key (``seen``) is held by the conversation's latest call of it: while
    that call's result is ``completed`` and not yet delivered (no model turn saw it), it is
    served to the same action under another id.
    """

    namespace: str
    action: str
    seen: str

    def claims(
        self, call_id: str, replaces: tuple[str | None, str | None] = (None, None)
    ) -> tuple[ClaimEffectKey, ClaimEffectKey]:
        """The two claims (the second gated on the first), taking over ``replaces``'s holds."""
        return (
            ClaimEffectKey(self.namespace, self.action, call_id, replaces=replaces[0]),
            ClaimEffectKey(self.namespace, self.seen, call_id, replaces=replaces[1], requires=0),
        )

    def releases(self, call_id: str, *, requires: int) -> tuple[ReleaseEffectKey, ...]:
        """The ops that unbind both keys from ``call_id`` iff op ``requires`` won."""
        return (
            ReleaseEffectKey(self.namespace, self.action, call_id, requires=requires),
            ReleaseEffectKey(self.namespace, self.seen, call_id, requires=requires),
        )


def action_keys(binding: Binding, conversation: str) -> ActionKeys:
    """Return the same-action keys of ``binding`` in ``conversation``.

    The action is tool name + revision + input fingerprint; what is stored is a SHA-256 of
    it (never the input), in the binding's namespace. The hashed text is ``json.dumps`` of
    ``["action", name, revision, fingerprint]`` (``["seen", …, conversation]``), built
    here without the encoder for the usual all-str parts (the same bytes: stored keys must
    keep matching).
    """
    parts = (binding.tool_name, binding.tool_revision, binding.input_fingerprint)
    name, revision, fp = parts
    # All str (the usual case), tested without a generator: this runs on every new call.
    strs = type(name) is str and type(revision) is str and type(fp) is str
    if strs and type(conversation) is str:
        body = ", ".join(map(_quoted, parts))
        action = f'["action", {body}]'
        seen = f'["seen", {body}, {_quoted(conversation)}]'
    else:
        action = json.dumps(["action", *parts])
        seen = json.dumps(["seen", *parts, conversation])
    return ActionKeys(
        binding.namespace,
        "sha256:" + hashlib.sha256(action.encode()).hexdigest(),
        "sha256:" + hashlib.sha256(seen.encode()).hexdigest(),
    )


#: ``json.dumps``' own quoting of a str (``ensure_ascii``), for ``action_keys``.
_quoted: Callable[[str], str] = json.encoder.encode_basestring_ascii


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One guarded call, validated: what the flow decides over (never changed).

    Attributes:
        tool: The tool.
        binding: The call's binding (namespace, call id, tool name, revision, input).
        input: The tool input (exact JSON).
        on_error: ``"raise"`` or ``"result"``.
        run_id: The run's id (handed to ``execute``/``recover``).
        justification: Passed to ``ExecuteContext`` and the journal event.
        justification_source: ``"developer"`` or ``"model"``.
        approval: The gate's mode (``None``, ``"always"``, ``"effect-only"``).
        approver: Who the gate asks (``None``: a stored decision is all that counts).
        effect: The call's effect key, or ``None``.
        approval_scope: For a gated call: its conversation (the run's ``conversation_id``,
            else the run id), where a denial holds for the same action under a new id;
            stored with its approval record. ``None`` for a call without a gate.
        conversation: The conversation whose same-action rules apply to the call, or
            ``None`` when none do (a tool with an effect key or ``independent=True``, or a
            store without effect keys); the flow derives the keys (``action_keys``) only
            when it claims, so a replay never computes them.
    """

    tool: Tool
    binding: Binding
    input: Any
    on_error: str
    run_id: str
    justification: str | None = None
    justification_source: str = "developer"
    approval: str | None = None
    approver: Callable[..., Any] | None = None
    effect: EffectKey | None = None
    conversation: str | None = None
    approval_scope: str | None = None


def effect_key_for(
    tool: Tool, binding: Binding, input: Any, conversation_id: str | None
) -> EffectKey | None:
    """Return the call's effect key, or ``None`` when the tool has none.

    A key function gets a private copy of the input (what it does to it never reaches
    the tool); the tool's revision is part of every key (revision 2 never gets revision
    1's stored result).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the tool's function raises or
            returns something other than a str of 1-1024 characters of valid Unicode
            (nothing is written).
    """
    spec = tool.effect_key
    if spec is None:
        return None
    if spec == "input":
        raw: object = f"{tool.name}:{tool.revision}:{binding.input_fingerprint}"
    else:
        try:
            raw = spec(copy_json(input))
        except Exception as exc:
            raise InvalidArgumentError(
                message=f"tool {tool.name}: its effect_key function raised "
                f"{type(exc).__qualname__}: {str(exc)[:200]}; nothing was claimed",
                details={"argument": "effect_key", "tool": tool.name},
            ) from exc
    if not (isinstance(raw, str) and 1 <= len(raw) <= EFFECT_KEY_MAX and _encodable(raw)):
        got = f"a str of {len(raw)} characters" if isinstance(raw, str) else type(raw).__name__
        raise InvalidArgumentError(
            message=f"tool {tool.name}: effect_key must return a str of 1-{EFFECT_KEY_MAX} "
            f"characters of valid Unicode; got {got}; nothing was claimed",
            details={"argument": "effect_key", "tool": tool.name},
        )
    scope = {
        "tool": tool.name,
        "revision": tool.revision,
        "key": raw,
        "conversation": conversation_id,
    }
    return EffectKey(binding.namespace, fingerprint(scope))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- the requests a flow yields ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Read:
    """Read a checkpoint (``store.get``); answer the record or ``None``."""

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class ReadGate:
    """Read a checkpoint and its stored approval at once; answer ``(record, approval())``.

    The answer's second item is a function returning the approval (decoded when called),
    or ``None`` when the store reads them apart (the gate then asks ``ReadApproval``).
    """

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class ReadApproval:
    """Read the stored approval for a call (``store.approval_get``)."""

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class FindDenial:
    """Find a stored denial of the same action in a conversation (``find_denial``)."""

    binding: Binding
    conversation: str


@dataclass(frozen=True, slots=True)
class PutApproval:
    """CAS an approval record (``store.approval_put``); answer whether it won."""

    record: ApprovalRecord
    expected_revision: int


@dataclass(frozen=True, slots=True)
class CreateReady:
    """Create a ``ready`` checkpoint unless one exists (durably); answer the stored one."""

    record: CheckpointRecord


@dataclass(frozen=True, slots=True)
class RecordApproval:
    """Record an ``approval`` journal event (``run.record_point``); flush it when asked."""

    tool_name: str
    status: str
    approval: dict[str, Any]
    checkpoint: dict[str, Any]
    flush: bool


@dataclass(frozen=True, slots=True)
class ReadHolder:
    """Read which call holds an effect key (``store.effect_key_holder``)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class ReadTombstone:
    """Read a call's tombstone (``store.tombstone``)."""

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class ReadOperation:
    """Read a call's operation-journal entry; answer it, or ``None`` when it is empty."""

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class EndFields:
    """The journal end record a completion carries: ``(status, outputs, meta, checkpoint)``."""

    status: str
    outputs: dict[str, Any]
    meta: dict[str, Any]
    checkpoint: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Commit:
    """Apply ``ops`` in one transaction; answer the ops' outcomes.

    ``claim``: a claim of a new or ready call (durable; the driver may batch it with other
    calls' claims and the runs' buffered journal records ride in it). ``end``: the
    call's journal end record, carried in the same transaction gated on op 0 winning.
    An op's ``requires`` indexes into ``ops`` (``join_claims`` re-bases a batch).
    """

    ops: tuple[Any, ...]
    durable: bool = True
    claim: bool = False
    end: EndFields | None = None


@dataclass(frozen=True, slots=True)
class Open:
    """Open the call's ``tool_call`` journal event; answer ``(attempt id, span)``."""


#: The one ``Open`` request (it has no fields).
OPEN = Open()


@dataclass(frozen=True, slots=True)
class Execute:
    """Call ``tool.execute(input, ctx)``; answer ``(True, output)`` or ``(False, exc)``."""

    binding: Binding
    attempt_id: str


@dataclass(frozen=True, slots=True)
class Recover:
    """Call ``tool.recover(ctx)``; answer ``(True, answer)`` or ``(False, exc)``."""

    binding: Binding
    attempt_id: str
    reason: str | None
    error: BaseException | None


class Abandoned(Exception):
    """Thrown into a flow at its ``Execute`` request: give the claim back, do not execute."""


Request = Any  # one of the request classes above, or the gate's ``ApprovalRequest``


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


# -- outcomes and errors -------------------------------------------------------------------

_REASON_MAX = 1024


def clip_reason(text: str) -> str:
    """Bound a reason stored on a record (``uncertain_reason``)."""
    return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1] + "…"


def describe(exc: BaseException) -> str:
    """One line naming an exception (its type and the start of its message)."""
    return f"{type(exc).__qualname__}: {str(exc)[:300]}"


def error_payload(exc: BaseException) -> dict[str, str]:
    """The stored result of a pre-effect failure with ``on_error="result"``."""
    return {"error": type(exc).__qualname__, "message": str(exc)[:2000]}


def group_errors(message: str, errors: builtins.list[BaseException]) -> BaseException:
    """An ``ExceptionGroup`` of ``errors`` (``RecoveryFailed`` where there is none)."""
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None and all(isinstance(e, Exception) for e in errors):
        result: BaseException = group(message, errors)
        return result
    fallback = RecoveryFailed(message)
    fallback.exceptions = tuple(errors)
    return fallback


class RecoveryFailed(Exception):
    """Python 3.10 stand-in for ``ExceptionGroup``: ``.exceptions`` holds both errors."""

    exceptions: tuple[BaseException, ...] = ()


def handed_out(record: CheckpointRecord) -> Any:
    """Return a private copy of ``record``'s stored payload (exact JSON, key order kept).

    Raises:
        AssertionError: the record has no result (callers check the status first).
    """
    assert record.result is not None
    return copy_json(record.result.payload)


# A frozen dataclass's __init__ sets each field through object.__setattr__; the slots' own
# descriptors set them at about a third of the cost (ToolOutcome has no __post_init__:
# nothing is skipped). Every call and every replay builds one.
(
    _SET_CALL_ID,
    _SET_TOOL_NAME,
    _SET_PAYLOAD,
    _SET_IS_ERROR,
    _SET_STATUS,
    _SET_REVISION,
    _SET_REPLAYED,
    _SET_RECOVERED,
    _SET_DEDUPLICATED_FROM,
) = (vars(ToolOutcome)[f.name].__set__ for f in dataclasses.fields(ToolOutcome))
if tuple(f.name for f in dataclasses.fields(ToolOutcome)) != (  # pragma: no cover
    "call_id", "tool_name", "payload", "is_error", "status", "revision", "replayed",
    "recovered", "deduplicated_from",
) or hasattr(ToolOutcome, "__post_init__"):  # fmt: skip
    raise AssertionError("the setters above must follow ToolOutcome's fields in order")
_new_object = object.__new__
_STATUS_VALUE: dict[Status, str] = {s: s.value for s in Status}


def outcome(
    record: CheckpointRecord,
    *,
    replayed: bool,
    recovered: bool = False,
    deduplicated_from: str | None = None,
) -> ToolOutcome:
    """Return the ``ToolOutcome`` of a call whose checkpoint ``record`` holds a result.

    The same object as ``ToolOutcome(call_id=..., ..., recovered=recovered)`` of the
    record's fields.
    """
    result = record.result
    assert result is not None
    binding = record.binding
    out: ToolOutcome = _new_object(ToolOutcome)
    _SET_CALL_ID(out, binding.call_id)
    _SET_TOOL_NAME(out, binding.tool_name)
    _SET_PAYLOAD(out, copy_json(result.payload))
    _SET_IS_ERROR(out, result.is_error)
    _SET_STATUS(out, _STATUS_VALUE[record.status])
    _SET_REVISION(out, record.revision)
    _SET_REPLAYED(out, replayed)
    _SET_RECOVERED(out, recovered)
    _SET_DEDUPLICATED_FROM(out, deduplicated_from)
    return out
