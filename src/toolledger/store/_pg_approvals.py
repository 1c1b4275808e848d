"""The approvals part of the ``Store`` contract on PostgreSQL (mixed into ``PostgresStore``).

Rules this module keeps:

- Same table shape as SQLite (migrations 3 ``approvals`` and 9 ``approvals_by_action`` in
  ``store/_pg_schema.py``): the record is stored as ``dump_approval``'s exact JSON text,
  never ``jsonb``; ``action`` (``action_digest``) and ``conversation_id`` are written with
  it, so a denial of the same action is one index read.
- Writes go through the store's connection layer (``self._db.write``) with a probe, so a
  ``COMMIT`` that got no answer is resolved by reading the row back, never guessed.
- Always durable: a decision must survive a power loss once ``approval_put`` returns.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..checkpoint.model import Binding, format_time
from ._approval_record import (
    ApprovalRecord,
    action_digest,
    approval_statuses,
    latest_denial,
    load_approval,
    prepare_put,
)

if TYPE_CHECKING:
    from ._pg_conn import PgConnections

__all__ = ["TEMPLATES", "PgApprovals"]

_GET = "SELECT record FROM {s}.approvals WHERE namespace = %s AND call_id = %s"
_INSERT = (
    "INSERT INTO {s}.approvals (status, revision, requested_at, record, action, "
    "conversation_id, namespace, call_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT DO NOTHING"
)
_UPDATE = (
    "UPDATE {s}.approvals SET status = %s, revision = %s, requested_at = %s, record = %s, "
    "action = %s, conversation_id = %s WHERE namespace = %s AND call_id = %s AND revision = %s"
)
_DENIALS = (
    "SELECT namespace, call_id, record FROM {s}.approvals WHERE namespace = %s AND action = %s "
    "AND conversation_id = %s AND status = 'denied' AND call_id <> %s "
    "ORDER BY requested_at, call_id"
)
#: Statements the schema's migrations run (``_pg_schema``), by name in ``Queries``.
TEMPLATES = {
    "approvals_all": "SELECT namespace, call_id, record FROM {s}.approvals",
    "approvals_set_action": "UPDATE {s}.approvals SET action = %s, conversation_id = %s "
    "WHERE namespace = %s AND call_id = %s",
}


@functools.lru_cache(maxsize=64)
def _rendered(template: str, schema: str) -> str:
    """Return ``template`` for ``schema``, rendered once (not on every call)."""
    from ._pg_schema import qualify  # late: psycopg is an optional dependency

    return qualify(template, schema).as_string(None)


class PgApprovals:
    """``approval_get``/``approval_put``/``find_denial``/``list_approvals`` for
    ``PostgresStore``.

    Needs ``self.schema`` and ``self._db``, the store's connection layer (``read`` and
    ``write(fn, *, durable, probe_fn, details)``).
    """

    schema: str
    _db: PgConnections

    def _approval_sql(self, template: str) -> str:
        return _rendered(template, self.schema)

    def approval_get(self, namespace: str, call_id: str) -> ApprovalRecord | None:
        """Return the call's approval or ``None``; see ``Store.approval_get``."""
        rows = self._db.read(self._approval_sql(_GET), (namespace, call_id))
        return load_approval(rows[0][0], namespace, call_id) if rows else None

    def approval_put(self, record: ApprovalRecord, *, expected_revision: int) -> bool:
        """Store ``record`` iff at ``expected_revision`` (durable); see ``Store``."""
        text = prepare_put(record, expected_revision)
        ns, cid = record.key
        values = (
            record.status.value,
            record.revision,
            format_time(record.requested_at),
            text,
            action_digest(record.binding),
            record.conversation_id,
        )
        insert, update, get = (self._approval_sql(t) for t in (_INSERT, _UPDATE, _GET))

        def write(cur: Any) -> bool:
            if expected_revision == -1:
                cur.execute(insert, (*values, ns, cid))
            else:
                cur.execute(update, (*values, ns, cid, expected_revision))
            return bool(cur.rowcount == 1)

        def check(cur: Any, wrote: bool) -> bool | None:
            if not wrote:
                return None
            cur.execute(get, (ns, cid))
            row = cur.fetchone()
            return row is not None and row[0] == text

        won: bool = self._db.write(
            write,
            durable=True,
            probe_fn=check,
            details={"namespace": ns, "call_id": cid, "revision": record.revision},
        )
        return won

    def find_denial(self, binding: Binding, conversation: str) -> ApprovalRecord | None:
        """Return the latest denial of ``binding``'s action in ``conversation`` under
        another call id (one index read); see ``Capabilities.denials_by_action``."""
        params = (binding.namespace, action_digest(binding), conversation, binding.call_id)
        rows = self._db.read(self._approval_sql(_DENIALS), params)
        denials = [load_approval(text, ns, cid) for ns, cid, text in rows]
        return latest_denial(denials, binding, conversation)

    def list_approvals(
        self,
        *,
        status: str | Iterable[str] | None = None,
        namespace: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[ApprovalRecord]:
        """Return approvals, oldest request first; see ``Store.list_approvals``."""
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        statuses = approval_statuses(status)
        if statuses is not None:
            where.append("status = ANY(%s)")
            params.append(statuses)
        if namespace is not None:
            where.append("namespace = %s")
            params.append(namespace)
        template = "SELECT namespace, call_id, record FROM {s}.approvals"
        if where:
            template += " WHERE " + " AND ".join(where)
        template += " ORDER BY requested_at, namespace, call_id"
        if limit is not None:
            template += " LIMIT %s"
            params.append(int(limit))
        rows = self._db.read(self._approval_sql(template), params)
        return [load_approval(text, ns, cid) for ns, cid, text in rows]
