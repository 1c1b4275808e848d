"""The Phoenix pieces ``scripts/demo_phoenix.py`` and the backend test's child share.

Start ``phoenix serve`` on loopback in a scratch directory, ask its GraphQL API, and open
headless Chromium on it. Run inside a network namespace with only loopback (Phoenix's gRPC
port binds every interface whatever ``PHOENIX_HOST`` says). Nothing here is a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["BASE", "PORT", "chrome", "gql", "serve"]

PORT = 6006
BASE = f"http://127.0.0.1:{PORT}"
START_SECONDS = 150.0


def _healthy() -> bool:
    try:
        with urllib.request.urlopen(BASE + "/healthz", timeout=5) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def gql(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one GraphQL query against Phoenix; raise on GraphQL errors."""
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        BASE + "/graphql", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        doc = json.loads(response.read())
    if doc.get("errors"):
        raise RuntimeError(f"GraphQL errors: {doc['errors']}")
    return dict(doc["data"])


@contextlib.contextmanager
def serve(phoenix: str, workdir: Path) -> Iterator[float]:
    """Bring loopback up, start Phoenix in ``workdir``; yield its startup time in seconds."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
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
        yield time.monotonic() - started
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def chrome(workdir: Path) -> Any:
    """Return a headless Debian Chromium (selenium) with its profile in ``workdir``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

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
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
