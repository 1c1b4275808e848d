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
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PORT = 6006
BASE = f"http://127.0.0.1:{PORT}"
START_SECONDS = 150.0
MARK = "then in another shell: "


def _healthy() -> bool:
    try:
        with urllib.request.urlopen(BASE + "/healthz", timeout=5) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def gql(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        BASE + "/graphql", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        doc = json.loads(response.read())
    if doc.get("errors"):
        raise RuntimeError(f"GraphQL errors: {doc['errors']}")
    return dict(doc["data"])


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
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1600,1000",
        f"--user-data-dir={workdir / 'chrome'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
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
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    workdir = Path(tempfile.mkdtemp(prefix="demo-phoenix-"))
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir / "phoenix"),
        "PHOENIX_PORT": str(PORT),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    server = subprocess.Popen([phoenix, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        started = time.monotonic()
        while not _healthy():
            if server.poll() is not None or time.monotonic() - started > START_SECONDS:
                raise SystemExit(f"phoenix did not start; see {workdir / 'phoenix.log'}")
            time.sleep(0.5)  # waiting for an external server to listen
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
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
