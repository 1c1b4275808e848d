"""A tool call's checkpoint life, read from the store's history, for the viewers.

Rules this module keeps: it only reads (``Store.history``, ``Store.get``,
``Store.tombstone``, ``Store.approval_get``); a key that cannot be read is reported as
such, never guessed, and never stops an export. Times are the stored ISO-8601 UTC text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..checkpoint.model import format_time
from ..errors import CheckpointError
from ..journal import epoch_ms
from ..store import Store

__all__ = ["checkpoint_life", "checkpoint_lives"]


def _t(value: Any) -> str | None:
    return None if value is None else format_time(value)


def _approval(store: Store, namespace: str, call_id: str) -> dict[str, Any] | None:
    """The call's approval request as stored now (what an approver is shown), or ``None``.

    ``input`` is the store's copy (``None`` once too large to keep, or scrubbed by an
    erasure); a damaged record is reported under ``error``.
    """
    try:
        record = store.approval_get(namespace, call_id)
    except CheckpointError as exc:
        return {"error": f"{exc.code}: {exc.message}"}
    if record is None:
        return None
    out = {
        "status": record.status.value,
        "ticket": record.ticket,
        "justification": record.justification,
        "description": record.description,
        "input": record.input,
        "tool": record.binding.tool_name,
        "requested_at": _t(record.requested_at),
        "by": record.by,
        "reason": record.reason,
        "decided_at": _t(record.decided_at),
        "expires_at": _t(record.expires_at),
        "binding_fingerprint": record.binding_fingerprint,
    }
    try:
        json.dumps(out)
    except (TypeError, ValueError) as exc:  # a damaged row (e.g. bytes where text belongs)
        return {"error": f"INVALID_CHECKPOINT: the stored approval request is damaged ({exc})"}
    return out


def checkpoint_life(store: Store, namespace: str, call_id: str) -> dict[str, Any]:
    """Return ``{status, delivered, delivered_at, delivery_attempts, uncertain_reason,
    transitions: [{revision, status, transition, at, at_ms, attempt_id, delivery_id}],
    erased, approval}`` (``approval``: the stored request and decision, when gated).
    """
    life: dict[str, Any] = {"namespace": namespace, "call_id": call_id}
    try:
        history = store.history(namespace, call_id)
        current = store.get(namespace, call_id)
        tomb = None if current is not None else store.tombstone(namespace, call_id)
    except CheckpointError as exc:
        life.update(status="invalid", error=f"{exc.code}: {exc.message}", transitions=[])
        return life
    life["transitions"] = [
        {
            "revision": h.revision,
            "status": h.status.value,
            "transition": h.transition,
            "at": _t(h.at),
            "at_ms": epoch_ms(h.at),
            "attempt_id": h.record.execution_fence,
            "delivery_id": h.record.delivery_fence,
            "delivery_attempts": h.record.delivery_attempts,
            "uncertain_reason": h.record.uncertain_reason,
        }
        for h in history
    ]
    if current is not None:
        life.update(
            status=current.status.value,
            revision=current.revision,
            delivered=current.delivered_at is not None,
            delivered_at=_t(current.delivered_at),
            completed_at=_t(current.completed_at),
            delivery_attempts=current.delivery_attempts,
            uncertain_reason=current.uncertain_reason,
        )
    elif tomb is not None:
        life.update(
            status=tomb.status.value,
            revision=tomb.revision,
            delivered=tomb.delivered_at is not None,
            delivered_at=_t(tomb.delivered_at),
            completed_at=_t(tomb.completed_at),
            erased={"at": _t(tomb.erased_at), "reason": tomb.reason},
            erased_transitions=list(tomb.transitions),
        )
    else:
        life["status"] = "missing"
    approval = _approval(store, namespace, call_id)
    if approval is not None:
        life["approval"] = approval
    return life


def checkpoint_lives(store: Store, events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Return ``{"namespace/call_id": life}`` for every checkpoint the events link to."""
    out: dict[str, Any] = {}
    for ev in events:
        link = ev.get("checkpoint")
        if not isinstance(link, Mapping):
            continue
        ns, cid = link.get("namespace"), link.get("call_id")
        if isinstance(ns, str) and isinstance(cid, str) and f"{ns}/{cid}" not in out:
            out[f"{ns}/{cid}"] = checkpoint_life(store, ns, cid)
    return out
