"""Record headers as the writer chains them: row columns and canonical text. Pure; no I/O.

Rules this module keeps:

- ``RecordHeader.full(seq)`` is ``canonical(header)`` of the record's full header (the
  layout is in ``_records``) with that ``seq``, and ``stored`` is
  ``canonical(stored_header(header))``: the text ``header_json`` writes for the same
  header dict (a property test pins it). The text is kept in two parts around ``seq``, so
  re-chaining a record after another writer's (a new ``seq``) encodes nothing again.
- ``HeaderFormat.header`` writes that text from parts without dispatching on their types:
  ids (``new_id``: hex), times (``now``: ISO-8601) and the content hash (hex) are the
  journal's own ASCII text and go in as they are; the phase is one of ``PHASES``; kinds,
  names, statuses, the justification source and span ids are escaped as
  ``canonical_json`` escapes strings; the checkpoint link is written as ``canonical``
  writes it; the run id's text is made once per run. Callers pass what they checked or
  made themselves. What an event's records share (ids, kind, name, span ids) comes as one
  value (``EventFields``): the live ``EventHandle`` for a start or end record, a
  ``PointEvent`` for an event written as one record.
- ``record_header`` takes any header dict (a newer writer's keys, any values) through
  ``header_json`` and ``canonical``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple, Protocol, cast

from ._content import JUSTIFICATION_MISSING
from ._records import FORMAT_VERSION, canonical, header_json

__all__ = ["PHASES", "EventFields", "HeaderFormat", "PointEvent", "RecordHeader", "record_header"]

#: A record's ``phase``: a step's start or end record, or a one-record event (which, with
#: ``ended_at`` in its header, began at its ``at`` and ended then).
PHASES = ("start", "end", "point")

_esc = json.encoder.encode_basestring  # the escaping canonical_json uses for strings
_new_header = object.__new__
_MAX_SAFE_INT = 2**53 - 1


class EventFields(Protocol):
    """What every record of one event shares in its header: a live ``EventHandle`` is
    one (its start and end records pass it as it is); ``point_event`` makes one for an
    event written as one record at once."""

    @property
    def event_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def span_id(self) -> str | None: ...


class PointEvent(NamedTuple):
    """``EventFields`` of an event without a live handle (made by ``point_event``)."""

    event_id: str
    parent_id: str | None
    kind: str
    name: str
    trace_id: str | None
    span_id: str | None


#: ``point_event((event_id, parent_id, kind, name, trace_id, span_id))``: a ``PointEvent``
#: made without its Python ``__new__`` (a C call: no frame on a replay's record).
point_event = cast(
    Callable[[tuple[str, str | None, str, str, str | None, str | None]], PointEvent],
    partial(tuple.__new__, PointEvent),
)


class RecordHeader:
    """One record's header: its row columns and canonical text around ``seq``."""

    __slots__ = (
        "after_seq",
        "at",
        "before_seq",
        "event_id",
        "kind",
        "name",
        "parent_id",
        "run_id",
        "status",
        "stored",
    )

    def __init__(
        self,
        run_id: str,
        event_id: str,
        parent_id: str | None,
        kind: str,
        name: str,
        status: str,
        at: str,
        before_seq: str,
        after_seq: str,
        stored: str,
    ) -> None:
        self.run_id = run_id
        self.event_id = event_id
        self.parent_id = parent_id
        self.kind = kind
        self.name = name
        self.status = status
        self.at = at
        self.before_seq = before_seq  # '{"at":…,"run_id":…,"seq":'
        self.after_seq = after_seq  # ',"status":…,"v":1}'
        self.stored = stored  # the canonical header kept in the row's ``data``

    def full(self, seq: int) -> str:
        """Return the canonical full header with ``seq`` (what the chain hashes)."""
        return self.before_seq + str(seq) + self.after_seq


