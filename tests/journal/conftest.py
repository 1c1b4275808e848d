"""Fixtures for journal tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolledger.store import SQLiteStore
from toolledger.testing import MemoryStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh store of each kind."""
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "j.db")
    yield s
    s.close()
