"""Log compaction: one cleaning round of one log (Kafka's ``Cleaner``).

A compacted log is a *clean* section (cleaned before, up to the first dirty
offset kept in ``cleaner-offset-checkpoint``) followed by a *dirty* one. The
dirty section ends at the first uncleanable offset: never the active segment,
never past the last stable offset (an undecided transaction) or the high
watermark, never a segment newer than ``min.compaction.lag.ms``.

One round:

1. Learn from the batch headers what a Kafka broker's producer state would
   know (producer_state.py): each producer's last batch, the aborted
   transactions, the first unstable offset.
2. Build the key -> latest offset map (``OffsetMap``) over the dirty section,
   marking as it goes which dirty records lose (``OffsetMarks``). When the map
   is full the round stops there: the map's latest offset + 1 is where the
   next round starts, so a small ``log.cleaner.dedupe.buffer.size`` cleans in
   several passes, each progressing by at least one record.
3. Rewrite every segment below that point, in groups that fit one segment, into
   a ``.cleaned`` file: a record survives if no later record has its key, and
   a tombstone (null value) also until its batch's delete horizon has passed.
   Offsets never change. Batches wholly kept are copied byte for byte; others
   are rebuilt with their producer id, epoch and sequence, timestamps,
   compression, leader epoch and last offset delta, and, as Kafka's
   buildRetainedRecordsInto, the base timestamp of their first kept record (a
   LogAppendTime batch's: the append time) with the deltas relative to it. The first cleaning that
   keeps a tombstone (or a marker of an empty transaction) stamps its batch
   with a delete horizon, ``now + delete.retention.ms``, in the base timestamp
   (attribute bit 6), as Kafka does. Records of aborted transactions go; a
   transaction marker stays until its transaction's batches are gone and its
   horizon has passed. The last batch of each live producer stays, as a bare
   header if all its records go, so that sequence numbers survive; so does the
   last batch of the round and of each group (a group's last offset is what a
   crash recovery uses to know which old segments a ``.swap`` replaces).
4. Swap each cleaned segment in as soon as it is written and flushed
   (``PartitionLog.replace_segments``: ``.cleaned`` -> ``.swap`` -> old files
   ``.deleted`` -> ``.swap`` removed). A crash leaves each group as it was or
   cleaned; a round of one group is thus all or nothing, and a round of
   several may stop between groups, having lost no latest value either way.

The map costs 24 bytes a key whatever the key's size, the marks one bit an
offset of the dirty section, both within the dedupe buffer (offset_map.py;
a map grows only while the old one and the new fit it together); I/O buffers
grow only to the largest batch. So a cleaning's memory is the dedupe buffer
plus a constant, whatever the log's size (an lz4 batch's records decompressed,
and those kept, take two more buffers as large as the largest batch's records,
let go after the round). The loops over records are C (storage/_compact.c):
the map is built a batch, or a run of plain batches, per call, and a batch is
filtered by copying the byte ranges of the records it keeps and rewriting its
header. lz4 batches as the Java client writes them are decompressed and
compressed again there too (records/_lz4.h, the Java client's bytes); other
compressed batches go through Python's codecs.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import CorruptIndexError, CorruptRecordError, KafkaStorageError, SeglogError
from ..records import (
    NO_TIMESTAMP,
    AnyBatch,
    BatchIterator,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message,
    crc32c,
)
from ..records.batches import HEADER_PEEK, peek_frame
from ..records.compression import compress
from ..records.layout import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from . import _compact, fileio
from .log import PartitionLog
from .naming import CLEANED_SUFFIX
from .offset_map import ENTRY_SIZE, OffsetMap, OffsetMarks
from .producer_state import ABORT, COMMIT, LastBatch, ProducerState, control_type, producer_state
from .segment import LogSegment
from .throttler import Throttler
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
_TARGET_LOAD = 0.4
_SYNC_EVERY = 8 << 20  # bytes written to a cleaned segment between two background fsyncs
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_WALK_END, _WALK_PYTHON, _WALK_FLUSH = 0, 1, 2  # where a C walk over batches stopped
_ATTR_KEEP_IN_EMPTY = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK


class LogCleaningAbortedError(SeglogError):
    """A cleaning stopped before its swap: the log was truncated, closed or deleted,
    or the cleaner is shutting down. Nothing of the cleaning is left."""


@dataclass
class LogToClean:
    """A log and the part of it a round may clean (Kafka's LogToClean)."""

    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass
class CleanerStats:
    """What one cleaning round did (Kafka's CleanerStats)."""

    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int = -1  # the first offset not cleaned: the next round starts here
    start_ms: int = 0  # the log's clock when the round began
    bytes_read: int = 0  # segments rewritten
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    invalid_records: int = 0  # keyless records, which a compacted log drops
    map_bytes_read: int = 0
    map_records_read: int = 0
    segments_cleaned: int = 0
    segments_swapped: int = 0
    buffer_utilization: float = 0.0
    map_seconds: float = 0.0
    seconds: float = 0.0
    throttled_seconds: float = 0.0

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_written


class _TransactionTracker:
    """Which transactions the cleaner is inside as it walks the log (Kafka's
    CleanedTransactionMetadata), from the aborted transactions found up front."""

    def __init__(self, aborted: Sequence[tuple[int, int, int]], start_offset: int) -> None:
        # only transactions still open at ``start_offset`` or later matter
        self._pending = [a for a in aborted if a[1] >= start_offset]
        self._next = 0
        self._aborted: dict[int, bool] = {}  # pid -> a batch of the aborted transaction was seen
        self._committed: set[int] = set()
        # the ABORT markers kept because a batch of their transaction was seen: Kafka's
        # cleaner indexes them in the cleaned segment's .txnindex (CleanedTransactionMetadata)
        self.kept_aborts: list[int] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next][0] <= offset:
            self._aborted.setdefault(pending[self._next][2], False)
            self._next += 1

    def on_control_batch(self, batch: RecordBatch) -> bool:
        """Whether the marker may go (once its horizon passes too)."""
        self._consume_up_to(batch.last_offset)
        kind = control_type(batch)
        if kind is None:
            return True  # an empty control batch was cleaned already
        pid = batch.producer_id
        if kind == ABORT:
            seen = self._aborted.pop(pid, None)
            if seen:
                self.kept_aborts.append(batch.last_offset)
            return not seen  # kept while a batch of the transaction remains
        if kind == COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False  # leader changes, snapshot markers: kept

    def on_data_batch(self, batch: AnyBatch) -> bool:
        """Whether the batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        pid = batch.producer_id
        if pid in self._aborted:
            self._aborted[pid] = True
            return True
        self._committed.add(pid)
        return False


def _empty_batch(batch: RecordBatch) -> bytearray:
    """A batch header with no records that keeps the batch's offsets, producer
    fields and max timestamp (Kafka's DefaultRecordBatch.writeEmptyHeader)."""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        batch.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        batch.partition_leader_epoch,
        MAGIC,
        0,
        batch.attributes & _ATTR_KEEP_IN_EMPTY,
        batch.last_offset_delta,
        NO_TIMESTAMP,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        0,
    )
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return out


