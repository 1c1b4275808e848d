"""The ``Store`` protocol: what every backend guarantees. No backend code here.

A store persists checkpoints (with their transition history), the operation journal
(small per-call correlation data), runs, journal events, tombstones, approvals, and effect
keys (which call holds each fingerprinted effect key). Backends:
``SQLiteStore`` (embedded default), ``PostgresStore`` (fleets), and ``MemoryStore`` in
``toolledger.testing``. The same contract suite (``toolledger.testing.check_store``) runs
against each.

Guarantees every backend gives:

- ``compare_and_swap`` and ``create_if_absent`` are atomic: of any number of concurrent
  callers (threads, processes, hosts) swapping from the same revision, exactly one wins.
- Every checkpoint write appends a history row in the same transaction.
- ``apply`` runs several writes in one transaction (one commit): all are applied, each
  reporting its own outcome, or, on a storage failure, none is.
- ``durable=True`` writes survive power loss once the call returns (when the store was
  opened with full durability); ``durable=False`` writes may be lost by a power failure, but
  never by a process crash, and never torn.
- ``ClaimEffectKey`` binds an effect key to one call id: of any number of concurrent
  claims of a free key exactly one wins, and a key stays bound (retention keeps it) until
  the holder's own claim is released (``ReleaseEffectKey``, proven pre-effect).
- A stored row that fails validation raises ``INVALID_CHECKPOINT`` naming its key; it is
  never rewritten, and other rows stay readable.
- Storage failures surface as ``StoreError`` subclasses (``STORE_BUSY``,
  ``STORE_UNAVAILABLE``, ``STORE_SCHEMA_TOO_NEW``), never as driver exceptions.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    Union,
    cast,
    get_args,
    runtime_checkable,
)

from ..checkpoint.model import Action, Binding, CheckpointRecord, Status
from ._search import EventQuery

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._approval_record import ApprovalRecord

__all__ = [
    "NO_CAPABILITIES",
    "OP_TYPES",
    "AppendEvents",
    "Capabilities",
    "ClaimEffectKey",
    "CreateCheckpoint",
    "EffectKeyRow",
    "EventRow",
    "HistoryEntry",
    "Op",
    "OperationRow",
    "QuarantinedRow",
    "ReleaseEffectKey",
    "RemoveOperation",
    "RunRow",
    "Store",
    "SwapCheckpoint",
    "Tombstone",
    "WriteOperation",
    "approval_reader",
    "capabilities_of",
    "denial_finder",
    "migrations_of",
    "no_approval",
    "record_fields_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One stored transition of a checkpoint (revision 0 is its creation)."""

    revision: int
    status: Status
    transition: str
    action: Action
    at: datetime
    record: CheckpointRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class QuarantinedRow:
    """A stored checkpoint row that failed validation; it is left exactly as found."""

    namespace: str
    call_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    """A stored run. ``data`` is the run's JSON document (owned by the journal layer).

    ``head_hash`` and ``event_count`` are maintained by ``append_events``; a stored
    ``event_count`` that is not an integer (a damaged row) reads as ``-1``.
    """

    run_id: str
    namespace: str
    agent: str | None
    goal: str | None
    status: str
    started_at: str
    ended_at: str | None = None
    head_hash: str | None = None
    event_count: int = 0
    data: str = "{}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRow:
    """A stored journal record. ``data`` is its canonical JSON (owned by the journal layer).

    ``seq`` is 0-based and dense within a run; ``hash`` chains over ``prev_hash``.
    """

    run_id: str
    seq: int
    event_id: str
    parent_id: str | None
    kind: str
    name: str | None
    status: str | None
    at: str
    prev_hash: str | None
    hash: str
    data: str


#: ``EventRow``'s fields in column order (the SQL stores select and insert in this order).
EVENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EventRow))

# A frozen dataclass's __init__ sets each field through object.__setattr__; the slots' own
# descriptors set them at about half the cost (EventRow has no __post_init__: nothing is
# skipped). Writers and readers build one per record: 40,000 for a 20,000-step run.
(
    _SET_RUN_ID,
    _SET_SEQ,
    _SET_EVENT_ID,
    _SET_PARENT_ID,
    _SET_KIND,
    _SET_NAME,
    _SET_STATUS,
    _SET_AT,
    _SET_PREV_HASH,
    _SET_HASH,
    _SET_DATA,
) = (vars(EventRow)[name].__set__ for name in EVENT_FIELDS)
_new_object = object.__new__


