"""In a network namespace with only loopback: start Phoenix, send it the scenario, read it.

Usage: ``python _phoenix_child.py PHOENIX_BIN WORKDIR [SPANS] [--screenshots DIR]`` (run by
``test_phoenix.py`` under ``unshare --net``; with ``--screenshots``, headless Chromium also
saves the trace tree, the chat span and the approval as PNGs in ``DIR``, as in ``docs/``,
and the framework run's trace with its refused call).
Prints one JSON document: the run id, the startup time, and every span as Phoenix's GraphQL
API returns it. Phoenix's gRPC port binds every interface whatever
``PHOENIX_HOST`` says; in the namespace that is only loopback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import _framework_run
import _scenario

# The Phoenix pieces scripts/demo_phoenix.py shares (server, GraphQL, Chromium).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from _phoenix import BASE, chrome, gql, serve

PROJECT = "toolledger-e2e"
SPAN_FIELDS = """
  name spanKind statusCode statusMessage startTime endTime parentId
  context { spanId traceId }
  input { value } output { value }
  attributes
  events { name timestamp }
"""


def project_spans(count: int, deadline: float) -> list[dict[str, Any]]:
    """Phoenix ingests asynchronously: poll (bounded) until ``count`` spans are there."""
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        projects = gql("{ projects { edges { node { id name } } } }")["projects"]["edges"]
        found = [p["node"]["id"] for p in projects if p["node"]["name"] == PROJECT]
        if found:
            data = gql(
                "query($id: ID!) { node(id: $id) { ... on Project { spans(first: 200) {"
                " edges { node {" + SPAN_FIELDS + "} } } } } }",
                {"id": found[0]},
            )
            spans = [e["node"] for e in data["node"]["spans"]["edges"]]
            if len(spans) >= count:
                return spans
        time.sleep(0.5)  # polling an external server, not synchronising our own threads
    return spans


def screenshots(spans: list[dict[str, Any]], out: Path, workdir: Path) -> None:
    """Save Phoenix's trace view: the tree, the chat span, the denied approval."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    projects = gql("{ projects { edges { node { id name } } } }")["projects"]["edges"]
    project = next(p["node"]["id"] for p in projects if p["node"]["name"] == PROJECT)
    run = next(s for s in spans if s["name"] == "invoke_agent support-bot")
    driver = chrome(workdir)
    try:
        driver.get(f"{BASE}/projects/{project}/traces/{run['context']['traceId']}")
        wait = WebDriverWait(driver, 60)

        def select(text: str, png: str) -> None:
            xpath = f"//*[normalize-space(text())='{text}']"
            found = wait.until(expected_conditions.presence_of_element_located((By.XPATH, xpath)))
            driver.execute_script("arguments[0].click()", found)
            # The detail panel shows the selected span's name as its title too.
            wait.until(lambda d: len(d.find_elements(By.XPATH, xpath)) >= 2)
            time.sleep(3)  # let the panel render before the picture (not synchronisation)
            driver.save_screenshot(str(out / png))

        wait.until(
            expected_conditions.presence_of_element_located(
                (By.XPATH, "//*[normalize-space(text())='artifact order.json']")
            )
        )
        select("invoke_agent support-bot", "phoenix-trace.png")
        select("chat claude-x-1", "phoenix-chat.png")
        select("approval refund", "phoenix-approval.png")
        framework = next(s for s in spans if s["name"] == f"invoke_agent {_framework_run.AGENT}")
        driver.get(f"{BASE}/projects/{project}/traces/{framework['context']['traceId']}")
        refused = [
            s for s in spans if s["name"] == "guard_tool send_email" and s["statusCode"] == "ERROR"
        ]
        wait.until(
            expected_conditions.presence_of_element_located(
                (By.XPATH, "//*[normalize-space(text())='guard_tool send_email']")
            )
        )
        time.sleep(3)  # let the tree render before the picture (not synchronisation)
        driver.save_screenshot(str(out / "phoenix-framework-trace.png"))
        if refused:  # the refused call's guard span, selected: its error panel
            found = driver.find_elements(
                By.XPATH, "//*[normalize-space(text())='guard_tool send_email']"
            )
            driver.execute_script("arguments[0].click()", found[-1])
            time.sleep(3)
            driver.save_screenshot(str(out / "phoenix-framework-refused.png"))
    finally:
        driver.quit()


def main() -> None:
    phoenix, workdir = sys.argv[1], Path(sys.argv[2])
    shots = None
    if "--screenshots" in sys.argv:
        shots = Path(sys.argv[sys.argv.index("--screenshots") + 1])
    with serve(phoenix, workdir) as startup:
        import toolledger

        handle = toolledger.configure(
            service_name="toolledger-e2e",
            endpoint=BASE,
            project=PROJECT,
            capture_content=True,
            metrics=False,  # Phoenix ingests traces only (no /v1/metrics, /v1/logs)
            logs=False,
        )
        recorded = _scenario.record(workdir / "ledger.db", capture_content=True)
        # A framework run with its own instrumentation on (the global provider configure()
        # installed): one trace, one tool span per call, the refused call visible.
        framework_run = _framework_run.record(workdir / "framework.db")
        handle.shutdown(timeout=30)
        expected = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 1
        spans = project_spans(expected, time.monotonic() + 60)
        if shots is not None:
            screenshots(spans, shots, workdir)
        print(
            json.dumps(
                {
                    "run_id": recorded.run_id,
                    "framework_run_id": framework_run,
                    "startup_seconds": round(startup, 1),
                    "spans": spans,
                }
            )
        )


if __name__ == "__main__":
    main()
