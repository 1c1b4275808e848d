"""The guard's small seams, each in one place: clock, limits, crash hook, transitions, ids.

Rules this module keeps:

- Clock: ``now()`` is the only clock the guard reads; ``after(rec)`` is "now, never earlier
  than the record's ``updated_at``" (clocks differ across hosts), used for every
  transition's ``at``.
- Limits: every retry budget of the guard is named here, with why it is that size.
- Crash hook: the named boundaries a crash test may stop a process at (``CRASH_POINTS``);
  ``reached(point)`` is called at each. Nothing is installed in production; tests install
  actions through ``toolledger.testing.crash_at``.
- Transition reporting: ``report_transition`` tells a span about one CAS; it never raises
  (telemetry never breaks a tool call).
- Attempt ids: the format lives in ``checkpoint._attempt`` (telemetry parses it too);
  the guard's ``new_attempt_id`` puts who runs the attempt in its first 32 hex digits
  (host, process id, process start time, then random), so ``is_live`` can tell a claim
  held by a live process on this host from one left by a dead one (in this process: by
  a call that has not ended, ``LIVE_ATTEMPTS``). Elsewhere (another
  host, no ``/proc``) nothing is claimed live: the guard then treats the claim as it
  always did.
- The run: ``GuardedRun`` is what the guard takes (``toolledger.Run`` is one): the
  journal seam, plus the event that requested a tool call (the call's parent).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any, Protocol

from ..checkpoint import new_attempt_id as _new_attempt_id
from ..checkpoint import parse_link
from ..checkpoint.model import CheckpointRecord, Status, Transition
from ..errors import InvalidArgumentError
from ..journal import EventHandle, JournalSeam
from ..store import CAS_ROUNDS
from ..telemetry import NoopSpan

__all__ = [
    "APPROVAL_ROUNDS",
    "CRASH_ACTIONS",
    "CRASH_POINTS",
    "DECIDE_ROUNDS",
    "DELIVERY_CLAIM_ROUNDS",
    "DELIVERY_COMPLETE_ROUNDS",
    "DONE",
    "STATUS_VALUE",
    "EFFECT_KEY_ROUNDS",
    "GuardedRun",
    "LIVE_ATTEMPTS",
    "STORE_RETRIES",
    "after",
    "crash_at",
    "is_live",
    "new_attempt_id",
    "now",
    "parse_link",
    "reached",
    "report_transition",
]


class GuardedRun(JournalSeam, Protocol):
    """The run a guarded call records through: the journal seam, and who asked for a call."""

    def requested_by(self, call_id: str) -> EventHandle | None:
        """The event (a journaled model call) that requested tool call ``call_id``."""
        ...


#: Statuses whose record holds the call's result: executing is over, whoever did it.
DONE = (Status.COMPLETED, Status.DELIVERING, Status.DELIVERED)
#: Each status's stored string (a dict lookup: ``Enum.value`` is a Python-level property).
STATUS_VALUE: dict[Status, str] = {s: s.value for s in Status}


# -- limits ----------------------------------------------------------------------------------

#: Store errors one flow (or one delivery's claim) tolerates before raising the last one:
#: enough to ride out a transient error, few enough that a locked or failing store is
#: reported promptly (each try already waited the store's own busy timeout).
STORE_RETRIES = 3
#: Decide/act rounds of one call (each lost CAS re-reads and decides again) before a store
#: that keeps refusing writes is reported; a live race settles in a few rounds.
DECIDE_ROUNDS = 64
#: Rounds of a delivery's claim (lost CAS against other deliverers) before giving up.
DELIVERY_CLAIM_ROUNDS = 64
#: Rounds recording a delivery after ``post``; losing them only repeats a later delivery.
DELIVERY_COMPLETE_ROUNDS = 8
#: Rounds of the approval gate's CAS on the approval record (two callers deciding at once):
#: the budget ``decide_approval`` uses too.
APPROVAL_ROUNDS = CAS_ROUNDS
#: Rounds resolving an effect key against the call holding it.
EFFECT_KEY_ROUNDS = 16

# -- clock -----------------------------------------------------------------------------------


def now() -> datetime:
    """Return the current UTC time."""
    return datetime.now(timezone.utc)


def after(rec: CheckpointRecord | None) -> datetime:
    """Now, but never earlier than ``rec.updated_at`` (clocks differ across hosts)."""
    t = datetime.now(timezone.utc)  # ``now()``, without its frame (every transition asks)
    return t if rec is None or t >= rec.updated_at else rec.updated_at


# -- crash hook ------------------------------------------------------------------------------

#: The boundaries a crash test may stop at, in the order a new call passes them.
CRASH_POINTS = (
    "after-approval",
    "before-claim",
    "after-claim",
    "after-execute",
    "after-completion",
    "after-delivery-claim",
    "after-post",
)

#: The actions installed by ``crash_at`` (empty in production: a caller on a hot path may
#: test it before calling ``reached``).
CRASH_ACTIONS: list[tuple[str, Callable[[], Any]]] = []
_ACTIONS = CRASH_ACTIONS


def reached(point: str) -> None:
    """The guard passes ``point``: run the actions installed for it (none in production)."""
    if _ACTIONS:
        for name, action in tuple(_ACTIONS):
            if name == point:
                action()


@contextlib.contextmanager
def crash_at(point: str, action: Callable[[], Any]) -> Iterator[None]:
    """Run ``action()`` each time the guard passes ``point``, inside the ``with`` block.

    Raises:
        InvalidArgumentError: ``INVALID_ARGUMENT`` for a point not in ``CRASH_POINTS``.
    """
    if point not in CRASH_POINTS:
        raise InvalidArgumentError(
            message=f"unknown crash point {point!r}; one of {', '.join(CRASH_POINTS)}",
            details={"point": str(point)[:100]},
        )
    entry = (point, action)
    _ACTIONS.append(entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _ACTIONS.remove(entry)


# -- transition reporting --------------------------------------------------------------------


def report_transition(span: Any, t: Transition, status_from: str | None, won: bool) -> None:
    """Tell ``span`` about one CAS of ``t`` from ``status_from`` (won or lost); never raises."""
    if span is None or type(span) is NoopSpan:
        return
    try:  # noqa: SIM105 (contextlib.suppress costs three Python frames per transition)
        span.transition(
            name=t.name,
            status_from=status_from,
            status_to=STATUS_VALUE[t.next.status],
            expected_revision=t.expected_revision,
            revision=t.next.revision,
            won=won,
            at=t.next.updated_at,  # converted on the telemetry thread, not here
        )
    except Exception:  # telemetry never breaks a tool call
        pass


# -- attempt ids that say who runs them ------------------------------------------------------

_IDENTITY: tuple[int, str | None] = (-1, None)

#: The attempts of this process whose call has not ended yet (the drivers add one when the
#: call's event opens and remove it when the call ends): in this process an attempt is
#: live only while its call runs, so a claim it left behind (a failed completion) is not.
LIVE_ATTEMPTS: set[str] = set()


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` since boot (clock ticks, 8 hex digits), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # Field 22 (starttime), counted after the command name's closing parenthesis.
        return f"{int(stat[stat.rindex(b')') + 2 :].split()[19]) & 0xFFFFFFFF:08x}"
    except (OSError, ValueError, IndexError):
        return None


def _identity() -> str | None:
    """This process as 24 hex digits (host, pid, start time), or ``None`` without ``/proc``."""
    global _IDENTITY
    pid = os.getpid()
    if _IDENTITY[0] == pid:  # recomputed after a fork
        return _IDENTITY[1]
    ident = None
    start = _start_time(pid)
    if start is not None:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as f:
                boot = f.read().strip()
        except OSError:
            boot = b""
        host = hashlib.sha256(socket.gethostname().encode() + b"\0" + boot).hexdigest()[:8]
        ident = f"{host}{pid & 0xFFFFFFFF:08x}{start}"
    _IDENTITY = (pid, ident)
    return ident


def new_attempt_id(trace_id: str | None, span_id: str | None) -> str:
    """A fresh attempt id saying who runs it (see the module rules), with the span's ids."""
    known = _IDENTITY  # ``_identity()``'s answer, read here while this process made it
    ident = known[1] if known[0] == os.getpid() else _identity()
    base = None if ident is None else ident + os.urandom(4).hex()
    return _new_attempt_id(trace_id, span_id, base)


def is_live(attempt_id: str | None) -> bool:
    """Whether ``attempt_id`` was made by a process that is running now on this host.

    ``False`` when it cannot tell (another host, an id without the guard's identity, no
    ``/proc``): the caller then treats the claim as possibly abandoned, as before.
    """
    if not attempt_id or len(attempt_id) < 32:
        return False
    ident = _identity()
    if ident is None or attempt_id[:8] != ident[:8]:
        return False
    try:
        pid = int(attempt_id[8:16], 16)
    except ValueError:
        return False
    if pid == os.getpid():
        return attempt_id[16:24] == ident[16:24] and attempt_id in LIVE_ATTEMPTS
    return _start_time(pid) == attempt_id[16:24]
