"""Send a toolledger run to any OTLP backend: set OTEL_EXPORTER_OTLP_ENDPOINT and run this.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/otlp_demo.py [DB]

No API keys, no model: a scripted agent run with a step, a guarded tool call (run, then
asked again and replayed from its checkpoint), and a refused approval. ``configure()``
installs the OpenTelemetry SDK with a batching OTLP exporter (http/protobuf by default;
``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` for gRPC). Tool arguments and results go on the spans
only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. Prints the run id
and trace id as JSON. Without an endpoint, nothing leaves the machine: the journal in DB
(default ``.toolledger.db``) holds everything, and ``toolledger export-otlp RUN`` sends it
later with the same ids.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import toolledger


def lookup_order(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Pretend to look an order up (the 'world' this tool touches)."""
    return {"order": input["order"], "status": "shipped"}


def main(db: str | None = None) -> dict[str, Any]:
    """Record one run (spans go wherever ``configure()`` points) and return its ids."""
    handle = toolledger.configure(service_name="toolledger-otlp-demo")
    guarded = hasattr(toolledger, "tool")
    try:
        with toolledger.run(
            goal="Answer the user's question about order 42", agent="support-bot", db=db
        ) as run:
            with run.step(
                "repo_search", justification="The question names a codebase.", query="gate"
            ) as step:
                step.record_output(n_hits=3)
            if guarded:
                tool = toolledger.tool(
                    "lookup_order",
                    revision="1",
                    execute=lookup_order,
                    description="Look up an order by number.",
                )
                for _ in range(2):  # the second call is replayed from the checkpoint
                    run.call(
                        tool,
                        call_id="call-42",
                        input={"order": 42},
                        justification="The user asked where order 42 is.",
                    )
            run.approval("email_findings", granted=False, by="user", reason="Answer locally.")
            run.finish("Answered from the order system; no email sent.")
    finally:
        handle.shutdown()
    return {"run_id": run.run_id, "trace_id": run.span.trace_id, "guarded": guarded}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else None)))
