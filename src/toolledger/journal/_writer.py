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
- ``append_events`` is compare-and-append on the run's event count. When another writer
  (another process resuming the same run) appended first, pending records are re-chained
  after the new head and appended again: nothing is lost and the chain stays valid.
- A storage failure never raises into the agent: it is handed to ``on_error`` and the
  records stay buffered for the next attempt (bounded by ``MAX_PENDING``; older ones are
  then dropped and reported). Strict runs flush at each record and raise instead. A run
  that closes while the store refuses it (another process holding the write lock) keeps
  its writer (``finish_later``): the background flusher tries every ``CLOSING_RETRY``
  seconds and the flush at process exit once more, then the run's columns follow.
- Riding (``ride``/``Ride.settle``): the guard can carry the whole buffer (oldest first,
  so the chain order holds) as one ``AppendEvents`` op inside its own checkpoint
  transaction instead of a separate commit. The flush lock is held from ``ride`` until
  ``settle``, so no other batch can interleave. If that transaction failed or its append
  lost the race (or was gated off), the records go back to the front of the buffer and
  are written by the normal path at once; a batch whose commit outcome was unknown is
  recognised by its hashes when it did land (``_skip_landed``), so nothing is lost or
  written twice, and ``seq`` stays dense.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import CheckpointError, InvalidArgumentError, StoreUnavailableError
from ..store.base import AppendEvents, EventRow, RunRow, Store, event_row_of
from ._events import chain_hash
from ._header import RecordHeader

__all__ = [
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
#: A closed run's refused records (and columns) are tried again at most this often.
CLOSING_RETRY = 1.0


class _Pending:
    """A buffered record; a lazy one (``build`` set) is not built or chained yet."""

    __slots__ = ("build", "content_json", "header", "row")

    def __init__(
        self,
        header: RecordHeader,
        content_json: str,
        row: EventRow,
        build: Callable[[], tuple[RecordHeader, str]] | None = None,
    ) -> None:
        self.header = header
        self.content_json = content_json
        self.row = row
        self.build = build


def _row(
    header: RecordHeader, content_json: str, seq: int, prev: str | None, key: bytes | None
) -> EventRow:
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
        chain_hash(prev, header.before_seq + str(seq) + header.after_seq, key),
        '{"header":' + header.stored + ',"content":' + content_json + "}",
    )


