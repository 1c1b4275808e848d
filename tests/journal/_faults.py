"""A store wrapper that injects the outcomes a journal append can have, on a script.

Write points (``apply``, ``append_events``, ``create_run``, ``update_run``) take, per call,
the next fault queued for that method:

- ``"lost"``: the write commits, then the answer is lost (``StoreUnavailableError``);
- ``"refuse"``: nothing is written (``StoreUnavailableError``);
- ``"interrupt"`` / ``"interrupt-after"``: ``KeyboardInterrupt`` before / after the commit;
- ``"cancel"`` / ``"cancel-after"``: ``asyncio.CancelledError`` before / after the commit.

Read-back points (``read_events``, ``get_run``) take ``"fail"`` (``StoreUnavailableError``).
``down`` refuses every write and fails every read-back until it is cleared. Everything
else is the wrapped store's (``gated_append`` included), so a run and its guarded calls
use the wrapper as their one store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from toolledger.errors import StoreUnavailableError

__all__ = ["READS", "WRITE_FAULTS", "WRITES", "FaultyStore"]

WRITES = ("apply", "append_events", "create_run", "update_run")
READS = ("read_events", "get_run")
WRITE_FAULTS = ("lost", "refuse", "interrupt", "interrupt-after", "cancel", "cancel-after")


class FaultyStore:
    """Wraps ``inner``; ``plan[method]`` is the queue of faults its next calls take."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plan: dict[str, list[str | None]] = {}
        self.down = False
        self.injected: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def queue(self, method: str, *faults: str | None) -> None:
        """Queue ``faults`` for the next calls of ``method`` (``None``: that call works)."""
        self.plan.setdefault(method, []).extend(faults)

    def _fault(self, method: str) -> str | None:
        if self.down:
            return "refuse" if method in WRITES else "fail"
        queued = self.plan.get(method)
        return queued.pop(0) if queued else None

    def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fault = self._fault(method)
        if fault is not None:
            self.injected[f"{method}:{fault}"] += 1
        if fault == "refuse":
            raise StoreUnavailableError(message=f"injected: {method} refused")
        if fault == "interrupt":
            raise KeyboardInterrupt
        if fault == "cancel":
            raise asyncio.CancelledError
        result = getattr(self.inner, method)(*args, **kwargs)
        if fault == "lost":
            raise StoreUnavailableError(message=f"injected: {method} landed, answer lost")
        if fault == "interrupt-after":
            raise KeyboardInterrupt
        if fault == "cancel-after":
            raise asyncio.CancelledError
        return result

    def _read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fault = self._fault(method)
        if fault is not None:
            self.injected[f"{method}:{fault}"] += 1
            raise StoreUnavailableError(message=f"injected: {method} failed")
        return getattr(self.inner, method)(*args, **kwargs)

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        return self._write("apply", *args, **kwargs)

    def append_events(self, *args: Any, **kwargs: Any) -> Any:
        return self._write("append_events", *args, **kwargs)

    def create_run(self, *args: Any, **kwargs: Any) -> Any:
        return self._write("create_run", *args, **kwargs)

    def update_run(self, *args: Any, **kwargs: Any) -> Any:
        return self._write("update_run", *args, **kwargs)

    def read_events(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("read_events", *args, **kwargs)

    def get_run(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("get_run", *args, **kwargs)
