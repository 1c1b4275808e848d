"""The approvals part of the ``Store`` contract on SQLite (mixed into ``SQLiteStore``).

Rules this module keeps:

- Same table shape as PostgreSQL (migrations 3 ``approvals`` and 11 ``approvals_by_action``
  in ``store/_sqlite_schema.py``, their twins in ``_pg_schema.py``): the record is stored
  as ``dump_approval``'s exact JSON text; ``action`` (``action_digest``) and
  ``conversation_id`` are written with it, so a denial of the same action is one index read.
- Writes go through the store's connection layer (``self._write``): one ``BEGIN
  IMMEDIATE`` transaction, a CAS on ``revision`` plus a row-count check.
- Always durable: a decision must survive a power loss once ``approval_put`` returns.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from ..checkpoint.model import Binding, format_time
from ._approval_record import (
    ApprovalRecord,
    action_digest,
    approval_statuses,
    latest_denial,
    load_approval,
    prepare_put,
)

__all__ = ["SqliteApprovals"]


class SqliteApprovals:
    """``approval_get``/``approval_put``/``find_denial``/``list_approvals`` for
    ``SQLiteStore``.

    Needs ``self._read(sql, params)`` and ``self._write(fn, *, durable)``, the store's
    connection layer.
    """

    _read: Callable[..., builtins.list[Any]]
    _write: Callable[..., Any]

    def approval_get(self, namespace: str, call_id: str) -> ApprovalRecord | None:
        """Return the call's approval or ``None``; see ``Store.approval_get``."""
        rows = self._read(
            "SELECT record FROM approvals WHERE namespace = ? AND call_id = ?",
            (namespace, call_id),
        )
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

        def write(conn: sqlite3.Connection) -> bool:
            if expected_revision == -1:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO approvals (namespace, call_id, status, revision, "
                    "requested_at, record, action, conversation_id) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (ns, cid, *values),
                )
            else:
                cur = conn.execute(
                    "UPDATE approvals SET status = ?, revision = ?, requested_at = ?, record = ?, "
                    "action = ?, conversation_id = ? "
                    "WHERE namespace = ? AND call_id = ? AND revision = ?",
                    (*values, ns, cid, expected_revision),
                )
            return cur.rowcount == 1

        won: bool = self._write(write, durable=True)
        return won

    def find_denial(self, binding: Binding, conversation: str) -> ApprovalRecord | None:
        """Return the latest denial of ``binding``'s action in ``conversation`` under
        another call id (one index read); see ``Capabilities.denials_by_action``."""
        rows = self._read(
            # INDEXED BY: without statistics the planner may prefer the primary key's
            # namespace prefix, which reads every approval of the namespace.
            "SELECT namespace, call_id, record FROM approvals INDEXED BY approvals_action "
            "WHERE namespace = ? "
            "AND action = ? AND conversation_id = ? AND status = 'denied' AND call_id <> ? "
            "ORDER BY requested_at, call_id",
            (binding.namespace, action_digest(binding), conversation, binding.call_id),
        )
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
        where, params = [], []
        statuses = approval_statuses(status)
        if statuses is not None:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params.extend(statuses)
        if namespace is not None:
            where.append("namespace = ?")
            params.append(namespace)
        sql = "SELECT namespace, call_id, record FROM approvals"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY requested_at, namespace, call_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [load_approval(text, ns, cid) for ns, cid, text in self._read(sql, params)]
