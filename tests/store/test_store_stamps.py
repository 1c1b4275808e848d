"""What a store stamps itself (an effect key's ``claimed_at``, an entry's ``written_at``) is
``format_time``'s form of a UTC time, taken while the write runs."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

import toolledger as tl
from toolledger.checkpoint.model import format_time, parse_time
from toolledger.store import SQLiteStore
from toolledger.store.base import ClaimEffectKey
from toolledger.testing import MemoryStore

_KEY = "sha256:" + "cd" * 32


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tl.Store:
    if request.param == "memory":
        return MemoryStore()
    return SQLiteStore(tmp_path / "s.db")


class TestStoreStamps:
    def test_claimed_at_is_the_stored_time_form_of_the_claim(self, store: tl.Store) -> None:
        """A claimed key's time is now, in ``format_time``'s form."""
        before = datetime.now(timezone.utc)
        assert store.apply([ClaimEffectKey("ns", _KEY, "call-1")]) == [True]
        after = datetime.now(timezone.utc)
        (row,) = store.list_effect_keys()
        at = parse_time(row.claimed_at, "claimed_at")
        assert format_time(at) == row.claimed_at
        assert before <= at <= after

    def test_written_at_is_the_stored_time_form_of_the_write(self, store: tl.Store) -> None:
        """An operation-journal entry's time is now, in ``format_time``'s form."""
        before = datetime.now(timezone.utc)
        store.operation_write("ns", "call-1", {"order": "o-1"})
        after = datetime.now(timezone.utc)
        (row,) = store.list_operations()
        at = parse_time(row.written_at, "written_at")
        assert format_time(at) == row.written_at
        assert before <= at <= after
