"""The journal's Run: it records why things happened, in one local database.

``toolledger.run(...)`` returns ``toolledger.Run`` (``guard._run``), which is this class
plus guarded tool calls; the journal itself knows nothing of the guard.

Rules this module keeps:

- A run is a context manager (``with`` and ``async with``). Entering stores the run (or
  resumes it when ``run_id`` names a stored run) and starts its ``invoke_agent`` span;
  leaving records a ``finish`` event (unless ``run.finish`` did), flushes every buffered
  record, marks the run ``completed`` or ``failed`` and ends the span. An exception leaving
  the block marks the run failed and is re-raised unchanged.
- Recording never breaks the agent: a storage failure is appended to ``run.errors`` and
  warned about once (``JournalWarning``), never raised, unless ``strict=True``. Errors in
  the *arguments* (a non-str justification, a missing artifact file) are raised at the
  call site: nothing is invented.
- Telemetry never breaks a run: every hook call is guarded; a failure is logged once.
- What the guard and the integrations record through is the journal seam
  (``journal._seam.JournalSeam``: ``begin_event``, ``ride``, ``prepare_end``,
  ``record_point``, ``flush``), implemented by ``Recorder``. The telemetry span ids of
  each event are stored in its record header as ``trace_id`` and ``span_id``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from functools import partial
from types import EllipsisType, TracebackType
from typing import Any, TypeVar

from opentelemetry.trace import TracerProvider

from ..checkpoint.model import Binding, check_identifier
from ..errors import CheckpointError, InvalidArgumentError, StoreBusyError
from ..store import Store, StoreLike, store_for
from ..store.base import RunRow
from ..telemetry import NOOP_TELEMETRY, CallFacts, NoopSpan, Redactor, SpanHandle, TelemetryHooks
from ._content import (
    Artifact,
    check_event_args,
    check_name,
    check_text,
    error_info,
    new_id,
    now,
)
from ._facts import TAIL, find_end
from ._header import HeaderFormat, point_event
from ._lifecycle import EventHandle, Events
from ._recorder import Recorder
from ._records import (
    MAC_HMAC_SHA256,
    RUN_FORMAT_VERSION,
    content_hash,
    content_json,
    journal_key,
    key_id,
    run_genesis,
)
from ._step import Step
from ._writer import ChainWriter

__all__ = ["Run", "current_run"]

_R = TypeVar("_R", bound="Run")
_CURRENT: ContextVar[Run | None] = ContextVar("toolledger_current_run", default=None)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")


def current_run() -> Run | None:
    """Return the run active in the current context (``with toolledger.run(...)``)."""
    return _CURRENT.get()


class Run(Recorder):
    """A recorded agent run; create it with ``toolledger.run(...)``.

    Attributes:
        run_id: 128-bit id (32 hex digits) unless given.
        goal, agent, namespace: As given.
        store: The ``Store`` holding the journal.
        telemetry: The ``TelemetryHooks``; ``span``: the run's span (after entering).
        errors: Recording failures (storage, telemetry is logged only), oldest first; at
            most ``MAX_ERRORS`` are kept (the first and the latest ones), ``error_count``
            counts them all.
        status: ``created``, ``running``, ``completed`` or ``failed``.
    """

    def __init__(
        self,
        goal: str,
        *,
        agent: str | None = None,
        db: StoreLike | None = None,
        run_id: str | None = None,
        namespace: str = "default",
        strict: bool = False,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | None = None,
        capture_intent: bool = True,
        redact: Redactor | None = None,
        conversation_id: str | None = None,
        user_id: str | None = None,
        key: str | bytes | None = None,
    ) -> None:
        if not isinstance(goal, str):
            raise InvalidArgumentError(message=f"goal must be a str; got {type(goal).__name__}")
        self.goal: str = check_text(goal, "goal") or ""
        self.agent = check_text(agent, "agent")
        #: The conversation (session, thread) and end user, for telemetry; never invented.
        self.conversation_id = check_text(conversation_id, "conversation_id")
        self.user_id = check_text(user_id, "user_id")
        self._summary: str | None = None
        # The checkpoint's rule, so a bad namespace is refused here, not at the first call.
        self.namespace = check_identifier(namespace, "namespace")
        if run_id is not None and not (isinstance(run_id, str) and _ID.match(run_id)):
            raise InvalidArgumentError(
                message="run_id must be 1-128 characters of letters, digits and ._:-; "
                f"got {run_id!r}"
            )
        self.run_id: str = run_id or new_id()
        self.events = Events(self, HeaderFormat(self.run_id))
        #: The journal key (``key=`` or ``$TOOLLEDGER_JOURNAL_KEY``): an HMAC-keyed chain.
        self._key = journal_key(key)
        self.strict = bool(strict)
        self.store: Store
        self.store, self._owns_store = store_for(db)
        self.errors: list[BaseException] = []  # bounded: MAX_ERRORS (see record_failure)
        self.error_count = 0
        self.status = "created"
        self.started_at: str | None = None
        self.span: SpanHandle = NoopSpan()
        self._warned = False
        self._telemetry_warned = False
        self._finished: str | None = None  # the event id of run.finish(...)
        self._token: Token[Run | None] | None = None
        self._active: contextlib.AbstractContextManager[None] | None = None
        self._writer: ChainWriter | None = None
        self._doc: dict[str, Any] = {}
        self.telemetry: TelemetryHooks = NOOP_TELEMETRY
        try:
            from ..telemetry import hooks_for

            self.telemetry = hooks_for(
                tracer_provider=tracer_provider,
                capture_content=capture_content,
                capture_intent=capture_intent,
                redact=redact,
            )
        except Exception as exc:
            self._telemetry_failed(exc)

    def __repr__(self) -> str:
        return f"<Run {self.run_id} {self.status} goal={self.goal!r}>"

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self: _R) -> _R:
        fresh = self.status == "created"
        try:
            self.start()
        except BaseException:
            if fresh:  # no __exit__ follows: let go of the store this run opened
                self.release_store()
            raise
        self._token = _CURRENT.set(self)
        # The run's span is current for the block: spans a framework (or its
        # instrumentation) starts inside nest under it, one trace without an extra call.
        active = self.span.activate()
        active.__enter__()
        self._active = active
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._active is not None:
            self._active.__exit__(None, None, None)  # never raises (telemetry)
            self._active = None
        if self._token is not None:
            with contextlib.suppress(ValueError):  # exited in another context
                _CURRENT.reset(self._token)
            self._token = None
        self.close(error=exc)

    async def __aenter__(self: _R) -> _R:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def start(self) -> None:
        """Store the run (or resume a stored one with the same id) and start its span.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when already started, or when
                ``run_id`` names a run of another namespace.
            StoreError: only with ``strict=True``.
        """
        if self.status != "created":
            raise InvalidArgumentError(message=f"run {self.run_id} was started already")
        self.status = "running"
        self.started_at = now()
        header: dict[str, Any] = {
            "v": RUN_FORMAT_VERSION,
            "run_id": self.run_id,
            "namespace": self.namespace,
            "agent": self.agent,
            "started_at": self.started_at,
            "content_sha256": content_hash({"goal": self.goal}, maybe_float=False),
        }
        # Only when given, so that runs without them keep the header they always had.
        if self.conversation_id is not None:
            header["conversation_id"] = self.conversation_id
        if self.user_id is not None:
            header["user_id"] = self.user_id
        header.update(self.header_facts())
        if self._key is not None:
            header["mac"] = MAC_HMAC_SHA256
            header["key_id"] = key_id(self._key)
        # The span starts first so that the run document can carry its live ids.
        self.span = self.safe_telemetry(
            self.telemetry.run_started,
            {
                "run_id": self.run_id,
                "agent": self.agent,
                "goal": self.goal,
                "namespace": self.namespace,
                "started_at": self.started_at,
                "conversation_id": self.conversation_id,
                "user_id": self.user_id,
                "links": self.span_links(),
            },
            default=self.span,
        )
        head, count, pending = self._store_run(header)
        genesis = self._doc["genesis"]
        self._writer = ChainWriter(
            self.store,
            self.run_id,
            head=head or genesis,
            genesis=genesis,
            count=count,
            strict=self.strict,
            on_error=self.record_failure,
            pending_row=pending,
            key=self._key,
        )

    def header_facts(self) -> dict[str, Any]:
        """Facts a subclass adds to the run's hashed header (none here; a replayed or
        forked run names its source: ``replay_of``/``forked_from``)."""
        return {}

    def span_links(self) -> list[dict[str, str]]:
        """Spans the run's span links to (``{"trace_id", "span_id"}``; none here: a
        replayed or forked run links to its source run's)."""
        return []

    def _store_run(self, header: dict[str, Any]) -> tuple[str | None, int, RunRow | None]:
        """Store (or resume) the run; return ``(head, count, row still to store)``."""
        genesis = run_genesis(header)
        self._doc = {
            "header": header,
            "content": {"goal": self.goal},
            "genesis": genesis,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **self._span_ids(),
        }
        row = RunRow(
            run_id=self.run_id,
            namespace=self.namespace,
            agent=self.agent,
            goal=self.goal,
            status="running",
            started_at=self.started_at or now(),
            data=json.dumps(self._doc, ensure_ascii=False, separators=(",", ":")),
        )
        try:
            existing = self.store.get_run(self.run_id)
            if existing is None:
                self.store.create_run(row)
                return None, 0, None
        except InvalidArgumentError as exc:
            if "exists" not in exc.message:
                raise
            existing = self.store.get_run(self.run_id)
        except CheckpointError as exc:
            self.record_failure(exc)
            return None, 0, row  # the writer stores the row before its first batch
        assert existing is not None
        return (*self._resume(existing), None)

    def _span_ids(self) -> dict[str, str]:
        """The run span's live ids (``trace_id``, ``span_id``), when telemetry records."""
        trace_id = getattr(self.span, "trace_id", None)
        span_id = getattr(self.span, "span_id", None)
        if isinstance(trace_id, str) and isinstance(span_id, str):
            return {"trace_id": trace_id, "span_id": span_id}
        return {}

    def _resume(self, existing: RunRow) -> tuple[str | None, int]:
        if existing.namespace != self.namespace:
            raise InvalidArgumentError(
                message=f"run {self.run_id} exists in namespace {existing.namespace!r}",
                details={"run_id": self.run_id},
            )
        try:
            doc = json.loads(existing.data)
        except ValueError:
            doc = {}
        self._check_resumed_key(doc)
        if isinstance(doc, dict) and "genesis" in doc:
            # A resumed run keeps the trace ids of its first live span, if it had one.
            self._doc = {
                **self._span_ids(),
                **doc,
                "host": socket.gethostname(),
                "pid": os.getpid(),
            }
            self.started_at = existing.started_at
        self._doc["resumed_at"] = now()
        try:
            self.store.update_run(
                self.run_id,
                status="running",
                data=json.dumps(self._doc, ensure_ascii=False, separators=(",", ":")),
            )
        except CheckpointError as exc:
            self.record_failure(exc)
        return existing.head_hash, existing.event_count

    def _check_resumed_key(self, doc: Any) -> None:
        """A resumed run chains as it started: keyed with its key, or unkeyed."""
        header = doc.get("header") if isinstance(doc, dict) else None
        if not isinstance(header, dict) or header.get("mac") is None:
            self._key = None  # an unkeyed run stays unkeyed
            return
        if self._key is None or key_id(self._key) != header.get("key_id"):
            raise InvalidArgumentError(
                message=f"run {self.run_id} is keyed (key id {header.get('key_id')}): resume it "
                "with its key (key= or TOOLLEDGER_JOURNAL_KEY)",
                details={"run_id": self.run_id},
            )

    def close(self, error: BaseException | None = None) -> None:
        """Finish the run: record ``finish`` if needed, flush, update the run, end its span.

        Raises:
            StoreError: only with ``strict=True``.
        """
        if self.status != "running":
            return
        status = "failed" if error is not None else "completed"
        ended = now()
        self._close_record(status, error, ended)
        self.status = status
        writer = self._writer
        assert writer is not None
        stored = False
        try:
            stored = writer.close()
        finally:
            self._doc["end"] = {"status": self.status, "ended_at": ended}
            # The run span's live ids, so telemetry re-export keeps the same parentage.
            if isinstance(getattr(self.span, "span_id", None), str):
                self._doc["trace_id"] = self.span.trace_id
                self._doc["span_id"] = self.span.span_id
            if error is not None:
                self._doc["end"]["error"] = error_info(error)
            if self.errors:
                self._doc["end"]["recording_errors"] = self.error_count
            text = json.dumps(self._doc, ensure_ascii=False, separators=(",", ":"))
            try:
                self._store_end(self.status, ended, text)
            except CheckpointError as exc:
                if self.strict:
                    raise
                self.record_failure(exc)
                stored = False
            busy = bool(self.errors) and isinstance(self.errors[-1], StoreBusyError)
            later = not stored and (busy or writer.pending > 0)
            if later:
                # Another writer held the store's lock past the busy timeout, or records are
                # still buffered (refused, or an interruption): the writer stores them once
                # the store takes them (or at process exit), then the columns.
                writer.finish_later(partial(self._end_later, self.status, ended, text))
            head, count = writer.chained
            final = {
                "run_id": self.run_id,
                "agent": self.agent,
                "goal": self.goal,
                "namespace": self.namespace,
                "started_at": self.started_at,
                "ended_at": ended,
                "status": self.status,
                "head_hash": head,
                "event_count": count,
                "summary": self._summary,
                "conversation_id": self.conversation_id,
                "user_id": self.user_id,
            }
            self.safe_telemetry(self.span.end, final, error)
            if not later:
                self.release_store()

    def release_store(self) -> None:
        """Close the store if this run opened it (``db=`` a path or URL); never raises.

        At the run's end, and for a run that cannot be used: its start failed, or its
        constructor did after opening the store.
        """
        if self._owns_store:
            with contextlib.suppress(Exception):
                self.store.close()

    def _end_later(self, status: str, ended: str, data: str) -> None:
        """The end the store refused at ``close``: the columns, then the owned store's close."""
        self._store_end(status, ended, data)
        self.release_store()

    def _store_end(self, status: str, ended: str, data: str) -> None:
        """Make the ``status``/``ended_at`` columns match the chain's last closing record.

        Another process ending the same run may append its closing record between ours and
        this update: after each update the chain is read again and the columns follow its
        last closing record, until they agree (each closer re-reads after writing, so the
        last one to write leaves the chain's last end).
        """
        text: str | None = data
        writer = self._writer
        for attempt in range(16):
            self.store.update_run(self.run_id, status=status, ended_at=ended, data=text)
            text = None
            row = self.store.get_run(self.run_id)
            if (
                attempt == 0
                and row is not None
                and writer is not None
                and not writer.pending
                and row.head_hash == writer.stored_head
            ):
                return  # our records, closing one included, are the last stored: agreed
            count = 0 if row is None else row.event_count
            end = find_end(self.store.read_events(self.run_id, after_seq=count - TAIL - 1))
            if end is None or end.status is None or end.at is None:
                return  # our end was not stored: verify will say the columns disagree
            if (end.status, end.at) == (status, ended):
                return
            status, ended = end.status, end.at

    def _close_record(self, status: str, error: BaseException | None, ended: str) -> None:
        """Chain the run's end (``journal._facts``): the closing ``finish`` record.

        Its header holds the status, the end time (``at``, equal to the ``ended_at``
        column) and ``run_end: true``; its content the error. After ``run.finish(...)`` it
        is that event's end record, else a one-record ``finish`` event.
        """
        err = error_info(error)
        text, digest = content_json({} if err is None else {"error": err}, False, True)
        event = point_event((self._finished or new_id(), None, "finish", "finish", None, None))
        header = self.events.headers.header(
            event, status, "end" if self._finished else "point", ended, digest, run_end=True
        )
        self.append(header, text)

    @property
    def head_hash(self) -> str | None:
        """The hash of the last record written (buffered or stored)."""
        return None if self._writer is None else self._writer.chained[0]

    @property
    def event_count(self) -> int:
        """Records written so far (buffered or stored)."""
        return 0 if self._writer is None else self._writer.chained[1]

    # -- recording ---------------------------------------------------------------------

    def step(
        self,
        name: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        **inputs: Any,
    ) -> Step:
        """Return a step context manager (``with`` / ``async with``).

        Args:
            name: What the step does.
            justification: Why (``None`` when unknown: nothing is invented).
            justification_source: ``developer`` or ``model``; a model that omitted the
                justification marks it missing (``Event``'s field).
            **inputs: Recorded as the step's inputs (non-JSON values get markers).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad name or justification.
        """
        check_event_args(name, "step name", justification, justification_source)
        return Step(
            self.events,
            {
                "name": name,
                "justification": justification,
                "justification_source": justification_source,
                "inputs": inputs,
            },
            checked=True,
        )

    def approval(
        self,
        name: str,
        *,
        granted: bool,
        by: str,
        reason: str | None = None,
        for_call: str | Binding | None = None,
    ) -> str:
        """Record who allowed or refused an action; return the event id.

        Args:
            name: The action (e.g. the tool name).
            granted: ``True`` (status ``granted``) or ``False`` (status ``refused``).
            by: Who decided (a user, a policy).
            reason: Why.
            for_call: A call id (or a ``Binding``) this approval is bound to: the
                approval records that call's binding fingerprint when it is known.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments.
        """
        check_name(name, "approval name")
        if not isinstance(granted, bool):
            raise InvalidArgumentError(message="granted must be True or False")
        check_name(by, "by")
        check_text(reason, "reason")
        approval: dict[str, Any] = {"granted": granted, "by": by, "reason": reason}
        link = None
        if for_call is not None:
            approval["for_call"], approval["binding_fingerprint"], link = self._bind(for_call)
        event_id = self.record_point(
            "approval",
            name,
            status="granted" if granted else "refused",
            approval=approval,
            checkpoint=link,
            parent=None,
        )
        self.flush()
        return event_id

    def _bind(self, for_call: Any) -> tuple[str, str | None, dict[str, Any] | None]:
        from ..checkpoint import fingerprint

        binding = for_call if isinstance(for_call, Binding) else None
        if binding is None:
            call_id = check_name(for_call, "for_call")
            record = None
            try:
                record = self.store.get(self.namespace, call_id)
            except CheckpointError as exc:
                self.record_failure(exc)
            if record is None:
                return call_id, None, None
            binding = record.binding
            revision: int | None = record.revision
        else:
            revision = None
        fp = fingerprint(
            {
                "namespace": binding.namespace,
                "call_id": binding.call_id,
                "tool_name": binding.tool_name,
                "tool_revision": binding.tool_revision,
                "input_fingerprint": binding.input_fingerprint,
            }
        )
        link = {"namespace": binding.namespace, "call_id": binding.call_id, "revision": revision}
        return binding.call_id, fp, link

    def record_event(
        self,
        kind: str,
        name: str,
        status: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: object = None,
        outputs: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        parent: EventHandle | EllipsisType | None = ...,
        facts: Callable[[], CallFacts] | None = None,
        error: BaseException | None = None,
    ) -> str:
        """Write an event that began and ended at once as one record; return its id.

        What ``begin_event`` + ``handle.end(status, outputs=, meta=)`` would record, in one
        ``point`` record (its ``at`` is the event's start and end): readers merge it into
        the same event. The record is buffered (written by the flush policy or carried by
        the next transaction that rides the buffer). Its span starts and ends here;
        ``facts()`` (a tool call's ``CallFacts``) is what its span ends with, called only
        when the run has telemetry; the span is told nothing else. ``error`` is recorded
        as the event's error (its ``code`` for a toolledger error) and ends the span with
        status ERROR.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
        """
        return self.events.record_event(
            kind,
            name,
            status,
            justification=justification,
            justification_source=justification_source,
            inputs=inputs,
            outputs=outputs,
            meta=meta,
            checkpoint=checkpoint,
            parent=parent,
            facts=facts,
            error=error,
        )

    def record_checked_event(
        self,
        kind: str,
        name: str,
        status: str,
        *,
        justification: str | None,
        justification_source: str,
        inputs: object,
        outputs: dict[str, Any],
        meta: dict[str, Any],
        checkpoint: dict[str, Any],
        parent: EventHandle | EllipsisType | None = ...,
        facts: Callable[[], CallFacts] | None = None,
    ) -> str:
        """``record_event`` of arguments its caller checked already: the same record.

        ``kind``, ``name`` and ``status`` pass ``check_name`` (a tool's name is an
        identifier), ``justification`` passed ``check_text`` and ``justification_source``
        ``check_source``; ``checkpoint`` is a link ``{"namespace", "call_id",
        "revision"}`` of str ids and a non-negative int revision (what
        ``checkpoint_link`` returns for it). A guarded call's one ``replayed`` record:
        nothing above is checked again, and without telemetry the record is built with
        no event dict and no span. With telemetry it is ``record_event``.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when the run is not running.
        """
        return self.events.record_checked_event(
            kind,
            name,
            status,
            justification=justification,
            justification_source=justification_source,
            inputs=inputs,
            outputs=outputs,
            meta=meta,
            checkpoint=checkpoint,
            parent=parent,
            facts=facts,
        )

    def note(self, text: str) -> str:
        """Record a note at the current nesting level; return its event id."""
        return self.record_point("note", "note", text=text)

    def finish(self, summary: str | None = None) -> str:
        """Record the run's outcome (``finish``); the run still ends when the block does."""
        check_text(summary, "summary")
        event_id = self.record_point("finish", "finish", text=summary, parent=None)
        self._summary = summary
        self._finished = event_id  # the run's closing record ends this event
        return event_id

    def add_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None = None,
    ) -> Artifact:
        """Record an artifact (by hash) at the current nesting level."""
        return self.events.record_artifact(
            path_or_bytes, name=name, media_type=media_type, parent=None
        )
