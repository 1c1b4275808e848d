"""The registry of live journal writers is listed while other threads add and drop writers.

The background flusher (and exit) list every live writer while the runs' own threads open
and close theirs; a listing that raced an add once raised ``RuntimeError: Set changed size
during iteration`` in the flusher thread.
"""

from __future__ import annotations

import threading

import toolledger
from toolledger.testing import MemoryStore

from .._internals import LIVE_WRITERS, flush_all


class _Idle:
    """A registered writer with nothing to flush (many of them make a listing take long)."""

    def flush(self, wait: float | None = None, leave_young: bool = False) -> None:
        pass

    def due(self, now: float) -> bool:
        return False


def test_listing_writers_while_runs_open_and_close_never_raises() -> None:
    store = MemoryStore()
    idle = [_Idle() for _ in range(3000)]
    for w in idle:
        LIVE_WRITERS.add(w)  # type: ignore[arg-type]
    errors: list[BaseException] = []
    stop = threading.Event()
    opened = [0]

    def runs() -> None:
        try:
            while not stop.is_set():
                with toolledger.run("g", db=store) as run:
                    run.note("n")
                opened[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=runs) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(500):  # each lists the 3,000 idle writers and the runs' own
            flush_all()
    except BaseException as exc:
        errors.append(exc)
    finally:
        stop.set()
        for t in threads:
            t.join()
    for w in idle:
        LIVE_WRITERS.discard(w)  # type: ignore[arg-type]
    assert errors == []
    assert opened[0] > 0  # runs opened and closed while the writers were listed
