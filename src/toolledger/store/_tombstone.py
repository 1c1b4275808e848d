"""Tombstones: building them from an erased record, storing them as JSON. No I/O here.

A tombstone keeps no content: the binding, status, revision, timestamps, transition names
and SHA-256 hashes of what was erased. Every backend stores ``dump_tombstone``'s JSON and
reads it back with ``load_tombstone``; ``tombstoned_error`` is the one ``TOMBSTONED``
error every backend raises when a checkpoint is created under an erased key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..checkpoint import compact_json
from ..checkpoint.model import (
    Binding,
    CheckpointRecord,
    Status,
    check_time,
    fingerprint,
    format_time,
    parse_time,
)
from ..errors import InvalidCheckpointError, TombstonedError
from .base import Tombstone

__all__ = ["build_tombstone", "dump_tombstone", "load_tombstone", "sha256_text", "tombstoned_error"]


def sha256_text(text: str) -> str:
    """Return ``"sha256:<hex>"`` over the UTF-8 bytes of ``text``."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_tombstone(
    record: CheckpointRecord,
    *,
    stored_json: str,
    transitions: Sequence[str],
    operation_json: str | None,
    erased_at: datetime,
    reason: str,
) -> Tombstone:
    """Return the tombstone that replaces ``record`` (whose stored JSON is ``stored_json``)."""
    return Tombstone(
        binding=record.binding,
        status=record.status,
        revision=record.revision,
        created_at=record.created_at,
        updated_at=record.updated_at,
        completed_at=record.completed_at,
        delivered_at=record.delivered_at,
        erased_at=check_time(erased_at, "erased_at"),
        reason=reason,
        result_sha256=None if record.result is None else fingerprint(record.result.to_dict()),
        record_sha256=sha256_text(stored_json),
        operation_sha256=None if operation_json is None else sha256_text(operation_json),
        transitions=tuple(transitions),
    )


def dump_tombstone(t: Tombstone) -> str:
    """Return the stored JSON of a tombstone."""

    def time(value: datetime | None) -> str | None:
        return None if value is None else format_time(value)

    return compact_json(
        {
            "binding": t.binding.to_dict(),
            "status": t.status.value,
            "revision": t.revision,
            "created_at": time(t.created_at),
            "updated_at": time(t.updated_at),
            "completed_at": time(t.completed_at),
            "delivered_at": time(t.delivered_at),
            "erased_at": time(t.erased_at),
            "reason": t.reason,
            "result_sha256": t.result_sha256,
            "record_sha256": t.record_sha256,
            "operation_sha256": t.operation_sha256,
            "transitions": list(t.transitions),
        }
    )


def load_tombstone(text: str, namespace: str, call_id: str) -> Tombstone:
    """Parse a stored tombstone; raise ``INVALID_CHECKPOINT`` naming its key if malformed."""
    try:
        d: dict[str, Any] = json.loads(text)

        def time(name: str) -> datetime | None:
            value = d.get(name)
            return None if value is None else parse_time(value, name)

        created, updated, erased = time("created_at"), time("updated_at"), time("erased_at")
        if created is None or updated is None or erased is None:
            raise ValueError("a tombstone needs created_at, updated_at and erased_at")
        return Tombstone(
            binding=Binding.from_dict(d["binding"]),
            status=Status(d["status"]),
            revision=int(d["revision"]),
            created_at=created,
            updated_at=updated,
            completed_at=time("completed_at"),
            delivered_at=time("delivered_at"),
            erased_at=erased,
            reason=str(d["reason"]),
            result_sha256=d.get("result_sha256"),
            record_sha256=str(d["record_sha256"]),
            operation_sha256=d.get("operation_sha256"),
            transitions=tuple(str(x) for x in d.get("transitions", ())),
        )
    except Exception as exc:
        raise InvalidCheckpointError(
            message=f"stored tombstone {namespace}/{call_id} is invalid: {exc}",
            details={"namespace": namespace, "call_id": call_id, "reason": str(exc)},
        ) from exc


def tombstoned_error(t: Tombstone) -> TombstonedError:
    """Return the ``TOMBSTONED`` error for a call whose checkpoint was erased."""
    ns, cid = t.key
    return TombstonedError(
        message=f"checkpoint {ns}/{cid} was erased by retention at "
        f"{format_time(t.erased_at)} ({t.reason}); it was {t.status.value} at revision "
        f"{t.revision}. The tool is not run again: use a new call id for a new call.",
        details={
            "namespace": ns,
            "call_id": cid,
            "erased_at": format_time(t.erased_at),
            "reason": t.reason,
            "status": t.status.value,
            "revision": t.revision,
        },
    )
