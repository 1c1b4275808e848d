"""Provider-neutral pieces of the adapters: parsing helpers, result texts, running calls.

Rules this module keeps:

- No SDK is imported: SDK objects are read through ``model_dump`` (pydantic) or as
  mappings, so plain dicts and SDK objects are accepted alike.
- Nothing the caller passed in is mutated; every function returns new lists and dicts.
- Result text is deterministic: a ``str`` payload is sent as is, anything else as
  canonical JSON, so re-sending a stored result gives the same bytes.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checkpoint import canonical_json
from ..checkpoint.model import Status, check_identifier, fingerprint
from ..errors import CheckpointError, InvalidArgumentError, OutcomeUnknownError
from ..store import using_store
from ..tools import Tool, ToolOutcome

if TYPE_CHECKING:
    from ..guard import Run

__all__ = [
    "AWAITING_APPROVAL_TEXT",
    "JUSTIFICATION",
    "NOT_EXECUTED",
    "OUTCOME_UNKNOWN",
    "ToolCall",
    "add_justification",
    "adeliver_calls",
    "arun_calls",
    "as_plain",
    "deliver_calls",
    "render",
    "repair_results",
    "run_calls",
    "unknown_text",
]

#: The argument every tool schema gets from ``with_justification``.
JUSTIFICATION = "justification"
JUSTIFICATION_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "Why this call is needed now, in one or two sentences (recorded in the "
    "audit journal; not passed to the tool).",
    # Bounded so that adapted schemas pass check_tool's unbounded_string rule.
    "maxLength": 1000,
}
#: What the model is told of a call whose outcome is unknown (``repair_transcript``, the
#: hand-loop helpers and every adapter): final and plain, since a model told only
#: "unknown" asks again under a new call id.
OUTCOME_UNKNOWN = (
    "outcome unknown: this action may already have happened and is being settled; do not retry it"
)
NOT_EXECUTED = "not executed"
#: A gated call waiting for a human decision (``ToolOutcome.status``), and what the model sees.
AWAITING_APPROVAL = "awaiting_approval"
AWAITING_APPROVAL_TEXT = "awaiting approval; not executed yet"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call parsed from a model response.

    ``args`` has the ``justification`` argument removed; ``justification`` is ``None``
    when the model omitted it. ``error`` explains arguments that could not be parsed;
    ``refused`` explains a call that cannot be run at all (no id). Either becomes that
    call's error result; nothing is checkpointed for it.
    """

    id: str
    name: str
    args: Any
    justification: str | None
    provider: str
    error: str | None = None
    refused: str | None = None


def as_plain(obj: Any) -> Any:
    """Return ``obj`` as plain JSON-like data (SDK pydantic objects are dumped)."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(obj, Mapping):
        return {k: as_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_plain(v) for v in obj]
    return obj


def unknown_text(unknown: OutcomeUnknownError) -> str:
    """The model's result for ``OUTCOME_UNKNOWN``: the call, or the same action asked before
    (``details["same_action_as"]``), may already have happened; do not retry it."""
    other = unknown.details.get("same_action_as")
    if isinstance(other, str):
        return (
            f"not run: the same action (call {other[:80]}) may already have happened and is "
            "being settled; do not retry it"
        )
    return OUTCOME_UNKNOWN


def field(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a mapping or an object."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def add_justification(schema: Any) -> dict[str, Any]:
    """Return a copy of a JSON schema object with a required ``justification`` string."""
    out: dict[str, Any] = copy.deepcopy(dict(as_plain(schema))) if schema else {"type": "object"}
    props = dict(out.get("properties") or {})
    if JUSTIFICATION not in props:
        props[JUSTIFICATION] = dict(JUSTIFICATION_SCHEMA)
    out["properties"] = props
    required = list(out.get("required") or [])
    if JUSTIFICATION not in required:
        required.append(JUSTIFICATION)
    out["required"] = required
    return out


def has_justification(schema: Any) -> bool:
    """Whether a schema already declares ``justification``."""
    props = field(schema, "properties") or {}
    return JUSTIFICATION in props


def split_args(args: Any) -> tuple[Any, str | None]:
    """Remove ``justification`` from the model's arguments."""
    if isinstance(args, Mapping) and JUSTIFICATION in args:
        rest = {k: v for k, v in args.items() if k != JUSTIFICATION}
        value = args[JUSTIFICATION]
        return rest, value if isinstance(value, str) and value.strip() else None
    return args, None