class HeaderFormat:
    """Write the headers of one run's records (see the module's rules)."""

    __slots__ = ("_run_seq", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._run_seq = '"run_id":' + _esc(run_id) + ',"seq":'

    def header(
        self,
        event: EventFields,
        status: str,
        phase: str,
        at: str,
        content_sha256: str,
        checkpoint: dict[str, Any] | None = None,
        justification_source: str | None = None,
        justification_missing: bool = False,
        *,
        run_end: bool = False,
        ended_at: str | None = None,
    ) -> RecordHeader:
        """Return the header of one record of ``event``.

        Args:
            event: What the event's records share: ids made by ``new_id``
                (``parent_id`` ``None``: top level), checked ``kind`` and ``name``, the
                span's ids (``span_id`` is kept with a ``trace_id`` only) or ``None``.
            status: A checked string.
            phase: One of ``PHASES``.
            at: A time made by ``now``.
            content_sha256: The hex SHA-256 of the record's canonical content.
            checkpoint: The checkpoint link, or ``None`` (no ``checkpoint`` key).
            justification_source: ``developer``/``model`` with ``justification_missing``,
                or ``None`` (neither key).
            run_end: Whether this is the run's closing record (``run_end: true``).
            ended_at: A ``point`` record of an event that began at ``at`` and ended
                later: its end time (made by ``now``), or ``None`` (no ``ended_at`` key).
        """
        ck = ""
        if checkpoint is not None:
            # ``canonical(checkpoint)``; a link ``{"namespace", "call_id", "revision"}`` of
            # ASCII strings and a safe int (or ``None``) is written without the encoder.
            namespace, call_id = checkpoint.get("namespace"), checkpoint.get("call_id")
            revision = checkpoint.get("revision", checkpoint)
            if (
                len(checkpoint) == 3
                and type(namespace) is str
                and type(call_id) is str
                and namespace.isascii()
                and call_id.isascii()
                and (
                    revision is None
                    or (type(revision) is int and -_MAX_SAFE_INT <= revision <= _MAX_SAFE_INT)
                )
            ):
                ck = (
                    f'"checkpoint":{{"call_id":{_esc(call_id)},"namespace":{_esc(namespace)},'
                    f'"revision":{"null" if revision is None else revision}}},'
                )
            else:
                ck = '"checkpoint":' + canonical(checkpoint) + ","
        why = ""
        if justification_source is not None:
            why = (
                f'"{JUSTIFICATION_MISSING}":{"true" if justification_missing else "false"},'
                f'"justification_source":{_esc(justification_source)},'
            )
        end = '"run_end":true,' if run_end else ""
        event_id, parent_id, kind, name = event.event_id, event.parent_id, event.kind, event.name
        trace_id = event.trace_id
        span = trace = ""
        if trace_id is not None:
            trace = '"trace_id":' + _esc(trace_id) + ","
            span_id = event.span_id
            if span_id is not None:
                span = '"span_id":' + _esc(span_id) + ","
        parent = "null" if parent_id is None else '"' + parent_id + '"'
        sha = f'"content_sha256":"{content_sha256}",'
        if ended_at is not None:
            sha += f'"ended_at":"{ended_at}",'
        # ``RecordHeader(...)``, its slots filled here: one call less per record.
        header = _new_header(RecordHeader)
        header.run_id = self.run_id
        header.event_id = event_id
        header.parent_id = parent_id
        header.kind = kind
        header.name = name
        header.status = status
        header.at = at
        header.before_seq = (
            f'{{"at":"{at}",{ck}{sha}"event_id":"{event_id}",'
            f'{why}"kind":{_esc(kind)},"name":{_esc(name)},"parent_id":{parent},'
            f'"phase":"{phase}",{end}{self._run_seq}'
        )
        header.after_seq = f',{span}"status":{_esc(status)},{trace}"v":{FORMAT_VERSION}}}'
        header.stored = (
            f'{{{ck}{sha}{why}"phase":"{phase}",{end}{span}{trace}"v":{FORMAT_VERSION}}}'
        )
        return header


def record_header(header: Mapping[str, Any]) -> RecordHeader:
    """Return the ``RecordHeader`` of any full header without ``seq`` (``header_json``'s
    text: a newer writer's keys, any exact-JSON values).

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` when a value is not exact JSON.
        KeyError: a row column is missing.
    """
    # Canonical keys sort by UTF-16 code units: the keys before ``seq`` and those after it
    # are two canonical objects whose members, joined around ``seq``, are the full one.
    seq_key = "seq".encode("utf-16-be")
    before = {k: v for k, v in header.items() if k != "seq" and k.encode("utf-16-be") < seq_key}
    after = {k: v for k, v in header.items() if k != "seq" and k not in before}
    head, tail = canonical(before), canonical(after)
    stored = header_json(header)[1]
    return RecordHeader(
        header["run_id"],
        header["event_id"],
        header["parent_id"],
        header["kind"],
        header["name"],
        header["status"],
        header["at"],
        head[:-1] + ("," if before else "") + '"seq":',
        ("," + tail[1:]) if after else "}",
        stored,
    )
