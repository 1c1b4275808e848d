"""``toolledger.run(...)``: a Run records why things happened, in one local database.

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
- Internal API for the guard and approvals: ``run._begin_event(kind, name, *,
  justification=None, justification_source="developer", inputs=None, meta=None,
  checkpoint=None) -> EventHandle`` (see ``_handles``). The telemetry span ids of each
  event are stored in its record header as ``trace_id`` and ``span_id``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import re
import socket
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, TypeVar, cast, overload

from ..errors import CheckpointError, InvalidArgumentError
from ..store import Store, open_store
from ..store.base import RunRow
from ..telemetry._hooks import NOOP_TELEMETRY, NoopSpan, SpanHandle, TelemetryHooks
from ._events import FORMAT_VERSION, canonical, content_hash, run_genesis
from ._handles import Artifact, EventHandle, Step, _push, current_stack, error_info, hash_artifact
from ._values import to_json
from ._writer import ChainWriter

__all__ = ["JournalWarning", "Run", "current_run", "run", "traced"]

log = logging.getLogger("toolledger.journal")

F = TypeVar("F", bound=Callable[..., Any])

_CURRENT: ContextVar[Run | None] = ContextVar("toolledger_current_run", default=None)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")
_JUSTIFICATION_SOURCES = ("developer", "model")


class JournalWarning(RuntimeWarning):
    """A journal write failed; the agent goes on (see ``run.errors``)."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _new_id() -> str:
    return os.urandom(16).hex()


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 256:
        raise InvalidArgumentError(
            message=f"{what} must be a non-empty str of at most 256 characters; got {value!r}"
        )
    return value


