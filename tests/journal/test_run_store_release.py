"""A run that cannot start closes the store it opened (no ``__exit__`` follows a failed
``__enter__``); a store the caller passed stays open. Python 3.13's sqlite3 reports the
leak as a ``ResourceWarning``; here the closed store says so itself."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolledger
from toolledger.store import SQLiteStore


class TestFailedStart:
    def test_a_replay_of_an_unknown_run_closes_the_store_it_opened(self, tmp_path: Path) -> None:
        """``with run(db=path, replay_of=unknown)`` raises ``NOT_FOUND`` and leaves no
        connection open."""
        SQLiteStore(tmp_path / "l.db").close()
        run = toolledger.run("g", db=tmp_path / "l.db", replay_of="no-such-run")
        with pytest.raises(toolledger.NotFoundError):
            run.__enter__()
        with pytest.raises(toolledger.StoreUnavailableError, match="is closed"):
            run.store.get_run("no-such-run")

    def test_a_store_the_caller_passed_stays_open(self, tmp_path: Path) -> None:
        """The same failure with ``db=`` a store: the caller's store is not closed for it."""
        store = SQLiteStore(tmp_path / "l.db")
        try:
            with (
                pytest.raises(toolledger.NotFoundError),
                toolledger.run("g", db=store, replay_of="no-such-run"),
            ):
                pass
            assert store.get_run("no-such-run") is None
        finally:
            store.close()

    def test_entering_a_started_run_again_keeps_its_store(self, tmp_path: Path) -> None:
        """A second ``__enter__`` is refused (``INVALID_ARGUMENT``) without closing the
        store of the run still in use."""
        with toolledger.run("g", db=tmp_path / "l.db") as run:
            with pytest.raises(toolledger.InvalidArgumentError, match="started already"):
                run.__enter__()
            run.note("still writing")
        assert run.status == "completed"
        store = SQLiteStore(tmp_path / "l.db")
        (row,) = store.list_runs()
        store.close()
        assert row.event_count == 2
