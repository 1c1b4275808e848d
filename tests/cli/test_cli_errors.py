"""Every CLI error is one line on stderr with a documented exit code, never a traceback."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import toolledger
from toolledger.cli import main


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with toolledger.run("a goal", db=path):
        pass
    return path


class TestDbPath:
    @pytest.mark.parametrize("command", [["migrate"], ["gc", "--older-than", "1d"]])
    def test_db_under_a_regular_file_is_one_line_exit_2(self, tmp_path, command) -> None:
        (tmp_path / "file").write_text("not a directory")
        line = assert_one_line_error(invoke("--db", str(tmp_path / "file" / "x.db"), *command))
        assert "file" in line


class TestLimits:
    @pytest.mark.parametrize("command", ["runs", "checkpoints", "approvals"])
    def test_limit_past_any_table_size_means_no_limit(self, db, command) -> None:
        result = invoke("--db", str(db), command, "--limit", str(10**30))
        assert result.exit_code == 0, result.output
        assert "Error" not in result.output

    @pytest.mark.parametrize("command", ["runs", "checkpoints", "approvals"])
    def test_negative_limit_is_a_usage_error(self, db, command) -> None:
        result = invoke("--db", str(db), command, "--limit", "-1")
        assert result.exit_code == 2
        assert "negative" in result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit)

    def test_runs_limit_huge_still_lists_the_run(self, db) -> None:
        result = invoke("--db", str(db), "runs", "--limit", str(10**30))
        assert "a goal" in result.stdout


class TestAges:
    @pytest.mark.parametrize("age", ["99999999999d", "9" * 40 + "w"])
    def test_gc_age_past_timedelta_is_one_line_exit_2(self, db, age) -> None:
        line = assert_one_line_error(invoke("--db", str(db), "gc", "--older-than", age))
        assert "at most" in line

    def test_gc_age_reaching_before_year_1_erases_nothing(self, db) -> None:
        result = invoke("--db", str(db), "gc", "--older-than", "999999999d", "--json")
        assert result.exit_code == 0, result.output
        assert '"runs_erased": 0' in result.stdout


READERS = [
    ["runs"],
    ["show", "RUN"],
    ["verify", "RUN"],
    ["export", "RUN", "-o", "OUT"],
    ["replay", "RUN"],
    ["checkpoints"],
    ["approvals", "--pending"],
]
WRITERS = [
    ["gc", "--older-than", "30d"],
    ["approve", "c1", "--by", "alice"],
    ["deny", "c1", "--by", "alice"],
    ["migrate"],
]


def _args(command: list[str], run_id: str, out: Path) -> list[str]:
    return [run_id if a == "RUN" else str(out) if a == "OUT" else a for a in command]


class TestReadersNeverCreate:
    @pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
    def test_reader_on_missing_database_is_one_line_and_creates_nothing(
        self, tmp_path, command
    ) -> None:
        db = tmp_path / "nodir" / "missing.db"
        args = _args(command, "r1", tmp_path / "out.json")
        line = assert_one_line_error(invoke("--db", str(db), *args))
        assert "no database" in line
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
    def test_reader_on_another_apps_sqlite_file_leaves_it_untouched(
        self, tmp_path, command
    ) -> None:
        db = tmp_path / "app.db"
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.commit()
        conn.close()
        before = db.read_bytes()
        line = assert_one_line_error(
            invoke("--db", str(db), *_args(command, "r1", tmp_path / "o.json"))
        )
        assert "not a toolledger database" in line
        assert db.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]

    def test_copy_from_missing_source_is_one_line_exit_2(self, tmp_path) -> None:
        line = assert_one_line_error(
            invoke("copy", "--from", str(tmp_path / "missing.db"), "--to", str(tmp_path / "d.db"))
        )
        assert "missing.db" in line
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize("db", ["postgresq://app@db/agents", "mysql://u@h/db"])
    @pytest.mark.parametrize("command", [["runs"], ["migrate"]], ids=lambda c: c[0])
    def test_unknown_url_scheme_is_one_line_exit_2(
        self, tmp_path, monkeypatch, db, command
    ) -> None:
        monkeypatch.chdir(tmp_path)
        line = assert_one_line_error(invoke("--db", db, *command))
        assert "unknown database URL scheme" in line
        assert list(tmp_path.iterdir()) == []


# -- corrupt files ----------------------------------------------------------------------


def _ledger(path: Path) -> str:
    """A ledger with a run (steps, an approval request), checkpoints and a tombstone-free
    history, checkpointed into the main file (no WAL left)."""

    @toolledger.tool(
        revision="1", approval="effect-only", approver=lambda r: toolledger.Pending("T-1")
    )
    def gated(input, ctx):
        return {"ok": True}

    @toolledger.tool(revision="1")
    def plain(input, ctx):
        return {"n": input["n"]}

    with toolledger.run("corrupt me", db=path) as run:
        for i in range(30):
            with run.step(f"step-{i}", justification="because " * 20):
                pass
            run.call(plain, call_id=f"p{i}", input={"n": i})
        run.call(gated, call_id="c1", input={"to": "x"})
    return run.run_id


SEED = 20261203


def _variants(good: bytes, n: int) -> list[tuple[str, bytes]]:
    """``n`` seeded corruptions of a database file: truncations, page and header damage,
    garbage, zeroes, a swapped page."""
    import random

    rng = random.Random(SEED)
    page = int.from_bytes(good[16:18], "big") or 65536
    pages = len(good) // page
    out: list[tuple[str, bytes]] = [
        ("empty", b""),
        ("garbage", bytes(rng.randrange(256) for _ in range(4096))),
        ("zero-header", bytes(100) + good[100:]),
        ("text", b"SQLite format 3\x00 but not really"),
    ]
    while len(out) < n:
        kind = rng.choice(["truncate", "flip", "zero-page", "swap", "header-byte"])
        data = bytearray(good)
        if kind == "truncate":
            data = data[: rng.randrange(1, len(good))]
        elif kind == "flip":
            for _ in range(rng.randrange(1, 64)):
                data[rng.randrange(100, len(data))] ^= 1 << rng.randrange(8)
        elif kind == "zero-page":
            p = rng.randrange(pages)
            data[p * page : (p + 1) * page] = bytes(page)
        elif kind == "swap":
            a, b = rng.randrange(1, pages), rng.randrange(1, pages)
            pa, pb = data[a * page : (a + 1) * page], data[b * page : (b + 1) * page]
            data[a * page : (a + 1) * page], data[b * page : (b + 1) * page] = pb, pa
        else:
            data[rng.randrange(16, 100)] = rng.randrange(256)
        out.append((f"{len(out)}-{kind}", bytes(data)))
    return out


@pytest.fixture(scope="module")
def good_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, str]:
    path = tmp_path_factory.mktemp("good") / "good.db"
    run_id = _ledger(path)
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path.read_bytes(), run_id


def test_every_command_on_40_corrupt_files_prints_one_line_never_a_traceback(
    tmp_path, good_ledger
) -> None:
    """Each of 40 seeded corruptions of a real ledger, under every command: exit 0, 1
    (a failed check) or 2 (one line on stderr); never an internal error (3) or a
    traceback. The outcome table is printed for the report."""
    good, run_id = good_ledger
    seen: dict[int, int] = {}
    for name, data in _variants(good, 40):
        for command in READERS + WRITERS:
            db = tmp_path / f"{name}.db"
            for leftover in tmp_path.glob(f"{name}.db*"):
                leftover.unlink()
            db.write_bytes(data)
            args = _args(command, run_id, tmp_path / "out.json")
            result = invoke("--db", str(db), *args)
            where = f"{name} {' '.join(command)}: {result.output!r:.300}"
            assert result.exit_code in (0, 1, 2), where
            assert result.exception is None or isinstance(result.exception, SystemExit), where
            assert "Traceback" not in result.output, where
            if result.exit_code == 2:
                assert len(result.stderr.splitlines()) == 1, where
            seen[result.exit_code] = seen.get(result.exit_code, 0) + 1
    print("exit codes over 40 corrupt files x 11 commands:", dict(sorted(seen.items())))
    assert seen.get(2, 0) > 0  # the corruptions are real: some commands must refuse


def test_corrupt_file_in_a_real_process_prints_one_line(tmp_path, good_ledger) -> None:
    """The same through the installed entry point in a real process (no CliRunner)."""
    import subprocess
    import sys

    good, run_id = good_ledger
    db = tmp_path / "bad.db"
    db.write_bytes(good[: len(good) // 3])
    for command in (["runs"], ["verify", run_id], ["checkpoints"], ["migrate"]):
        proc = subprocess.run(
            [sys.executable, "-m", "toolledger", "--db", str(db), *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode in (0, 1, 2), proc.stderr
        assert "Traceback" not in proc.stderr
        if proc.returncode:
            assert len(proc.stderr.splitlines()) == 1, proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo (POSIX)")
def test_db_naming_a_fifo_exits_2_at_once_in_a_real_process(tmp_path) -> None:
    """A FIFO as --db blocked open() forever (deaf to Ctrl-C): now one line, exit 2."""
    import subprocess
    import sys

    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    for command in (["runs"], ["verify", "r1"], ["search", "word"], ["migrate"]):
        proc = subprocess.run(
            [sys.executable, "-m", "toolledger", "--db", str(fifo), *command],
            capture_output=True,
            text=True,
            timeout=60,  # only a regression gets near it
        )
        assert proc.returncode == 2, (command, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert line.startswith("Error: cannot open ")
        assert "is a FIFO (named pipe), not a database file" in line
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.db"]  # nothing beside it


def test_db_parent_without_permission_is_one_line_exit_2(tmp_path, monkeypatch) -> None:
    """PermissionError creating the parent (a writer): one line, exit 2. Root ignores
    chmod, so the denial comes from Path.mkdir as the kernel raises it."""

    def denied(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", denied)
    line = assert_one_line_error(invoke("--db", str(tmp_path / "locked" / "x.db"), "migrate"))
    assert "Permission denied" in line


def test_a_warning_is_one_line_in_a_real_process(tmp_path) -> None:
    """A writing command on a new file warns as one ``warning: …`` line, never Python's
    two-line warning with a source excerpt (real process: pytest's filters are not there)."""
    import subprocess
    import sys

    db = tmp_path / "new.db"
    proc = subprocess.run(
        [sys.executable, "-m", "toolledger", "--db", str(db), "gc", "--older-than", "30d"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"warning: created a new ledger at {db.resolve()} (no file was there: check db= or "
        "TOOLLEDGER_DB if you meant an existing one)"
    ]