def _sealed(filtered: bytearray, codec: int) -> bytearray:
    """A batch from filter_batch's output (header + uncompressed records, CRC left zero):
    its records compressed with the batch's codec, its length and CRC set."""
    if codec:
        body = compress(codec, memoryview(filtered)[HEADER_SIZE:])
        filtered = filtered[:HEADER_SIZE]
        filtered += body
        _I32.pack_into(filtered, LENGTH_OFFSET, len(filtered) - LOG_OVERHEAD)
    _U32.pack_into(filtered, CRC_OFFSET, crc32c(memoryview(filtered)[CRC_START:]))
    return filtered


class _Chunk:
    """Bytes of a segment read from byte ``origin``. Whoever walks them sets ``used`` to
    the end of the whole batches taken (0: the first batch is larger than the chunk)."""

    __slots__ = ("origin", "used", "view")

    def __init__(self, view: memoryview, origin: int) -> None:
        self.view = view
        self.origin = origin
        self.used = 0


def _legacy_wrapper(batch: LegacyBatch, kept: list[Record]) -> bytes:
    """A compressed legacy wrapper holding only ``kept``, offsets unchanged: inner
    offsets absolute in v0, relative to the first kept one in v1."""
    magic, first = batch.magic, kept[0].offset

    def ts(r: Record) -> int:
        return NO_TIMESTAMP if r.timestamp is None else r.timestamp

    inner = b"".join(
        build_message(r.offset - first if magic == 1 else r.offset, magic, 0, ts(r), r.key, r.value) for r in kept
    )
    append_time = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    wrapper_ts = batch.timestamp if append_time else max(ts(r) for r in kept)
    # a magic 1 message's LogAppendTime is its attribute bit 3, as v2's
    attributes = int(batch.compression) | (TIMESTAMP_TYPE_MASK if append_time else 0)
    return build_message(kept[-1].offset, magic, attributes, wrapper_ts, None, compress(batch.compression, inner))


