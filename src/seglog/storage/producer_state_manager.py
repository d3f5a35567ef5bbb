"""A partition's idempotence state: Kafka's ProducerStateManager.

Holds a ``ProducerStateEntry`` per producer id (``producer_entry.py``), checks
each append's batches against it, takes it over once the append is written,
writes it as ``<offset>.snapshot`` files (``producer_snapshot.py``) and, on
start-up, loads the latest snapshot and replays the log's batch headers after
it (the same header walk the cleaner uses, ``producer_state.producer_batches``).

``PartitionLog`` calls it under the partition's lock, as Kafka's ``UnifiedLog`` does:
``analyze_append`` once a leader's batches have their offsets (a duplicate is
acknowledged with ``check.duplicate``'s offsets and nothing is written; a refused batch
raises and the state is unchanged), ``on_append`` once they are written (an ABORT
marker's entry added to its segment's ``.txnindex``, then the state taken over) or,
for a producer's batch next in order that ``_scan.append_batch`` took in one call
(reading the entries itself), ``on_in_order_append``; ``on_roll`` and ``on_close`` (a
snapshot), ``load_log`` when the log opens or is truncated; the log manager calls ``remove_expired`` every
producer.id.expiration.check.interval.ms.

Transactions, as Kafka's ``ongoingTxns`` and ``unreplicatedTxns``: a transaction is
undecided until its marker is in the log, then unreplicated until the high watermark
passes the marker (``on_high_watermark_updated``). ``first_unstable_offset(hw)`` is the
first offset of the earliest of either, which the log's readers take without its lock
(the log's last stable offset: ``PartitionLog.last_stable_offset``).

``map_end_offset`` is the offset up to which the state holds the log; a snapshot
is named after it.

A read-only log (a reader beside the process owning the dir) loads its state the same
way, the latest snapshot and the batch headers after it, deleting no snapshot
(``read_only``).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import CorruptIndexError, CorruptSnapshotError, InvalidConfigurationError, KafkaStorageError
from ..records import RecordBatch
from ..records.control import ControlRecordType, EndTransactionMarker, parse_control_record
from ..records.layout import (
    CONTROL_FLAG_MASK,
    HEADER,
    MAGIC,
    MAGIC_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
)
from . import _map, fileio, producer_snapshot
from .naming import SNAPSHOT_SUFFIX, offset_file_name
from .producer_entry import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    increment_sequence,
)
from .producer_state import PRODUCER_ID_EXPIRATION_MS, producer_batches
from .segment import LogSegment
from .txn_index import AbortedTxn

_READ_BUFFER = 256 * 1024
_PRODUCER_ID = struct.Struct(">q")
_new = tuple.__new__


@dataclass
class ProducerAppendCheck:
    """What ``analyze`` found in one append: the producers' new state, the transactions
    its markers ended, or the earlier append a duplicate batch repeats."""

    updated: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None  # the kept batch a duplicate repeats: answer with its offsets


_NO_PRODUCERS = ProducerAppendCheck()
# (first undecided offset, ((first offset, marker offset) of each decided transaction not yet
# known to be replicated, by first offset)): see ProducerStateManager._unstable
Unstable = tuple[int | None, tuple[tuple[int, int], ...]]


def first_unstable(unstable: Unstable, high_watermark: int) -> int | None:
    """The first offset of the earliest transaction of ``unstable`` (a producer state's,
    taken whole) that is undecided, or whose marker lies at or past ``high_watermark``."""
    undecided, unreplicated = unstable
    for first, last in unreplicated:
        if undecided is not None and first >= undecided:
            break
        if last >= high_watermark:
            return first
    return undecided


log = logging.getLogger(__name__)


class ProducerStateManager:
    def __init__(
        self, dir: str, *, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS, read_only: bool = False
    ) -> None:
        if producer_id_expiration_ms < 1:
            raise InvalidConfigurationError(
                f"producer.id.expiration.ms must be at least 1, not {producer_id_expiration_ms}", file=dir
            )
        self.dir = dir
        self.read_only = read_only
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None
        # What readers take without the log's lock, replaced whole: the first offset of the
        # earliest undecided transaction (None: none), and the transactions decided by a
        # marker the high watermark may not have passed yet, as (first offset, marker offset)
        # sorted by first offset (Kafka's ongoingTxns and unreplicatedTxns). Replaced under
        # ``_unstable_lock``: an append (the log's lock) and a high watermark's move (not
        # under it) may both replace it.
        self._unstable: Unstable = (None, ())
        self._unstable_lock = threading.Lock()
        # a load's replay: where it began, and the entries of the ABORT markers it met
        self.replayed_from = 0
        self.replayed_aborts: list[AbortedTxn] = []

    # --- the append path ---------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def analyze(
        self, batches: Iterable[RecordBatch], origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> ProducerAppendCheck:
        """Check an append's batches (offsets already assigned) without changing the state;
        raises OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError or
        TransactionCoordinatorFencedError for the first batch Kafka refuses."""
        check = ProducerAppendCheck()
        for batch in batches:
            header = HEADER.unpack_from(batch.buffer)
            pid = header[9]
            if pid < 0:
                continue
            if origin == AppendOrigin.CLIENT and not header[5] & CONTROL_FLAG_MASK:
                entry = self.producers.get(pid)
                last_seq = increment_sequence(header[11], header[6])
                kept = None if entry is None else entry.find_duplicate(header[10], header[11], last_seq)
                if kept is not None:
                    check.duplicate = kept
                    return check
            self._append(check, header, _marker(batch) if header[5] & CONTROL_FLAG_MASK else None, origin)
        return check

    def analyze_append(
        self, buffer: bytearray | memoryview | _map.Map, spans: Sequence[Sequence[int]], origin: AppendOrigin
    ) -> ProducerAppendCheck:
        """``analyze`` of the batches of an append's buffer, each span starting (position,
        size, ...); only v2 batches with a producer id are looked at."""
        # most appends carry no producer id: nothing made for them (this runs on every append)
        if len(spans) == 1:  # (a producer's usual append: one batch, looked at without a loop)
            at = spans[0][0]
            if buffer[at + MAGIC_OFFSET] != MAGIC or _PRODUCER_ID.unpack_from(buffer, at + PRODUCER_ID_OFFSET)[0] < 0:
                return _NO_PRODUCERS
        batches = [
            (at, size)
            for at, size, *_ in spans
            if buffer[at + MAGIC_OFFSET] == MAGIC and _PRODUCER_ID.unpack_from(buffer, at + PRODUCER_ID_OFFSET)[0] >= 0
        ]
        if not batches:
            return _NO_PRODUCERS  # one shared empty check, which nothing changes
        view = memoryview(buffer)
        return self.analyze([RecordBatch(view[at : at + size], at) for at, size in batches], origin)

    def on_in_order_append(self, entry: ProducerStateEntry, info: tuple[int, ...], log_end_offset: int) -> None:
        """An append of one batch that ``_scan.append_batch`` found next in order for the
        producer of ``entry`` (see its ``in_order_entry``: what ``analyze`` lets through
        changing nothing but the entry's kept batches) is in the log, at the first and last
        offsets and with the max timestamp of ``info``: the state as ``on_append`` leaves it,
        the batch kept (its sequences follow the last kept) and its timestamp the producer's
        last. (This runs on every append of an idempotent producer: no Python function called.)"""
        first, last, max_ts = info[0], info[1], info[2]
        delta = last - first
        batches = entry.batches
        last_seq = batches[-1][0] + delta + 1  # (the BatchMetadata's last_seq)
        if last_seq > INT32_MAX:
            last_seq -= INT32_MAX + 1
        if len(batches) == NUM_BATCHES_TO_RETAIN:
            batches.popleft()
        batches.append(_new(BatchMetadata, (last_seq, last, delta, max_ts)))
        entry.last_timestamp = max_ts
        self.map_end_offset = log_end_offset

    def on_append(
        self, check: ProducerAppendCheck, log_end_offset: int, segment: LogSegment, high_watermark: int | None = None
    ) -> None:
        """The append ``check`` analysed is in ``segment``: index the transactions its ABORT
        markers ended (Kafka's ``updateTxnIndex``), then take its state over. The entries go
        first, as Kafka completes a transaction only once its entry is written: a reader that
        finds the transaction decided finds its entry too. ``high_watermark``: the log's
        now, which the transactions decided before may have passed."""
        if check is _NO_PRODUCERS:
            self.map_end_offset = log_end_offset
            return
        if check.completed:
            for entry in self._aborted_entries(check):
                segment.txn_index.append(entry)
        self.update(check, log_end_offset, high_watermark)

    def _aborted_entries(self, check: ProducerAppendCheck) -> list[AbortedTxn]:
        """The ``.txnindex`` entries of the aborted transactions an append ended, with
        Kafka's LSO (``UnifiedLog.append``: every producer's update of the append applied,
        then for each completed transaction in turn ``lastStableOffset`` and
        ``completeTxn``): the first offset of the earliest transaction of another producer
        open then (one the append began counts, and one a later marker of the same append
        ends), else past the marker. A follower's append may end several."""
        ongoing = {
            e.current_txn_first_offset: pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is not None
        }
        for pid, info in check.updated.items():
            for first in info.started_transactions:
                ongoing[first] = pid
        entries = []
        for txn in check.completed:
            if txn.is_aborted:
                others = (first for first, pid in ongoing.items() if pid != txn.producer_id)
                lso = min(others, default=txn.last_offset + 1)
                entries.append(AbortedTxn(txn.first_offset, txn.last_offset, txn.producer_id, lso))
            ongoing.pop(txn.first_offset, None)
        return entries

    def update(self, check: ProducerAppendCheck, log_end_offset: int, high_watermark: int | None = None) -> None:
        """Take over an append's state once its batches are in the log."""
        for pid, info in check.updated.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = info.entry
            else:
                current.update(info.entry)
        self.map_end_offset = log_end_offset
        if check.completed or any(info.started_transactions for info in check.updated.values()):
            self._publish(check.completed, high_watermark)

    def _publish(self, completed: Sequence[CompletedTxn], high_watermark: int | None) -> None:
        """The transactions' state for readers, after the producers' changed: the first
        undecided offset again (a walk of every producer), the completed transactions added
        to those not yet replicated, the ones the high watermark passed dropped."""
        undecided = self.first_undecided_offset
        with self._unstable_lock:
            unreplicated = [t for t in self._unstable[1] if high_watermark is None or t[1] >= high_watermark]
            unreplicated += [(t.first_offset, t.last_offset) for t in completed]
            unreplicated.sort()
            self._unstable = (undecided, tuple(unreplicated))

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Kafka's: the decided transactions whose markers lie below the high watermark are
        replicated (stable). Any thread: the log's owner moves its high watermark without
        the log's lock."""
        if not self._unstable[1]:
            return
        with self._unstable_lock:
            undecided, unreplicated = self._unstable
            kept = tuple(t for t in unreplicated if t[1] >= high_watermark)
            if len(kept) != len(unreplicated):
                self._unstable = (undecided, kept)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Kafka's ``firstUnstableOffset``: the first offset of the earliest transaction
        undecided, or decided by a marker at or past ``high_watermark`` (not known to be on
        every replica yet); None when there is none."""
        return first_unstable(self._unstable, high_watermark)

    @property
    def unstable(self) -> Unstable:
        """The transactions' state as readers take it without the log's lock: whole, and
        before they read the high watermark they pass to ``first_unstable_offset`` (a
        transaction dropped from it meanwhile had its marker below that)."""
        return self._unstable

    def _append(
        self, check: ProducerAppendCheck, header: tuple, marker: tuple[bool, int, int] | None, origin: AppendOrigin
    ) -> None:
        base, attributes, delta, max_ts, pid, epoch, base_seq = (
            header[0], header[5], header[6], header[8], header[9], header[10], header[11]
        )  # fmt: skip
        info = check.updated.get(pid)
        if info is None:
            info = check.updated[pid] = ProducerAppendInfo(pid, self.producers.get(pid), origin)
        if attributes & CONTROL_FLAG_MASK:
            # no marker: a control batch the cleaner emptied (its whole transaction went), or another type
            if marker is not None:
                is_abort, coordinator_epoch, timestamp = marker
                done = info.append_end_txn_marker(is_abort, coordinator_epoch, epoch, base, timestamp)
                if done is not None:
                    check.completed.append(done)
        else:
            last_seq = increment_sequence(base_seq, delta)
            info.append_data_batch(
                epoch, base_seq, last_seq, max_ts, base, base + delta, bool(attributes & TRANSACTIONAL_FLAG_MASK)
            )

    # --- transactions ------------------------------------------------------------------------

    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest transaction whose marker is not in the log."""
        firsts = [e.current_txn_first_offset for e in self.producers.values() if e.current_txn_first_offset is not None]
        return min(firsts) if firsts else None

    # --- expiry, snapshots and loading -------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        # a producer inside a transaction is kept until its transaction ends
        return (
            entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle ``producer.id.expiration.ms``; returns their ids."""
        gone = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in gone:
            del self.producers[pid]
        return gone

    def take_snapshot(self) -> str:
        """Write the state as ``<map_end_offset>.snapshot``; returns its path."""
        path = producer_snapshot.write(self.dir, self.map_end_offset, self.producers.values())
        self.last_snapshot_offset = self.map_end_offset
        return path

    def on_roll(self, log_end_offset: int) -> None:
        """A new segment starts at the log end: snapshot the state there (Kafka does, so
        that recovery replays at most the active segment)."""
        self.map_end_offset = log_end_offset
        self.take_snapshot()

    on_close = on_roll

    def delete_snapshots_before(self, offset: int) -> None:
        """Snapshots below the log start offset describe deleted data (retention)."""
        for found in producer_snapshot.snapshot_offsets(self.dir):
            if found < offset:
                fileio.unlink(os.path.join(self.dir, offset_file_name(found, SNAPSHOT_SUFFIX)))

    def load_log(
        self,
        segments: Sequence[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        now_ms: int,
        *,
        clean_shutdown: bool = False,
        rebuild_txn_index: bool = False,
        snapshot_offsets: list[int] | None = None,
    ) -> None:
        """The state of a log being opened (or truncated): ``load``, except that after a
        clean shutdown that left no snapshot (a dir written before producer state was
        kept) the log holds no producer worth a scan, as Kafka assumes. With
        ``rebuild_txn_index`` (after a crash) the ABORT markers the replay met are
        indexed again: a crash may have come between a marker and its entry, which is
        always after the last snapshot (one is taken at every roll). ``snapshot_offsets``:
        the snapshots in the dir, when the caller has just listed it (else listed here)."""
        if snapshot_offsets is None:
            snapshot_offsets = producer_snapshot.snapshot_offsets(self.dir)
        if clean_shutdown and not snapshot_offsets and not self.read_only:
            self.producers.clear()
            self.map_end_offset = log_end_offset
            with self._unstable_lock:
                self._unstable = (None, ())
            self.replayed_from, self.replayed_aborts = log_end_offset, []
            return
        start, aborted = self.load(segments, log_start_offset, log_end_offset, now_ms, snapshot_offsets)
        if rebuild_txn_index and not self.read_only:
            _reindex_aborts(segments, start, aborted)

    def load(
        self,
        segments: Sequence[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        now_ms: int,
        snapshot_offsets: list[int] | None = None,
    ) -> tuple[int, list[AbortedTxn]]:
        """Kafka's ``truncateAndReload`` + ``rebuildProducerState``: drop snapshots outside
        (log start, log end], load the latest one that reads (a corrupt one is deleted and
        the one before it tried), then replay the batch headers from its offset to the log end.
        Returns where the replay started and the transactions its ABORT markers ended,
        as their ``.txnindex`` entries (kept as ``replayed_from`` and ``replayed_aborts``).
        The transactions the replay saw decided are unreplicated until the owner says where
        its high watermark is (``on_high_watermark_updated``).

        Read-only, no file is deleted: snapshots outside the range are passed over, and so
        is one that is corrupt or that its owner deleted since it was listed."""
        self.producers.clear()
        self.map_end_offset = log_start_offset
        self.last_snapshot_offset = None
        with self._unstable_lock:
            self._unstable = (None, ())
        if snapshot_offsets is None:
            snapshot_offsets = producer_snapshot.snapshot_offsets(self.dir)
        for offset in reversed(snapshot_offsets):
            path = os.path.join(self.dir, offset_file_name(offset, SNAPSHOT_SUFFIX))
            if offset > log_end_offset or offset <= log_start_offset:
                if not self.read_only:
                    fileio.unlink(path)
            elif self.last_snapshot_offset is None:
                try:
                    entries = producer_snapshot.read(path)
                except CorruptSnapshotError:
                    if not self.read_only:
                        fileio.unlink(path)
                    continue
                except KafkaStorageError as e:
                    if not self.read_only or getattr(e, "errno", None) != errno.ENOENT:
                        raise
                    continue  # its owner deleted it since the listing: an older one will do
                self.producers = {e.producer_id: e for e in entries if not self.is_expired(e, now_ms)}
                self.map_end_offset = self.last_snapshot_offset = offset
        start = self.map_end_offset
        aborted = self._replay(segments, log_end_offset)
        with self._unstable_lock:  # (the snapshot's open transactions too, when the replay began or ended none)
            self._unstable = (self.first_undecided_offset, self._unstable[1])
        self.replayed_from, self.replayed_aborts = start, aborted
        return start, aborted

    def _replay(self, segments: Sequence[LogSegment], log_end_offset: int) -> list[AbortedTxn]:
        start = self.map_end_offset
        if start >= log_end_offset:
            return []  # the snapshot holds the whole log (a clean shutdown): no segment is read
        buffer = bytearray(_READ_BUFFER)
        check = ProducerAppendCheck()
        aborted: list[AbortedTxn] = []

        def visit(header: tuple, marker_batch: RecordBatch | None) -> None:
            if header[9] >= 0 and header[0] >= start and header[0] < log_end_offset:
                marker = None if marker_batch is None else _marker(marker_batch)
                ended = len(check.completed)
                self._append(check, header, marker, AppendOrigin.REPLICATION)
                if len(check.completed) > ended and check.completed[-1].is_aborted:
                    aborted.append(self._aborted_entry(check, check.completed[-1]))

        for i, segment in enumerate(segments):
            following = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if following is not None and following <= start:
                continue  # wholly before the snapshot
            producer_batches(segment, _read, buffer, visit)
        self.update(check, max(start, log_end_offset))
        return aborted

    def _aborted_entry(self, check: ProducerAppendCheck, txn: CompletedTxn) -> AbortedTxn:
        """The ``.txnindex`` entry of an abort the replay met, with the LSO as Kafka's
        recovery records it (``lastStableOffset(completedTxn)``, the state as of the
        marker): the first offset of the earliest transaction of another producer still
        open then, else past the marker (``on_append``'s rule, on the replay's state)."""
        open_firsts = [info.entry.current_txn_first_offset for info in check.updated.values()]
        open_firsts += [e.current_txn_first_offset for pid, e in self.producers.items() if pid not in check.updated]
        undecided = min((first for first in open_firsts if first is not None), default=None)
        lso = txn.last_offset + 1 if undecided is None else undecided
        return AbortedTxn(txn.first_offset, txn.last_offset, txn.producer_id, lso)


def aborted_txns_rebuilt(
    dir: str,
    segments: Sequence[LogSegment],
    segment: LogSegment,
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int,
    producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
) -> list[AbortedTxn]:
    """The ``.txnindex`` entries of ``segment`` (one of ``segments``) made again from its
    ABORT markers, with the producer state as of its start: the latest snapshot at or
    before its base offset and the batch headers after it, as Kafka's recovery of a
    segment rebuilds its index (``LogLoader.recoverSegment``). No file is touched."""
    i = next(k for k, s in enumerate(segments) if s is segment)
    end = segments[i + 1].base_offset if i + 1 < len(segments) else log_end_offset
    state = ProducerStateManager(dir, producer_id_expiration_ms=producer_id_expiration_ms, read_only=True)
    before = [o for o in producer_snapshot.snapshot_offsets(dir) if o <= segment.base_offset]
    _, aborted = state.load(segments[: i + 1], log_start_offset, end, now_ms, before)
    return [t for t in aborted if t.last_offset >= segment.base_offset]


def _reindex_aborts(segments: Sequence[LogSegment], start: int, aborted: list[AbortedTxn]) -> None:
    """Write the ``.txnindex`` of the segments holding offsets from ``start`` on again: their
    entries from before ``start`` kept, the ABORT markers found from ``start`` on added."""
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if end is not None and end <= start:
            continue
        try:
            kept = [e for e in segment.txn_index.entries() if e.last_offset < start]
        except (KafkaStorageError, CorruptIndexError) as e:  # not whole: made again below
            kept = []
            log.warning("%s; writing it again from the markers", e)
        first = max(start, segment.base_offset)
        found = [t for t in aborted if t.last_offset >= first and (end is None or t.last_offset < end)]
        segment.txn_index.write(kept + found)


def _read(segment: LogSegment, buffer: bytearray, position: int, size: int) -> int:
    return segment.handle.readinto(memoryview(buffer)[:size], position)


def _marker(batch: RecordBatch) -> tuple[bool, int, int] | None:
    """(is abort, coordinator epoch, timestamp) of a control batch's transaction marker;
    None for an emptied batch or another control type."""
    records = batch.records()
    if not records:
        return None
    value = parse_control_record(records[0], batch.position)
    if not isinstance(value, EndTransactionMarker):
        return None
    # the marker is the batch's one record: its timestamp is the batch's max (Kafka reads the record's)
    return value.type == ControlRecordType.ABORT, value.coordinator_epoch, batch.max_timestamp