def _check_text(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(
            message=f"{what} must be a str or None; got {type(value).__name__}"
        )
    return value


def current_run() -> Run | None:
    """Return the run active in the current context (``with toolledger.run(...)``)."""
    return _CURRENT.get()


class Run:
    """A recorded agent run; create it with ``toolledger.run(...)``.

    Attributes:
        run_id: 128-bit id (32 hex digits) unless given.
        goal, agent, namespace: As given.
        store: The ``Store`` holding the journal.
        telemetry: The ``TelemetryHooks``; ``span``: the run's span (after entering).
        errors: Recording failures (storage, telemetry is logged only), oldest first.
        status: ``created``, ``running``, ``completed`` or ``failed``.
    """

    def __init__(
        self,
        goal: str,
        *,
        agent: str | None = None,
        db: Any = None,
        run_id: str | None = None,
        namespace: str = "default",
        strict: bool = False,
        tracer_provider: Any = None,
        capture_content: bool | None = None,
        capture_intent: bool = True,
        redact: Any = None,
    ) -> None:
        if not isinstance(goal, str):
            raise InvalidArgumentError(message=f"goal must be a str; got {type(goal).__name__}")
        self.goal = goal
        self.agent = _check_text(agent, "agent")
        self.namespace = _check_name(namespace, "namespace")
        if run_id is not None and not (isinstance(run_id, str) and _ID.match(run_id)):
            raise InvalidArgumentError(
                message="run_id must be 1-128 characters of letters, digits and ._:-; "
                f"got {run_id!r}"
            )
        self.run_id: str = run_id or _new_id()
        self.strict = bool(strict)
        self._owns_store = not isinstance(db, Store) or isinstance(db, (str, os.PathLike))
        self.store: Store = open_store(db)
        self.errors: list[BaseException] = []
        self.status = "created"
        self.started_at: str | None = None
        self.span: SpanHandle = NoopSpan()
        self._warned = False
        self._telemetry_warned = False
        self._finished = False
        self._token: Token[Run | None] | None = None
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

    def __enter__(self) -> Run:
        self.start()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            with contextlib.suppress(ValueError):  # exited in another context
                _CURRENT.reset(self._token)
            self._token = None
        self.close(error=exc)

    async def __aenter__(self) -> Run:
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
        self.started_at = _now()
        header: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "run_id": self.run_id,
            "namespace": self.namespace,
            "agent": self.agent,
            "started_at": self.started_at,
            "content_sha256": content_hash({"goal": self.goal}, maybe_float=False),
        }
        head, count = self._store_run(header)
        genesis = self._doc["genesis"]
        self._writer = ChainWriter(
            self.store,
            self.run_id,
            head=head or genesis,
            genesis=genesis,
            count=count,
            strict=self.strict,
            on_error=self._record_failure,
        )
        self.span = self._safe_telemetry(
            self.telemetry.run_started,
            {
                "run_id": self.run_id,
                "agent": self.agent,
                "goal": self.goal,
                "namespace": self.namespace,
                "started_at": self.started_at,
            },
            default=self.span,
        )

    def _store_run(self, header: dict[str, Any]) -> tuple[str | None, int]:
        genesis = run_genesis(header)
        self._doc = {
            "header": header,
            "content": {"goal": self.goal},
            "genesis": genesis,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        try:
            existing = self.store.get_run(self.run_id)
            if existing is None:
                self.store.create_run(
                    RunRow(
                        run_id=self.run_id,
                        namespace=self.namespace,
                        agent=self.agent,
                        goal=self.goal,
                        status="running",
                        started_at=self.started_at or _now(),
                        data=json.dumps(self._doc, ensure_ascii=False, separators=(",", ":")),
                    )
                )
                return None, 0
        except InvalidArgumentError as exc:
            if "exists" not in exc.message:
                raise
            existing = self.store.get_run(self.run_id)
        except CheckpointError as exc:
            self._record_failure(exc)
            return None, 0
        assert existing is not None
        return self._resume(existing)

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
        if isinstance(doc, dict) and "genesis" in doc:
            self._doc = {**doc, "host": socket.gethostname(), "pid": os.getpid()}
            self.started_at = existing.started_at
        self._doc["resumed_at"] = _now()
        try:
            self.store.update_run(
                self.run_id,
                status="running",
                data=json.dumps(self._doc, ensure_ascii=False, separators=(",", ":")),
            )
        except CheckpointError as exc:
            self._record_failure(exc)
        return existing.head_hash, existing.event_count

    def close(self, error: BaseException | None = None) -> None:
        """Finish the run: record ``finish`` if needed, flush, update the run, end its span.

        Raises:
            StoreError: only with ``strict=True``.
        """
        if self.status != "running":
            return
        failed = error is not None
        if not self._finished:
            self._point(
                "finish",
                "finish",
                status="failed" if failed else "completed",
                text=None,
                error=error,
                parent=None,
            )
        self.status = "failed" if failed else "completed"
        writer = self._writer
        assert writer is not None
        try:
            writer.close()
        finally:
            ended = _now()
            self._doc["end"] = {"status": self.status, "ended_at": ended}
            # The run span's live ids, so telemetry re-export keeps the same parentage.
            if isinstance(getattr(self.span, "span_id", None), str):
                self._doc["trace_id"] = self.span.trace_id
                self._doc["span_id"] = self.span.span_id
            if error is not None:
                self._doc["end"]["error"] = error_info(error)
            if self.errors:
                self._doc["end"]["recording_errors"] = len(self.errors)
            try:
                self.store.update_run(
                    self.run_id,
                    status=self.status,
                    ended_at=ended,
                    data=json.dumps(self._doc, ensure_ascii=False, separators=(",", ":")),
                )
            except CheckpointError as exc:
                if self.strict:
                    raise
                self._record_failure(exc)
            final = {
                "run_id": self.run_id,
                "agent": self.agent,
                "goal": self.goal,
                "namespace": self.namespace,
                "started_at": self.started_at,
                "ended_at": ended,
                "status": self.status,
                "head_hash": writer.head,
                "event_count": writer.next_seq,
            }
            self._safe_telemetry(self.span.end, final, error)
            if self._owns_store:
                with contextlib.suppress(Exception):
                    self.store.close()

    def flush(self) -> bool:
        """Write every buffered record now; return whether nothing is left buffered.

        Raises:
            StoreError: only with ``strict=True``.
        """
        return True if self._writer is None else self._writer.flush()

    @property
    def head_hash(self) -> str | None:
        """The hash of the last record written (buffered or stored)."""
        return None if self._writer is None else self._writer.head

    @property
    def event_count(self) -> int:
        """Records written so far (buffered or stored)."""
        return 0 if self._writer is None else self._writer.next_seq

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
                justification gives ``justification_missing=True``.
            **inputs: Recorded as the step's inputs (non-JSON values get markers).

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for a bad name or justification.
        """
        _check_name(name, "step name")
        _check_text(justification, "justification")
        _check_source(justification_source)
        return Step(
            self,
            {
                "name": name,
                "justification": justification,
                "justification_source": justification_source,
                "inputs": inputs,
            },
        )

    def approval(
        self,
        name: str,
        *,
        granted: bool,
        by: str,
        reason: str | None = None,
        for_call: Any = None,
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
        _check_name(name, "approval name")
        if not isinstance(granted, bool):
            raise InvalidArgumentError(message="granted must be True or False")
        _check_name(by, "by")
        _check_text(reason, "reason")
        approval: dict[str, Any] = {"granted": granted, "by": by, "reason": reason}
        link = None
        if for_call is not None:
            approval["for_call"], approval["binding_fingerprint"], link = self._bind(for_call)
        event_id = self._point(
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
        from ..checkpoint import Binding, fingerprint

        binding = for_call if isinstance(for_call, Binding) else None
        if binding is None:
            call_id = _check_name(for_call, "for_call")
            record = None
            try:
                record = self.store.get(self.namespace, call_id)
            except CheckpointError as exc:
                self._record_failure(exc)
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

    def note(self, text: str) -> str:
        """Record a note at the current nesting level; return its event id."""
        return self._point("note", "note", text=text)

    def finish(self, summary: str | None = None) -> str:
        """Record the run's outcome (``finish``); the run still ends when the block does."""
        _check_text(summary, "summary")
        event_id = self._point("finish", "finish", text=summary, parent=None)
        self._finished = True
        return event_id

    def add_artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None = None,
    ) -> Artifact:
        """Record an artifact (by hash) at the current nesting level."""
        return self._artifact(path_or_bytes, name=name, media_type=media_type, parent=None)

    # -- guarded tool calls (issue 5 lives in toolledger.guard) ------------------------

    def call(self, tool: Any, **kw: Any) -> Any:
        """Run a guarded tool call (``toolledger.guard.call``)."""
        from ..guard import call  # type: ignore[import-not-found,unused-ignore]

        return call(self, tool, **kw)

    async def acall(self, tool: Any, **kw: Any) -> Any:
        """Run a guarded tool call asynchronously (``toolledger.guard.acall``)."""
        from ..guard import acall  # type: ignore[import-not-found,unused-ignore]

        return await acall(self, tool, **kw)

    def deliver(self, *args: Any, **kw: Any) -> Any:
        """Deliver a stored tool result (``toolledger.guard.deliver``)."""
        from ..guard import deliver  # type: ignore[import-not-found,unused-ignore]

        return deliver(self, *args, **kw)

    async def adeliver(self, *args: Any, **kw: Any) -> Any:
        """Deliver a stored tool result asynchronously (``toolledger.guard.adeliver``)."""
        from ..guard import adeliver  # type: ignore[import-not-found,unused-ignore]

        return await adeliver(self, *args, **kw)

    def call_many(self, *args: Any, **kw: Any) -> Any:
        """Run parallel tool calls of one model turn (``toolledger.guard.call_many``)."""
        from ..guard import call_many  # type: ignore[import-not-found,unused-ignore]

        return call_many(self, *args, **kw)

    # -- the internal event API --------------------------------------------------------

    def _begin_event(
        self,
        kind: str,
        name: str,
        *,
        justification: str | None = None,
        justification_source: str = "developer",
        inputs: Any = None,
        meta: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> EventHandle:
        """Write an event's start record, start its span, push it as the current parent.

        Returns:
            An ``EventHandle``; call ``.end(status, ...)`` exactly once.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments (nothing written).
            StoreError: only with ``strict=True``.
        """
        from ._handles import _checkpoint_link

        self._require_running()
        _check_name(kind, "kind")
        _check_name(name, "name")
        _check_text(justification, "justification")
        _check_source(justification_source)
        link = None if checkpoint is None else _checkpoint_link(checkpoint)
        content: dict[str, Any] = {}
        floats = False
        if inputs is not None:
            content["inputs"], floats = to_json(inputs)
        if justification is not None:
            content["justification"] = justification
        meta_value: dict[str, Any] = {}
        if meta:
            meta_value, f2 = to_json(dict(meta))
            floats |= f2
            content["meta"] = meta_value
        parent = self._parent()
        event_id = _new_id()
        missing = justification is None and justification_source == "model"
        event: dict[str, Any] = {
            "run_id": self.run_id,
            "event_id": event_id,
            "parent_id": parent.event_id if parent else None,
            "kind": kind,
            "name": name,
            "status": "running",
            "started_at": _now(),
            "ended_at": None,
            "justification": justification,
            "justification_source": justification_source,
            "justification_missing": missing,
            "meta": {**meta_value, "justification_source": justification_source},
            "inputs": content.get("inputs"),
            "outputs": None,
            "error": None,
            "checkpoint": link,
        }
        handle = EventHandle(
            self,
            event_id=event_id,
            kind=kind,
            name=name,
            parent_id=event["parent_id"],
            event=event,
            floats=floats,
            checkpoint=link,
        )
        handle.span = self._safe_telemetry(
            self.telemetry.event_started,
            event,
            parent.span if parent else None,
            default=handle.span,
        )
        header = self._header(event, "start", link, handle.span)
        header["justification_source"] = justification_source
        header["justification_missing"] = missing
        self._write(header, content, floats)
        if meta_value:
            handle._meta.update(meta_value)
        _push(handle)
        if kind == "tool_call":
            self.flush()
        return handle

    def _end_event(self, handle: EventHandle, status: str, error: Any) -> None:
        content: dict[str, Any] = {}
        if handle._outputs:
            content["outputs"] = handle._outputs
        err = error_info(error)
        if err is not None:
            content["error"] = err
        if handle._meta:
            content["meta"] = handle._meta
        event = handle.event
        event.update(
            status=status,
            ended_at=_now(),
            outputs=handle._outputs or None,
            error=err,
            checkpoint=handle._checkpoint,
        )
        event["meta"] = {**event["meta"], **handle._meta}
        header = self._header(event, "end", handle._checkpoint, handle.span)
        header["at"] = event["ended_at"]
        self._write(header, content, handle._floats)
        exc = error if isinstance(error, BaseException) else None
        self._safe_telemetry(handle.span.end, event, exc)
        if handle.kind == "tool_call":
            self.flush()

    def _header(
        self, event: Mapping[str, Any], phase: str, link: Any, span: SpanHandle
    ) -> dict[str, Any]:
        header: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "run_id": self.run_id,
            "event_id": event["event_id"],
            "parent_id": event["parent_id"],
            "kind": event["kind"],
            "name": event["name"],
            "status": event["status"],
            "phase": phase,
            "at": event["started_at"],
        }
        if link is not None:
            header["checkpoint"] = link
        trace_id = getattr(span, "trace_id", None)
        if isinstance(trace_id, str):
            header["trace_id"] = trace_id
            span_id = getattr(span, "span_id", None)
            if isinstance(span_id, str):
                header["span_id"] = span_id
        return header

    def _write(self, header: dict[str, Any], content: dict[str, Any], floats: bool) -> None:
        content_json = canonical(content, maybe_float=floats) if content else "{}"
        header["content_sha256"] = _sha256(content_json)
        writer = self._writer
        assert writer is not None
        writer.append(header, content_json)

    def _point(
        self,
        kind: str,
        name: str,
        *,
        status: str = "completed",
        text: str | None = None,
        error: BaseException | None = None,
        approval: dict[str, Any] | None = None,
        artifact: dict[str, Any] | None = None,
        checkpoint: dict[str, Any] | None = None,
        parent: Any = ...,
    ) -> str:
        """Write a one-record event (approval, note, artifact, finish); return its id."""
        self._require_running()
        _check_text(text, "text")
        if parent is ...:
            parent = self._parent()
        elif isinstance(parent, Step):
            parent = parent.handle
        content: dict[str, Any] = {}
        if text is not None:
            content["text"] = text
        if approval is not None:
            content["approval"] = approval
        if artifact is not None:
            content["artifact"] = artifact
        err = error_info(error)
        if err is not None:
            content["error"] = err
        now = _now()
        event: dict[str, Any] = {
            "run_id": self.run_id,
            "event_id": _new_id(),
            "parent_id": parent.event_id if parent else None,
            "kind": kind,
            "name": name,
            "status": status,
            "started_at": now,
            "ended_at": now,
            "justification": None,
            "justification_source": None,
            "justification_missing": False,
            "meta": {},
            "inputs": None,
            "outputs": None,
            "error": err,
            "checkpoint": checkpoint,
            "approval": approval,
            "text": text,
        }
        span: SpanHandle = NoopSpan()
        if kind in ("approval", "artifact", "note"):
            span = self._safe_telemetry(
                self.telemetry.event_started,
                event,
                parent.span if parent else None,
                default=span,
            )
        header = self._header(event, "point", checkpoint, span)
        self._write(header, content, False)
        self._safe_telemetry(span.end, event, error)
        return str(event["event_id"])

    def _artifact(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str,
        media_type: str | None,
        parent: Any,
    ) -> Artifact:
        info = hash_artifact(path_or_bytes, name, media_type)
        event_id = self._point(
            "artifact", name, artifact=info, parent=... if parent is None else parent
        )
        return Artifact(event_id=event_id, **info)

    def _parent(self) -> EventHandle | None:
        for handle in reversed(current_stack()):
            if handle.run is self:
                return handle
        return None

    def _require_running(self) -> None:
        if self.status != "running":
            raise InvalidArgumentError(
                message=f"run {self.run_id} is {self.status}: use it inside "
                "`with toolledger.run(...)`",
                details={"run_id": self.run_id},
            )

    def _writer_maybe_flush(self) -> None:
        if self._writer is not None:
            self._writer.maybe_flush()

    # -- failure handling --------------------------------------------------------------

    def _record_failure(self, exc: BaseException) -> None:
        if self.strict:
            raise exc
        self.errors.append(exc)
        log.warning("toolledger: journal write for run %s failed: %s", self.run_id, exc)
        if not self._warned:
            self._warned = True
            # warnings-as-errors must not turn recording into a crash
            with contextlib.suppress(Warning):
                warnings.warn(
                    f"toolledger: journal write for run {self.run_id} failed ({exc}); "
                    "the agent goes on, see run.errors",
                    JournalWarning,
                    stacklevel=3,
                )

    def _telemetry_failed(self, exc: BaseException) -> None:
        if not self._telemetry_warned:
            self._telemetry_warned = True
            log.warning("toolledger: telemetry failed (spans may be missing): %r", exc)

    def _safe_telemetry(self, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            self._telemetry_failed(exc)
            return default

    def _activate(self, handle: EventHandle) -> contextlib.AbstractContextManager[None] | None:
        try:
            cm = handle.span.activate()
            cm.__enter__()
            return cm
        except Exception as exc:
            self._telemetry_failed(exc)
            return None

    def _deactivate(
        self,
        cm: contextlib.AbstractContextManager[None] | None,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if cm is None:
            return
        try:
            cm.__exit__(exc_type, exc, tb)
        except Exception as err:
            self._telemetry_failed(err)


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_source(source: object) -> None:
    if source not in _JUSTIFICATION_SOURCES:
        raise InvalidArgumentError(
            message=f"justification_source must be 'developer' or 'model'; got {source!r}"
        )


def run(
    goal: str,
    *,
    agent: str | None = None,
    db: Any = None,
    run_id: str | None = None,
    namespace: str = "default",
    strict: bool = False,
    tracer_provider: Any = None,
    capture_content: bool | None = None,
    capture_intent: bool = True,
    redact: Any = None,
) -> Run:
    """Return a ``Run`` to use as ``with toolledger.run(goal, ...) as run:``.

    Args:
        goal: What the run is for.
        agent: The agent's name.
        db: A path, a ``sqlite:///`` URL, a ``postgresql://`` DSN or a ``Store``; default
            ``$TOOLLEDGER_DB`` or ``.toolledger.db``.
        run_id: Resume or name the run (default: a new 128-bit id).
        namespace: Checkpoint namespace for the run's tool calls.
        strict: Raise storage failures instead of recording them in ``run.errors``.
        tracer_provider, capture_content, capture_intent, redact: Telemetry options.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for bad arguments.
    """
    return Run(
        goal,
        agent=agent,
        db=db,
        run_id=run_id,
        namespace=namespace,
        strict=strict,
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        capture_intent=capture_intent,
        redact=redact,
    )


@overload
def traced(name: F) -> F: ...


@overload
def traced(name: str | None = None, justification: str | None = None) -> Callable[[F], F]: ...


def traced(name: Any = None, justification: str | None = None) -> Any:
    """Decorate a function so each call is a step of the run active in the context.

    ``@toolledger.traced`` or ``@toolledger.traced(name=None, justification=None)``. The
    call's arguments are the step's inputs and its return value the output ``result``.
    Outside a run the function is called unrecorded. Works on sync and async functions.
    """
    if callable(name):
        return traced()(name)

    def decorate(fn: F) -> F:
        step_name = name or fn.__qualname__
        signature = _signature(fn)

        def inputs_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            if signature is None:
                return {"args": list(args), "kwargs": kwargs}
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return {"args": list(args), "kwargs": kwargs}
            return dict(bound.arguments)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                active = current_run()
                if active is None or active.status != "running":
                    return await fn(*args, **kwargs)
                step = Step(active, _spec(step_name, justification, inputs_of(args, kwargs)))
                async with step:
                    result = await fn(*args, **kwargs)
                    step.record_output(result=result)
                    return result

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            active = current_run()
            if active is None or active.status != "running":
                return fn(*args, **kwargs)
            with Step(active, _spec(step_name, justification, inputs_of(args, kwargs))) as step:
                result = fn(*args, **kwargs)
                step.record_output(result=result)
                return result

        return cast(F, wrapper)

    return decorate


def _spec(name: str, justification: str | None, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "justification": justification,
        "justification_source": "developer",
        "inputs": inputs,
    }


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None
