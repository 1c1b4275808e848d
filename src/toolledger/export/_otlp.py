"""Re-export a stored run's spans: read it through the journal, rebuild, send (OTLP).

Rules this module keeps:

- Only reads: the store is opened read-only; the run comes from the journal's reader
  (``load_stored_run``), so the spans show exactly the hashed facts every other reader shows.
- What the spans are is telemetry's (``telemetry._reexport.build_spans``: ids, names,
  attributes, policy); this module only composes reading, building and sending, which is
  why it sits above the journal (telemetry may not read the journal it is told by).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..journal import load_stored_run
from ..store import StoreLike, using_store
from ..telemetry import (
    Redactor,
    ReexportReport,
    build_spans,
    make_resource,
    resolve_policy,
    send_spans,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["reexport"]


def _read(store: Any, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the run (row fields over its document) and its merged events."""
    view = load_stored_run(store, run_id)
    row = view.row
    run: dict[str, Any] = dict(view.doc)
    facts = view.facts  # hashed values only, never the runs columns
    found = run.get("end")
    end: dict[str, Any] = found if isinstance(found, dict) else {}
    header = run.get("header")
    head: Mapping[str, Any] = header if isinstance(header, Mapping) else {}
    finish = [e for e in view.events if e.get("kind") == "finish"]
    run.update(
        run_id=row.run_id,
        agent=facts.agent,
        goal=facts.goal,
        status=facts.status,
        started_at=facts.started_at,
        ended_at=facts.ended_at,
        head_hash=row.head_hash,
        event_count=row.event_count,
        error=facts.error if facts.end_hashed else end.get("error"),
        conversation_id=head.get("conversation_id"),
        user_id=head.get("user_id"),
        summary=finish[-1].get("text") if finish else None,
    )
    # ``finish`` records have no live span (the summary is the run's output).
    return run, [e for e in view.events if e.get("kind") != "finish"]


def reexport(
    db: StoreLike | None,
    run_id: str,
    exporter: SpanExporter,
    *,
    capture_content: bool | None = None,
    capture_intent: bool | None = True,
    redact: Redactor | None = None,
    service_name: str | None = None,
    batch_size: int = 512,
    project: str | None = None,
) -> ReexportReport:
    """Rebuild run ``run_id``'s spans from ``db`` and pass them to ``exporter.export()``.

    Args:
        db: A path, URL or ``Store`` (as for ``toolledger.run``).
        run_id: The run to send.
        exporter: An OpenTelemetry ``SpanExporter`` (e.g. OTLP); it is not shut down.
        capture_content: As for live spans (``None``: ``configure()``'s, else the env var).
        capture_intent: ``False`` drops intent text.
        redact: ``redact(attributes) -> attributes`` applied before anything is set.
        service_name: ``service.name`` of the resource (else ``OTEL_SERVICE_NAME``).
        project: ``openinference.project.name`` of the resource (the Phoenix project).
        batch_size: Spans per ``export()`` call (one OTLP request each); the first batch
            that fails stops the export.

    Returns:
        A ``ReexportReport``; ``success`` is the exporter's verdict.

    Raises:
        NotFoundError: ``NOT_FOUND`` for an unknown run.
        StoreError: the database cannot be read.
    """
    with using_store(db, readonly=True) as store:
        policy = resolve_policy(
            capture_content=capture_content, capture_intent=capture_intent, redact=redact
        )
        resource = make_resource(service_name, project)
        run, events = _read(store, run_id)
        spans = build_spans(run, events, store=store, policy=policy, resource=resource)
    return send_spans(run_id, spans, exporter, batch_size)
