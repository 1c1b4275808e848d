"""Span endings run on one toolledger thread, never on the thread making a tool call.

Rules of this module:

- ``Span.end()`` runs every span processor's ``on_end`` on the thread that calls it; with a
  ``SimpleSpanProcessor`` that is a synchronous export. A processor or exporter that blocks
  would hang the tool call (and leave its checkpoint ``executing``). So the live hooks hand
  every span ending (attributes, status, events, ``end()``) to ``ENDER``: one daemon thread
  that runs them in submission order.
- The thread gathers: woken by the first ending, it waits up to ``GATHER_SECONDS`` (or until
  ``BATCH`` endings are queued, or someone drains) and then runs what is queued in one go.
  Waking it for every span cost the caller two context switches and a GIL hand-over per
  call (``bench/bench_telemetry.py``); a span reaches the processors at most
  ``GATHER_SECONDS`` later, and ``drain`` (a run's end, ``flush_spans``) does not wait for it.
- ``submit`` never blocks and never raises: past ``MAX_PENDING`` queued endings a span is
  dropped (counted in ``dropped``, logged once).
- ``drain(timeout)`` waits until everything submitted before it has run, bounded by
  ``timeout``; when the thread is stuck (one ending has been running for more than
  ``STUCK_SECONDS``) it waits at most ``grace`` for progress, so a blocked processor costs
  a run's end nothing (``grace=0``).
- After ``fork()`` the child starts with an empty queue and no thread (the parent's thread
  does not exist there).
- No OpenTelemetry import: a job is any callable.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable

from ._report import report

__all__ = ["BATCH", "ENDER", "GATHER_SECONDS", "MAX_PENDING", "STUCK_SECONDS", "Ender"]

#: Span endings queued at most; past this, endings are dropped (never blocking the caller).
MAX_PENDING = 65_536
#: An ending running longer than this means the thread is stuck in a processor or exporter.
STUCK_SECONDS = 0.5
#: Once woken, the thread waits up to this long for more endings (or until ``BATCH`` are
#: queued, or someone drains), then runs them in one go: one wake-up per few calls instead
#: of two context switches and a GIL hand-over per span.
GATHER_SECONDS = 0.02
BATCH = 16


class Ender:
    """One daemon thread that runs submitted span endings in order."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._max = max_pending
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._done_cv = threading.Condition(self._lock)
        self._queue: deque[Callable[[], None]] = deque()
        self._thread: threading.Thread | None = None
        self._sleeping = False
        self._drainers = 0
        self._busy_since: float | None = None
        self._submitted = 0
        self._done = 0
        #: Endings dropped because the queue was full (the thread is stuck or slow).
        self.dropped = 0

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; return ``False`` when it was dropped (queue full). Never blocks."""
        with self._lock:
            if len(self._queue) >= self._max:
                self.dropped += 1
                if self.dropped == 1:
                    report("end (queue full: a span processor is stuck)", OverflowError())
                return False
            self._queue.append(job)
            self._submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="toolledger-telemetry", daemon=True
                )
                self._thread.start()
            elif self._sleeping and (len(self._queue) == 1 or len(self._queue) >= BATCH):
                # The first ending wakes the thread into its gathering wait; later ones
                # join the batch without a wake-up each, unless the batch is full.
                self._wake.notify()
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._sleeping = True
                    self._wake.wait()
                    self._sleeping = False
                if len(self._queue) < BATCH and not self._drainers:
                    self._sleeping = True
                    self._wake.wait(GATHER_SECONDS)  # let the endings of a few calls gather
                    self._sleeping = False
                batch = list(self._queue)
                self._queue.clear()
            for job in batch:
                with self._lock:
                    self._busy_since = time.monotonic()
                try:
                    job()
                except Exception as exc:  # a job guards itself; this is the last line
                    report("end", exc)
                with self._lock:
                    self._done += 1
                    self._busy_since = None
                    if self._drainers:
                        self._done_cv.notify_all()

    @property
    def pending(self) -> int:
        """Endings submitted and not yet finished."""
        with self._lock:
            return self._submitted - self._done

    def stuck(self) -> bool:
        """Whether one ending has been running for more than ``STUCK_SECONDS``."""
        with self._lock:
            return self._is_stuck()

    def _is_stuck(self) -> bool:
        since = self._busy_since
        return since is not None and time.monotonic() - since > STUCK_SECONDS

    def drain(self, timeout: float, *, grace: float = 0.0) -> bool:
        """Wait until every ending submitted so far has run; ``False`` on timeout or stuck.

        Args:
            timeout: Seconds to wait at most.
            grace: While the thread is stuck, seconds to wait for it to make progress
                before giving up (``0``: give up at once).
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            target = self._submitted
            self._drainers += 1
            if self._sleeping:
                self._wake.notify()  # end a gathering wait now
            try:
                while self._done < target:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    if self._is_stuck():
                        if grace <= 0:
                            return False
                        before = self._done
                        self._done_cv.wait(min(remaining, grace))
                        if self._done == before:
                            return False
                        continue
                    # Timed so that a job that gets stuck is noticed while we wait.
                    self._done_cv.wait(min(remaining, STUCK_SECONDS / 2))
            finally:
                self._drainers -= 1
        return True


ENDER = Ender()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=ENDER._reset)
