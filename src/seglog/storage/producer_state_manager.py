"""A partition's idempotence state: Kafka's ProducerStateManager.

Holds a ``ProducerStateEntry`` per producer id (``producer_entry.py``), checks
each append's batches against it, takes it over once the append is written,
writes it as ``<offset>.snapshot`` files (``producer_snapshot.py``) and, on
start-up, loads the latest snapshot and replays the log's batch headers after
it (the same header walk the cleaner uses, ``producer_state.producer_batches``).

How the broker wires it into a leader's append, under the partition's lock, as
Kafka's ``UnifiedLog.append`` does::

    check = manager.analyze(batches, AppendOrigin.CLIENT)   # after offsets are assigned
    if check.duplicate is not None:     # acknowledge with check.duplicate's offsets, write nothing
        ...
    log.append_batches(...)            # raises: the state is unchanged
    manager.update(check, log.log_end_offset)
    # and manager.take_snapshot() when the log rolls and at close;
    # manager.remove_expired(now) every producer.id.expiration.check.interval.ms

``map_end_offset`` is the offset up to which the state holds the log; a snapshot
is named after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import CorruptSnapshotError, InvalidConfigurationError
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

_READ_BUFFER = 256 * 1024


@dataclass
class ProducerAppendCheck:
    """What ``analyze`` found in one append: the producers' new state, the transactions
    its markers ended, or the earlier append a duplicate batch repeats."""

    updated: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None  # the kept batch a duplicate repeats: answer with its offsets


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

    def update(self, check: ProducerAppendCheck, log_end_offset: int) -> None:
        """Take over an append's state once its batches are in the log."""
        for pid, info in check.updated.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = info.entry
            else:
                current.update(info.entry)
        self.map_end_offset = log_end_offset

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

    def load(self, segments: Sequence[LogSegment], log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Kafka's ``truncateAndReload`` + ``rebuildProducerState``: drop snapshots outside
        (log start, log end], load the latest one that reads (a corrupt one is deleted and
        the one before it tried), then replay the batch headers from its offset to the log end."""
        self.producers.clear()
        self.map_end_offset = log_start_offset
        self.last_snapshot_offset = None
        for offset in reversed(producer_snapshot.snapshot_offsets(self.dir)):
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
        self._replay(segments, log_end_offset)

    def _replay(self, segments: Sequence[LogSegment], log_end_offset: int) -> None:
        start = self.map_end_offset
        buffer = bytearray(_READ_BUFFER)
        check = ProducerAppendCheck()

        def visit(header: tuple, marker_batch: RecordBatch | None) -> None:
            if header[9] >= 0 and header[0] >= start and header[0] < log_end_offset:
                marker = None if marker_batch is None else _marker(marker_batch)
                self._append(check, header, marker, AppendOrigin.REPLICATION)

        for i, segment in enumerate(segments):
            following = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if following is not None and following <= start:
                continue  # wholly before the snapshot
            producer_batches(segment, _read, buffer, visit)
        self.update(check, max(start, log_end_offset))


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
