"""A stored checkpoint text proven valid once is not checked again; any other text is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.checkpoint import (
    Binding,
    CheckpointRecord,
    claim_execution,
    complete_execution,
    create_checkpoint,
    fingerprint,
)
from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore

from .._internals import load_record


def _completed(store: tl.Store, call_id: str, payload: object) -> CheckpointRecord:
    from datetime import datetime, timezone

    at = datetime.now(timezone.utc)
    rec = create_checkpoint(Binding("ns", call_id, "t", "1", fingerprint({})), at=at)
    assert store.create_if_absent(rec)[0]
    t = claim_execution(rec, attempt_id="a1", at=at)
    assert store.compare_and_swap(0, t.next)
    done = complete_execution(t.next, attempt_id="a1", at=at, result=payload).next
    assert store.compare_and_swap(1, done)
    return done


class TestProvenRows:
    def test_read_of_proven_text_hands_out_a_private_payload(self, tmp_path: Path) -> None:
        """Mutating what one read returned never changes what the next read returns."""
        store = SQLiteStore(tmp_path / "s.db")
        _completed(store, "c1", {"items": [1, 2]})
        first = store.get("ns", "c1")
        assert first is not None
        assert first.result is not None
        first.result.payload["items"].append(3)
        again = store.get("ns", "c1")
        assert again is not None
        assert again.result is not None
        assert again.result.payload == {"items": [1, 2]}
        assert again.result.payload is not first.result.payload

    def test_one_byte_edit_of_a_proven_row_is_checked_in_full(self, tmp_path: Path) -> None:
        """An edited row is not the proven text: the read quarantines it as before."""
        store = SQLiteStore(tmp_path / "s.db")
        _completed(store, "c1", {"ok": True})
        assert store.get("ns", "c1") is not None  # proven now
        conn = sqlite3.connect(tmp_path / "s.db")
        conn.execute(
            "UPDATE checkpoints SET record = replace(record, '\"revision\":2', '\"revision\":-2')"
        )
        conn.commit()
        conn.close()
        with pytest.raises(tl.InvalidCheckpointError):
            store.get("ns", "c1")

    def test_proven_text_under_another_key_is_checked_in_full(self) -> None:
        """A text proven for one key says nothing about another key's row."""
        store = MemoryStore()
        _completed(store, "c1", {"ok": True})
        text = store.rows[("ns", "c1")]
        assert load_record(text, "ns", "c1").key == ("ns", "c1")
        with pytest.raises(tl.InvalidCheckpointError):
            load_record(text, "ns", "other")
