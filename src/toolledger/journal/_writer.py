"""The per-run buffered chain writer: sequence numbers, hashes, batched appends.

Rules this module keeps:

- Every record gets its ``seq`` and ``hash`` under the run's lock, in call order, so the
  chain is total even when threads of one run write concurrently.
- Records are buffered and appended in batches with ``Store.append_events`` (relaxed
  durability, one transaction per batch). A batch is written by the recording thread at a
  step end once ``FLUSH_RECORDS`` are buffered, when a tool call not carried by the guard
  begins or ends, after an approval, at run end and at process exit; inside the guard's
  claim/completion transaction (``ride``); and by a background flusher once the oldest
  buffered record is ``FLUSH_INTERVAL`` seconds old. So a process crash loses at most the
  records of the last ``FLUSH_INTERVAL`` (fewer than ``FLUSH_RECORDS`` of them);
  a committed batch survives a process crash (SQLite WAL, ``synchronous=NORMAL``) but not
  necessarily a power failure.
- A step's start record is buffered *lazy* (``append_lazy``): built and chained only when
  something needs it (another record chained after it, a flush, a ride, a read of the
  chain), exactly as it would have been built at once. A step that ends before that is
  stored as one record in its place (``replace_last``): the chain never held the start.
  The background flusher leaves a lazy record younger than ``FLUSH_INTERVAL`` buffered,
  so whether a short step is one record or two does not hang on when the flusher wakes.
- The invariant, kept under every outcome of an append (stored and reported, stored with
  the answer lost, refused, interrupted by any ``BaseException`` such as
  ``KeyboardInterrupt`` or ``CancelledError``, a read-back that fails): the *buffer* holds
  exactly the records the store is not known to hold, chained in order from the *stored
  prefix* (``stored_count`` records ending in ``stored_head``); the next ``seq`` and the
  head hash are derived from the buffer's last record, never kept apart from it. A record
  leaves the buffer only once the store is known to hold it (the store said so, or a
  read-back found its hash at its ``seq``), so no failure, whatever its type, drops one.
  A write whose outcome is unknown leaves its records *in doubt*: they are not replaced
  (``replace_last``) until a later write settles them, by the compare-and-append on the
  stored count (a landed batch makes it fail, and a read-back skips what landed by hash)
  or, for a ride's provisional record, by a read-back before the next write. Every write
  first re-establishes the invariant (``_normalise``: records a landing counted already
  leave, a chain an interruption left half re-linked is re-chained), so an interruption
  between two bookkeeping steps is repaired by the next write: a run whose store recovers
  always writes again, nothing is stored twice, and a flush that returned ``True`` lost
  nothing.
- ``append_events`` is compare-and-append on the run's event count. When another writer
  (another process resuming the same run) appended first, pending records are re-chained
  after the new head and appended again: nothing is lost and the chain stays valid.
- A storage failure never raises into the agent: it is handed to ``on_error`` and the
  records stay buffered for the next attempt (bounded by ``MAX_PENDING``; older ones are
  then dropped, reported, and the rest re-chained after what is stored, so the chain
  stays writable). Strict runs flush at each record and raise instead. A ``BaseException``
  propagates; the records stay buffered. A run that closes with records still buffered
  (the store refused them, another process held its write lock, an interruption) keeps
  its writer (``finish_later``): the background flusher tries every ``CLOSING_RETRY``
  seconds and the flush at process exit once more, then the run's columns follow.
- Riding (``ride``/``Ride.settle``): the guard can carry the whole buffer (oldest first,
  so the chain order holds) as one ``AppendEvents`` op inside its own checkpoint
  transaction instead of a separate commit. The flush lock is held from ``ride`` until
  ``settle``, so no other batch can interleave. Anything but a reported append is
  checked by a read-back: records not stored are written at once by the normal path; a
  provisional record (``extra``) stays only if it landed or the op it describes won.
  A ride never settled (an interruption between ``ride`` and the caller's ``try``) is
  abandoned, in doubt, by the next flush of the same thread or when it is collected, so
  the flush lock is never held forever; the exit flush waits at most ``EXIT_WAIT``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CheckpointError, InvalidArgumentError, StoreUnavailableError
from ..store.base import AppendEvents, EventRow, RunRow, Store, event_row_of
from ._header import RecordHeader
from ._records import chain_hash

__all__ = [
    "CLOSING_RETRY",
    "EXIT_WAIT",
    "FLUSH_INTERVAL",
    "FLUSH_RECORDS",
    "MAX_PENDING",
    "ChainWriter",
    "Ride",
    "flush_all",
]

#: A buffered record is written at most this many seconds after it was buffered.
FLUSH_INTERVAL = 0.1
#: Step ends flush inline once this many records are buffered.
FLUSH_RECORDS = 512
#: Records kept buffered while the store keeps failing; beyond this the oldest are dropped.
MAX_PENDING = 100_000
#: The exit flush waits at most this many seconds for a batch another thread is writing.
EXIT_WAIT = 5.0
#: A thread waiting for the flush lock looks again at least this often (seconds).
_POLL = 0.05
#: A closed run's refused records (and columns) are tried again at most this often.
CLOSING_RETRY = 1.0


class _Pending:
    """A buffered record; a lazy one (``row`` is ``None``) is not built or chained yet.

    Only the buffer's last record can be lazy. ``row`` is set last when it is built, so
    a record is either lazy or whole. Its slots are filled where it is made (no
    ``__init__``: one call less per record); it is buffered only once whole.
    """

    __slots__ = ("build", "content_json", "header", "row")

    header: RecordHeader | None
    content_json: str
    row: EventRow | None
    build: Callable[[], tuple[RecordHeader, str]] | None


_sha256 = hashlib.sha256
_new = object.__new__


def _row(
    header: RecordHeader, content_json: str, seq: int, prev: str | None, key: bytes | None
) -> EventRow:
    full = header.before_seq + str(seq) + header.after_seq
    if key is None and prev is not None and prev.isascii():
        # ``chain_hash``'s first case, without its call: the bytes of ``prev + full``.
        digest = _sha256((prev + full).encode("utf-8")).hexdigest()
    else:
        digest = chain_hash(prev, full, key)
    return event_row_of(
        header.run_id,
        seq,
        header.event_id,
        header.parent_id,
        header.kind,
        header.name,
        header.status,
        header.at,
        prev,
        digest,
        '{"header":' + header.stored + ',"content":' + content_json + "}",
    )


class Ride:
    """Buffered records handed to one caller transaction (see ``ChainWriter.ride``).

    Until it is settled, the ride is its writer's write in doubt: what it carried (the
    stored count its append expected, its rows, the provisional ``extra`` record) and
    whom to tell once ``extra`` is known to be in the chain.

    Attributes:
        op: The ``AppendEvents`` op to put in the transaction (after the ops it rides
            with; ``requires`` may gate it on one of them).
        carried: After ``settle``: whether the extra record is in the chain (stored, or
            buffered to be written); ``False`` when it was withdrawn or is in doubt.

    Made by ``ChainWriter.ride`` only, which fills its slots (no ``__init__``: one call
    less per ride).
    """

    __slots__ = (
        "_settled",
        "_writer",
        "carried",
        "count",
        "extra",
        "keep",
        "on_carried",
        "op",
        "rows",
    )

    _writer: ChainWriter
    _settled: bool
    op: AppendEvents
    count: int  # the stored count the ride's append expected
    rows: Sequence[EventRow]
    extra: _Pending | None
    keep: bool  # the op ``extra`` describes won: it stays in the chain
    on_carried: Callable[[], None] | None  # told once ``extra`` is known to be in the chain
    carried: bool

    def settle(self, appended: bool | BaseException, *, keep_extra: bool = True) -> None:
        """Report the transaction: ``True`` when it committed with the append applied.

        ``False`` (the append lost the race or was gated off) or an exception (the
        transaction failed; its outcome may be unknown): the store is asked what landed,
        and records not stored are written at once by the normal path (relaxed). The
        extra record is withdrawn unless it landed or ``keep_extra`` (the op it describes
        won); when the store cannot be asked it is in doubt (``carried`` is
        ``keep_extra``) until a later write settles it. Never raises a ``StoreError``
        (a write failure goes to ``on_error``). Idempotent.
        """
        if self._settled:
            return
        self._settled = True
        self.__class__ = Ride  # settled: no finalizer left to run (``_OpenRide``)
        self.keep = keep_extra
        writer = self._writer
        try:
            if appended is True:
                # Stored as carried. The usual case inline: the buffer still starts with
                # the ride's rows after the count it expected (the flush lock kept other
                # batches out; other threads only append after them): they leave it.
                extra = self.extra
                with writer.lock:
                    pending = writer._pending
                    rows = self.rows
                    n = len(rows)
                    whole = writer._stored[0] == self.count and len(pending) >= n
                    if whole:
                        for k in range(n):
                            if pending[k].row is not rows[k]:
                                whole = False
                                break
                    if whole and (extra is None or n == len(pending)):
                        last = rows[-1]
                        writer._stored = (last.seq + 1, last.hash)  # first, as ``_land``
                        del pending[:n]
                        if extra is not None and self.on_carried is not None:
                            try:  # noqa: SIM105 (``contextlib.suppress`` costs 3 calls on the usual path)
                                self.on_carried()
                            except Exception:
                                pass
                        writer._doubt = None
                        writer._inflight = 0
                        self.carried = extra is not None
                        return
                self.carried = writer._settle(self, appended)
            else:
                self.carried = writer._settle(self, appended)
        finally:
            writer._ride = None
            with writer.lock:  # ``_release_flush``, inline
                writer._flush_owner = None
                if writer._flush_waiters:
                    writer._flush_free.notify_all()


class _OpenRide(Ride):
    """A ride not settled yet: one its caller never settles (an interruption between
    ``ride`` and the caller's ``try``) is abandoned, in doubt, when it is collected.
    ``settle`` makes it a plain ``Ride``, so a settled ride runs no finalizer."""

    __slots__ = ()

    def __del__(self) -> None:
        # A ride an interruption left unsettled; one half-made (not its writer's ride yet)
        # holds nothing: ``ride``'s own handler freed the lock.
        if not getattr(self, "_settled", True) and self._writer._ride is self:
            with contextlib.suppress(Exception):
                self._writer._abandon(self)


class ChainWriter:
    """Assign ``seq``/``hash`` to a run's records and append them in batches.

    Args:
        store: Where records go.
        run_id: The run.
        head: The hash records chain from (the genesis hash, or the stored head).
        genesis: The run's genesis hash (the ``prev_hash`` of record 0).
        count: Records already stored for the run.
        strict: Flush at every record and raise storage failures.
        on_error: Called with each storage failure (non-strict).
        pending_row: The run's row when storing it failed at start: stored before the
            first batch.
        key: The run's journal key (a keyed run: HMAC-SHA256 chain), or ``None``.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        head: str,
        genesis: str,
        count: int,
        strict: bool,
        on_error: Callable[[BaseException], None],
        pending_row: RunRow | None = None,
        key: bytes | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.pending_row = pending_row
        self.run_id = run_id
        self.genesis = genesis
        self.lock = threading.RLock()
        # Who writes batches now: one thread at a time (the flush lock). The owner is the
        # lock's whole state, set under ``lock``, so an interruption leaves it either
        # taken by this thread or free, never taken by no one.
        self._flush_owner: int | None = None
        self._flush_free = threading.Condition(self.lock)
        self._flush_waiters = 0  # threads waiting on ``_flush_free`` (under ``lock``)
        # The stored prefix, one value so that it never changes half-way.
        self._stored: tuple[int, str] = (count, head)
        self.strict = strict
        self._on_error = on_error
        # Records the store is not known to hold, chained from ``_stored``; only the last
        # can be lazy (``append_lazy``).
        self._pending: list[_Pending] = []
        # The first ``_inflight`` records are being written or in doubt: never replaced.
        self._inflight = 0
        self._doubt: Ride | None = None  # a ride (settled or not) whose outcome is unknown
        self._ride: Ride | None = None  # the ride holding the flush lock, until settled
        self._lazy_at = 0.0
        self._oldest = 0.0
        self.dropped = 0
        # What a closed run still owes the store (its columns), once the buffer is stored.
        self._then: Callable[[], None] | None = None
        self._retry_at = 0.0
        _live_add(self)

    @property
    def stored_count(self) -> int:
        """Records the store is known to hold."""
        return self._stored[0]

    @property
    def stored_head(self) -> str:
        """The hash of the last record the store is known to hold (genesis for none)."""
        return self._stored[1]

    @property
    def pending(self) -> int:
        """Records buffered and not yet stored."""
        return len(self._pending)

    @property
    def chained(self) -> tuple[str, int]:
        """The chain's head hash and the number of records in it (buffered or stored)."""
        with self.lock:
            self._materialize()
            seq, head = self._tip()
            return head, seq

    def _tip(self) -> tuple[int, str]:
        """The next ``seq`` and the head hash: after the last built record (lock held)."""
        pending = self._pending
        for p in reversed(pending[-2:]):  # only the last can be lazy
            row = p.row
            if row is not None:
                return row.seq + 1, row.hash
        return self._stored

    def append(self, header: RecordHeader, content_json: str) -> EventRow:
        """Chain one record (the next ``seq``) and buffer it; return its row."""
        with self.lock:
            buffered = self._pending
            if buffered and buffered[-1].row is None:
                self._materialize()
            seq, prev = self._tip()
            pending = _new(_Pending)
            pending.header, pending.content_json, pending.build = header, content_json, None
            pending.row = _row(header, content_json, seq, prev, self.key)
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(pending)  # the one step that chains it
            size = len(self._pending)
        if self.strict:
            self.flush()
        elif size == 1:
            _ensure_flusher()
        assert pending.row is not None
        return pending.row

    def append_lazy(self, build: Callable[[], tuple[RecordHeader, str]]) -> object:
        """Buffer the record ``build()`` returns, built and chained only when needed.

        It is built (and gets the next ``seq``) when another record is chained after it,
        when the buffer is written or carried, or when the chain is read; until then
        ``replace_last`` may put another record in its place without it ever being built
        (a step's start record, when the step ends first). ``build`` must not raise.
        Returns the token ``is_last`` and ``replace_last`` take.
        """
        if self.strict:
            return self.append(*build())
        with self.lock:
            buffered = self._pending
            if buffered and buffered[-1].row is None:
                self._materialize()
            pending = _new(_Pending)
            pending.header, pending.content_json, pending.row = None, "", None
            pending.build = build
            now = time.monotonic()
            if not self._pending:
                self._oldest = now
            self._lazy_at = now
            self._pending.append(pending)
            size = len(self._pending)
        if size == 1 and _flusher is None:  # (``_ensure_flusher``'s own test, inline)
            _ensure_flusher()
        return pending

    def _materialize(self) -> None:
        """Build and chain the lazy last record, if any (lock held)."""
        pending = self._pending
        if not pending:
            return
        last = pending[-1]
        build = last.build
        if last.row is not None or build is None:
            return
        header, content_json = build()  # if it raises (it checks nothing), nothing changed
        seq, prev = self._tip()
        row = _row(header, content_json, seq, prev, self.key)
        last.header, last.content_json = header, content_json
        last.row = row  # the one step that chains it
        last.build = None

    def is_last(self, token: object) -> bool:
        """Whether ``append_lazy``'s ``token`` is the last record buffered (built or not);
        unlocked: ``replace_last`` decides."""
        pending = self._pending
        return bool(pending) and pending[-1] is token

    def replace_last(self, token: object, header: RecordHeader, content_json: str) -> bool:
        """Chain a record in place of ``token``'s if that is still the last one buffered.

        Returns ``False`` (nothing changed) when it was stored, is being written or is in
        doubt (a write whose outcome is unknown carried it), or another record was
        chained after it: then the caller appends its own record as usual. The
        replacement takes the replaced record's place in the chain (its ``seq``, after
        its ``prev_hash``), so the chain never held that record; a lazy one is never built.
        """
        with self.lock:
            pending = self._pending
            if not pending or self.strict:
                return False
            i = len(pending) - 1
            last = pending[i]
            if last is not token or i < self._inflight:
                return False
            old = last.row
            if old is not None:
                seq, prev = old.seq, old.prev_hash
            elif i:  # a lazy last: after the record before it (only the last is lazy)
                before = pending[i - 1].row
                assert before is not None
                seq, prev = before.seq + 1, before.hash
            else:
                seq, prev = self._stored
            record = _new(_Pending)
            record.header, record.content_json, record.build = header, content_json, None
            record.row = _row(header, content_json, seq, prev, self.key)
            pending[i] = record
        return True

    def maybe_flush(self) -> None:
        """Flush inline once ``FLUSH_RECORDS`` are buffered (called at step ends).

        Size-triggered batches are written by the recording thread itself: a background
        thread would contend for the GIL on every row and slow every step down; the
        background flusher only writes buffers that grew *old* (an idle or slow run).
        """
        if len(self._pending) >= FLUSH_RECORDS:
            self.flush()

    def due(self, now: float) -> bool:
        """Whether the buffer should be written now (large or old)."""
        pending = len(self._pending)
        return bool(pending) and (pending >= FLUSH_RECORDS or now - self._oldest >= FLUSH_INTERVAL)

    @staticmethod
    def _due_at(buffered_at: float) -> bool:
        return time.monotonic() - buffered_at >= FLUSH_INTERVAL

    def flush(self, *, leave_young: bool = False, wait: float | None = None) -> bool:
        """Append every buffered record; return whether the buffer is now empty.

        The store write happens outside the chain lock, so steps keep recording while a
        batch is committed. ``leave_young`` (the background flusher): a lazy last record
        younger than ``FLUSH_INTERVAL`` stays buffered (a step that began just now may
        still end as one record); a step running longer has its start record written.
        ``wait``: give up (``False``) after this many seconds if another thread is
        writing a batch (``0``: do not wait); ``None`` waits for it.

        Raises:
            StoreError: only in strict mode.
        """
        if not self._acquire_flush(wait):
            return False
        try:
            with self.lock:
                if not (leave_young and self._pending and not self._due_at(self._lazy_at)):
                    self._materialize()
            try:
                self._write_front()
            except Exception as exc:
                if self.strict:
                    raise
                self._on_error(exc)
                with self.lock:
                    self._bound_pending()
                return False
            return not self._pending
        finally:
            self._release_flush()

    def _acquire_flush(self, wait: float | None = None) -> bool:
        """Take the flush lock (``wait``: at most that many seconds; ``None``: forever).

        The lock is never taken twice by one thread, so if this thread holds it already,
        whatever took it was interrupted before giving it back (a ride its caller never
        settled, an interruption between taking the lock and the ``try`` that frees it):
        this thread takes it over, and such a ride is abandoned in doubt.
        """
        me = threading.get_ident()
        deadline = None if wait is None else time.monotonic() + wait
        with self.lock:  # ``_flush_free``'s lock, without the Condition's Python wrapper
            while True:
                owner = self._flush_owner
                if owner == me:
                    ride = self._ride
                    if ride is not None:
                        self._abandon(ride, release=False)
                    return True
                if owner is None:
                    self._flush_owner = me
                    return True
                left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._flush_waiters += 1
                try:
                    self._flush_free.wait(left)
                finally:  # (``wait`` holds the lock again when it returns or raises)
                    self._flush_waiters -= 1

    def _release_flush(self) -> None:
        with self.lock:
            self._flush_owner = None
            if self._flush_waiters:  # nobody to wake is the usual case: skip ``notify_all``
                self._flush_free.notify_all()

    def ride(
        self,
        store: Any,
        extra: tuple[RecordHeader, str] | None = None,
        on_carried: Callable[[], None] | None = None,
        requires: int | None = None,
    ) -> Ride | None:
        """Hand every buffered record to the caller's transaction on ``store``.

        ``extra`` (``(header, content_json)``) is chained after
        them as a provisional record: the caller gates the append on its own op and tells
        ``settle`` whether the record still holds. ``on_carried()`` is called (once)
        as soon as ``extra`` is known to be in the chain, before ``settle`` returns or,
        when that is not known then, when a later write finds out: a caller interrupted
        meanwhile must not write the same record again (a later record of ``extra``'s
        event, buffered meanwhile, is dropped as superseded). ``requires``: the op's
        ``AppendEvents.requires`` (the index of the caller's op it is gated on).

        Returns ``None`` (nothing to carry) when there is nothing to write, the run is
        strict, ``store`` is not this writer's store, or a write in doubt cannot be
        settled now. Otherwise the caller must put ``ride.op`` in its transaction and
        then call ``ride.settle(...)`` exactly once (``finally``): the flush lock is held
        until then.
        """
        if self.strict or store is not self.store or (not self._pending and extra is None):
            return None
        with self.lock:  # the flush lock (``_acquire_flush``), its usual free case inline
            free = self._flush_owner is None
            if free:
                self._flush_owner = threading.get_ident()
        if not free:
            self._acquire_flush()
        ride: Ride | None = None
        held = True
        try:
            if self.pending_row is not None or self._doubt is not None:
                try:
                    self._ensure_row()
                    if self._doubt is not None:
                        self._resolve()
                except Exception as exc:
                    with contextlib.suppress(Exception):
                        self._on_error(exc)
                    held = False
                    self._release_flush()
                    return None  # the caller's transaction goes on without the journal
            with self.lock:
                pending = self._pending
                if pending and pending[0].row is not None:  # (a lazy first is alone: linked)
                    self._normalise()
                # The buffer's rows, chained from the stored prefix; the lazy last record
                # is built and chained here (``_materialize``).
                count, prev = self._stored
                seq = count
                rows: list[EventRow] = []
                for p in pending:
                    row = p.row
                    if row is None and p.build is not None:
                        header, content_json = p.build()  # if it raises, nothing changed
                        row = _row(header, content_json, seq, prev, self.key)
                        p.header, p.content_json = header, content_json
                        p.row = row  # the one step that chains it
                        p.build = None
                    if row is not None:
                        rows.append(row)
                        seq, prev = seq + 1, row.hash
                last: _Pending | None = None
                if extra is not None:
                    header, content_json = extra
                    row = _row(header, content_json, seq, prev, self.key)
                    last = _new(_Pending)
                    last.header, last.content_json, last.build = header, content_json, None
                    last.row = row
                    rows.append(row)
                if not rows:
                    held = False
                    self._release_flush()
                    return None
                op = AppendEvents(self.run_id, tuple(rows), count, requires)
                # In doubt from now until settled: an interruption anywhere leaves it so.
                made = _new(_OpenRide)  # (``ride`` once it is whole)
                made._writer = self
                made.op = op
                made.count = count
                made.rows = op.rows
                made.extra = last
                made.keep = False
                made.on_carried = on_carried
                made.carried = made._settled = False
                ride = made
                self._ride = ride
                self._doubt = ride
                self._inflight = len(rows)
                if last is not None:
                    pending.append(last)  # the extra record is chained
            return ride
        except BaseException:
            if ride is not None:
                self._abandon(ride)
            elif held:
                self._release_flush()
            raise

    def _settle(self, ride: Ride, appended: bool | BaseException) -> bool:
        """Finish ``ride`` (flush lock held; ``Ride.settle`` frees it); return whether its
        extra record is carried."""
        keep = ride.keep
        extra = ride.extra
        self._doubt = ride  # (set by ``ride`` already)
        if appended is True:
            self._resolved(landed=True)
            return extra is not None
        # Not reported stored: ask the store (a commit may land and still raise).
        try:
            landed = self._resolve()
        except Exception as exc:
            with contextlib.suppress(Exception):  # strict on_error raises: not here
                self._on_error(exc)
            return extra is not None and keep  # in doubt: a later write settles it
        try:
            self._write_front()
        except Exception as exc:
            with self.lock:
                self._bound_pending()
            with contextlib.suppress(Exception):
                self._on_error(exc)
        return extra is not None and (keep or landed)

    def _abandon(self, ride: Ride, *, release: bool = True) -> None:
        """A ride its caller never settled: its outcome is in doubt; free the flush lock."""
        with self.lock:
            if self._ride is ride:
                self._ride = None
            if ride._settled:
                return  # (an interruption inside ``settle``: its doubt is set already)
            ride._settled = True
            self._doubt = ride
        if release:
            self._release_flush()

    def _resolve(self) -> bool:
        """Settle the ride in doubt by reading back what landed; return whether it did
        (flush lock held).

        Raises:
            StoreError: the store could not be read; the ride stays in doubt.
        """
        doubt = self._doubt
        assert doubt is not None
        stored = self.store.read_events(
            self.run_id, after_seq=doubt.count - 1, limit=len(doubt.rows)
        )
        landed = len(stored) == len(doubt.rows) and all(
            s.hash == r.hash for s, r in zip(stored, doubt.rows, strict=True)
        )
        self._resolved(landed=landed)
        return landed

    def _resolved(self, *, landed: bool) -> None:
        """The ride in doubt did (not) land: settle the buffer (flush lock held).

        Its records leave the buffer if they landed. Its extra record stays in the chain
        if it landed or its op won (``keep``): the caller is told (``on_carried``) and a
        later record of the same event, buffered meanwhile by a caller that was not told
        yet, is dropped; otherwise the extra record is withdrawn.
        """
        doubt = self._doubt
        assert doubt is not None
        with self.lock:
            self._normalise()
            if landed:
                self._land_rows(doubt.count, doubt.rows)
            extra = doubt.extra
            pending = self._pending
            if extra is not None and (landed or doubt.keep):
                if doubt.on_carried is not None:
                    with contextlib.suppress(Exception):
                        doubt.on_carried()
                # Records after it (it left the buffer if it landed) of the same event.
                after = next((i + 1 for i, p in enumerate(pending) if p is extra), 0)
                event_id = extra.header.event_id if extra.header is not None else None
                pending[after:] = [
                    p for p in pending[after:] if p.header is None or p.header.event_id != event_id
                ]
            elif extra is not None:
                pending[:] = [p for p in pending if p is not extra]
            self._doubt = None
            self._inflight = 0
            self._normalise()

    def _land_rows(self, count: int, rows: Sequence[EventRow]) -> None:
        """The store holds ``rows`` after ``count`` records: those buffered leave (lock
        held). A stored prefix that moved since is left to ``_normalise``."""
        if self._stored[0] != count:
            return
        pending = self._pending
        k = 0
        while k < len(rows) and k < len(pending):
            row = pending[k].row
            if row is None or row.hash != rows[k].hash:
                break
            k += 1
        self._land(k)

    def _land(self, k: int) -> None:
        """The buffer's first ``k`` records are stored (lock held)."""
        if k <= 0:
            return
        row = self._pending[k - 1].row
        assert row is not None
        self._stored = (row.seq + 1, row.hash)  # first: ``_normalise`` drops the rest
        del self._pending[:k]
        self._inflight = max(0, self._inflight - k)

    def _normalise(self) -> None:
        """Re-establish the invariant (lock held): the buffer chains from ``_stored``.

        Records a landing counted already leave; from the first record that does not
        link (an interruption inside a re-chain, records dropped by ``MAX_PENDING``) the
        rest is chained again.
        """
        count, prev = self._stored
        pending = self._pending
        drop = 0
        for p in pending:
            row = p.row
            if row is None or row.seq >= count:
                break
            drop += 1
        if drop:
            del pending[:drop]
            self._inflight = max(0, self._inflight - drop)
        seq = count
        for i, p in enumerate(pending):
            row = p.row
            if row is None:
                return  # the lazy last: chained when built
            if row.seq != seq or row.prev_hash != prev:
                self._chain_from(i, seq, prev)
                return
            seq, prev = seq + 1, row.hash

    def _write_front(self) -> None:
        """Append the buffer's built records until the store holds them (flush lock held).

        Raises:
            StoreError: the store failed; the records stay buffered (in doubt).
        """
        self._ensure_row()
        if self._doubt is not None:
            self._resolve()
        for _attempt in range(100):
            with self.lock:
                self._normalise()
                pending = self._pending
                n = len(pending)
                if n and pending[-1].row is None:
                    n -= 1  # a lazy last record stays buffered (not built yet)
                if not n:
                    self._inflight = 0
                    return
                rows = [p.row for p in pending[:n] if p.row is not None]  # all built
                count = self._stored[0]
                self._inflight = n
            if self.store.append_events(
                self.run_id,
                rows,
                expected_count=count,
                durable=False,
            ):
                with self.lock:
                    self._land(n)
                    self._inflight = 0
                return
            # Lost the race to another writer, or a write whose answer was lost landed:
            # skip what is stored with our hashes, re-chain the rest after the store.
            stored = self.store.read_events(self.run_id, after_seq=count - 1, limit=n)
            k = 0
            while k < len(stored) and stored[k].hash == rows[k].hash:
                k += 1
            with self.lock:
                if self._stored[0] == count:
                    self._land(k)
            if k == n:
                with self.lock:
                    self._inflight = 0
                return
            self._rechain()
        raise StoreUnavailableError(
            message=f"could not append journal records to run {self.run_id}: "
            "other writers kept appending first",
            details={"run_id": self.run_id},
        )

    def _ensure_row(self) -> None:
        """Store the run's row if that failed at start (flush lock held)."""
        row = self.pending_row
        if row is None:
            return
        try:
            self.store.create_run(row)
        except InvalidArgumentError:
            # Stored already: an attempt whose outcome was unknown did land.
            if self.store.get_run(self.run_id) is None:
                raise
        self.pending_row = None

    def _rechain(self) -> None:
        """Another writer appended: chain the buffer after the stored head (flush lock)."""
        run = self.store.get_run(self.run_id)
        if run is None:
            raise StoreUnavailableError(
                message=f"run {self.run_id} vanished from the store",
                details={"run_id": self.run_id},
            )
        prev: str = (run.head_hash or self.genesis) if run.event_count else self.genesis
        with self.lock:
            self._chain_from(0, run.event_count, prev)
            self._stored = (run.event_count, prev)  # after: ``_normalise`` keeps the rows

    def _chain_from(self, start: int, count: int, prev: str) -> None:
        """Chain the buffer's records from ``start`` after ``count`` records ending in
        ``prev`` (lock held); a lazy last record is chained when built."""
        seq = count
        for p in self._pending[start:]:
            if p.row is None or p.header is None:
                break
            p.row = _row(p.header, p.content_json, seq, prev, self.key)
            prev = p.row.hash
            seq += 1

    def _bound_pending(self) -> None:
        """Drop the oldest records past ``MAX_PENDING`` (lock held), never one in doubt.

        The rest is re-chained after what is stored (``_normalise``): the chain stays
        valid and writable; the drop is reported through ``on_error``, never silent.
        """
        excess = len(self._pending) - MAX_PENDING
        if excess > 0:
            start = self._inflight
            del self._pending[start : start + excess]
            self.dropped += excess
            self._normalise()
            self._on_error(
                StoreUnavailableError(
                    message=f"dropped {excess} journal records of run {self.run_id}: "
                    "the store kept failing",
                    details={"run_id": self.run_id, "dropped": excess},
                )
            )

    def close(self) -> bool:
        """Flush and stop background flushing for this run; return whether all is stored.

        What is left buffered (the store refused it, or an interruption) is kept for
        later, as ``finish_later`` keeps it.
        """
        try:
            return self.flush()
        finally:
            _live_discard(self)
            if self._pending:
                self.finish_later(None)

    def finish_later(self, then: Callable[[], None] | None) -> None:
        """Keep this closed writer until its buffer is stored, then run ``then`` (until it
        returns without raising): by the background flusher every ``CLOSING_RETRY``
        seconds, and at process exit."""
        with self.lock:
            if then is not None:
                self._then = then
            self._retry_at = time.monotonic() + CLOSING_RETRY
        with _live_lock:
            _CLOSING.add(self)  # held strongly: the run may be gone
            _LIVE.add(self)
        _ensure_flusher()

    def _finish(self, now: float | None = None, wait: float | None = None) -> None:
        """Store what a closed run still owes, if the store takes it now.

        ``now`` (the background flusher): not before ``CLOSING_RETRY`` seconds after the
        last refusal, so a store that keeps failing is not asked (and logged) nonstop.
        ``wait`` as for ``flush``.
        """
        if now is not None and now < self._retry_at:
            return
        self._retry_at = time.monotonic() + CLOSING_RETRY
        if not self.flush(wait=wait):
            return
        then = self._then
        if then is not None:
            try:
                then()
            except Exception:  # retried at the next round, or at process exit
                return
            self._then = None
        with _live_lock:
            _CLOSING.discard(self)
            _LIVE.discard(self)


# -- background flushing -----------------------------------------------------------------

_LIVE: weakref.WeakSet[ChainWriter] = weakref.WeakSet()
_CLOSING: set[ChainWriter] = set()  # closed runs whose records or columns wait for the store
# Writers are added and dropped by the runs' threads while the flusher (or exit) lists
# them: a WeakSet listed during another thread's add raises "Set changed size".
_live_lock = threading.RLock()  # reentrant: a finalizer may close a writer while it is held


def _live_add(writer: ChainWriter) -> None:
    with _live_lock:
        _LIVE.add(writer)


def _live_discard(writer: ChainWriter) -> None:
    with _live_lock:
        _LIVE.discard(writer)


def live_writers() -> list[ChainWriter]:
    """The live writers, listed while no other thread adds or drops one."""
    with _live_lock:
        return list(_LIVE)


_flusher_lock = threading.Lock()
_flusher: threading.Thread | None = None


def flush_all() -> None:
    """Flush every live run's buffer (at process exit), waiting at most ``EXIT_WAIT`` for
    a batch another thread is writing."""
    for writer in live_writers():
        try:
            if writer in _CLOSING:
                writer._finish(wait=EXIT_WAIT)
            else:
                writer.flush(wait=EXIT_WAIT)
        except CheckpointError:
            pass  # strict writers raise at their own call sites, not here
        except Exception:  # never raise from a background flush
            pass


def _flusher_loop() -> None:
    global _flusher
    while True:
        time.sleep(FLUSH_INTERVAL / 2)
        writers = live_writers()
        if not writers:
            with _flusher_lock:
                if not _LIVE:
                    _flusher = None
                    return
            continue
        now = time.monotonic()
        for writer in writers:
            if writer in _CLOSING:
                with contextlib.suppress(Exception):  # a background flush never raises
                    writer._finish(now, wait=0)  # busy: next round
            elif writer.due(now):
                with contextlib.suppress(Exception):  # a background flush never raises
                    writer.flush(leave_young=True, wait=0)  # busy: next round


def _ensure_flusher() -> None:
    global _flusher
    if _flusher is not None:
        return
    with _flusher_lock:
        if _flusher is None:
            thread = threading.Thread(
                target=_flusher_loop, name="toolledger-journal-flusher", daemon=True
            )
            _flusher = thread
            thread.start()


def _after_fork_in_child() -> None:
    global _flusher
    _flusher = None
    _CLOSING.clear()  # the parent's closed runs are the parent's to finish


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(flush_all)
