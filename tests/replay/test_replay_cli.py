"""``toolledger replay RUN -- CMD``, ``fork RUN --at EVENT -- CMD`` and ``diff A B``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main
from toolledger.testing import stored_run

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from ._agent import Effects, Wire, agent

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Mail a@b.c please."
AGENT = [sys.executable, "-m", "tests.replay._cli_agent"]


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A recorded run of the loop, and a working directory the command runs in."""
    db = tmp_path / "cli.db"
    with toolledger.run("mail ana", db=db) as run:
        agent(run, Wire(), Effects(), PROMPT)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    for name in ("TOOLLEDGER_REPLAY_OF", "TOOLLEDGER_FORK_AT", "TOOLLEDGER_ON_DIVERGENCE"):
        monkeypatch.delenv(name, raising=False)
    return db, run.run_id


def cli(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_replay_command_serves_everything_and_exits_0(
    source: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command runs with the replay variables set; the report says what was served."""
    db, run_id = source
    monkeypatch.setenv("AGENT_WIRE", "failing")
    code, out, err = cli(db, "replay", run_id, "--json", "--", *AGENT, PROMPT)
    assert code == 0, err
    (report,) = [json.loads(line) for line in out.splitlines()]
    assert report["source_run_id"] == run_id
    assert (report["mode"], report["served_model_calls"], report["served_tool_calls"]) == (
        "replay",
        4,
        1,
    )
    assert (report["divergence"], report["live_from"], report["exit_code"]) == (None, None, 0)
    header = stored_run(db, report["run_id"]).doc["header"]
    assert header["replay_of"] == {"run_id": run_id}


def test_replay_command_changed_prompt_prints_the_diff_and_exits_1(
    source: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A divergence: exit 1, the report names the request and diffs the message."""
    db, run_id = source
    monkeypatch.setenv("AGENT_WIRE", "failing")
    code, out, _ = cli(db, "replay", run_id, "--", *AGENT, "Mail b@c.d instead.")
    assert code == 1
    assert "diverged at llm_call 0 (claude-x-1): messages[0] differs" in out
    assert '-  "content": "Mail a@b.c please.",' in out
    assert '+  "content": "Mail b@c.d instead.",' in out


def test_fork_command_goes_live_at_the_event(source: tuple[Path, str]) -> None:
    """``fork --at`` the second model call: one call served, live from there, exit 0."""
    db, run_id = source
    second = [e for e in stored_run(db, run_id).events if e["kind"] == "llm_call"][1]
    code, out, err = cli(db, "fork", run_id, "--at", second["event_id"], "--", *AGENT, PROMPT)
    assert code == 0, err
    assert "1 model call and 1 tool call served from the record" in out
    assert f"live from event {second['event_id']}" in out


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "no-such-run", "--", "true"],
        ["fork", "RUN", "--at", "no-such-event", "--", "true"],
        ["fork", "RUN", "--", "true"],
    ],
)
def test_replay_and_fork_usage_errors_exit_2(source: tuple[Path, str], args: list[str]) -> None:
    """Unknown run or event, missing --at: exit 2, an error line, the command never runs."""
    db, run_id = source
    code, _, err = cli(db, *[run_id if a == "RUN" else a for a in args])
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("Error: ")
    assert "Traceback" not in err


def test_diff_marks_the_first_divergence_text_and_html(
    source: tuple[Path, str], tmp_path: Path
) -> None:
    """Text marks the row with >>, HTML anchors it; runs that diverge exit 1."""
    db, run_id = source
    with toolledger.run("mail ana", db=db, replay_of=run_id, on_divergence="live") as run:
        agent(run, Wire(), Effects(), "Mail b@c.d instead.")
    code, out, _ = cli(db, "diff", run_id, run.run_id)
    assert code == 1
    flagged = [line for line in out.splitlines() if line.startswith(">>")]
    assert len(flagged) == 1
    assert "llm_call claude-x-1" in flagged[0]
    page = tmp_path / "diff.html"
    code, _, _ = cli(db, "diff", run_id, run.run_id, "--format", "html", "-o", str(page))
    assert code == 1
    text = page.read_text()
    assert text.count('id="first-divergence"') == 1
    assert "Mail b@c.d instead." in text
    same, _, _ = cli(db, "diff", run_id, run_id)
    assert same == 0
