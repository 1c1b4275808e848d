"""A full re-chain: invisible to an unkeyed store-only verify; caught by a key or an anchor.

The attacker edits a record in a real SQLite file and recomputes every hash after it
(and the run row's head), as anyone with write access and this source code can.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main

from .._internals import canonical, chain_hash, content_hash, run_genesis

KEY = "k3y-for-tests-0123456789abcdef"
_COLUMNS = ("seq", "run_id", "event_id", "parent_id", "kind", "name", "status", "at")


def _record(db: Path, **kw) -> str:
    with toolledger.run("Pay invoice INV-7", agent="payer", db=db, **kw) as run:
        for amount in (10, 20, 30):
            with run.step("pay", justification="the invoice is due", amount=amount) as st:
                st.record_output(paid=amount)
    return run.run_id


def _rechain(db: Path, run_id: str, *, seq: int = 2, strip_mac: bool = False) -> None:
    """Change record ``seq``'s inputs, then recompute every hash without any key."""
    conn = sqlite3.connect(db)
    with conn:
        (text,) = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        run_doc = json.loads(text)
        if strip_mac:
            run_doc["header"].pop("mac", None)
            run_doc["header"].pop("key_id", None)
            run_doc["genesis"] = run_genesis(run_doc["header"])
            conn.execute("UPDATE runs SET data = ? WHERE run_id = ?", (json.dumps(run_doc), run_id))
        prev = run_doc["genesis"]
        rows = conn.execute(
            "SELECT seq, run_id, event_id, parent_id, kind, name, status, at, data FROM events "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        for row in rows:
            doc = json.loads(row[8])
            if row[0] == seq:
                doc["content"]["inputs"]["amount"] = 9999
                doc["header"]["content_sha256"] = content_hash(doc["content"])
            columns = dict(zip(_COLUMNS, row[:8], strict=True))
            full = {**doc["header"], **columns}
            digest = chain_hash(prev, canonical(full))
            conn.execute(
                "UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE run_id = ? AND seq = ?",
                (json.dumps(doc), prev, digest, run_id, row[0]),
            )
            prev = digest
        conn.execute("UPDATE runs SET head_hash = ? WHERE run_id = ?", (prev, run_id))
    conn.close()


def _cli(db: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["--db", str(db), *args], env=env)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "chain.db"


class TestUnkeyed:
    def test_a_full_rechain_passes_store_only_verify(self, db: Path):
        """The documented limit of an unkeyed chain: nothing in the store contradicts it."""
        run_id = _record(db)
        _rechain(db, run_id)
        assert toolledger.verify(db, run_id).ok

    def test_verify_with_an_export_names_the_first_changed_record(self, db: Path, tmp_path):
        run_id = _record(db)
        export = tmp_path / "receipt.json"
        toolledger.export_json(db, run_id, export)
        _rechain(db, run_id, seq=2)
        report = toolledger.verify(db, run_id, export=export)
        assert not report.ok
        assert report.first_bad_seq == 2
        assert "record 2 differs from the export" in report.reason
        assert "tail" not in report.reason
        result = _cli(db, "verify", run_id, "--export", str(export))
        assert result.exit_code == 1
        assert "record 2 differs from the export" in result.output

    def test_head_prints_the_digest_and_expect_head_checks_it(self, db: Path):
        run_id = _record(db)
        result = _cli(db, "verify", run_id, "--head")
        assert result.exit_code == 0
        head = result.output.strip()
        assert head == toolledger.verify(db, run_id).head_hash
        assert len(head) == 64
        assert _cli(db, "verify", run_id, "--expect-head", head).exit_code == 0
        _rechain(db, run_id)
        result = _cli(db, "verify", run_id, "--expect-head", head)
        assert result.exit_code == 1
        assert "expected head" in result.output


class TestKeyed:
    def test_a_keyed_run_verifies_with_its_key_only(self, db: Path, monkeypatch):
        run_id = _record(db, key=KEY)
        assert toolledger.verify(db, run_id, key=KEY).ok
        missing = toolledger.verify(db, run_id)
        assert not missing.ok
        assert "keyed" in missing.reason
        wrong = toolledger.verify(db, run_id, key="another key")
        assert not wrong.ok
        assert "not the run's key" in wrong.reason
        monkeypatch.setenv("TOOLLEDGER_JOURNAL_KEY", KEY)
        assert toolledger.verify(db, run_id).ok
        assert _cli(db, "verify", run_id, env={"TOOLLEDGER_JOURNAL_KEY": KEY}).exit_code == 0

    def test_a_full_rechain_of_a_keyed_run_is_caught(self, db: Path):
        run_id = _record(db, key=KEY)
        _rechain(db, run_id, seq=2)
        report = toolledger.verify(db, run_id, key=KEY)
        assert not report.ok
        assert report.first_bad_seq == 0  # no record hashes as the key would
        result = _cli(db, "verify", run_id, env={"TOOLLEDGER_JOURNAL_KEY": KEY})
        assert result.exit_code == 1

    def test_stripping_the_key_marker_and_rechaining_is_caught(self, db: Path):
        run_id = _record(db, key=KEY)
        _rechain(db, run_id, strip_mac=True)
        assert toolledger.verify(db, run_id).ok  # unkeyed, it looks fine ...
        report = toolledger.verify(db, run_id, key=KEY)  # ... to anyone without the key
        assert not report.ok
        assert "not keyed" in report.reason

    def test_the_key_comes_from_the_environment(self, db: Path, monkeypatch):
        monkeypatch.setenv("TOOLLEDGER_JOURNAL_KEY", KEY)
        run_id = _record(db)
        monkeypatch.delenv("TOOLLEDGER_JOURNAL_KEY")
        assert not toolledger.verify(db, run_id).ok
        assert toolledger.verify(db, run_id, key=KEY.encode()).ok

    def test_a_keyed_export_verifies_and_imports_with_the_key(self, db: Path, tmp_path: Path):
        run_id = _record(db, key=KEY)
        export = tmp_path / "keyed.json"
        toolledger.export_json(db, run_id, export)
        assert toolledger.verify_export(export, key=KEY).ok
        assert not toolledger.verify_export(export).ok
        other = tmp_path / "other.db"
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.import_json(export, other)
        assert toolledger.import_json(export, other, key=KEY) == run_id
        assert toolledger.verify(other, run_id, key=KEY).ok

    def test_resuming_a_keyed_run_needs_its_key(self, db: Path):
        run_id = _record(db, key=KEY)
        with pytest.raises(toolledger.InvalidArgumentError) as err:
            toolledger.run("Pay invoice INV-7", db=db, run_id=run_id).start()
        assert "keyed" in err.value.message
        with toolledger.run("Pay invoice INV-7", db=db, run_id=run_id, key=KEY) as run:
            run.note("resumed")
        assert toolledger.verify(db, run_id, key=KEY).ok

    def test_a_bad_key_is_invalid_argument(self, db: Path):
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.run("x", db=db, key=12345)  # type: ignore[arg-type]
