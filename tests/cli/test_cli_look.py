"""One CLI look: the table renderer, run-id prefixes and ``latest``, filters, pipes, ``show``.

Snapshots are compared with times, ages and durations replaced by placeholders
(``<TIME>``, ``<AGE>``, ``+<T>``, ``<MS>``); everything else is exact.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import toolledger
from toolledger import Pending
from toolledger.cli import main

from ._pty import on_a_terminal


def _send(input: Any, ctx: Any) -> Any:
    return {"sent": input["to"]}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """run-a (bot): a step, a delivered and an undelivered call, a refusal; run-b (other,
    failed); zeta-1 (bot): a call waiting for approval (ticket T-7)."""
    path = tmp_path_factory.mktemp("look") / "look.db"
    send = toolledger.tool("send", revision="1", execute=_send)
    gated = toolledger.tool(
        "send", revision="1", execute=_send, approval="always", approver=lambda r: Pending("T-7")
    )
    with toolledger.run("Email the report", agent="bot", db=path, run_id="run-a") as run:
        with run.step("search", justification="find it", q="report") as st:
            st.record_output(hits=3)
        run.call(send, call_id="c1", input={"to": "a@x"}, justification="send it")
        run.call(send, call_id="c2", input={"to": "b@x"}, justification="and this")
        run.deliver("c2", lambda payload: None)
        run.approval("email", granted=False, by="ann", reason="not now")
    with (
        pytest.raises(RuntimeError),
        toolledger.run("Weekly report", agent="other", db=path, run_id="run-b"),
    ):
        raise RuntimeError("boom")
    with toolledger.run("Pay", agent="bot", db=path, run_id="zeta-1") as run:
        run.call(gated, call_id="g1", input={"to": "c@x"}, justification="pay it")
    return path


def invoke(db: Path, *args: str, color: bool = False, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args], color=color, env=env)


def _nines(match: re.Match[str]) -> str:
    return re.sub(r"\d", "9", match.group())


def normal(text: str) -> str:
    """Times, relative times and ages with every digit a 9 (widths kept, so alignment is
    checked); durations as ``<MS>``."""
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", _nines, text)
    text = re.sub(r"\+\d+\.\d{3}s", _nines, text)
    text = re.sub(r" \d+\.\dms", " <MS>", text)
    # An age (``7s``, ``12s``, ``2m``) as ``9s`` right-aligned in its own width: a slow
    # machine may take more than 9 s between the fixture and the listing.
    text = re.sub(r"(?m)(?:^|(?<=  )) *\d+[smhd](?=  )", lambda m: "9s".rjust(len(m.group())), text)
    text = re.sub(r"\b[0-9a-f]{32}\b", "e" * 32, text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def _python(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "toolledger", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        **kwargs,
    )


T = "9999-99-99T99:99:99+99:99"  # a time, every digit a 9 (see ``normal``)

RUNS = f"""\
run     status     events  failed  refused  started                    goal
zeta-1  completed       2       0        0  {T}  Pay
run-b   failed          1       1        0  {T}  Weekly report
run-a   completed       5       0        1  {T}  Email the report"""

SEARCH = f"""\
time                       run    kind       name    status     snippet
{T}  run-a  finish     finish  completed  -
{T}  run-a  approval   email   refused    refused by ann: not now
{T}  run-a  tool_call  send    completed  and this
{T}  run-a  tool_call  send    completed  send it
{T}  run-a  step       search  completed  find it"""

APPROVALS = """\
age  status   call        tool    by  ticket  fingerprint          justification  input
 9s  pending  default/g1  send@1  -   T-7     sha256:{fp}  pay it         {{"to":"c@x"}}"""

SHOW = """\
run run-a  completed  agent=bot
goal: Email the report
started 9999-99-99T99:99:99.999+99:99 (times below are since this start)
├─ step search [completed] +9.999s <MS>
│    why: find it
│    in {"q":"report"}
│    out {"hits":3}
├─ tool_call send [completed] undelivered +9.999s <MS>
│    why: send it
│    in {"to":"a@x"}
│    out {"sent":"a@x"}
├─ tool_call send [completed] +9.999s <MS>
│    why: and this
│    in {"to":"b@x"}
│    out {"sent":"b@x"}
├─ approval email [refused] +9.999s
│    refused by ann: not now
└─ finish [completed] +9.999s"""


CHECKPOINTS = """\
call        tool  status     rev  age  blocks (same action)  reason
default/c1  send  completed    2   9s  -                     result stored, not yet delivered"""

E = "e" * 32  # an event id (see ``normal``)

REPLAY = f"""\
seq  event                             parent  kind       name    status
  0  {E}  -       step       search  completed
  1  {E}  -       tool_call  send    completed
  3  {E}  -       tool_call  send    completed
  5  {E}  -       approval   email   refused
  6  {E}  -       finish     finish  completed"""


class TestSnapshots:
    """Each listing in a pipe (no colour) and on a terminal (colour), same text."""

    def _fingerprint(self, db: Path) -> str:
        store = toolledger.open_store(db, readonly=True)
        try:
            return store.approval_get("default", "g1").binding.input_fingerprint[7:19]
        finally:
            store.close()

    @pytest.mark.parametrize("color", [False, True], ids=["pipe", "tty"])
    @pytest.mark.parametrize(
        "command", ["runs", "search", "approvals", "checkpoints", "replay", "show"]
    )
    def test_listing(self, db: Path, command: str, color: bool) -> None:
        args = {
            "runs": ["runs"],
            "search": ["search", "--run", "run-a"],
            "approvals": ["approvals"],
            "checkpoints": ["checkpoints"],
            "replay": ["replay", "run-a"],
            "show": ["show", "run-a"],
        }[command]
        expected = {
            "runs": RUNS,
            "search": SEARCH,
            "approvals": APPROVALS,
            "checkpoints": CHECKPOINTS,
            "replay": REPLAY,
            "show": SHOW,
        }[command]
        if command == "approvals":
            expected = expected.format(fp=self._fingerprint(db))
        result = invoke(db, *args, color=color)
        assert result.exit_code == 0, result.output
        plain = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
        assert normal(plain) == expected
        assert ("\x1b[" in result.stdout) is color  # colour on a terminal only
        if color:  # statuses coloured: green done, red refused/failed, yellow waiting
            assert "\x1b[3" in result.stdout

    @pytest.mark.parametrize(
        "command",
        [
            ["runs"],
            ["search"],
            ["approvals"],
            ["checkpoints"],
            ["replay", "run-a"],
            ["show", "latest"],
        ],
    )
    def test_no_color_turns_colour_offon_a_terminal(self, db: Path, command: list[str]) -> None:
        result = invoke(db, *command, color=True, env={"NO_COLOR": "1"})
        assert result.exit_code == 0
        assert "\x1b" not in result.stdout

    def test_csv_has_the_table_columns_uncut(self, db: Path) -> None:
        import csv

        rows = list(csv.reader(invoke(db, "runs", "--csv").stdout.splitlines()))
        assert rows[0] == ["run", "status", "events", "failed", "refused", "started", "goal"]
        assert [r[0] for r in rows[1:]] == ["zeta-1", "run-b", "run-a"]
        search = list(
            csv.reader(invoke(db, "search", "--csv", "--run", "zeta").stdout.splitlines())
        )
        assert search[0] == ["time", "run", "kind", "name", "status", "snippet"]

    def test_search_shows_a_pending_approval_as_pending(self, db: Path) -> None:
        out = invoke(db, "search", "--kind", "approval", "--run", "zeta-1").stdout
        assert "pending (ticket T-7)" in out
        assert "None" not in out

    def test_show_in_ascii_when_stdout_cannot_encode_the_tree(self, db: Path) -> None:
        proc = _python("--db", str(db), "show", "run-a", env={"PYTHONIOENCODING": "ascii"})
        assert proc.returncode == 0, proc.stderr
        assert "|- step search [completed]" in proc.stdout
        assert "`- finish [completed]" in proc.stdout
        assert "├" not in proc.stdout


class TestRunIds:
    @pytest.mark.parametrize("command", [["show"], ["export", "-o", "OUT"], ["verify"]])
    def test_a_unique_prefix_and_latest_name_a_run(self, db, tmp_path, command) -> None:
        out = str(tmp_path / "x.json")
        for ref, run_id in (("zet", "zeta-1"), ("latest", "zeta-1"), ("run-b", "run-b")):
            args = [command[0], ref, *[out if a == "OUT" else a for a in command[1:]]]
            result = invoke(db, *args)
            assert result.exit_code == 0, result.output
            if command[0] == "show":
                assert result.stdout.startswith(f"run {run_id} ")
            if command[0] == "verify":
                assert result.stdout.startswith(f"OK store {run_id}:")

    @pytest.mark.parametrize(
        "command",
        [
            ["show", "run-"],
            ["export", "run-"],
            ["verify", "run-"],
            ["export-otlp", "run-"],
            ["replay", "run-"],
            ["replay", "run-a", "--diff", "run-"],
            ["fork", "run-", "--at", "e", "--", "true"],
            ["diff", "run-a", "run-"],
            ["search", "--run", "run-"],
        ],
        ids=" ".join,
    )
    def test_an_ambiguous_prefix_is_exit_2_naming_the_candidates(self, db, command) -> None:
        result = invoke(db, *command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert "ambiguous" in line
        assert "run-a, run-b" in line
        assert result.stdout == ""

    def test_replay_and_diff_take_prefixes_and_latest(self, db) -> None:
        listed = invoke(db, "replay", "latest", "--json")
        assert listed.exit_code == 0, listed.output
        assert [json.loads(line)["kind"] for line in listed.stdout.splitlines()][-1] == "finish"
        diff = invoke(db, "diff", "run-a", "zet")
        assert diff.exit_code == 1, diff.output  # found, and they diverge
        assert "zeta-1" in diff.stdout + diff.stderr

    def test_an_unknown_prefix_is_exit_2_not_found(self, db) -> None:
        result = invoke(db, "show", "nope")
        assert result.exit_code == 2
        assert "nope" in result.stderr

    def test_latest_in_an_empty_ledger_is_exit_2(self, tmp_path) -> None:
        path = tmp_path / "empty.db"
        toolledger.open_store(path).close()
        result = invoke(path, "show", "latest")
        assert result.exit_code == 2
        assert "no run" in result.stderr

    def test_search_prints_run_ids_that_show_accepts(self, db) -> None:
        rows = invoke(db, "search", "--run", "zeta-1").stdout.splitlines()[1:]
        ids = {row.split()[1] for row in rows}
        assert ids == {"zeta-1"}
        for run_id in ids:
            assert invoke(db, "show", run_id).exit_code == 0


class TestFilters:
    def test_runs_status_agent_and_since(self, db) -> None:
        def ids(*args: str) -> list[str]:
            result = invoke(db, "runs", "--csv", *args)
            assert result.exit_code == 0, result.output
            return [line.split(",")[0] for line in result.stdout.splitlines()[1:]]

        assert ids("--status", "failed") == ["run-b"]
        assert ids("--agent", "bot") == ["zeta-1", "run-a"]
        assert ids("--since", "1h") == ["zeta-1", "run-b", "run-a"]
        assert ids("--since", "0s") == []

    @pytest.mark.parametrize(
        ("args", "more"),
        [
            (["--limit", "1"], "2 more: use --limit 3 to list them"),
            (["--limit", "1", "--agent", "bot"], "1 more: use --limit 2 to list them"),
            (["--limit", "1", "--json"], "2 more: use --limit 3 to list them"),
        ],
    )
    def test_runs_past_the_limit_says_how_many_more(self, db, args, more) -> None:
        result = invoke(db, "runs", *args)
        assert result.exit_code == 0
        assert result.stderr.strip() == more
        rows = [line for line in result.stdout.splitlines() if "zeta-1" in line]
        assert len(rows) == 1

    def test_runs_within_the_limit_says_nothing(self, db) -> None:
        assert invoke(db, "runs", "--limit", "3").stderr == ""

    @pytest.mark.parametrize(
        ("args", "valid"),
        [
            (["search", "--kind", "bogus"], "'tool_call'"),
            (["search", "--status", "bogus"], "'refused'"),
            (["runs", "--status", "bogus"], "'interrupted'"),
        ],
    )
    def test_unknown_values_are_refused_listing_the_valid_ones(self, db, args, valid) -> None:
        result = invoke(db, *args)
        assert result.exit_code == 2
        assert "bogus" in result.stderr
        assert valid in result.stderr
        assert result.stdout == ""


@pytest.fixture(scope="module")
def long_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose ``show`` is about 300 KB: far past a pipe's buffer."""
    path = tmp_path_factory.mktemp("long") / "long.db"
    with toolledger.run("many steps", db=path, run_id="long") as run:
        for i in range(1200):
            with run.step("parse", justification="x" * 80, i=i) as st:
                st.record_output(ok=True)
    return path


