"""The journal CLI: runs, show, export, verify, replay, checkpoints; exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.checkpoint import Binding, claim_execution, create_checkpoint, fingerprint
from toolledger.cli import main

from ._pty import drain


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    with toolledger.run("Answer the question", agent="bot", db=path, run_id="run-a") as run:
        with run.step("search", justification="names a codebase", q="gate") as st:
            st.record_output(hits=3)
        run.approval("email", granted=False, by="user", reason="local")
    run_b = toolledger.run("Answer the question", agent="bot", db=path, run_id="run-b")
    with run_b, run_b.step("search", justification="names a codebase", q="gate") as st:
        st.record_output(hits=4)
    return path


def invoke(db: Path, *args: str):
    return CliRunner().invoke(main, ["--db", str(db), *args], catch_exceptions=False)


class TestCommands:
    def test_runs_lists_newest_first(self, db):
        result = invoke(db, "runs", "--json")
        assert result.exit_code == 0
        rows = [json.loads(line) for line in result.output.splitlines()]
        assert [r["run_id"] for r in rows] == ["run-b", "run-a"]
        assert rows[1]["status"] == "completed"
        assert rows[1]["records"] == 3  # the step is one record: it ended while buffered
        assert rows[1]["counts"] == {"events": 3, "failed": 0, "refused": 1, "running": 0}
        table = invoke(db, "runs").output.splitlines()
        assert table[0].split()[:5] == ["run", "status", "events", "failed", "refused"]
        assert table[2].split()[:5] == ["run-a", "completed", "3", "0", "1"]

    def test_show_prints_the_tree(self, db):
        result = invoke(db, "show", "run-a")
        assert result.exit_code == 0
        assert re.search(r"(?m)^├─ step search \[completed\] \+0\.\d{3}s ", result.output)
        assert "└─ finish [completed]" in result.output  # not "finish finish"
        assert '│    in {"q":"gate"}' in result.output
        assert '│    out {"hits":3}' in result.output
        assert "why: names a codebase" in result.output
        assert "refused by user: local" in result.output

    @pytest.mark.parametrize("fmt", ["json", "md", "html"])
    def test_export_writes_each_format(self, db, tmp_path, fmt):
        out = tmp_path / f"out.{fmt}"
        result = invoke(db, "export", "run-a", "--format", fmt, "-o", str(out))
        assert result.exit_code == 0
        assert result.stdout.strip() == str(out)
        assert out.stat().st_size > 0
        if fmt == "json":
            assert toolledger.verify_export(out).ok

    @pytest.mark.parametrize("fmt", ["json", "md", "html"])
    def test_export_to_dash_writes_standard_output(self, db, tmp_path, monkeypatch, fmt):
        """``-o -`` prints the export itself (what the file would hold), and writes no file."""
        monkeypatch.chdir(tmp_path)
        to_file = invoke(db, "export", "run-a", "--format", fmt, "-o", str(tmp_path / "f"))
        assert to_file.exit_code == 0
        result = invoke(db, "export", "run-a", "--format", fmt, "-o", "-")
        assert result.exit_code == 0
        assert not (tmp_path / "-").exists()
        assert result.stderr.startswith("wrote standard output (3 records, ")
        printed = result.stdout_bytes
        if fmt == "json":
            assert (
                json.loads(printed)["events"] == json.loads((tmp_path / "f").read_bytes())["events"]
            )
            (tmp_path / "piped.json").write_bytes(printed)
            assert toolledger.verify_export(tmp_path / "piped.json").ok
        else:
            assert len(printed) == (tmp_path / "f").stat().st_size
            assert printed.splitlines()[0] == (tmp_path / "f").read_bytes().splitlines()[0]

    def test_import_of_an_export_is_the_same_run_in_another_database(self, db, tmp_path):
        """export then import: the run id on stdout, the same records and head, verified."""
        export = tmp_path / "a.json"
        invoke(db, "export", "run-a", "-o", str(export))
        other = tmp_path / "other.db"
        toolledger.open_store(other).close()
        result = invoke(other, "import", str(export))
        assert result.exit_code == 0, result.output
        assert result.stdout == "run-a\n"
        head = invoke(db, "verify", "run-a", "--head").stdout
        assert result.stderr == f"imported run-a (3 records, head {head.strip()})\n"
        assert invoke(other, "verify", "run-a", "--head").stdout == head
        shown = [invoke(path, "show", "run-a", "--json").stdout for path in (db, other)]
        assert shown[0] == shown[1]

    def test_import_refuses_a_tampered_export_and_a_run_it_holds(self, db, tmp_path):
        """A tampered file: exit 1, nothing imported; the run already there: exit 2."""
        export = tmp_path / "a.json"
        invoke(db, "export", "run-a", "-o", str(export))
        tampered = tmp_path / "t.json"
        tampered.write_text(export.read_text().replace('"hits":3', '"hits":9'))
        other = tmp_path / "other.db"
        toolledger.open_store(other).close()
        bad = invoke(other, "import", str(tampered))
        assert bad.exit_code == 1
        assert bad.stderr.startswith(f"FAILED export {tampered}: record 0: ")
        assert bad.stderr.endswith("; nothing imported\n")
        assert invoke(other, "runs", "--json").stdout == ""
        again = invoke(db, "import", str(export))
        assert again.exit_code == 2
        assert again.stderr == "Error: run run-a is in this database already\n"

    def test_verify_ok_then_tampered_exits_1(self, db, tmp_path):
        export = tmp_path / "a.json"
        invoke(db, "export", "run-a", "-o", str(export))
        ok = invoke(db, "verify", "run-a")
        assert ok.exit_code == 0
        assert ok.output.startswith("OK store run-a: 3 records")
        assert invoke(db, "verify", "--export", str(export)).exit_code == 0
        conn = sqlite3.connect(db)
        conn.execute("UPDATE events SET data = replace(data, '\"hits\":3', '\"hits\":9')")
        conn.commit()
        conn.close()
        bad = invoke(db, "verify", "run-a")
        assert bad.exit_code == 1
        assert "FAILED store run-a: record 0: its content was altered" in bad.stderr

    def test_verify_expect_head_ignores_case_and_whitespace(self, db):
        head = invoke(db, "verify", "run-a", "--head").output.strip()
        for written in (head.upper(), f"  {head}\n", f" {head.upper()}\t"):
            result = invoke(db, "verify", "run-a", "--expect-head", written)
            assert result.exit_code == 0, result.stderr
            assert result.output.startswith("OK store run-a")
        other = invoke(db, "verify", "run-a", "--expect-head", "0" * 64)
        assert other.exit_code == 1
        assert "the tail was changed" in other.stderr

    @pytest.mark.parametrize("given", ["", "nope", "a" * 63, "z" * 64])
    def test_verify_malformed_expect_head_exits_2(self, db, given):
        result = invoke(db, "verify", "run-a", "--expect-head", given)
        assert result.exit_code == 2
        assert "64 hex digits" in result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1

    def test_replay_prints_events_and_diff_names_divergence(self, db):
        result = invoke(db, "replay", "run-a", "--json")
        assert result.exit_code == 0
        kinds = [json.loads(line)["kind"] for line in result.output.splitlines()]
        assert kinds == ["step", "approval", "finish"]
        table = invoke(db, "replay", "run-a").output.splitlines()
        assert table[0].split() == ["seq", "event", "parent", "kind", "name", "status"]
        assert [line.split()[3:] for line in table[1:]] == [
            ["step", "search", "completed"],
            ["approval", "email", "refused"],
            ["finish", "finish", "completed"],
        ]
        diff = invoke(db, "replay", "run-a", "--diff", "run-b")
        assert diff.exit_code == 1
        assert "event 0 (step 'search'): outputs differs" in diff.stderr

    def test_checkpoints_lists_the_reconcile_queue_with_ages(self, db):
        store = toolledger.open_store(db)
        binding = Binding("default", "c1", "send", "1", fingerprint({}))
        now = datetime.now(timezone.utc)
        _, rec = store.create_if_absent(create_checkpoint(binding, at=now))
        t = claim_execution(rec, attempt_id="a1", at=now)
        assert store.compare_and_swap(t.expected_revision, t.next)
        store.close()
        result = invoke(db, "checkpoints", "--json")
        assert result.exit_code == 0
        (row,) = [json.loads(line) for line in result.output.splitlines()]
        assert (row["call_id"], row["status"], row["revision"]) == ("c1", "executing", 1)
        assert row["age_seconds"] >= 0
        empty = invoke(db, "checkpoints", "--status", "delivered").output.splitlines()
        assert [line.split()[:3] for line in empty] == [["call", "tool", "status"]]
        assert invoke(db, "checkpoints", "--status", "delivered", "--json").output == ""


class TestExitCodes:
    @pytest.mark.parametrize(
        "args",
        [["show", "nope"], ["export", "nope"], ["verify", "nope"], ["replay", "nope"]],
    )
    def test_unknown_run_exits_2_with_error_on_stderr(self, db, args):
        result = invoke(db, *args)
        assert result.exit_code == 2
        assert "nope" in result.stderr
        assert result.stdout == ""

    def test_every_command_has_help(self, db):
        for command in ("runs", "show", "export", "verify", "replay", "checkpoints"):
            result = invoke(db, command, "-h")
            assert result.exit_code == 0
            assert "Example:" in result.output


def test_export_shows_a_progress_bar_when_stderr_is_a_terminal(tmp_path):
    db = tmp_path / "big.db"
    with toolledger.run("many", db=db, run_id="big") as run:
        for i in range(2100):  # one record each (PROGRESS_MIN_RECORDS: 2,000)
            with run.step("s", i=i):
                pass
    primary, secondary = pty.openpty()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolledger.cli import main; main()",
            "--db",
            str(db),
            "export",
            "big",
            "-o",
            str(tmp_path / "big.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "dumb"},
        timeout=60,
        check=False,
    )
    os.close(secondary)
    err = drain(primary).decode()
    assert proc.returncode == 0
    assert "exporting" in err
    assert "100%" in err