class _BackgroundSync:
    """fsyncs a file in another thread while the cleaner goes on writing it: fsync
    releases the GIL, so the disk flushes what is written while the next records are
    filtered, and the fsync before the swap has little left to do."""

    def __init__(self, handle: fileio.FileHandle) -> None:
        self.handle = handle
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def idle(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def start(self) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, name="seglog-cleaner-fsync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.handle.fsync()
        except BaseException as e:
            self._error = e

    def wait(self, raising: bool = True) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None and raising:
            raise error


class _Output:
    """A cleaned segment being written: batches gather in the first ``length`` bytes of a
    buffer (C writes there too), which go to the segment once they are
    ``io_buffer_size`` or more; the segment is fsynced in the background every
    ``_SYNC_EVERY`` bytes. The buffer is kept from flush to flush: one allocation a
    group, not a new buffer grown anew (reallocated and copied) for each write."""

    def __init__(self, cleaner: Cleaner, dest: LogSegment, sync: _BackgroundSync, stats: CleanerStats) -> None:
        self.cleaner, self.dest, self.sync, self.stats = cleaner, dest, sync, stats
        self.buffer = bytearray()
        self.length = 0
        self.entries: list[tuple[int, int, int, int]] = []  # (position in buffer, size, last offset, max timestamp)
        self.unsynced = 0

    def add(self, batch: bytes | bytearray | memoryview, last_offset: int, max_ts: int) -> None:
        start, size = self.length, len(batch)
        self.entries.append((start, size, last_offset, max_ts))
        self.buffer[start : start + size] = batch  # (grows the buffer when it ends before start + size)
        self.length = start + size
        if self.length >= self.cleaner.io_buffer_size:
            self.flush()

    def flush(self) -> None:
        if not self.length:
            return
        self.cleaner._write(self.dest, memoryview(self.buffer)[: self.length], self.entries, self.stats)
        self.unsynced += self.length
        self.length, self.entries = 0, []
        if self.unsynced >= _SYNC_EVERY and self.sync.idle:
            self.sync.start()  # the disk works on what is written while we go on
            self.unsynced = 0


def _last_modified_ms(segment: LogSegment) -> int:
    try:
        return segment.last_modified_ms
    except OSError as e:
        raise KafkaStorageError(f"stat failed: {e.strerror}", file=segment.log_path) from None


class Cleaner:
    """Cleans logs, one round at a time. One per cleaner thread: it owns a dedupe
    budget of ``memory`` bytes (``log.cleaner.dedupe.buffer.size`` / threads) and
    its I/O buffers. ``check_done(log)`` is called between chunks and raises
    ``LogCleaningAbortedError`` to stop a cleaning."""

    def __init__(
        self,
        id: int = 0,
        *,
        memory: int = 128 * 1024 * 1024,
        load_factor: float = 0.9,
        io_buffer_size: int = 256 * 1024,
        throttler: Throttler | None = None,
        check_done: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        if memory < 2 * ENTRY_SIZE:
            raise ValueError(f"dedupe buffer of {memory} bytes cannot hold a key")
        self.id = id
        self.memory = memory
        self.load_factor = load_factor
        self.io_buffer_size = max(io_buffer_size, 4096)
        self.throttler = throttler or Throttler(math.inf)
        self._check_done = check_done or (lambda _log: None)
        self._read_buffer = bytearray(self.io_buffer_size)
        # an lz4 batch's records decompressed, and those kept before they are compressed again
        self._section, self._rebuilt = bytearray(), bytearray()
        self._map: OffsetMap | None = None
        self._marks = OffsetMarks(0, 0)
        self._map_budget = memory

    # --- the round ------------------------------------------------------------------------

    def clean(self, cleanable: LogToClean, now: int) -> tuple[int, CleanerStats]:
        """One round; returns the first offset not cleaned (the new checkpoint) and stats."""
        segments = cleanable.log.segments
        try:
            return self._clean(cleanable, segments, now)
        except (KafkaStorageError, CorruptRecordError) as e:
            # a truncation (a follower's) deletes segments under the cleaner: not a fault of the log
            live = cleanable.log.segments
            if cleanable.log.closed or any(all(s is not t for t in live) for s in segments[:-1]):
                raise LogCleaningAbortedError(f"{cleanable.log.name} changed under the cleaner: {e}") from e
            raise
        finally:
            self._section, self._rebuilt = bytearray(), bytearray()  # grown to this round's largest batch

    def _clean(self, cleanable: LogToClean, segments: tuple[LogSegment, ...], now: int) -> tuple[int, CleanerStats]:
        log_ = cleanable.log
        config = log_.config
        started = time.monotonic()
        throttled_before = self.throttler.slept
        stats = CleanerStats(log_.topic, log_.partition, cleanable.first_dirty_offset, start_ms=now)
        scan = producer_state(segments, functools.partial(self._read, log_), self._read_buffer)

        first_dirty = cleanable.first_dirty_offset
        end = cleanable.first_uncleanable_offset
        if scan.first_unstable_offset is not None:
            # not past an undecided transaction: the segment holding it is uncleanable
            end = min(end, _floor_base(segments, scan.first_unstable_offset))
        end = max(end, first_dirty)

        clean_section = [s for s in segments if s.base_offset < first_dirty]
        legacy_horizon = _last_modified_ms(clean_section[-1]) - config.delete_retention_ms if clean_section else 0

        # a bit an offset for the dirty section, an eighth of the budget at most (offsets past
        # them are looked up in the map); the map has the rest
        marks = OffsetMarks(first_dirty, min(end - first_dirty, self.memory))
        if self.memory - marks.memory < 2 * ENTRY_SIZE:
            marks = OffsetMarks(first_dirty, 0)  # a buffer this small is all map
        self._marks, self._map_budget = marks, self.memory - marks.memory
        dirty_records = sum(scan.records[s.base_offset] for s in _overlapping(segments, first_dirty, end))
        omap = self._build_offset_map(log_, segments, first_dirty, end, self._offset_map(dirty_records), scan, stats)
        if omap.latest_offset < first_dirty - 1:
            omap.latest_offset = first_dirty - 1  # nothing dirty: re-clean the clean section
        end_offset = omap.latest_offset + 1
        stats.map_seconds = time.monotonic() - started
        stats.buffer_utilization = omap.utilization

        to_clean = [s for s in segments[:-1] if s.base_offset < end_offset]
        groups = self.group_segments(to_clean, config.segment_bytes, config.segment_index_bytes, end)
        tracker = _TransactionTracker(scan.aborted, groups[0][0].base_offset if groups else end_offset)
        active = scan.active_producers(now)
        for group in groups:
            self._clean_group(log_, group, omap, now, legacy_horizon, tracker, active, end, stats)
        stats.end_offset = end_offset
        stats.seconds = time.monotonic() - started
        stats.throttled_seconds = self.throttler.slept - throttled_before
        return end_offset, stats

    def _offset_map(self, records: int) -> OffsetMap:
        """The map for a round: room for the dirty section's records at 40% load (a key is
        then found at its first slot two times in three), within the budget. Where the
        budget has room for that map beside one a quarter of its size, it starts at a
        sixteenth and grows by four as keys come: a compacted log has fewer keys than
        records, and a map larger than its keys costs page faults and cache misses."""
        want = max(int((records + 1) / min(self.load_factor, _TARGET_LOAD) + 2), 1024) * ENTRY_SIZE
        if want + want // 4 <= self._map_budget:
            memory = max(want // 16 // ENTRY_SIZE, 1024) * ENTRY_SIZE
        else:
            memory = min(self._map_budget, want)
        if self._map is not None and self._map.memory == memory:
            self._map.clear()
        else:
            self._map = None  # free the old one first: only one map at a time
            self._map = OffsetMap(memory, self.load_factor)
        self._limit_load(self._map)
        return self._map

    def _grown_memory(self, omap: OffsetMap) -> int:
        """The memory of a map grown from ``omap`` (four times larger, or what the budget
        leaves beside it: both live while the keys move), or 0 if it cannot grow."""
        memory = min(4 * omap.memory, self._map_budget - omap.memory) // ENTRY_SIZE * ENTRY_SIZE
        return memory if memory >= 2 * omap.memory else 0

    def _limit_load(self, omap: OffsetMap) -> None:
        """A map that can grow takes keys up to 40% of its slots, then grows; one that
        cannot fills up to the load factor."""
        if self.load_factor > _TARGET_LOAD and self._grown_memory(omap):
            omap.limit = max(1, int(omap.slots * _TARGET_LOAD))
        else:
            omap.limit = omap.max_entries

    def _grow(self, omap: OffsetMap) -> OffsetMap | None:
        """Room for more keys than ``omap`` holds: a larger map holding its keys, or ``omap``
        itself filling up to the load factor once it cannot grow; None when it is full."""
        if omap.limit >= omap.max_entries:
            return None
        memory = self._grown_memory(omap)
        if not memory:
            omap.limit = omap.max_entries
            return omap
        bigger = OffsetMap(memory, self.load_factor, seed=omap.seed)
        bigger.absorb(omap)
        self._map = bigger
        self._limit_load(bigger)
        return bigger

    # --- reading segments -------------------------------------------------------------------

    def _read_chunks(self, log_: PartitionLog, segment: LogSegment, start: int = 0) -> Iterator[_Chunk]:
        """The segment's bytes from ``start``, in chunks of whole batches; each chunk is a
        view of the read buffer, valid until the next one is asked for."""
        size = segment.size
        position = start
        while position < size:
            buffer = self._read_buffer
            n = self._read(log_, segment, buffer, position, min(len(buffer), size - position))
            chunk = _Chunk(memoryview(buffer)[:n], position)
            yield chunk
            if chunk.used == 0:
                if n < HEADER_PEEK:
                    raise CorruptRecordError(
                        "partial batch at the end of a segment", file=segment.log_path, position=position
                    )
                need = LOG_OVERHEAD + peek_frame(buffer, 0, position)[1]
                if need <= n or position + need > size:
                    raise CorruptRecordError(
                        f"batch of {need} bytes does not fit the segment's {size - position} remaining bytes",
                        file=segment.log_path,
                        position=position,
                    )
                self._read_buffer = bytearray(need)  # a new buffer: views of the old one may live on
                continue
            position += chunk.used
        if len(self._read_buffer) > self.io_buffer_size:
            self._read_buffer = bytearray(self.io_buffer_size)
        # an lz4 batch's records decompressed, and those kept before they are compressed again
        self._section, self._rebuilt = bytearray(), bytearray()

    def _read(self, log_: PartitionLog, segment: LogSegment, buffer: bytearray, position: int, size: int) -> int:
        self._check_done(log_)
        n = segment.handle.readinto(memoryview(buffer)[:size], position)
        self.throttler.maybe_throttle(n)
        return n

    # --- the offset map ---------------------------------------------------------------------

    def _build_offset_map(
        self,
        log_: PartitionLog,
        segments: Sequence[LogSegment],
        start: int,
        end: int,
        omap: OffsetMap,
        scan: ProducerState,
        stats: CleanerStats,
    ) -> OffsetMap:
        """Map the keys of [start, end), growing the map up to the budget; stop early
        when it is full. Returns the map (a grown one is a new object). Plain data
        batches are mapped by runs in C; the others come back to ``_map_batch``."""
        dirty = _overlapping(segments, start, end)
        tracker = _TransactionTracker(scan.aborted, start)
        marks = self._marks
        for i, segment in enumerate(dirty):
            next_base = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = segment.offset_index.lookup(start)[1] if segment.base_offset < start else 0
            for chunk in self._read_chunks(log_, segment, position):
                view, origin, at, grown_at = chunk.view, chunk.origin, 0, -1
                while True:
                    # the batches C maps need no tracker: they are not transactional, and the
                    # tracker catches up on aborted transactions at the next batch it sees
                    at, needs_python, records, size = omap.put_batches(view, at, origin, start, marks, self._section)
                    stats.map_records_read += records
                    stats.map_bytes_read += size
                    batch = next(BatchIterator(view, at, origin=origin), None) if needs_python else None
                    if batch is None:
                        break
                    if at != grown_at and self._outgrows(batch, omap):
                        # C stopped for want of room: grow the map and let C map the batch (an lz4
                        # one is decompressed there, not by Python's codec); Python takes it if C
                        # stops at it again
                        grown, grown_at = self._grow(omap), at
                        if grown is not None:
                            omap = grown
                            continue
                    omap, full = self._map_batch(batch, omap, start, tracker, stats)
                    if full:
                        return omap  # full: latest_offset is the last record mapped
                    at += batch.size_in_bytes
                chunk.used = at
            omap.latest_offset = max(omap.latest_offset, next_base - 1)
        return omap

    @staticmethod
    def _outgrows(batch: AnyBatch, omap: OffsetMap) -> bool:
        """Whether a walk in C stopped at ``batch``, a plain data batch, only because its
        records may not fit the room left in the map."""
        plain = isinstance(batch, RecordBatch) and not batch.is_control and not batch.is_transactional
        return plain and batch.record_count > omap.room

    def _map_batch(
        self, batch: AnyBatch, omap: OffsetMap, start: int, tracker: _TransactionTracker, stats: CleanerStats
    ) -> tuple[OffsetMap, bool]:
        """Map one batch: a control, transactional, compressed or legacy one, or one that
        may fill the map. Returns the map (grown, maybe) and whether it is full."""
        stats.map_bytes_read += batch.size_in_bytes
        if batch.is_control:
            assert isinstance(batch, RecordBatch)
            tracker.on_control_batch(batch)
            stats.map_records_read += 1
            return omap, False
        marks = self._marks
        if isinstance(batch, LegacyBatch):
            records = batch.records()
            stats.map_records_read += len(records)

            def put(skip: int) -> int:
                full_at = omap.put_records(records[skip:], start, marks)
                return full_at + skip if full_at >= 0 else -1

        else:
            section = batch.records_section() if batch.attributes & COMPRESSION_CODEC_MASK else None
            stats.map_records_read += batch.record_count

            def put(skip: int) -> int:
                return omap.put_batch(batch.buffer, section, start, marks, skip, batch.position)

        if not tracker.on_data_batch(batch):
            full_at = put(0)
            while full_at >= 0:
                grown = self._grow(omap)
                if grown is None:
                    return omap, True
                omap = grown
                full_at = put(full_at)
        if batch.last_offset >= start:
            omap.latest_offset = max(omap.latest_offset, batch.last_offset)
        return omap, False

    # --- grouping and rewriting ------------------------------------------------------------------

    @staticmethod
    def group_segments(
        segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
    ) -> list[list[LogSegment]]:
        """Runs of consecutive segments whose logs, and each of whose indexes, fit one
        segment, and whose offsets fit 32 bits above the run's base (Kafka's
        groupSegmentsBySize)."""
        groups: list[list[LogSegment]] = []
        i = 0
        while i < len(segments):
            group = [segments[i]]
            size = segments[i].size
            index_size = segments[i].offset_index.size_in_bytes
            time_index_size = segments[i].time_index.size_in_bytes
            i += 1
            while i < len(segments):
                s = segments[i]
                last_offset = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
                if (
                    size + s.size > max_size
                    or index_size + s.offset_index.size_in_bytes > max_index_size
                    or time_index_size + s.time_index.size_in_bytes > max_index_size
                    or (s.size > 0 and last_offset - group[0].base_offset > _INT32_MAX)
                ):
                    break
                group.append(s)
                size += s.size
                index_size += s.offset_index.size_in_bytes
                time_index_size += s.time_index.size_in_bytes
                i += 1
            groups.append(group)
        return groups

    def _clean_group(
        self,
        log_: PartitionLog,
        group: list[LogSegment],
        omap: OffsetMap,
        now: int,
        legacy_horizon: int,
        tracker: _TransactionTracker,
        producers: dict[int, LastBatch],
        upper_bound: int,
        stats: CleanerStats,
    ) -> None:
        """Rewrite a group into one ``.cleaned`` segment and swap it in."""
        config = log_.config
        dest = LogSegment.create(
            log_.dir,
            group[0].base_offset,
            suffix=CLEANED_SUFFIX,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
        )
        swapped = False
        sync = _BackgroundSync(dest.handle)
        kept_aborts = len(tracker.kept_aborts)
        try:
            changed = False
            output = _Output(self, dest, sync, stats)
            marks, horizon = self._marks, now + config.delete_retention_ms
            for k, segment in enumerate(group):
                retain_legacy_deletes = _last_modified_ms(segment) > legacy_horizon
                size = segment.size
                closes_group = k == len(group) - 1
                group_end = size if closes_group else -1  # where the group's last batch ends
                for chunk in self._read_chunks(log_, segment):
                    view, origin, at = chunk.view, chunk.origin, 0
                    while True:
                        # plain data batches: filtered by runs in C, the others come back here
                        at, stop, read, written, invalid, rewritten, output.length = _compact.filter_batches(
                            view, at, origin, out=output.buffer, out_len=output.length, out_limit=self.io_buffer_size,
                            entries=output.entries, table=omap.table, k0=omap.k0, k1=omap.k1,
                            latest=omap.latest_offset, marks=marks.superseded, marks_first=marks.first,
                            marks_count=marks.count, now=now, horizon=horizon, upper_bound=upper_bound,
                            group_end=group_end, section=self._section, rebuilt=self._rebuilt,
                        )  # fmt: skip
                        stats.records_read += read
                        stats.records_written += written
                        stats.invalid_records += invalid
                        changed = changed or rewritten > 0
                        if stop == _WALK_FLUSH:
                            output.flush()
                            continue
                        batch = next(BatchIterator(view, at, origin=origin), None) if stop == _WALK_PYTHON else None
                        if batch is None:
                            break
                        batch.validate()
                        last_of_group = closes_group and batch.position + batch.size_in_bytes == size
                        result = self._clean_batch(
                            batch, omap, now, config.delete_retention_ms, retain_legacy_deletes, tracker, producers,
                            upper_bound, last_of_group, stats,
                        )  # fmt: skip
                        at += batch.size_in_bytes
                        if result is None:
                            changed = True
                            continue
                        kept, last_offset, max_ts = result
                        changed = changed or kept is not batch.buffer
                        output.add(kept, last_offset, max_ts)
                    chunk.used = at
                stats.bytes_read += size
                stats.segments_cleaned += 1
            output.flush()
            if not changed and len(group) == 1:
                return  # the segment is already clean: nothing to swap
            self._index_kept_aborts(log_, group, dest, tracker.kept_aborts[kept_aborts:])
            sync.wait()
            dest.on_become_inactive()
            dest.flush()
            # keep the group's mtime: retention of timestamp-less data and legacy tombstones go by it
            mtime = max(_last_modified_ms(s) for s in group) / 1000
            try:
                os.utime(dest.log_path, (mtime, mtime))
            except OSError as e:
                raise KafkaStorageError(f"utime failed: {e.strerror}", file=dest.log_path) from None
            if not log_.replace_segments(dest, group):
                raise LogCleaningAbortedError(f"{log_.name} changed under the cleaner", file=log_.dir)
            swapped = True
            stats.segments_swapped += len(group)
        finally:
            sync.wait(raising=False)
            # an I/O error inside the swap may leave ``dest`` in the log: a restart finishes it
            if not swapped and all(s is not dest for s in log_.segments):
                dest.delete()

    def _write(
        self, dest: LogSegment, out: memoryview, entries: list[tuple[int, int, int, int]], stats: CleanerStats
    ) -> None:
        dest.append(out, entries)
        stats.bytes_written += len(out)
        self.throttler.maybe_throttle(len(out))

    @staticmethod
    def _index_kept_aborts(log_: PartitionLog, group: list[LogSegment], dest: LogSegment, markers: list[int]) -> None:
        """The cleaned segment's ``.txnindex``: the entries of the group's old indexes whose
        ABORT markers stay because batches of their transactions were seen (Kafka's
        ``CleanedTransactionMetadata.onControlBatchRead`` appends the entry it read from
        them). Without them a read_committed fetch would take the aborted records kept
        (empty batches, or the records of a transaction whose marker is beyond this round)
        for committed ones."""
        if not markers:
            return
        entries: dict[int, AbortedTxn] = {}
        for k, segment in enumerate(group):
            try:
                found = segment.txn_index.entries()
            except CorruptIndexError:  # the log's search makes it again from the markers
                end = group[k + 1].base_offset if k + 1 < len(group) else _next_base(log_, segment)
                found = [
                    t
                    for t in log_.collect_aborted_transactions(segment.base_offset, end)
                    if segment.base_offset <= t.last_offset < end
                ]
            entries.update((t.last_offset, t) for t in found)
        dest.txn_index.write([entries[m] for m in markers if m in entries])

    def _clean_batch(
        self,
        batch: AnyBatch,
        omap: OffsetMap,
        now: int,
        delete_retention_ms: int,
        retain_legacy_deletes: bool,
        tracker: _TransactionTracker,
        producers: dict[int, LastBatch],
        upper_bound: int,
        last_of_group: bool,
        stats: CleanerStats,
    ) -> tuple[bytes | bytearray | memoryview, int, int] | None:
        """What of ``batch`` survives: (bytes, last offset, max timestamp), or None.
        Kafka's MemoryRecords.filterTo with the cleaner's RecordFilter."""
        if isinstance(batch, LegacyBatch):
            return self._clean_legacy(batch, omap, retain_legacy_deletes, stats)
        assert isinstance(batch, RecordBatch)
        pid = batch.producer_id
        control = batch.is_control
        if control:
            can_discard = tracker.on_control_batch(batch)
            horizon = batch.delete_horizon_ms
            discard_records = can_discard and batch.has_delete_horizon and horizon <= now
        else:
            can_discard = discard_records = tracker.on_data_batch(batch)
        producer = producers.get(pid) if pid >= 0 else None
        if producer is None:
            is_last_of_producer = False
        elif producer.data_offset is not None:
            is_last_of_producer = batch.last_offset == producer.data_offset
        else:
            is_last_of_producer = control and batch.producer_epoch == producer.epoch
        retain_empty = is_last_of_producer or batch.next_offset == upper_bound or last_of_group
        if discard_records:
            stats.records_read += batch.record_count
            return (_empty_batch(batch), batch.last_offset, batch.max_timestamp) if retain_empty else None
        if control:
            return self._clean_control(batch, can_discard, now + delete_retention_ms, retain_empty, stats)

        marks, codec = self._marks, batch.attributes & COMPRESSION_CODEC_MASK
        filtered, kept, invalid, max_ts = _compact.filter_batch(
            batch.buffer, batch.records_section() if codec else None, table=omap.table, k0=omap.k0, k1=omap.k1,
            latest=omap.latest_offset, marks=marks.superseded, marks_first=marks.first, marks_count=marks.count,
            now=now, horizon=now + delete_retention_ms, position=batch.position,
        )  # fmt: skip
        stats.records_read += batch.record_count
        stats.records_written += kept
        stats.invalid_records += invalid
        if filtered is not None:
            return _sealed(filtered, codec), batch.last_offset, max_ts
        if kept:
            return batch.buffer, batch.last_offset, batch.max_timestamp
        if retain_empty:
            return _empty_batch(batch), batch.last_offset, batch.max_timestamp
        return None

    @staticmethod
    def _clean_control(
        batch: RecordBatch, can_discard: bool, horizon_ms: int, retain_empty: bool, stats: CleanerStats
    ) -> tuple[bytes | bytearray | memoryview, int, int] | None:
        """A control batch whose marker stays: stamped with a delete horizon the first
        time it may go (its transaction's batches are gone)."""
        records = batch.records()
        stats.records_read += len(records)
        stats.records_written += len(records)
        if not records:
            return (_empty_batch(batch), batch.last_offset, batch.max_timestamp) if retain_empty else None
        if not can_discard or batch.has_delete_horizon:
            return batch.buffer, batch.last_offset, batch.max_timestamp
        append_time = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        built = build_batch(
            records,
            base_offset=batch.base_offset,
            compression=batch.compression,
            timestamp_type=batch.timestamp_type,
            log_append_time=batch.max_timestamp if append_time else None,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            transactional=batch.is_transactional,
            control=True,
            partition_leader_epoch=batch.partition_leader_epoch,
            keep_offsets=True,
            last_offset_delta=batch.last_offset_delta,
            delete_horizon_ms=horizon_ms,
        )
        return built, batch.last_offset, _I64.unpack_from(built, MAX_TIMESTAMP_OFFSET)[0]

    @staticmethod
    def _clean_legacy(
        batch: LegacyBatch, omap: OffsetMap, retain_deletes: bool, stats: CleanerStats
    ) -> tuple[bytes | bytearray | memoryview, int, int] | None:
        """A legacy message, or the messages of a compressed wrapper: tombstones go once
        the segment is older than the legacy delete horizon."""
        records = batch.records()
        stats.records_read += len(records)
        latest = omap.latest_offset
        found = omap.offsets_of(records, latest)
        kept = []
        for record, offset in zip(records, found, strict=True):
            if record.offset > latest:
                kept.append(record)
            elif record.key is None:
                stats.invalid_records += 1
            elif record.offset >= offset and (retain_deletes or record.value is not None):
                kept.append(record)
        stats.records_written += len(kept)
        if not kept:
            return None
        if len(kept) == len(records):
            return batch.buffer, batch.last_offset, batch.timestamp
        wrapper = _legacy_wrapper(batch, kept)
        return wrapper, kept[-1].offset, LegacyBatch(wrapper).timestamp


def _overlapping(segments: Sequence[LogSegment], start: int, end: int) -> list[LogSegment]:
    """The segments holding offsets in [start, end): from the one holding ``start``."""
    out: list[LogSegment] = []
    for i, s in enumerate(segments):
        if s.base_offset >= end:
            break
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if following is not None and following <= start:
            continue
        out.append(s)
    return out


def _floor_base(segments: Sequence[LogSegment], offset: int) -> int:
    base = segments[0].base_offset
    for s in segments:
        if s.base_offset > offset:
            break
        base = s.base_offset
    return base


def _next_base(log_: PartitionLog, segment: LogSegment) -> int:
    """The base offset of the segment after ``segment`` in the log (the log end: none)."""
    segments = log_.segments
    for i, s in enumerate(segments):
        if s is segment and i + 1 < len(segments):
            return segments[i + 1].base_offset
    return log_.log_end_offset
