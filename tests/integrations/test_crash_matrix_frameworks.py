"""The framework crash matrix: real processes SIGKILLed, restarted, effects counted.

For each framework adapter adopted as docs/frameworks.md shows (no effect key, no
``recover``), a scripted model that retries once an action whose result reads as a
failure, and each cell: the first process is SIGKILLed inside the tool right after its
effect (``tool``) or when the next model request carries the result (``model``), then
restarted through the framework's resume path (``resume``) or with its saved state lost,
so that the model is asked again (``replan``). Three payments in one turn are killed inside
the first. The effects (lines the tool appends) must be one per payment.

The opt-ins (an effect key, ``recover(input, ctx)``) are crashed the same way, also right
after the guard stored the result (before the framework saved anything).

One server process per framework (``_crash_matrix_child.py``) imports the framework once
and forks a process per step; the whole matrix runs in seconds.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .._adk import adk_env, adk_python_or_skip

CHILD = Path(__file__).with_name("_crash_matrix_child.py")
FRAMEWORKS = [
    "anthropic",
    "claude_agent_sdk",
    "google_adk",
    "langgraph",
    "openai_agents",
    "pydantic_ai",
]
#: Frameworks that run one turn's calls concurrently: all three effects precede the kill.
CONCURRENT = {"langgraph", "openai_agents", "pydantic_ai"}
PAYMENTS = ["ana 30", "ben 40", "cy 50"]
#: (kill point, restart, three payments in one turn)
CELLS = [
    ("tool", "resume", False),
    ("tool", "replan", False),
    ("model", "resume", False),
    ("model", "replan", False),
    ("tool", "resume", True),
    ("tool", "replan", True),
]
#: Cells that still end with a second effect (none since the guard blocks the same action
#: asked again under a new call id and serves an unseen result to a re-plan).
NEW_ID = "the model asks again under a new call id, which executes"
FAILING: set[tuple[str, str, bool]] = set()
TIMEOUT = 120


class Server:
    """One framework's server process: a JSON command in, a JSON answer out."""

    def __init__(self, framework: str) -> None:
        src = str(Path(__file__).resolve().parents[2] / "src")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        python = sys.executable
        if framework == "google_adk":  # in its own virtualenv (tests/_adk.py)
            python, env = adk_python_or_skip(), adk_env()
        self.proc = subprocess.Popen(
            [python, str(CHILD), framework],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.ready = self._read()

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(TIMEOUT):
                self.close()
                pytest.fail(f"the crash-matrix server gave no answer in {TIMEOUT} s")
        line = self.proc.stdout.readline()
        if not line:
            pytest.fail(f"the crash-matrix server ended (exit {self.proc.wait()})")
        return json.loads(line)

    def cell(
        self, folder: Path, kill: str, restart: str, parallel: bool, optin: bool = False
    ) -> Any:
        assert self.proc.stdin is not None
        command = {
            "dir": str(folder),
            "kill": kill,
            "restart": restart,
            "parallel": parallel,
            "optin": optin,
        }
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Callable[[str], Server]]:
    """``server(framework)``: that framework's server, started on first use."""
    started: dict[str, Server] = {}

    def get(framework: str) -> Server:
        if framework not in started:
            started[framework] = Server(framework)
        return started[framework]

    yield get
    for s in started.values():
        s.close()


def _params() -> list[Any]:
    out = []
    for framework in FRAMEWORKS:
        for kill, restart, parallel in CELLS:
            name = f"{framework}-{kill}-{restart}{'-parallel' if parallel else ''}"
            marks = []
            if (kill, restart, parallel) in FAILING:
                marks.append(pytest.mark.xfail(strict=True, reason=NEW_ID))
            out.append(pytest.param(framework, kill, restart, parallel, id=name, marks=marks))
    return out


@pytest.mark.parametrize(("framework", "kill", "restart", "parallel"), _params())
def test_crash_then_restart_each_payment_takes_effect_once(
    server: Callable[[str], Server],
    tmp_path: Path,
    framework: str,
    kill: str,
    restart: str,
    parallel: bool,
) -> None:
    """Killed at the point, restarted the cell's way: every payment took effect exactly once."""
    out = server(framework).cell(tmp_path, kill, restart, parallel)
    assert out["first"] == -signal.SIGKILL, out["stderr"]["first"]
    done_first = PAYMENTS if parallel and framework in CONCURRENT else PAYMENTS[:1]
    assert sorted(out["first_effects"]) == done_first
    assert out["restart"] == 0, out["stderr"]["restart"]
    expected = PAYMENTS if parallel else PAYMENTS[:1]
    assert sorted(out["effects"]) == expected, out["seen"]


@pytest.mark.parametrize("restart", ["resume", "replan"])
@pytest.mark.parametrize("kill", ["tool", "stored"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_opt_in_effect_key_and_recover_pay_once_and_tell_the_model(
    server: Callable[[str], Server], tmp_path: Path, framework: str, kill: str, restart: str
) -> None:
    """With an effect key and ``recover(input, ctx)``: one payment, and the model is told it.

    ``resume``: the same call id (``recover`` proves a lost outcome from the effects, with
    the call's input); ``replan``: a new id for the same action, caught by the effect key.
    """
    out = server(framework).cell(tmp_path, kill, restart, parallel=False, optin=True)
    assert out["first"] == -signal.SIGKILL, out["stderr"]["first"]
    assert out["first_effects"] == PAYMENTS[:1]
    assert out["restart"] == 0, out["stderr"]["restart"]
    assert out["effects"] == PAYMENTS[:1], out["seen"]
    assert out["seen"][-1] == "paid 30 to ana", out["seen"]
