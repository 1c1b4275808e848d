"""export-site: one page per run whatever the ids, never a write outside DIR, no hang."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

import toolledger
from toolledger.cli import main
from toolledger.export.site import page_name

#: A run id ``toolledger.run`` accepts (``journal/_run.py``).
LEGAL_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}\Z")

posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo (POSIX)")


def _runs(db: Path, *run_ids: str) -> None:
    for run_id in run_ids:
        with toolledger.run(f"goal of {run_id}", db=db, run_id=run_id) as run:
            run.note("x")


def _site(db: Path, out: Path):
    return CliRunner().invoke(main, ["--db", str(db), "export-site", str(out)])


class TestPageNames:
    def test_a_run_id_equal_to_another_runs_old_hashed_name_gets_its_own_page(
        self, tmp_path: Path
    ) -> None:
        """The impostor attack: ``run-<sha of run:42>`` is legal; both runs keep their page."""
        db = tmp_path / "t.db"
        impostor = "run-" + hashlib.sha256(b"run:42").hexdigest()[:32]
        ids = ["run:42", impostor, "Run-A", "run-a", "RUN-A", "con", "nul.x", "a."]
        _runs(db, *ids)
        info = toolledger.export_site(db, tmp_path / "site")
        files = sorted((tmp_path / "site" / "runs").iterdir())
        assert info.runs == len(ids) == len(files) == len(set(info.pages))
        assert len({p.name.casefold() for p in files}) == len(ids)  # case-insensitive FS too
        for run_id in ids:
            page = tmp_path / "site" / "runs" / page_name(run_id)
            assert f"goal of {run_id}" in page.read_text(encoding="utf-8"), run_id
        index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
        assert index.count('"href"') == len(ids)

    def test_plain_lower_case_ids_keep_their_name_others_are_hashed(self) -> None:
        assert page_name("3f2a9c41") == "3f2a9c41.html"
        assert page_name("weekly-report.v2") == "weekly-report.v2.html"
        for odd in ("Run-A", "run:42", "con", "com1.log", "a.", "x" * 101):
            assert page_name(odd).startswith("run_"), odd

    @given(LEGAL_ID, LEGAL_ID)
    @example("Run-A", "run-a")
    @example("run:42", "run-" + hashlib.sha256(b"run:42").hexdigest()[:32])
    def test_two_legal_ids_never_share_a_page_even_ignoring_case(self, a: str, b: str) -> None:
        if a != b:
            assert page_name(a).casefold() != page_name(b).casefold()

    @given(LEGAL_ID)
    def test_no_legal_id_names_a_hashed_page_and_no_page_is_hidden(self, run_id: str) -> None:
        name = page_name(run_id)
        assert name.endswith(".html")
        assert not name.startswith((".", "_"))
        assert ("_" in name) == (name != f"{run_id}.html")  # only hashed names hold "_"


class TestStaysInsideDir:
    def test_a_runs_symlink_out_of_dir_is_refused_and_nothing_written(self, tmp_path: Path) -> None:
        db = tmp_path / "t.db"
        _runs(db, "r1")
        outside = tmp_path / "outside"
        outside.mkdir()
        site = tmp_path / "site"
        site.mkdir()
        (site / "runs").symlink_to(outside, target_is_directory=True)
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            toolledger.export_site(db, site)
        assert "is a symbolic link" in info.value.message
        assert list(outside.iterdir()) == []
        assert sorted(p.name for p in site.iterdir()) == ["runs"]
        result = _site(db, site)
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert "runs is a symbolic link" in line
        assert list(outside.iterdir()) == []

    def test_a_runs_that_is_a_file_is_refused(self, tmp_path: Path) -> None:
        db = tmp_path / "t.db"
        _runs(db, "r1")
        site = tmp_path / "site"
        site.mkdir()
        (site / "runs").write_text("mine")
        with pytest.raises(toolledger.InvalidArgumentError, match="runs is not a directory"):
            toolledger.export_site(db, site)
        assert (site / "runs").read_text() == "mine"

    def test_symlinks_in_the_page_and_index_places_are_replaced_not_followed(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.db"
        _runs(db, "r1")
        site = tmp_path / "site"
        (site / "runs").mkdir(parents=True)
        victim = tmp_path / "victim.txt"
        victim.write_text("keep me")
        (site / "index.html").symlink_to(victim)
        (site / "runs" / "r1.html").symlink_to(victim)
        toolledger.export_site(db, site)
        assert victim.read_text() == "keep me"
        for page in (site / "index.html", site / "runs" / "r1.html"):
            assert not page.is_symlink()
            assert "<html" in page.read_text(encoding="utf-8")


@posix_only
class TestSpecialFiles:
    def test_fifos_in_the_index_or_a_page_place_are_refused_at_once(self, tmp_path: Path) -> None:
        """In a real process with a timeout: opening either FIFO to write would block."""
        db = tmp_path / "t.db"
        _runs(db, "r1", "r2")
        script = textwrap.dedent(
            """
            import os, sys
            from pathlib import Path
            import toolledger
            db, tmp = Path(sys.argv[1]), Path(sys.argv[2])
            for n, place in enumerate(["index.html", "runs/r2.html"]):
                site = tmp / f"site{n}"
                (site / "runs").mkdir(parents=True)
                os.mkfifo(site / place)
                try:
                    toolledger.export_site(db, site)
                    print("written")
                except toolledger.InvalidArgumentError as exc:
                    print(exc.code, exc.message)
                print(sorted(str(p.relative_to(site)) for p in site.rglob("*")))
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", script, str(db), str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,  # only a regression gets near it
        )
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith("INVALID_ARGUMENT ")
        assert "index.html is a FIFO (named pipe)" in lines[0]
        assert lines[1] == "['index.html', 'runs']"  # nothing written
        assert "r2.html is a FIFO (named pipe)" in lines[2]
        assert lines[3] == "['runs', 'runs/r2.html']"  # only the FIFO itself: no page

    def test_a_socket_or_directory_in_a_page_place_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        db = tmp_path / "t.db"
        _runs(db, "r1")
        site = tmp_path / "s"
        (site / "runs" / "r1.html").mkdir(parents=True)
        with pytest.raises(toolledger.InvalidArgumentError, match=r"r1\.html is a directory"):
            toolledger.export_site(db, site)
        (site / "runs" / "r1.html").rmdir()
        monkeypatch.chdir(site / "runs")  # AF_UNIX paths are short: bind a relative name
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind("r1.html")
        try:
            result = _site(db, site)
        finally:
            server.close()
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert "r1.html is a socket" in line
        assert not (site / "index.html").exists()
