"""toolledger's warnings name the application's line, however deep inside they are raised.

A fixed ``stacklevel`` named a toolledger line for ``toolledger.run`` and ``sys:1`` for
``open_store``; ``errors.warn_at_caller`` walks up to the first frame outside the package.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

import toolledger
from toolledger.errors import warn_at_caller
from toolledger.store import SQLiteStore

from .journal._faults import FaultyStore


def _here() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def _only(
    caught: list[warnings.WarningMessage], category: type[Warning]
) -> warnings.WarningMessage:
    (found,) = [w for w in caught if issubclass(w.category, category)]
    return found


class TestWarnAtCaller:
    def test_a_new_ledger_from_run_names_the_run_line(self, tmp_path: Path) -> None:
        """``toolledger.run`` on a missing file: the warning's line is the ``run(...)`` line."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = _here() + 1
            with toolledger.run("g", db=tmp_path / "new.db"):
                pass
        got = _only(caught, toolledger.NewLedgerWarning)
        assert (got.filename, got.lineno) == (__file__, line)

    def test_a_new_ledger_from_open_store_names_the_open_line(self, tmp_path: Path) -> None:
        """``open_store`` (one call shallower than ``run``) names its own caller too."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = _here() + 1
            store = toolledger.open_store(tmp_path / "new.db")
        store.close()
        got = _only(caught, toolledger.NewLedgerWarning)
        assert (got.filename, got.lineno) == (__file__, line)

    def test_an_undelivered_call_names_the_applications_frame(self, tmp_path: Path) -> None:
        """The warning raised while the run closes points into this file, not toolledger."""
        db = tmp_path / "l.db"
        SQLiteStore(db).close()

        @toolledger.tool(revision="1")
        def send(input: dict[str, str], ctx: toolledger.ExecuteContext) -> dict[str, bool]:
            return {"ok": True}

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with toolledger.run("g", db=db) as run:
                run.call(send, call_id="toolu_1", input={"to": "ana"})
        got = _only(caught, toolledger.UndeliveredWarning)
        assert got.filename == __file__

    def test_a_failed_journal_write_names_the_applications_line(self, tmp_path: Path) -> None:
        """A refused journal append warns once, at the line that asked for the flush."""
        inner = SQLiteStore(tmp_path / "j.db")
        faulty = FaultyStore(inner)
        try:
            with toolledger.run("g", db=faulty) as run:
                run.note("a")
                faulty.queue("append_events", "refuse")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    line = _here() + 1
                    assert run.flush() is False
                assert run.flush() is True
        finally:
            inner.close()
        got = _only(caught, toolledger.JournalWarning)
        assert (got.filename, got.lineno) == (__file__, line)

    def test_called_from_outside_the_package_it_names_its_caller(self) -> None:
        """From application code (no toolledger frame between), the caller's own line."""
        line = _here() + 2
        with pytest.warns(UserWarning, match="from the app") as caught:
            warn_at_caller(UserWarning("from the app"))
        assert (caught[0].filename, caught[0].lineno) == (__file__, line)
