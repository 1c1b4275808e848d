"""Send a toolledger run to an MLflow tracking server, routed to an experiment.

MLflow files OTLP spans under an experiment and answers 422 to a request without the
``x-mlflow-experiment-id`` header. With an MLflow server up, run:

    pip install mlflow                       # in a virtualenv of its own
    mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri sqlite:///mlflow.db &
    MLFLOW_URL=http://127.0.0.1:5000 MLFLOW_EXPERIMENT_ID=0 python examples/mlflow_backend.py

then open http://127.0.0.1:5000 (Experiments -> Default -> Traces). Without ``MLFLOW_URL``
the run is recorded locally and the script prints these instructions (it needs no server,
so the examples test runs it as is).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import toolledger


def lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"order": input["order"], "status": "shipped"}


def record(db: Path) -> str:
    tool = toolledger.tool("lookup_order", revision="1", execute=lookup, description="Look up.")
    with toolledger.run(
        "Where is order 42?", agent="support-bot", db=db, conversation_id="conv-42"
    ) as run:
        with run.step("plan", justification="The user asked about an order."):
            pass
        run.call(tool, call_id="call-42", input={"order": 42}, justification="The user asked.")
        run.call(tool, call_id="call-42", input={"order": 42})  # a replay
        run.finish("Order 42 has shipped.")
    return run.run_id


def main() -> None:
    url = os.environ.get("MLFLOW_URL")
    experiment = os.environ.get("MLFLOW_EXPERIMENT_ID", "0")
    db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "ledger.db"
    if not url:
        run_id = record(db)
        print(f"recorded run {run_id} in {db} (no MLFLOW_URL: nothing sent)")
        print("to see it in MLflow: start `mlflow server` and set MLFLOW_URL (see the docstring);")
        print(f"or send this very run later: toolledger --db {db} export-otlp {run_id} \\")
        header = f"OTEL_EXPORTER_OTLP_HEADERS=x-mlflow-experiment-id={experiment}"
        print(f"    --endpoint $MLFLOW_URL   # with {header}")
        return
    handle = toolledger.configure(
        service_name="toolledger-mlflow-example",
        endpoint=url,
        headers={"x-mlflow-experiment-id": experiment},
        capture_content=True,
        metrics=False,  # MLflow ingests traces only
        logs=False,
    )
    run_id = record(db)
    flushed = handle.force_flush(timeout_millis=15_000)
    handle.shutdown()
    print(f"sent run {run_id} to {url} (experiment {experiment}); flushed: {flushed}")


if __name__ == "__main__":
    main()
