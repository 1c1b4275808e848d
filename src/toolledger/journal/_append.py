"""One record added to a stored run from outside it (a person's decision). Reads only.

Rules this module keeps:

- ``find_call`` finds the run and the ``tool_call`` event of a checkpointed call by the
  event's checkpoint link (header ``checkpoint``: namespace and call id), among the runs
  of its namespace that started before the call was created, newest first, at most
  ``MAX_RUNS`` of them; ``None`` when none holds it (a call made without a run's journal).
- ``point_row`` builds the next record of a stored run as its own writer would: a
  ``point`` record chained after the run's stored head (``seq`` = its count), keyed with
  the run's key when the run is keyed (``key=`` or ``TOOLLEDGER_JOURNAL_KEY``). The caller
  appends it with ``AppendEvents(expected_count=count)`` (a CAS: another writer's append
  in between makes it lose, and the caller builds it again).
- Nothing here writes: the caller's transaction carries the row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, NotFoundError
from ..store.base import EventRow, Store, event_row_of
from ._content import new_id, now
from ._header import HeaderFormat, point_event
from ._records import canonical, chain_hash, journal_key, key_id
from ._values import to_json

__all__ = ["MAX_RUNS", "find_call", "point_row"]

#: Runs searched for a call's ``tool_call`` event.
MAX_RUNS = 64


def find_call(
    store: Store, namespace: str, call_id: str, *, created_at: str
) -> tuple[str, str] | None:
    """Return ``(run_id, event_id)`` of the call's ``tool_call`` event, or ``None``.

    Args:
        created_at: The checkpoint's creation time as stored (runs that started later
            cannot hold the call).
    """
    needle = json.dumps(call_id)
    scanned = 0
    for run in store.list_runs(namespace=namespace):
        if run.started_at > created_at:
            continue
        scanned += 1
        if scanned > MAX_RUNS:
            break
        for row in store.read_events(run.run_id):
            if row.kind != "tool_call" or needle not in row.data:
                continue
            try:
                link = json.loads(row.data)["header"].get("checkpoint")
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            if (
                isinstance(link, dict)
                and link.get("call_id") == call_id
                and link.get("namespace") == namespace
            ):
                return run.run_id, row.event_id
    return None


def point_row(
    store: Store,
    run_id: str,
    *,
    kind: str,
    name: str,
    status: str,
    parent_id: str | None,
    content: Mapping[str, Any],
    checkpoint: Mapping[str, Any] | None,
    key: str | bytes | None = None,
) -> tuple[EventRow, int]:
    """Return the run's next record (a ``point`` event) and the count it goes after.

    Raises:
        NotFoundError: ``NOT_FOUND`` when the run is not stored.
        InvalidArgumentError: ``INVALID_ARGUMENT`` when the run is keyed and ``key`` (or
            ``TOOLLEDGER_JOURNAL_KEY``) is not its key.
    """
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundError(message=f"no run {run_id}", details={"run_id": run_id})
    try:
        doc = json.loads(run.data)
    except ValueError:
        doc = {}
    header = doc.get("header") if isinstance(doc, dict) else None
    genesis = doc.get("genesis") if isinstance(doc, dict) else None
    if not isinstance(genesis, str):
        raise InvalidArgumentError(
            message=f"run {run_id} has no chain genesis (a damaged run document)",
            details={"run_id": run_id},
        )
    mac = journal_key(key)
    if isinstance(header, dict) and header.get("mac") is not None:
        if mac is None or key_id(mac) != header.get("key_id"):
            raise InvalidArgumentError(
                message=f"run {run_id} is keyed (key id {header.get('key_id')}): pass its key "
                "(key= or TOOLLEDGER_JOURNAL_KEY)",
                details={"run_id": run_id},
            )
    else:
        mac = None  # an unkeyed run stays unkeyed
    body, floats = to_json(dict(content))
    content_json = canonical(body, maybe_float=floats)
    digest = hashlib.sha256(content_json.encode("utf-8")).hexdigest()
    link = None if checkpoint is None else dict(checkpoint)
    head = HeaderFormat(run_id).header(
        point_event((new_id(), parent_id, kind, name, None, None)),
        status,
        "point",
        now(),
        digest,
        checkpoint=link,
    )
    count = run.event_count
    prev = (run.head_hash or genesis) if count else genesis
    seq_header = head.full(count)
    row = event_row_of(
        run_id,
        count,
        head.event_id,
        head.parent_id,
        kind,
        name,
        status,
        head.at,
        prev,
        chain_hash(prev, seq_header, mac),
        '{"header":' + head.stored + ',"content":' + content_json + "}",
    )
    return row, count