class TestPipes:
    def test_head_closing_the_pipe_exits_0_quietly(self, long_db) -> None:
        """``toolledger show RUN | head -1`` under ``set -o pipefail``: status 0, no error."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        cmd = f"{sys.executable} -m toolledger --db {long_db} show long | head -1"
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.stdout == "run long  completed  agent=-\n"
        assert proc.stderr == ""
        assert proc.returncode == 0

    def test_reader_closing_mid_stream_exits_0(self, long_db) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolledger", "--db", str(long_db), "search", "--limit", "5000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.readline().startswith(b"time")
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(120) == 0
        assert err == b""


PAGER_ENV = {"PAGER": "sed s/^/PAGED:/", "LINES": "20", "COLUMNS": "100"}


class TestPager:
    def test_long_output_on_a_terminal_goes_through_the_pager(self, db, long_db) -> None:
        code, out = on_a_terminal(["--db", str(db), "show", "run-a"], PAGER_ENV)
        assert code == 0
        assert "PAGED:" not in out  # short: printed as is
        code, out = on_a_terminal(["--db", str(long_db), "show", "long"], PAGER_ENV)
        assert code == 0
        assert out.startswith("PAGED:run long")

    def test_no_pager_prints_directly(self, long_db) -> None:
        code, out = on_a_terminal(["--db", str(long_db), "show", "long", "--no-pager"], PAGER_ENV)
        assert code == 0
        assert "PAGED:" not in out
        assert out.startswith("run long")
