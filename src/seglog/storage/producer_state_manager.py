"""A partition's idempotence state: Kafka's ProducerStateManager.

Holds a ``ProducerStateEntry`` per producer id (``producer_entry.py``), checks
each append's batches against it, takes it over once the append is written,
writes it as ``<offset>.snapshot`` files (``producer_snapshot.py``) and, on
start-up, loads the latest snapshot and replays the log's batch headers after
it (the same header walk the cleaner uses, ``producer_state.producer_batches``).

``PartitionLog`` calls it under the partition's lock, as Kafka's ``UnifiedLog`` does:
``analyze_append`` once a leader's batches have their offsets (a duplicate is
acknowledged with ``check.duplicate``'s offsets and nothing is written; a refused batch
raises and the state is unchanged), ``on_append`` once they are written (the state
taken over, an ABORT marker's entry added to its segment's ``.txnindex``), ``on_roll``
and ``on_close`` (a snapshot), ``load_log`` when the log opens or is truncated; the log
manager calls ``remove_expired`` every producer.id.expiration.check.interval.ms.

``map_end_offset`` is the offset up to which the state holds the log; a snapshot
is named after it.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import CorruptIndexError, CorruptSnapshotError, InvalidConfigurationError, KafkaStorageError
from ..records import RecordBatch
from ..records.control import ControlRecordType, EndTransactionMarker, parse_control_record
from ..records.layout import CONTROL_FLAG_MASK, HEADER, TRANSACTIONAL_FLAG_MASK
from . import fileio, producer_snapshot
from .naming import SNAPSHOT_SUFFIX, offset_file_name
from .producer_entry import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    increment_sequence,
)
from .producer_state import PRODUCER_ID_EXPIRATION_MS, producer_batches
from .segment import LogSegment
from .txn_index import AbortedTxn, append_txn_index, read_txn_index, truncate_txn_index, write_txn_index

_READ_BUFFER = 256 * 1024
_V2 = 2
_MAGIC_AT = 16  # a batch's magic byte: legacy batches carry no producer
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43  # in a v2 batch header


@dataclass
class ProducerAppendCheck:
    """What ``analyze`` found in one append: the producers' new state, the transactions
    its markers ended, or the earlier append a duplicate batch repeats."""

    updated: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None  # the kept batch a duplicate repeats: answer with its offsets


_NO_PRODUCERS = ProducerAppendCheck()
log = logging.getLogger(__name__)


class ProducerStateManager:
    def __init__(self, dir: str, *, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        if producer_id_expiration_ms < 1:
            raise InvalidConfigurationError(
                f"producer.id.expiration.ms must be at least 1, not {producer_id_expiration_ms}", file=dir
            )
        self.dir = dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None
        # first_undecided_offset as of the last append: readers take it without the log's lock
        self.first_unstable_offset: int | None = None

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
            if origin is AppendOrigin.CLIENT and not header[5] & CONTROL_FLAG_MASK:
                entry = self.producers.get(pid)
                last_seq = increment_sequence(header[11], header[6])
                kept = None if entry is None else entry.find_duplicate(header[10], header[11], last_seq)
                if kept is not None:
                    check.duplicate = kept
                    return check
            self._append(check, header, _marker(batch) if header[5] & CONTROL_FLAG_MASK else None, origin)
        return check

    def analyze_append(
        self, buffer: bytearray | memoryview | mmap.mmap, spans: Sequence[Sequence[int]], origin: AppendOrigin | str
    ) -> ProducerAppendCheck:
        """``analyze`` of the batches of an append's buffer, each span starting (position,
        size, ...); only v2 batches with a producer id are looked at. ``origin`` may be
        given by its value ("client", ...)."""
        # most appends carry no producer id: nothing made for them (this runs on every append)
        if len(spans) == 1:  # (a producer's usual append: one batch, looked at without a loop)
            at = spans[0][0]
            if buffer[at + _MAGIC_AT] != _V2 or _PRODUCER_ID.unpack_from(buffer, at + _PRODUCER_ID_AT)[0] < 0:
                return _NO_PRODUCERS
        batches = [
            (at, size)
            for at, size, *_ in spans
            if buffer[at + _MAGIC_AT] == _V2 and _PRODUCER_ID.unpack_from(buffer, at + _PRODUCER_ID_AT)[0] >= 0
        ]
        if not batches:
            return _NO_PRODUCERS  # one shared empty check, which nothing changes
        view = memoryview(buffer)
        return self.analyze([RecordBatch(view[at : at + size], at) for at, size in batches], AppendOrigin(origin))

    def on_append(self, check: ProducerAppendCheck, log_end_offset: int, segment: LogSegment) -> None:
        """The append ``check`` analysed is in ``segment``: take its state over, and index
        the transactions its ABORT markers ended (Kafka's ``updateTxnIndex``, with the LSO
        once the transaction is done: the next undecided transaction's start, else past
        the marker)."""
        if check is _NO_PRODUCERS:
            self.map_end_offset = log_end_offset
            return
        self.update(check, log_end_offset)
        for txn in check.completed:
            if txn.is_aborted:
                undecided = self.first_undecided_offset
                lso = txn.last_offset + 1 if undecided is None else undecided
                append_txn_index(segment.log_path, AbortedTxn(txn.first_offset, txn.last_offset, txn.producer_id, lso))

    def update(self, check: ProducerAppendCheck, log_end_offset: int) -> None:
        """Take over an append's state once its batches are in the log."""
        for pid, info in check.updated.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = info.entry
            else:
                current.update(info.entry)
        self.map_end_offset = log_end_offset
        if check.completed or any(info.started_transactions for info in check.updated.values()):
            self.first_unstable_offset = self.first_undecided_offset  # (a walk of every producer)

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
        if clean_shutdown and not snapshot_offsets:
            self.producers.clear()
            self.map_end_offset = log_end_offset
            self.first_unstable_offset = None
            return
        start, aborted = self.load(segments, log_start_offset, log_end_offset, now_ms, snapshot_offsets)
        if rebuild_txn_index:
            _reindex_aborts(segments, start, aborted)

    @staticmethod
    def truncate_txn_index(segment: LogSegment, offset: int) -> None:
        truncate_txn_index(segment.log_path, offset)

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
        as their ``.txnindex`` entries."""
        self.producers.clear()
        self.map_end_offset = log_start_offset
        self.last_snapshot_offset = None
        if snapshot_offsets is None:
            snapshot_offsets = producer_snapshot.snapshot_offsets(self.dir)
        for offset in reversed(snapshot_offsets):
            path = os.path.join(self.dir, offset_file_name(offset, SNAPSHOT_SUFFIX))
            if offset > log_end_offset or offset <= log_start_offset:
                fileio.unlink(path)
            elif self.last_snapshot_offset is None:
                try:
                    entries = producer_snapshot.read(path)
                except CorruptSnapshotError:
                    fileio.unlink(path)
                    continue
                self.producers = {e.producer_id: e for e in entries if not self.is_expired(e, now_ms)}
                self.map_end_offset = self.last_snapshot_offset = offset
        start = self.map_end_offset
        aborted = self._replay(segments, log_end_offset)
        self.first_unstable_offset = self.first_undecided_offset
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


def _reindex_aborts(segments: Sequence[LogSegment], start: int, aborted: list[AbortedTxn]) -> None:
    """Write the ``.txnindex`` of the segments holding offsets from ``start`` on again: their
    entries from before ``start`` kept, the ABORT markers found from ``start`` on added."""
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if end is not None and end <= start:
            continue
        try:
            kept = [e for e in read_txn_index(segment.txn_index_path) if e.last_offset < start]
        except (KafkaStorageError, CorruptIndexError) as e:  # missing, or not whole: made again below
            kept = []
            if getattr(e, "errno", None) != errno.ENOENT:
                log.warning("%s; writing it again from the markers", e)
        first = max(start, segment.base_offset)
        found = [t for t in aborted if t.last_offset >= first and (end is None or t.last_offset < end)]
        write_txn_index(segment.log_path, kept + found)


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