class Ride:
    """Buffered records handed to one caller transaction (see ``ChainWriter.ride``).

    Attributes:
        op: The ``AppendEvents`` op to put in the transaction (after the ops it rides
            with; ``requires`` may gate it on one of them).
        carried: After ``settle``: whether the extra record is in the chain (stored, or
            buffered to be written); ``False`` when it was withdrawn.
    """

    __slots__ = ("_batch", "_extra", "_settled", "_writer", "carried", "op")

    def __init__(
        self, writer: ChainWriter, batch: list[_Pending], op: AppendEvents, extra: Any
    ) -> None:
        self._writer = writer
        self._batch = batch
        self._extra = extra
        self.op = op
        self.carried = False
        self._settled = False

    def settle(self, appended: bool | BaseException, *, keep_extra: bool = True) -> None:
        """Report the transaction: ``True`` when it committed with the append applied.

        ``False`` (the append lost the race or was gated off) or an exception (the
        transaction failed; its outcome may be unknown, so the store is asked whether
        the rows landed): records not stored are written at once by the normal path
        (relaxed). The extra record is withdrawn unless it landed or ``keep_extra`` (the
        op it describes won). Never raises (a write failure goes to ``on_error``).
        Idempotent.
        """
        if self._settled:
            return
        self._settled = True
        self.carried = self._writer._settle(self._batch, appended, self._extra, keep_extra)


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
        self._flush_lock = threading.Lock()
        self.head = head
        self.next_seq = count
        self.stored_count = count
        self.stored_head = head
        self.strict = strict
        self._on_error = on_error
        self._pending: list[_Pending] = []
        # The last buffered record when it is lazy (``append_lazy``): built and chained
        # (``_materialize``) before anything reads the chain or the buffer's rows.
        self._lazy: _Pending | None = None
        self._lazy_at = 0.0
        self._oldest = 0.0
        self.dropped = 0
        # What a closed run still owes the store (its columns), once the buffer is stored.
        self._then: Callable[[], None] | None = None
        self._retry_at = 0.0
        _LIVE.add(self)

    @property
    def pending(self) -> int:
        """Records buffered and not yet stored."""
        return len(self._pending)

    @property
    def chained(self) -> tuple[str, int]:
        """The chain's head hash and the number of records in it (buffered or stored)."""
        with self.lock:
            self._materialize()
            return self.head, self.next_seq

    def append(self, header: RecordHeader, content_json: str) -> EventRow:
        """Chain one record (the next ``seq``) and buffer it; return its row."""
        with self.lock:
            if self._lazy is not None:
                self._materialize()
            row = _row(header, content_json, self.next_seq, self.head, self.key)
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(_Pending(header, content_json, row))
            self.head = row.hash
            self.next_seq += 1
            size = len(self._pending)
        if self.strict:
            self.flush()
        elif size == 1:
            _ensure_flusher()
        return row

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
            self._materialize()
            pending = _Pending(None, "", None, build)  # type: ignore[arg-type]
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(pending)
            self._lazy = pending
            self._lazy_at = time.monotonic()
            size = len(self._pending)
        if size == 1:
            _ensure_flusher()
        return pending

    def _materialize(self) -> None:
        """Build and chain the lazy record, if any (lock held)."""
        pending = self._lazy
        if pending is None:
            return
        build = pending.build
        assert build is not None
        header, content_json = build()  # if it raises (it checks nothing), nothing changed
        pending.row = _row(header, content_json, self.next_seq, self.head, self.key)
        pending.header, pending.content_json, pending.build = header, content_json, None
        self._lazy = None
        self.head = pending.row.hash
        self.next_seq += 1

    def is_last(self, token: object) -> bool:
        """Whether ``append_lazy``'s ``token`` is the last record buffered (built or not);
        unlocked: ``replace_last`` decides."""
        pending = self._pending
        return bool(pending) and pending[-1] is token

    def replace_last(self, token: object, header: RecordHeader, content_json: str) -> bool:
        """Chain a record in place of ``token``'s if that is still the last one buffered.

        Returns ``False`` (nothing changed) when it was stored or handed to a batch
        already, or another record was chained after it: then the caller appends its own
        record as usual. The replacement takes the replaced record's place in the chain
        (its ``seq``, after its ``prev_hash``), so the chain never held that record; a
        lazy one is never built.
        """
        with self.lock:
            pending = self._pending
            if not pending or self.strict:
                return False
            last = pending[-1]
            if last is token and last is self._lazy:
                self._lazy = None
                row = _row(header, content_json, self.next_seq, self.head, self.key)
                self.next_seq += 1
            elif last is token:  # built since (a flush put it back), still the last
                old = last.row
                row = _row(header, content_json, old.seq, old.prev_hash, self.key)
            else:
                return False
            pending[-1] = _Pending(header, content_json, row)
            self.head = row.hash
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

    def flush(self, *, leave_young: bool = False) -> bool:
        """Append every buffered record; return whether the buffer is now empty.

        The store write happens outside the chain lock, so steps keep recording while a
        batch is committed. ``leave_young`` (the background flusher): a lazy last record
        younger than ``FLUSH_INTERVAL`` stays buffered (a step that began just now may
        still end as one record); a step running longer has its start record written.

        Raises:
            StoreError: only in strict mode.
        """
        with self._flush_lock:
            with self.lock:
                lazy = self._lazy
                if leave_young and lazy is not None and not self._due_at(self._lazy_at):
                    batch = self._pending[:-1]
                    self._pending = [lazy]
                    self._oldest = self._lazy_at
                else:
                    self._materialize()
                    batch = self._pending
                    self._pending = []
                left = bool(self._pending)  # a young lazy record left buffered
                if not batch:
                    return not left
            try:
                self._append_batch(batch)
            except Exception as exc:
                with self.lock:
                    self._pending = batch + self._pending
                if self.strict:
                    raise
                self._on_error(exc)
                with self.lock:
                    self._bound_pending()
                return False
            return not left

    def ride(self, store: Any, extra: tuple[RecordHeader, str] | None = None) -> Ride | None:
        """Hand every buffered record to the caller's transaction on ``store``.

        ``extra`` (``(header, content_json)``) is chained after
        them as a provisional record: the caller gates the append on its own op and tells
        ``settle`` whether the record still holds.

        Returns ``None`` (nothing to carry) when there is nothing to write, the run is
        strict or ``store`` is not this writer's store. Otherwise the caller must put
        ``ride.op`` in its transaction and then call ``ride.settle(...)`` exactly once
        (``finally``): the flush lock is held until then.
        """
        if self.strict or store is not self.store or (not self._pending and extra is None):
            return None
        self._flush_lock.acquire()
        if self.pending_row is not None:
            try:
                self._ensure_row()
            except Exception as exc:
                self._flush_lock.release()
                with contextlib.suppress(Exception):
                    self._on_error(exc)
                return None  # the caller's transaction goes on without the journal
        try:
            with self.lock:
                self._materialize()
                last: _Pending | None = None
                if extra is not None:
                    header, content_json = extra
                    row = _row(header, content_json, self.next_seq, self.head, self.key)
                    last = _Pending(header, content_json, row)
                    self._pending.append(last)
                    self.head = last.row.hash
                    self.next_seq += 1
                batch = self._pending
                self._pending = []
            if not batch:
                self._flush_lock.release()
                return None
            op = AppendEvents(self.run_id, tuple(p.row for p in batch), self.stored_count)
        except BaseException:
            self._flush_lock.release()
            raise
        return Ride(self, batch, op, last)

    def _settle(
        self, batch: list[_Pending], appended: bool | BaseException, extra: Any, keep: bool
    ) -> bool:
        """Finish a ride (flush lock held); return whether ``extra`` stays in the chain."""
        try:
            if isinstance(appended, BaseException):
                appended = self._landed(batch)
            if appended is True:
                self.stored_count += len(batch)
                self.stored_head = batch[-1].row.hash
                return extra is not None
            if extra is not None and not keep:
                with self.lock:
                    batch = [p for p in batch if p is not extra]
                    self._chain_from(batch + self._pending, self.stored_count, self.stored_head)
                extra = None
            if batch:
                try:
                    self._append_batch(batch)
                except Exception as exc:
                    with self.lock:
                        self._pending = batch + self._pending
                        self._bound_pending()
                    with contextlib.suppress(Exception):  # strict on_error raises: not here
                        self._on_error(exc)
            return extra is not None
        finally:
            self._flush_lock.release()

    def _landed(self, batch: list[_Pending]) -> bool:
        """Whether a batch whose commit raised is stored after all (one transaction)."""
        try:
            stored = self.store.read_events(
                self.run_id, after_seq=self.stored_count - 1, limit=len(batch)
            )
        except Exception:
            return False  # unknown: the caller's op is then treated as not landed
        return len(stored) == len(batch) and all(
            s.hash == p.row.hash for s, p in zip(stored, batch, strict=True)
        )

    def _skip_landed(self, batch: list[_Pending]) -> list[_Pending]:
        """Drop the leading records of ``batch`` that are already stored (same hashes).

        A commit whose outcome was unknown may have landed: its rows then sit at the
        stored ``seq`` with exactly our hashes (a hash covers the whole chain before it).
        """
        stored = self.store.read_events(
            self.run_id, after_seq=self.stored_count - 1, limit=len(batch)
        )
        k = 0
        while k < len(stored) and stored[k].hash == batch[k].row.hash:
            k += 1
        if k:
            self.stored_count += k
            self.stored_head = batch[k - 1].row.hash
        return batch[k:]

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

    def _append_batch(self, batch: list[_Pending]) -> None:
        self._ensure_row()
        for _attempt in range(100):
            rows = [p.row for p in batch]
            if self.store.append_events(
                self.run_id, rows, expected_count=self.stored_count, durable=False
            ):
                self.stored_count += len(rows)
                self.stored_head = rows[-1].hash
                return
            batch = self._skip_landed(batch)
            if not batch:
                return
            with self.lock:
                self._rechain(batch + self._pending)
        raise StoreUnavailableError(
            message=f"could not append journal records to run {self.run_id}: "
            "other writers kept appending first",
            details={"run_id": self.run_id},
        )

    def _rechain(self, items: list[_Pending]) -> None:
        """Another writer appended: chain ``items`` after the stored head (lock held)."""
        run = self.store.get_run(self.run_id)
        if run is None:
            raise StoreUnavailableError(
                message=f"run {self.run_id} vanished from the store",
                details={"run_id": self.run_id},
            )
        prev: str = (run.head_hash or self.genesis) if run.event_count else self.genesis
        self._chain_from(items, run.event_count, prev)

    def _chain_from(self, items: list[_Pending], count: int, prev: str) -> None:
        """Chain ``items`` after ``count`` stored records ending in ``prev`` (lock held)."""
        self._materialize()  # a lazy record among ``items`` is built (chained again below)
        seq = count
        for p in items:
            p.row = _row(p.header, p.content_json, seq, prev, self.key)
            prev = p.row.hash
            seq += 1
        self.stored_count = count
        self.head = prev
        self.next_seq = seq

    def _bound_pending(self) -> None:
        excess = len(self._pending) - MAX_PENDING
        if excess > 0:
            # The chain of what remains no longer links to the store: verify will name
            # the gap. Reported through on_error, never silent.
            del self._pending[:excess]
            self.dropped += excess
            self._on_error(
                StoreUnavailableError(
                    message=f"dropped {excess} journal records of run {self.run_id}: "
                    "the store kept failing",
                    details={"run_id": self.run_id, "dropped": excess},
                )
            )

    def close(self) -> bool:
        """Flush and stop background flushing for this run; return whether all is stored.

        What the store refused stays buffered: ``finish_later`` keeps it for later.
        """
        try:
            return self.flush()
        finally:
            _LIVE.discard(self)

    def finish_later(self, then: Callable[[], None]) -> None:
        """Keep this closed writer until its buffer is stored, then run ``then`` (until it
        returns without raising): by the background flusher every ``CLOSING_RETRY``
        seconds, and at process exit."""
        with self.lock:
            self._then = then
            self._retry_at = time.monotonic() + CLOSING_RETRY
        _CLOSING.add(self)  # held strongly: the run may be gone
        _LIVE.add(self)
        _ensure_flusher()

    def _finish(self, now: float | None = None) -> None:
        """Store what a closed run still owes, if the store takes it now.

        ``now`` (the background flusher): not before ``CLOSING_RETRY`` seconds after the
        last refusal, so a store that keeps failing is not asked (and logged) nonstop.
        """
        if now is not None and now < self._retry_at:
            return
        self._retry_at = time.monotonic() + CLOSING_RETRY
        if not self.flush():
            return
        then = self._then
        if then is not None:
            try:
                then()
            except Exception:  # retried at the next round, or at process exit
                return
            self._then = None
        _CLOSING.discard(self)
        _LIVE.discard(self)


# -- background flushing -----------------------------------------------------------------

_LIVE: weakref.WeakSet[ChainWriter] = weakref.WeakSet()
_CLOSING: set[ChainWriter] = set()  # closed runs whose records or columns wait for the store
_flusher_lock = threading.Lock()
_flusher: threading.Thread | None = None


def flush_all() -> None:
    """Flush every live run's buffer (used at process exit and by the flusher)."""
    for writer in list(_LIVE):
        try:
            if writer in _CLOSING:
                writer._finish()
            else:
                writer.flush()
        except CheckpointError:
            pass  # strict writers raise at their own call sites, not here
        except Exception:  # never raise from a background flush
            pass


def _flusher_loop() -> None:
    global _flusher
    while True:
        time.sleep(FLUSH_INTERVAL / 2)
        writers = list(_LIVE)
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
                    writer._finish(now)
            elif writer.due(now):
                with contextlib.suppress(Exception):  # a background flush never raises
                    writer.flush(leave_young=True)


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
