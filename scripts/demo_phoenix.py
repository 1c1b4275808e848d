"""Follow the demo's Phoenix line for real: start Phoenix, run the demo, paste its command.

Usage (as root, inside a network namespace with only loopback, because Phoenix's gRPC port
binds every interface whatever ``PHOENIX_HOST`` says)::

    unshare --net python scripts/demo_phoenix.py PHOENIX_BIN [--screenshot docs/phoenix-demo.png]

``PHOENIX_BIN`` is ``phoenix`` from a virtualenv of its own (``.ci/phoenix-requirements.txt``).
The script starts ``phoenix serve`` in a scratch directory, runs ``examples/demo_agent.py``
there, runs the ``export-otlp`` command the demo printed (word for word), reads the trace
back through Phoenix's GraphQL API, and prints one JSON document: the run id, the span
names the demo's tree printed and the span names Phoenix holds. With ``--screenshot``,
headless Chromium saves Phoenix's view of the trace as a PNG.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _phoenix import BASE, chrome, gql, serve

ROOT = Path(__file__).resolve().parents[1]
MARK = "then in another shell: "


def trace_spans(trace_id: str, count: int, deadline: float) -> tuple[str, list[dict[str, Any]]]:
    """Poll (bounded) until Phoenix has ingested ``count`` spans of the trace."""
    spans: list[dict[str, Any]] = []
    project = ""
    while time.monotonic() < deadline:
        for edge in gql("{ projects { edges { node { id name } } } }")["projects"]["edges"]:
            project = edge["node"]["id"]
            data = gql(
                "query($id: ID!) { node(id: $id) { ... on Project { spans(first: 200) {"
                " edges { node { name context { traceId } } } } } } }",
                {"id": project},
            )
            spans = [
                e["node"]
                for e in data["node"]["spans"]["edges"]
                if e["node"]["context"]["traceId"] == trace_id
            ]
            if len(spans) >= count:
                return project, spans
        time.sleep(0.5)  # polling an external server, not synchronising our own threads
    return project, spans


def screenshot(project: str, trace_id: str, root_name: str, out: Path, workdir: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chrome(workdir)
    try:
        driver.get(f"{BASE}/projects/{project}/traces/{trace_id}")
        xpath = f"//*[normalize-space(text())='{root_name}']"
        wait = WebDriverWait(driver, 60)
        found = wait.until(expected_conditions.presence_of_element_located((By.XPATH, xpath)))
        driver.execute_script("arguments[0].click()", found)
        wait.until(lambda d: len(d.find_elements(By.XPATH, xpath)) >= 2)
        time.sleep(3)  # let the panel render before the picture (not synchronisation)
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def printed_spans(lines: list[str]) -> list[str]:
    """Return the span names of the demo's tree (event lines left out), in printed order."""
    start = next(i for i, line in enumerate(lines) if line.startswith("the run as a tracing"))
    names = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        bare = re.sub(r"^[│├└─|`\- ]+", "", line)
        name, kind = re.split(r"\s{2,}", bare, maxsplit=2)[:2]
        if kind != "event":
            names.append(name)
    return names


def main() -> None:
    phoenix = sys.argv[1]
    shot = None
    if "--screenshot" in sys.argv:
        shot = Path(sys.argv[sys.argv.index("--screenshot") + 1]).resolve()
    workdir = Path(tempfile.mkdtemp(prefix="demo-phoenix-"))
    with serve(phoenix, workdir):
        demo = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "demo_agent.py")],
            cwd=workdir,
            capture_output=True,
            text=True,
            check=True,
        )
        lines = demo.stdout.splitlines()
        command = next(line for line in lines if MARK in line).split(MARK, 1)[1]
        argv = shlex.split(command)
        run_id = argv[argv.index("export-otlp") + 1]
        sent = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, check=True)
        printed = printed_spans(lines)
        import toolledger

        view = toolledger.load_run(workdir / "demo-out" / "demo_agent.db", run_id)
        trace_id = next(e.trace_id for e in view.events if e.trace_id)
        project, spans = trace_spans(trace_id, len(printed), time.monotonic() + 60)
        root = printed[0]
        if shot is not None:
            screenshot(project, trace_id, root, shot, workdir)
        print(
            json.dumps(
                {
                    "run_id": run_id,
                    "command": command,
                    "export_stdout": sent.stdout.strip(),
                    "printed": printed,
                    "phoenix": sorted(s["name"] for s in spans),
                }
            )
        )


if __name__ == "__main__":
    main()