def event_row_of(
    run_id: str,
    seq: int,
    event_id: str,
    parent_id: str | None,
    kind: str,
    name: str | None,
    status: str | None,
    at: str,
    prev_hash: str | None,
    hash: str,
    data: str,
) -> EventRow:
    """Return ``EventRow(...)`` of these fields, positional in ``EVENT_FIELDS`` order."""
    row = _new_object(EventRow)
    _SET_RUN_ID(row, run_id)
    _SET_SEQ(row, seq)
    _SET_EVENT_ID(row, event_id)
    _SET_PARENT_ID(row, parent_id)
    _SET_KIND(row, kind)
    _SET_NAME(row, name)
    _SET_STATUS(row, status)
    _SET_AT(row, at)
    _SET_PREV_HASH(row, prev_hash)
    _SET_HASH(row, hash)
    _SET_DATA(row, data)
    return row


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What retention (``toolledger.gc``) keeps of an erased checkpoint: no content.

    The binding, the last status and revision, the timestamps, the names of every
    transition in revision order (``transitions[r]`` led to revision ``r``), and SHA-256
    hashes of what was erased (``"sha256:<hex>"``): the result (canonical JSON of
    ``{"payload", "is_error"}``), the whole stored record, and the operation-journal entry.
    A key with a tombstone can never hold a checkpoint again: ``create_if_absent`` raises
    ``TOMBSTONED``.
    """

    binding: Binding
    status: Status
    revision: int
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None
    delivered_at: datetime | None = None
    erased_at: datetime
    reason: str
    result_sha256: str | None = None
    record_sha256: str
    operation_sha256: str | None = None
    transitions: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """The store key, ``(namespace, call_id)``."""
        return self.binding.key


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationRow:
    """A stored operation-journal entry (``data`` is its JSON object)."""

    namespace: str
    call_id: str
    data: str
    written_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectKeyRow:
    """A stored effect key: which call holds it (``key`` is a ``sha256:`` fingerprint)."""

    namespace: str
    key: str
    call_id: str
    claimed_at: str


@dataclass(frozen=True, slots=True)
class CreateCheckpoint:
    """``apply`` op: ``create_if_absent(record)``; outcome ``(created, stored_record)``.

    ``requires``: the index of an earlier op of the same ``apply`` that must have won (a
    won ``ClaimEffectKey``); when it did not, nothing is written and the outcome is
    ``False``.
    """

    record: CheckpointRecord
    requires: int | None = None


@dataclass(frozen=True, slots=True)
class SwapCheckpoint:
    """``apply`` op: ``compare_and_swap(expected_revision, next)``; outcome ``bool``.

    ``requires``: as for ``CreateCheckpoint`` (an earlier op that must have won; the
    created flag of a ``CreateCheckpoint`` counts).
    """

    expected_revision: int
    next: CheckpointRecord
    requires: int | None = None


@dataclass(frozen=True, slots=True)
class ClaimEffectKey:
    """``apply`` op: bind the effect ``key`` to ``call_id`` unless another call holds it.

    ``key`` is a fingerprint (``sha256:<hex>``, no content); it is unique per namespace.
    Outcome ``bool``: ``True`` when ``call_id`` holds the key now (claimed here, or it held
    it already), ``False`` when another call holds it (nothing written; read the holder
    with ``effect_key_holder``).

    ``replaces``: a call id whose hold the claim takes over (a compare-and-swap on the
    holder: the key is rebound to ``call_id`` only while ``replaces`` still holds it).
    ``requires``: as for ``CreateCheckpoint`` (an earlier op that must have won).
    """

    namespace: str
    key: str
    call_id: str
    replaces: str | None = None
    requires: int | None = None


@dataclass(frozen=True, slots=True)
class ReleaseEffectKey:
    """``apply`` op: unbind ``key`` iff ``call_id`` holds it; outcome ``bool`` (released).

    ``requires``: as for ``CreateCheckpoint`` (the won release of the holder's claim).
    """

    namespace: str
    key: str
    call_id: str
    requires: int | None = None


@dataclass(frozen=True, slots=True)
class WriteOperation:
    """``apply`` op: set the call's operation-journal entry; outcome ``None``."""

    namespace: str
    call_id: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RemoveOperation:
    """``apply`` op: remove the call's operation-journal entry; outcome ``bool`` (existed).

    ``requires``: as for ``CreateCheckpoint`` (the swap that settles the call must win).
    """

    namespace: str
    call_id: str
    requires: int | None = None


@dataclass(frozen=True, slots=True)
class AppendEvents:
    """``apply`` op: ``append_events(run_id, rows, expected_count=…)``; outcome ``bool``.

    ``requires``: the index of an earlier op of the same ``apply`` whose outcome must be
    true (a won ``SwapCheckpoint``); when it is false nothing is appended and the outcome
    is ``False`` (the rest of the transaction still commits). Stores that honour it set
    ``Capabilities.gated_append`` (the built-in ones do); callers check that before relying
    on it.
    """

    run_id: str
    rows: Sequence[EventRow] = field(default_factory=tuple)
    expected_count: int = 0
    requires: int | None = None


Op = Union[  # noqa: UP007 (a runtime alias; X | Y needs 3.10 evaluation of classes)
    CreateCheckpoint,
    SwapCheckpoint,
    WriteOperation,
    RemoveOperation,
    AppendEvents,
    ClaimEffectKey,
    ReleaseEffectKey,
]
#: Every ``apply`` op type: each backend's op table has one handler for each.
OP_TYPES: tuple[type[Any], ...] = get_args(Op)


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a store does beyond the ``Store`` protocol, declared as ``store.capabilities``.

    Callers read it through ``capabilities_of`` (a store that declares nothing has none of
    them) and never probe a store for a method or flag. ``check_store`` runs each group of
    checks a store declares.
    """

    #: ``AppendEvents.requires`` is honoured (a gated append).
    gated_append: bool = False
    #: ``ClaimEffectKey``/``ReleaseEffectKey`` ops and ``requires`` on checkpoint ops.
    effect_keys: bool = False
    #: ``get_with_approval(namespace, call_id)``: ``get``'s record and a function returning
    #: what ``approval_get`` returned at the same moment (decoding, and raising, only when
    #: called): the guard reads a call's checkpoint and approval in one round trip.
    read_with_approval: bool = False
    #: ``read_event_fields(run_id)``: a run's records as ``RECORD_FIELDS`` tuples, one
    #: statement (journal readers use it instead of building ``EventRow``s).
    record_fields: bool = False
    #: ``applied_migrations()``: the ``(version, name)`` schema migrations applied.
    migrations: bool = False
    #: ``find_denial(binding, conversation)``: the latest denial of the binding's action
    #: (namespace, tool name, revision, input fingerprint) in the conversation under
    #: another call id, found through an index rather than by reading every denial.
    denials_by_action: bool = False


#: A store that declares no ``capabilities``.
NO_CAPABILITIES = Capabilities()


def no_approval() -> None:
    """``get_with_approval``'s second value when no approval is stored for the call.

    Stores answer with this very function, so a caller may tell "none stored" by identity
    (``first is no_approval``) without calling it.
    """
    return None


def capabilities_of(store: object) -> Capabilities:
    """Return ``store.capabilities``, or ``NO_CAPABILITIES`` for a store declaring none."""
    caps = getattr(store, "capabilities", NO_CAPABILITIES)
    return caps if isinstance(caps, Capabilities) else NO_CAPABILITIES


class _ReadsWithApproval(Protocol):
    def get_with_approval(
        self, namespace: str, call_id: str
    ) -> tuple[CheckpointRecord | None, Callable[[], ApprovalRecord | None]]: ...


class _ReadsRecordFields(Protocol):
    def read_event_fields(self, run_id: str) -> builtins.list[tuple[Any, ...]]: ...


class _FindsDenials(Protocol):
    def find_denial(self, binding: Binding, conversation: str) -> ApprovalRecord | None: ...


class _Migrates(Protocol):
    def applied_migrations(self) -> builtins.list[tuple[int, str]]: ...


def approval_reader(
    store: Store,
) -> (
    Callable[[str, str], tuple[CheckpointRecord | None, Callable[[], ApprovalRecord | None]]] | None
):
    """Return the store's ``get_with_approval`` (a call's checkpoint and a function
    returning its approval, as of one moment) where it declares ``read_with_approval``,
    else ``None`` (the caller reads ``get``, then ``approval_get``)."""
    if capabilities_of(store).read_with_approval:
        return cast("_ReadsWithApproval", store).get_with_approval
    return None


def record_fields_of(store: Store, run_id: str) -> builtins.list[tuple[Any, ...]] | None:
    """Return the run's ``RECORD_FIELDS`` tuples where the store declares ``record_fields``,
    else ``None`` (the caller reads its rows)."""
    if capabilities_of(store).record_fields:
        return cast("_ReadsRecordFields", store).read_event_fields(run_id)
    return None


def denial_finder(store: Store) -> Callable[[Binding, str], ApprovalRecord | None] | None:
    """Return the store's ``find_denial`` where it declares ``denials_by_action``, else
    ``None`` (the caller scans ``list_approvals``)."""
    if capabilities_of(store).denials_by_action:
        return cast("_FindsDenials", store).find_denial
    return None


def migrations_of(store: Store) -> builtins.list[tuple[int, str]]:
    """Return the store's applied migrations (none for a store without ``migrations``)."""
    if capabilities_of(store).migrations:
        return cast("_Migrates", store).applied_migrations()
    return []


