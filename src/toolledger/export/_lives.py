"""A tool call's checkpoint life, read from the store's history, for the viewers.

Rules this module keeps: it only reads (``Store.history``, ``Store.get``,
``Store.tombstone``); a key that cannot be read is reported as such, never guessed, and
never stops an export. Times are the stored ISO-8601 UTC text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..checkpoint.model import format_time
from ..errors import CheckpointError
from ..store import Store

__all__ = ["checkpoint_life", "checkpoint_lives"]


def _t(value: Any) -> str | None:
    return None if value is None else format_time(value)


def checkpoint_life(store: Store, namespace: str, call_id: str) -> dict[str, Any]:
    """Return ``{status, delivered, delivered_at, delivery_attempts, uncertain_reason,
    transitions: [{revision, status, transition, at, attempt_id, delivery_id}], erased}``.
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