def render(payload: Any) -> str:
    """Return the text sent to the model for a stored payload (deterministic)."""
    return payload if isinstance(payload, str) else canonical_json(payload)


def _tools_by_name(tools: Iterable[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:
    if isinstance(tools, Mapping):
        return dict(tools)
    out = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise InvalidArgumentError(message="tools must be toolledger.Tool objects")
        out[t.name] = t
    return out


def _refusal(call: ToolCall, seen: Mapping[str, int]) -> str | None:
    """Why ``call`` gets an error result instead of running, or ``None``.

    Decided for the whole turn before anything executes: a call the guard would refuse
    (a bad id, arguments that are not exact JSON) fails only itself, never the turn, and
    two calls sharing an id both fail (neither runs: which result answers which would be
    a guess).
    """
    if call.refused is not None:
        return f"invalid tool call: {call.refused}"
    if call.error is not None:
        return f"invalid arguments: {call.error}"
    if seen.get(call.id, 0) > 1:
        return f"invalid tool call: duplicate call id {call.id!r:.80} in one response; not run"
    try:
        check_identifier(call.id, "call_id")
    except CheckpointError as exc:
        return f"invalid tool call: {exc.message}"
    try:
        fingerprint(call.args)
    except (CheckpointError, RecursionError) as exc:
        reason = exc.message if isinstance(exc, CheckpointError) else "nested too deeply"
        return f"invalid arguments: {reason}"
    return None


def _prepare(
    calls: Sequence[ToolCall], tools: Iterable[Tool] | Mapping[str, Tool]
) -> tuple[list[tuple[str, bool] | None], list[dict[str, Any]], list[int]]:
    table = _tools_by_name(tools)
    results: list[tuple[str, bool] | None] = [None] * len(calls)
    items: list[dict[str, Any]] = []
    where: list[int] = []
    seen = Counter(c.id for c in calls if c.refused is None)
    for i, c in enumerate(calls):
        refusal = _refusal(c, seen)
        if refusal is not None:
            results[i] = (refusal, True)
        elif c.name not in table:
            results[i] = (f"unknown tool {c.name!r}", True)
        else:
            items.append(
                {
                    "tool": table[c.name],
                    "call_id": c.id,
                    "input": c.args,
                    "justification": c.justification,
                    "justification_source": "model",
                    "on_error": "result",
                }
            )
            where.append(i)
    return results, items, where


def _conclude(
    calls: Sequence[ToolCall],
    results: list[tuple[str, bool] | None],
    where: list[int],
    outs: Sequence[Any],
) -> list[tuple[ToolCall, str, bool]]:
    failure: BaseException | None = None
    for i, out in zip(where, outs, strict=True):
        if isinstance(out, ToolOutcome) and out.status == AWAITING_APPROVAL:
            results[i] = (AWAITING_APPROVAL_TEXT, True)
        elif isinstance(out, ToolOutcome):
            results[i] = (render(out.payload), out.is_error)
        elif isinstance(out, OutcomeUnknownError):
            results[i] = (unknown_text(out), True)
        elif failure is None:
            failure = out
    if failure is not None:
        raise failure
    return [(c, *r) for c, r in zip(calls, results, strict=True) if r is not None]


def run_calls(
    run: Run, calls: Sequence[ToolCall], tools: Iterable[Tool] | Mapping[str, Tool]
) -> list[tuple[ToolCall, str, bool]]:
    """Run parsed calls one after another through ``run.call`` (``on_error="result"``).

    Each call claims just before it runs, not the whole turn at once: a process killed
    inside one call leaves only that call's outcome unknown, and the turn's later calls,
    never claimed, run when the model asks again (``run.call_many`` claims a turn in one
    transaction: after such a kill its unstarted calls are indistinguishable from the one
    that ran, and wait for ``toolledger resolve``). Two durable commits per call, as always.

    Returns:
        ``(call, text, is_error)`` per call, in order. An unknown tool or unparseable
        arguments give an error text (nothing is checkpointed); an unknown outcome gives
        ``OUTCOME_UNKNOWN`` (nothing is re-run).

    Raises:
        BindingConflictError: a call id was used for another call.
        StoreError, or an interruption: as ``run.call``.
    """
    results, items, where = _prepare(calls, tools)
    outs: list[Any] = []
    for item in items:
        spec = dict(item)
        tool = spec.pop("tool")
        try:
            outs.append(run.call(tool, **spec))
        except Exception as exc:  # kept per call, as call_many(return_exceptions=True)
            outs.append(exc)
    return _conclude(calls, results, where, outs)


async def arun_calls(
    run: Run, calls: Sequence[ToolCall], tools: Iterable[Tool] | Mapping[str, Tool]
) -> list[tuple[ToolCall, str, bool]]:
    """Async ``run_calls``: the calls run concurrently through ``run.acall``.

    Their claims share one transaction (concurrent ``acall``s are batched); async tools
    are awaited. Same returns and errors as ``run_calls``.
    """
    import asyncio

    results, items, where = _prepare(calls, tools)
    outs = await asyncio.gather(
        *(run.acall(item.pop("tool"), **item) for item in items), return_exceptions=True
    )
    for out in outs:
        if isinstance(out, BaseException) and not isinstance(out, Exception):
            raise out  # an interruption or cancellation
    return _conclude(calls, results, where, outs)


def repair_results(
    store: Any, namespace: str | None, call_ids: Sequence[str]
) -> dict[str, tuple[str, bool]]:
    """Return a truthful ``(text, is_error)`` for each orphaned call id, from its checkpoint.

    completed or later: the stored payload; executing/uncertain: ``OUTCOME_UNKNOWN``;
    no checkpoint or ready: ``NOT_EXECUTED``. A path or URL is opened read-only: a
    missing database is ``NOT_FOUND`` (never "not executed" for calls it cannot see).
    """
    if hasattr(store, "store") and hasattr(store, "namespace"):  # a Run
        store, namespace = store.store, namespace or store.namespace
    ns = namespace or "default"
    out: dict[str, tuple[str, bool]] = {}
    with using_store(store, readonly=True) as st:
        for call_id in call_ids:
            try:
                rec = st.get(ns, call_id)
            except InvalidArgumentError:
                rec = None
            if rec is None or rec.status is Status.READY:
                out[call_id] = (NOT_EXECUTED, True)
            elif rec.status in (Status.EXECUTING, Status.UNCERTAIN) or rec.result is None:
                out[call_id] = (OUTCOME_UNKNOWN, True)
            else:
                out[call_id] = (render(rec.result.payload), rec.result.is_error)
    return out


def call_ids_with_checkpoints(run: Run, calls: Sequence[ToolCall]) -> list[str]:
    """The ids among ``calls`` that have a checkpoint with a result (deliverable)."""
    out = []
    seen = Counter(c.id for c in calls if c.refused is None)
    for c in calls:
        rec = None if _refusal(c, seen) is not None else run.store.get(run.namespace, c.id)
        if rec is not None and rec.result is not None:
            out.append(c.id)
    return out


def deliver_calls(
    run: Run,
    calls: Sequence[ToolCall],
    post: Callable[[dict[str, Any]], Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Post the results of ``calls`` once (one model request) through their checkpoints.

    ``post(payloads)`` gets ``{call_id: stored payload}``. Calls without a checkpoint
    (unknown tools, bad arguments) are not tracked; when no call has one, ``post`` is
    simply called. Returns what ``post`` returned, or ``None`` when every call was
    already delivered (nothing is posted twice).

    Raises:
        DeliveryUncertainError: ``DELIVERY_UNCERTAIN`` unless ``redeliver=True``.
    """
    from ..guard import deliver_many

    ids = call_ids_with_checkpoints(run, calls)
    if not ids:
        return post({})
    return deliver_many(run, ids, post, redeliver=redeliver)


async def adeliver_calls(
    run: Run,
    calls: Sequence[ToolCall],
    post: Callable[[dict[str, Any]], Any],
    *,
    redeliver: bool = False,
) -> Any:
    """Async ``deliver_calls``: ``post(payloads)`` may be async."""
    import inspect

    from ..guard import Delivery, apost_once

    ids = call_ids_with_checkpoints(run, calls)
    if not ids:
        result = post({})
        return await result if inspect.isawaitable(result) else result
    return await apost_once(Delivery(run, ids, redeliver), post)
