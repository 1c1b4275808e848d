"""Hand-written loops over the real Anthropic and OpenAI SDKs, in real processes: the crash matrix.

Each cell: a child process runs the documented loop (``_handloop_child.py``: a journaled
client, ``run_tool_calls``, ``deliver_results``, the transcript saved after every model
response) against a scripted model that retries once, under a new call id, any tool result
that does not read as a success. The child is SIGKILLed at one point; a second process
restarts it by resuming (the same run and conversation, the saved transcript) or by
re-planning (the transcript lost, the same conversation, the model asked again); a third
restart resumes through ``repair_transcript`` (the orphaned calls answered from the
ledger, nothing run again). The effects are counted in the file the tool appends to: one
payment per payment asked for.

The killed first process runs once per (provider, scenario) (module-scoped); each restart
works on a copy of what it left, so every restart starts from the same crash.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("_handloop_child.py")
PROVIDERS = ["anthropic", "openai"]
#: ``after-effect``: inside the tool right after its effect; ``at-post``: when the next model
#: request carries the result; ``parallel``: three different payments in one turn, killed
#: inside the first right after its effect.
SCENARIOS = ["after-effect", "at-post", "parallel"]
RESTARTS = ["resume", "repair", "replan"]
EXPECTED = {
    "after-effect": ["ana 500"],
    "at-post": ["ana 500"],
    "parallel": ["ana 500", "bob 700", "cy 900"],
}
#: Cells that do not end with the right effects yet (none: the hand-loop helper claims each
#: call of a turn just before it runs, so a kill inside the first leaves the others
#: unclaimed and they run when the model asks again).
NEEDS_SAME_ACTION: set[tuple[str, str]] = set()


def _child(
    provider: str, folder: Path, mode: str, scenario: str
) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(CHILD), provider, str(folder), mode, scenario],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def _effects(folder: Path) -> list[str]:
    return sorted((folder / "effects.log").read_text().splitlines())


def _seen(folder: Path) -> list[list[list[str]]]:
    """The tool results each model request carried, in order (``[call_id, text]`` pairs)."""
    return [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """``crashed(provider, scenario)``: the folder the killed first process left (made once)."""
    made: dict[tuple[str, str], Path] = {}

    def get(provider: str, scenario: str) -> Path:
        if (provider, scenario) not in made:
            folder = tmp_path_factory.mktemp(f"{provider}-{scenario}")
            first = _child(provider, folder, "first", scenario)
            assert first.returncode == -signal.SIGKILL, first.stderr
            assert _effects(folder) == ["ana 500"]
            # Killed before the result reached the model, or as it was being posted.
            posts_with_results = [r for r in _seen(folder) if r]
            assert len(posts_with_results) == (scenario == "at-post")
            made[provider, scenario] = folder
        return made[provider, scenario]

    return get


def _cells() -> list[object]:
    cells: list[object] = []
    for provider in PROVIDERS:
        for scenario in SCENARIOS:
            for restart in RESTARTS:
                marks = (
                    [
                        pytest.mark.xfail(
                            strict=True, reason="needs unstarted claims of a turn told apart"
                        )
                    ]
                    if (scenario, restart) in NEEDS_SAME_ACTION
                    else []
                )
                cells.append(
                    pytest.param(
                        provider,
                        scenario,
                        restart,
                        marks=marks,
                        id=f"{provider}-{scenario}-{restart}",
                    )
                )
    return cells


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "scenario", "restart"), _cells())
def test_hand_loop_sigkill_then_restart_pays_each_invoice_once(
    crashed: Callable[[str, str], Path], tmp_path: Path, provider: str, scenario: str, restart: str
) -> None:
    """Whatever the kill point and the restart, each payment happens exactly once."""
    folder = tmp_path / "copy"
    shutil.copytree(crashed(provider, scenario), folder)
    if restart == "replan":
        (folder / "transcript.json").unlink()
    again = _child(provider, folder, restart, scenario)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1]) == {"answer": "Done."}
    assert _effects(folder) == EXPECTED[scenario]


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_model_is_told_the_payment_may_have_happened_and_not_to_retry(
    crashed: Callable[[str, str], Path], tmp_path: Path, provider: str
) -> None:
    """The restarted loop's unknown outcomes reach the model as a final, plain tool result."""
    folder = tmp_path / "copy"
    shutil.copytree(crashed(provider, "after-effect"), folder)
    again = _child(provider, folder, "resume", "after-effect")
    assert again.returncode == 0, again.stderr
    texts = [text for request in _seen(folder) for _, text in request]
    unknown = [t for t in texts if "payment_id" not in t]
    assert unknown, texts  # the first payment's outcome is unknown after the kill
    for text in unknown:
        assert re.search(r"may (already )?have (happened|taken effect)", text, re.I), text
        assert re.search(r"(do not|don't|not to) retry", text, re.I), text
