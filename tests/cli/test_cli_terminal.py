"""Stored text never drives the terminal: every control character a goal, justification,
ticket, approver name or reason carries is printed as a visible escape."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger import Pending
from toolledger.cli import main

from .._internals import clean, json_line
from ._pty import on_a_terminal

#: OSC 52 (clipboard write), OSC 8 (hyperlink), CSI, CR, BS, BEL, DEL, C1 CSI/OSC (8-bit),
#: a bidirectional override and a line separator.
HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07"
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
    "\x1b[2J\rover\bwrite\x7f"
    "\x9b31m\x9d0;title\x9c"
    "\u202egnp.exe\u2028end"
)
UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x202E]}


def _unsafe_in(text: str, *, allowed: str = "\n") -> set[str]:
    return {ch for ch in text if ch in UNSAFE and ch not in allowed}


@pytest.fixture
def hostile_db(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "hostile.db"

    @toolledger.tool(revision="1", approval="effect-only", approver=lambda r: Pending(HOSTILE))
    def gated(input, ctx):
        return {"ok": True}

    with toolledger.run(HOSTILE, agent="agent" + HOSTILE, db=db) as run:
        with run.step("lookup", justification=HOSTILE):
            pass
        run.approval("email", granted=False, by=HOSTILE, reason=HOSTILE)
        run.note(HOSTILE)
        run.call(gated, call_id="c1", input={"to": HOSTILE}, justification=HOSTILE)
        run.call(gated, call_id="c2", input={"to": "x"}, justification=HOSTILE)
    return db, run.run_id


def invoke(db: Path, *args: str):
    return CliRunner().invoke(main, ["--db", str(db), *args])


class TestClean:
    def test_clean_escapes_every_control_and_keeps_text(self) -> None:
        out = clean(HOSTILE)
        assert not _unsafe_in(out, allowed="")
        assert "\\x1b]52;c;ZXZpbA==\\x07" in out
        assert "\\x9b31m" in out
        assert "\\u202e" in out
        assert clean("plain text, ünïcode ✓") == "plain text, ünïcode ✓"

    def test_json_line_escapes_c1_and_round_trips(self) -> None:
        line = json_line({"goal": HOSTILE})
        assert not _unsafe_in(line, allowed="")
        assert json.loads(line) == {"goal": HOSTILE}


class TestCommands:
    @pytest.mark.parametrize(
        "args",
        [
            ["runs"],
            ["show", "RUN"],
            ["verify", "RUN"],
            ["approvals"],
            ["approvals", "--pending"],
            ["replay", "RUN"],
            ["runs", "--json"],
            ["show", "RUN", "--json"],
            ["approvals", "--json"],
            ["runs", "--csv"],
            ["approvals", "--csv"],
            ["search"],
            ["search", "--csv"],
            ["show", "latest"],
        ],
        ids=lambda a: " ".join(a),
    )
    def test_command_prints_no_control_character(self, hostile_db, args) -> None:
        db, run_id = hostile_db
        result = invoke(db, *[run_id if a == "RUN" else a for a in args])
        assert result.exit_code == 0, result.output
        assert not _unsafe_in(result.stdout), result.stdout
        assert not _unsafe_in(result.stderr), result.stderr

    def test_show_keeps_the_text_visible(self, hostile_db) -> None:
        db, run_id = hostile_db
        out = invoke(db, "show", run_id).stdout
        assert "goal: \\x1b]52;c;ZXZpbA==\\x07" in out
        assert "gnp.exe" in out

    def test_approvals_pending_escapes_ticket_and_justification(self, hostile_db) -> None:
        db, _ = hostile_db
        lines = invoke(db, "approvals", "--pending").stdout.splitlines()
        assert len(lines) == 3  # header + two requests: no field broke a line
        assert "\\x1b]52" in lines[1]
        rows = list(csv.reader(invoke(db, "approvals", "--pending", "--csv").stdout.splitlines()))
        assert len(rows) == 3
        assert all(len(row) == 9 for row in rows)
        assert "\\x1b]52" in rows[1][5]  # the ticket, escaped

    @pytest.mark.parametrize("command", ["deny", "approve"])
    def test_decision_output_escapes_approver_and_reason(self, hostile_db, command) -> None:
        db, _ = hostile_db
        result = invoke(db, command, "c1", "--by", "eve" + HOSTILE, "--reason", HOSTILE)
        assert result.exit_code == 0, result.output
        assert not _unsafe_in(result.output), result.output
        assert "\\x1b]8;;https://evil.example" in result.stdout
        assert len(result.stdout.splitlines()) == 1

    def test_error_messages_are_escaped(self, hostile_db) -> None:
        db, _ = hostile_db
        result = invoke(db, "show", "no" + HOSTILE)
        assert result.exit_code == 2
        assert not _unsafe_in(result.stderr), result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_show_on_a_real_terminal_emits_only_its_own_colour_codes(hostile_db) -> None:
    """Under a pty (colour on), the only escape sequences are show's SGR colours."""
    import re

    db, run_id = hostile_db
    code, text = on_a_terminal(["--db", str(db), "show", run_id], stdin=False)
    assert code == 0
    assert "\x1b[3" in text  # colours are on: this is a terminal
    stripped = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert not _unsafe_in(stripped), repr(stripped)
