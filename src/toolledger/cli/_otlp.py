"""``toolledger export-otlp``: send a stored run's spans to an OTLP endpoint.

A thin layer over ``toolledger.reexport``. Data (the trace id and span count) goes to
stdout, diagnostics to stderr. Exit 0 when the endpoint accepted the spans, 1 when the
export failed (a failed check), 2 on usage errors (unknown run, bad protocol, no SDK).
"""

from __future__ import annotations

import click

from ..errors import CheckpointError, NotFoundError
from . import main
from ._common import CONTEXT_SETTINGS, RUN, UsageError, clean, fail_check, get_store, not_found

__all__ = ["export_otlp"]


@main.command("export-otlp", context_settings=CONTEXT_SETTINGS)
@click.argument("run_id", metavar="RUN", type=RUN)
@click.option(
    "--endpoint",
    default=None,
    metavar="URL",
    help="OTLP base URL (else OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT, else the OTLP default "
    "http://localhost:4318, or http://localhost:4317 for grpc).",
)
@click.option(
    "--protocol",
    type=click.Choice(["grpc", "http/protobuf"]),
    default=None,
    help="OTLP protocol (else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).",
)
@click.option(
    "--capture-content/--no-capture-content",
    default=None,
    help="Put tool arguments/results on the spans "
    "(default: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).",
)
@click.option("--no-intent", is_flag=True, help="Leave goal/justification/reason text out.")
@click.pass_context
def export_otlp(
    ctx: click.Context,
    run_id: str,
    endpoint: str | None,
    protocol: str | None,
    capture_content: bool | None,
    no_intent: bool,
) -> None:
    """Rebuild RUN's spans from the database and send them over OTLP.

    The spans keep their original timestamps, parentage and the trace/span ids recorded
    live (or ids derived from the run and event ids), so sending twice gives the same ids.
    Headers and timeouts come from the standard OTEL_EXPORTER_OTLP_* variables.

    Example: toolledger export-otlp 3f2a... --endpoint http://127.0.0.1:4318
    """
    from ..export import reexport
    from ..telemetry import make_exporter, resolve_endpoint

    try:
        url, proto = resolve_endpoint(endpoint, protocol)
    except CheckpointError as exc:
        raise UsageError(exc.message) from exc
    if url is None:
        default = "http://localhost:4317" if proto == "grpc" else "http://localhost:4318"
        url, proto = resolve_endpoint(default, proto)
    assert url is not None
    try:
        exporter = make_exporter(url, proto)
    except ImportError as exc:
        raise UsageError(
            "the OpenTelemetry SDK and OTLP exporter are needed: pip install 'toolledger[otlp]'"
        ) from exc
    store = get_store(ctx)
    try:
        report = reexport(
            store,
            run_id,
            exporter,
            capture_content=capture_content,
            capture_intent=not no_intent,
        )
    except NotFoundError as exc:
        raise not_found(exc) from exc
    finally:
        store.close()
        exporter.shutdown()
    if not report.success:
        fail_check(f"export-otlp: {url} did not accept the {report.span_count} spans")
    click.echo(f"{report.trace_id}\t{report.span_count} spans\t{clean(url)}")