@runtime_checkable
class Store(Protocol):
    """Persistence for checkpoints, the operation journal, runs and journal events."""

    # -- checkpoints -------------------------------------------------------------------

    def create_if_absent(
        self, record: CheckpointRecord, *, durable: bool = True
    ) -> tuple[bool, CheckpointRecord]:
        """Store ``record`` unless its key exists.

        Returns:
            ``(True, record)`` when stored, else ``(False, the stored record)``. The caller
            compares bindings (``decide_checkpoint``); the store does not.

        Raises:
            InvalidCheckpointError: ``record`` is invalid, or the stored row is.
            StoreError: storage failure.
        """
        ...

    def get(self, namespace: str, call_id: str) -> CheckpointRecord | None:
        """Return the stored record, or ``None`` when the key is absent.

        Raises:
            InvalidCheckpointError: the stored row fails validation (it is left as is).
        """
        ...

    def compare_and_swap(
        self, expected_revision: int, next: CheckpointRecord, *, durable: bool = True
    ) -> bool:
        """Replace the record at ``next``'s key iff its revision is ``expected_revision``.

        ``next.revision`` must be ``expected_revision + 1``. Returns ``False`` (and writes
        nothing) when the stored revision differs or the key is absent.
        """
        ...

    def list(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        namespace: str | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
    ) -> builtins.list[CheckpointRecord]:
        """Return records matching every given filter, oldest ``updated_at`` first.

        This is the reconcile queue. Rows that fail validation are skipped here and
        reported by ``quarantined()``.
        """
        ...

    def quarantined(self, *, limit: int | None = None) -> builtins.list[QuarantinedRow]:
        """Return stored checkpoint rows that fail validation, untouched."""
        ...

    def history(self, namespace: str, call_id: str) -> builtins.list[HistoryEntry]:
        """Return every stored transition of the key in revision order (empty if absent)."""
        ...

    # -- batches -----------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], *, durable: bool = True) -> builtins.list[Any]:
        """Run ``ops`` in order in one transaction and one commit; return each outcome."""
        ...

    # -- operation journal -------------------------------------------------------------

    def operation_write(
        self, namespace: str, call_id: str, data: Mapping[str, Any], *, durable: bool = True
    ) -> None:
        """Set the call's operation-journal entry (small JSON object; no secrets)."""
        ...

    def operation_read(self, namespace: str, call_id: str) -> dict[str, Any] | None:
        """Return the call's operation-journal entry, or ``None`` when empty."""
        ...

    def operation_remove(self, namespace: str, call_id: str, *, durable: bool = True) -> bool:
        """Remove the call's entry; return whether one existed."""
        ...

    # -- runs and journal events -------------------------------------------------------

    def create_run(self, run: RunRow, *, durable: bool = False) -> None:
        """Store a new run.

        Raises:
            InvalidArgumentError: a run with that id exists.
        """
        ...

    def get_run(self, run_id: str) -> RunRow | None:
        """Return the run, or ``None``."""
        ...

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        ended_at: str | None = None,
        data: str | None = None,
        durable: bool = False,
    ) -> None:
        """Update a run's status, end time or document (not its chain head).

        Raises:
            NotFoundError: no such run.
        """
        ...

    def list_runs(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[RunRow]:
        """Return runs, newest ``started_at`` first."""
        ...

    def append_events(
        self,
        run_id: str,
        rows: Sequence[EventRow],
        *,
        expected_count: int,
        durable: bool = False,
    ) -> bool:
        """Append ``rows`` iff the run holds exactly ``expected_count`` events.

        On success the run's ``event_count`` grows by ``len(rows)`` and its ``head_hash``
        becomes the last row's hash, in the same transaction. Returns ``False`` (nothing
        written) when another writer appended first.

        Raises:
            NotFoundError: no such run.
        """
        ...

    def read_events(
        self, run_id: str, *, after_seq: int = -1, limit: int | None = None
    ) -> builtins.list[EventRow]:
        """Return the run's events with ``seq > after_seq``, in ``seq`` order."""
        ...

    def search_events(self, query: EventQuery) -> builtins.list[tuple[EventRow, ...]]:
        """Return the records of the events matching ``query``, newest event first.

        Each item is one event's records in ``seq`` order (a step's start and end). Events
        are ordered by their first record's ``at``, then ``run_id``, then ``seq``, all
        descending; ``query.offset`` events are skipped and at most ``query.limit``
        returned. Every term of ``query.terms`` must match the text of one of the event's
        records (its name and content values) or its run's goal; content erased by
        retention no longer matches. The full-text index behind this is kept in the same
        transaction as the rows it indexes.
        """
        ...

    # -- retention and copying ---------------------------------------------------------

    def erase_checkpoint(self, tombstone: Tombstone, *, expected_revision: int) -> bool:
        """Replace the checkpoint at ``tombstone.key`` by ``tombstone``, in one transaction.

        Deletes the checkpoint (iff its revision is ``expected_revision``), its history
        rows and its operation-journal entry, and stores the tombstone. Returns ``False``
        (nothing written) when the key is absent or its revision differs.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when a tombstone exists already.
        """
        ...

    def add_tombstone(self, tombstone: Tombstone) -> bool:
        """Store a tombstone (copying a ledger); return ``False`` if one exists already.

        Raises:
            InvalidArgumentError: ``INVALID_ARGUMENT`` when a checkpoint holds the key.
        """
        ...

    def tombstone(self, namespace: str, call_id: str) -> Tombstone | None:
        """Return the key's tombstone, or ``None`` when it was never erased."""
        ...

    def list_tombstones(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[Tombstone]:
        """Return tombstones ordered by key."""
        ...

    def list_operations(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[OperationRow]:
        """Return operation-journal entries ordered by key."""
        ...

    def rewrite_event_data(self, run_id: str, data: Mapping[int, str]) -> int:
        """Replace the ``data`` of the run's events ``{seq: data}`` in one transaction.

        Only retention uses this, with content-free documents that keep every hash input
        (``toolledger.journal.erase_content``): the chain's ``hash`` columns never change.
        Returns how many rows were rewritten.

        Raises:
            NotFoundError: ``NOT_FOUND`` for an unknown run or sequence number (nothing is
                written).
        """
        ...

    # -- effect keys (re-plan safety; see docs/guard.md) -------------------------------

    def effect_key_holder(self, namespace: str, key: str) -> str | None:
        """Return the call id holding the effect ``key`` in ``namespace``, or ``None``."""
        ...

    def list_effect_keys(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> builtins.list[EffectKeyRow]:
        """Return stored effect keys ordered by ``(namespace, key)``."""
        ...

    # -- approvals (human-in-the-loop gates; see toolledger.approvals) -----------------

    def approval_get(self, namespace: str, call_id: str) -> ApprovalRecord | None:
        """Return the call's approval request/decision, or ``None``.

        A store may also declare ``Capabilities.read_with_approval`` (both in one read).

        Raises:
            InvalidCheckpointError: the stored row is damaged (it is left as is).
        """
        ...

    def approval_put(self, record: ApprovalRecord, *, expected_revision: int) -> bool:
        """Store ``record`` iff the stored approval is at ``expected_revision`` (CAS).

        ``expected_revision=-1`` stores a new request (the key must be absent; the record's
        revision is 0); otherwise ``record.revision`` must be ``expected_revision + 1``.
        Always durable: a decision survives power loss once this returns. Of concurrent
        writers from the same revision exactly one wins. Returns ``False`` (nothing
        written) when the stored revision differs.

        Raises:
            InvalidArgumentError: ``record.revision`` does not follow ``expected_revision``.
        """
        ...

    def list_approvals(
        self,
        *,
        status: str | Iterable[str] | None = None,
        namespace: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[ApprovalRecord]:
        """Return approvals matching every filter, oldest ``requested_at`` first."""
        ...

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...
