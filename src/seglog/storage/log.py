"""A partition's log (Kafka's UnifiedLog + LocalLog): an ordered run of segments.

Offsets are dense and increasing across segments (compaction may leave gaps);
the last segment is the active one, the only one appended to. Segments are
found by base offset in O(log n) (bisect over a sorted list).

Concurrency: one writer at a time (``_lock`` around every mutation), any
number of readers. Readers never take the lock: they read ``_segments``,
a tuple that mutations replace whole, and they never read past the offset
bound (high watermark or log end) captured when the read started, so they
never see a half-written batch.

Offsets this log keeps, as Kafka names them:

- log start offset: the first offset a reader may ask for (raised by
  retention and DeleteRecords);
- log end offset (LEO): the offset the next appended record gets;
- high watermark: the end of what consumers may read. With no followers
  (embedded use, one broker) it follows the LEO as appends land;
- recovery point: everything below it is known to be on disk (fsynced).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from ..config import LogConfig
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    SeglogError,
    UnexpectedAppendOffsetError,
)
from ..records import (
    AnyBatch,
    BatchIterator,
    Compression,
    LegacyBatch,
    Record,
    RecordBatch,
    _codec,
    _scan,
    build_batch,
)
from ..records.batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    HEADER_SIZE,
    check_batch,
)
from ..records.compression import decompress
from ..records.limits import INT32_MAX, INT64_MAX, INT64_MIN, check_int
from . import fileio
from .index import MAX_RELATIVE_OFFSET
from .leader_epoch import LeaderEpochCache
from .naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_offset_file,
)
from .producer_entry import AppendOrigin
from .producer_state import PRODUCER_ID_EXPIRATION_MS
from .producer_state_manager import ProducerStateManager
from .segment import FetchData, LogSegment, random_jitter

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_READ_ONLY_LOAD_ATTEMPTS = 5
_READ_ATTEMPTS = 5  # a read that finds its segments deleted looks again at most this often
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_NEVER = 1 << 62  # a flush.ms at least this long: flushes by time never come

# What validation learns of each batch of an append, in this order: position in the
# append's buffer, size, record count, last offset delta, max timestamp, leader epoch,
# base offset. Tuples, made by _scan.check_append (or the general path alike).
_Facts = tuple[int, int, int, int, int, int, int]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _records_of(batches: Iterator[AnyBatch], start: int, end: int) -> Iterator[Record]:
    """The data records of ``batches`` with offsets in [start, end)."""
    for batch in batches:
        if batch.is_control:
            continue
        for record in batch.records():
            if start <= record.offset < end:
                yield record


class AppendInfo(NamedTuple):
    """What an append did: the offsets it got and where it landed."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    size: int
    log_append_time: int = -1


class PartitionLog:
    """The log of one topic partition, in one directory."""

    def __init__(
        self,
        dir: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
        hw_follows_leo: bool = True,
        clock: Callable[[], int] | None = None,
        scheduler_delete: Callable[[Callable[[], None], float], None] | None = None,
        read_only: bool = False,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = dir
        self.read_only = read_only
        self.topic = topic
        self.partition = partition
        self.config = config
        self.hw_follows_leo = hw_follows_leo
        self._clock = clock or _now_ms
        self._schedule_delete = scheduler_delete
        self._lock = threading.RLock()
        self._segments: tuple[LogSegment, ...] = ()
        self._bases: list[int] = []
        # readers take both at once (one attribute load): set separately, a reader could
        # pair a new segment tuple with old base offsets and read the wrong segment
        self._view: tuple[tuple[LogSegment, ...], list[int]] = ((), [])
        self._ts_prefix: tuple[tuple[LogSegment, ...], list[int]] | None = None
        self.leader_epoch_cache = LeaderEpochCache(dir, read_only)
        self.leader_epoch = self.leader_epoch_cache.latest_epoch or 0
        self.recovery_point = recovery_point
        self._last_flush_ms = self._clock()
        self.closed = False
        self._high_watermark = 0  # set from the log end once loaded (a load may truncate, which reads it)
        self._followed_tail: tuple[LogSegment, int] | None = None  # refresh(): the active segment, its end
        # idempotence and transactions: each producer's last batches, open transactions
        self.producer_state = ProducerStateManager(dir, producer_id_expiration_ms=producer_id_expiration_ms)
        self._load(recovery_point, log_start_offset, had_clean_shutdown)
        self._high_watermark = self.log_end_offset
        if not read_only:
            self._load_producer_state(had_clean_shutdown, rebuild_txn_index=not had_clean_shutdown)
        if high_watermark is not None and not hw_follows_leo:
            self._high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)

    # --- loading ----------------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(self.dir, base_offset, **self._segment_args())

    def _segment_args(self) -> dict:
        c = self.config
        return {
            "index_interval_bytes": c.index_interval_bytes,
            "max_index_size": c.segment_index_bytes,
            "roll_jitter_ms": random_jitter(c.segment_jitter_ms, c.segment_ms),
            "clock": self._clock,
            "read_only": self.read_only,
        }

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        if not self.read_only:
            self._load_files(recovery_point, log_start_offset, clean)
            return
        # a reader races the process that owns the dir: a segment it lists may be gone by
        # the time it opens it (retention, a truncation, a cleaning's swap): list again
        for attempt in range(_READ_ONLY_LOAD_ATTEMPTS):
            try:
                self._load_files(recovery_point, log_start_offset, clean)
                return
            except KafkaStorageError as e:
                if getattr(e, "errno", None) != errno.ENOENT or attempt + 1 == _READ_ONLY_LOAD_ATTEMPTS:
                    raise
                log.info("%s: a file went while loading the log read-only (%s): listing again", self.name, e)
                for segment in self._segments:
                    segment.close_handlers()

    def _load_files(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        names = os.listdir(self.dir)
        if self.read_only:
            bases = sorted(p[0] for p in map(parse_offset_file, names) if p is not None and p[1] == LOG_SUFFIX)
        else:
            bases = self._resolve_leftovers(names)
        segments = [LogSegment(self.dir, b, **self._segment_args()) for b in bases]
        if not segments:
            if self.read_only:
                # (the owner truncating it fully, between its old segments and its new one)
                error = KafkaStorageError("partition directory holds no segment", file=self.dir)
                error.errno = errno.ENOENT  # type: ignore[attr-defined]
                raise error
            segments = [self._new_segment(max(log_start_offset, 0))]
        self._set_segments(segments)
        active = self._segments[-1]
        active.active = True
        if self.read_only:
            pass  # a reader takes the files as they are: whole batches are what it reads
        elif clean and recovery_point >= 0:
            self._load_active_tail()
        else:
            self._recover(recovery_point)
            active = self._segments[-1]
            active.active = True
        if not self.read_only:
            active.ensure_writable_indexes()
        self._next_offset = active.read_next_offset()
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if self.log_start_offset > self._next_offset:
            # a checkpoint ahead of the data (the data went): start the log afresh there
            # (a reader, which may not touch the files, sees it empty there)
            if self.read_only:
                self._next_offset = self.log_start_offset
            else:
                self._truncate_fully(self.log_start_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self._next_offset)
        if not self.read_only:
            self.leader_epoch_cache.truncate_from_end(self._next_offset)

    def _resolve_leftovers(self, names: list[str]) -> list[int]:
        """Kafka's start-up rules for files a crash left, then the base offsets of the segments.

        ``.deleted`` files were on their way out; ``.cleaned`` files are a cleaning that
        did not finish; ``.swap`` files are a cleaning that finished writing: a log swap
        replaces the segments whose offsets it covers (unless a ``.cleaned`` file at or
        below it shows that the cleaning that made it was itself unfinished); index
        swaps are rebuilt. Index files without a log are orphans.
        """
        parsed = [(n, parse_offset_file(n)) for n in names]
        files = [(n, p[0], p[1]) for n, p in parsed if p is not None]
        cleaned = [b for _, b, s in files if s.endswith(CLEANED_SUFFIX)]
        min_cleaned = min(cleaned, default=None)
        swaps: list[int] = []
        for name, base, suffix in files:
            path = os.path.join(self.dir, name)
            if suffix.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                log.info("%s: removing leftover %s", self.name, name)
                fileio.unlink(path)
            elif suffix.endswith(SWAP_SUFFIX):
                if suffix != LOG_SUFFIX + SWAP_SUFFIX or (min_cleaned is not None and base >= min_cleaned):
                    fileio.unlink(path)
                else:
                    swaps.append(base)
        logs = {b for _, b, s in files if s == LOG_SUFFIX}
        for base in sorted(swaps):
            self._complete_swap(base, logs)
        for name, base, suffix in files:
            if suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and base not in logs:
                log.warning("%s: removing orphaned index file %s", self.name, name)
                fileio.unlink(os.path.join(self.dir, name))
        return sorted(logs)

    def _complete_swap(self, base: int, logs: set[int]) -> None:
        swap = LogSegment(self.dir, base, suffix=SWAP_SUFFIX, **self._segment_args())
        truncated = swap.recover()
        end = swap.read_next_offset()
        if end == base or (truncated and base in logs):
            # Nothing valid says which segments it was to replace (renamed, it would take
            # the place of the segment of its base offset); or it was damaged while the
            # segments it replaces are all still there (they are renamed oldest first, and
            # the first has its base offset): the cleaning is done again instead.
            log.warning("%s: discarding the damaged swap file of segment %d", self.name, base)
            swap.delete()
            return
        for old in sorted(b for b in logs if base <= b < end):
            log.info("%s: completing an interrupted swap: segment %d replaces %d", self.name, base, old)
            LogSegment(self.dir, old).delete()
            logs.discard(old)
        swap.change_suffix("")
        swap.close()
        logs.add(base)

    def _load_active_tail(self) -> None:
        """After a clean shutdown only the active segment's tail needs a look:
        a tail that does not frame as batches is recovered after all."""
        active = self._segments[-1]
        active.active = True
        try:
            active.read_next_offset()
        except CorruptRecordError as e:
            log.warning("%s: the active segment's tail is corrupt despite a clean shutdown (%s)", self.name, e)
            active.recover()

    def _recover(self, recovery_point: int) -> None:
        """Recover every segment from the one holding the recovery point; a segment
        that had invalid bytes ends the log: the segments after it are deleted."""
        segments = list(self._segments)
        start = max(0, bisect.bisect_right(self._bases, max(recovery_point, 0)) - 1)
        for i in range(start, len(segments)):
            segment = segments[i]
            log.info("%s: recovering segment %d", self.name, segment.base_offset)
            truncated = segment.recover(on_epoch=self.leader_epoch_cache.assign)
            if truncated and i + 1 < len(segments):
                for later in segments[i + 1 :]:
                    log.warning("%s: deleting segment %d after a truncated one", self.name, later.base_offset)
                    later.delete()
                segments = segments[: i + 1]
                break
        self._set_segments(segments)

    # --- segments ------------------------------------------------------------------------------

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        for s in segments[:-1]:
            s.active = False
        self._segments = tuple(segments)
        self._bases = [s.base_offset for s in segments]
        self._view = (self._segments, self._bases)
        self._ts_prefix = None

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _floor_segment(self, offset: int) -> int:
        """Index of the segment whose base offset is the largest <= ``offset``."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (a leader does, as followers catch up); clamped to the log."""
        check_int("high watermark", offset, 0, INT64_MAX, file=self.dir)
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self._high_watermark

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # --- appending -----------------------------------------------------------------------------

    def append(
        self,
        records: Sequence[Record | tuple],
        *,
        compression: Compression | str | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
    ) -> tuple[int, int]:
        """Append records as one batch; returns (first offset, last offset)."""
        if not records:
            raise InvalidRecordError("cannot append an empty list of records", file=self.dir)
        try:
            codec = self._codec(compression)
            batch = build_batch(
                records,
                compression=codec,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                transactional=transactional,
            )
        except SeglogError as e:
            raise e.at(file=self.dir) from None
        info = self.append_batches(batch)
        return info.first_offset, info.last_offset

    def _codec(self, compression: Compression | str | None) -> Compression:
        if compression is not None:
            return Compression.parse(compression)
        configured = self.config.compression_type
        return Compression.NONE if configured in ("producer", "uncompressed") else Compression.parse(configured)

    def append_batches(self, data: bytes | bytearray | memoryview, *, origin: str = "client") -> AppendInfo:
        """Append record batches as the leader: validate them, assign offsets by
        rewriting base offsets, stamp LogAppendTime if configured.

        ``origin`` is "client" (a producer: no control batches), or "coordinator"
        (the transaction coordinator's markers).

        As in Kafka (LogValidator runs under the log's lock), the batches are validated
        where their offsets are assigned: one C call (``_scan.check_append``) makes every
        check of ``_validate_general`` and then the edits, or none of them."""
        self._check_origin(origin)
        buffer = data if isinstance(data, bytearray) else bytearray(data)
        with self._lock:
            info = self._append_as_leader(buffer, origin, may_roll=True)
            assert info is not None
            return info

    def try_append_batches(self, data: bytes | bytearray | memoryview, *, origin: str = "client") -> AppendInfo | None:
        """``append_batches`` if it cannot wait on anything but memory, else None with the
        log and ``data`` untouched: when another thread holds the log's lock, or the append
        would roll a segment (files made) or be followed by an fsync (flush.messages or
        flush.ms). For an event loop, which hands the appends refused to a thread."""
        self._check_origin(origin)
        if not self._lock.acquire(blocking=False):
            return None
        try:
            c = self.config
            # a batch's records take more than a byte each: len(data) bounds their count
            if c.flush_ms < _NEVER or self._next_offset - self.recovery_point + len(data) >= c.flush_messages:
                return None
            return self._append_as_leader(bytearray(data), origin, may_roll=False)
        finally:
            self._lock.release()

    def _check_origin(self, origin: str) -> None:
        if origin != "client" and origin != "coordinator":
            raise InvalidRequestError(f"origin must be 'client' or 'coordinator', not {origin!r}", file=self.dir)

    def _append_as_leader(self, buffer: bytearray, origin: str, *, may_roll: bool) -> AppendInfo | None:
        """Validate, assign offsets and append, under the lock; None (nothing written)
        when the append needs a roll and ``may_roll`` is False."""
        c = self.config
        bounds, stamp, assignment = self._leader_append_rules()
        assigned = _scan.check_append(
            buffer,
            True,
            origin != "client",
            c.compact,
            c.max_message_bytes,
            bounds,
            decompress,
            self.dir,
            assignment,
        )
        if assigned is None:
            self._validate_general(buffer, True, origin, bounds)  # legacy batches, which a leader refuses
            raise AssertionError("legacy batches passed a leader's validation")
        entries, first, last, max_ts, count = assigned
        check = self.producer_state.analyze_append(buffer, entries, AppendOrigin(origin))
        if check.duplicate is not None:  # a producer's retry: acknowledged with the first append's offsets
            d = check.duplicate
            return AppendInfo(d.first_offset, d.last_offset, d.timestamp, 0, 0)
        if not may_roll and self._segments[-1].should_roll(len(buffer), max_ts, last, c.segment_bytes, c.segment_ms):
            return None
        self._append_locked(buffer, entries, first, last, max_ts, ((self.leader_epoch, first),))
        self.producer_state.on_append(check, self._next_offset, self._segments[-1])
        return AppendInfo(first, last, max_ts, count, len(buffer), -1 if stamp is None else stamp)

    def append_segment_file(self, path: str) -> AppendInfo:
        """Append the record batches of the file at ``path`` by making the file itself the
        new active segment: no byte is copied. The batches are validated and given their
        offsets in place, under the log's lock, exactly as ``append_batches`` does; then
        the log rolls (unless its active segment is empty) and the file is renamed over
        the active segment's empty log (``LogSegment.adopt``).

        For large appends staged beside the log (the Spark sink): the file must be on
        the log's filesystem and hold at most segment.bytes. When validation refuses it,
        it stays where it was, its bytes unchanged; when a file operation fails, the log
        holds the records it held before (rolled, perhaps)."""
        with self._lock:
            c = self.config
            bounds, stamp, assignment = self._leader_append_rules()
            handle = fileio.open_file(path)
            try:
                size = handle.size()
                if size == 0:
                    raise InvalidRecordError("an append must hold at least one batch", file=path)
                with handle.mmap(size, writable=True) as mapped:
                    assigned = _scan.check_append(
                        mapped, True, False, c.compact, c.max_message_bytes, bounds, decompress, path, assignment
                    )
                    check = self.producer_state.analyze_append(
                        mapped, assigned[0] if assigned else (), AppendOrigin.REPLICATION
                    )
            except SeglogError as e:
                raise e.at(file=path) from None  # a CRC fault knows its position, not the file
            finally:
                handle.close()
            if assigned is None:
                raise InvalidRecordError("legacy batches cannot be appended; use v2", file=path)
            entries, first, last, max_ts, count = assigned
            if last - first > MAX_RELATIVE_OFFSET:
                raise RecordTooLargeError(
                    f"append spans offsets {first}..{last}, more than a segment can index", file=path
                )
            self._roll(first).adopt(path, entries)  # an empty active segment at the log end takes the file
            log.debug("%s: %s became the segment at offset %d", self.name, path, first)
            self._advance(last, ((self.leader_epoch, first),))
            self.producer_state.on_append(check, self._next_offset, self._segments[-1])
            return AppendInfo(first, last, max_ts, count, size, -1 if stamp is None else stamp)

    def _leader_append_rules(self) -> tuple[tuple[int, int] | None, int | None, tuple[int, int, int | None, int]]:
        """For a leader's append, under the lock: the CreateTime bounds its timestamps must
        lie in, the LogAppendTime it is stamped with, and its assignment (next offset,
        leader epoch, stamp, segment.bytes) as ``_scan.check_append`` takes it."""
        if self.closed or self.read_only:
            self._check_open()
        c = self.config
        bounds = self._timestamp_bounds() if c.message_timestamp_type == "CreateTime" else None
        stamp = self._clock() if c.message_timestamp_type == "LogAppendTime" else None
        return bounds, stamp, (self._next_offset, self.leader_epoch, stamp, c.segment_bytes)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches copied from a leader: offsets and epochs are kept, and
        must continue the log."""
        buffer = data if isinstance(data, bytearray) else bytearray(data)
        batches = self._validate(buffer, leader=False, origin="replication")
        self._check_follower_records(buffer, batches)
        with self._lock:
            self._check_open()
            first = batches[0][6]
            if first < self._next_offset:
                raise UnexpectedAppendOffsetError(
                    f"follower append starts at offset {first}, below the log end offset {self._next_offset}",
                    file=self.dir,
                    offset=first,
                )
            size = len(buffer)
            if size > self.config.segment_bytes:
                raise RecordTooLargeError(
                    f"append of {size} bytes exceeds segment.bytes {self.config.segment_bytes}", file=self.dir
                )
            entries = [(at, n, base + delta, ts) for at, n, _, delta, ts, _, base in batches]
            last, max_ts = entries[-1][2], max(e[3] for e in entries)
            check = self.producer_state.analyze_append(buffer, entries, AppendOrigin.REPLICATION)
            self._append_locked(buffer, entries, first, last, max_ts, [(b[5], b[6]) for b in batches])
            self.producer_state.on_append(check, self._next_offset, self._segments[-1])
            return AppendInfo(first, last, max_ts, sum(b[2] for b in batches), size)

    def _check_follower_records(self, buffer: bytearray, batches: list[_Facts]) -> None:
        """The structural checks of a leader's append that ``_validate`` leaves out for a
        follower: each v2 batch's records walked (decompressed within the bound), their
        count against their bytes and against the batch's offset span. Offsets are not
        checked record by record: compaction leaves gaps, and fewer records than the span."""
        view = memoryview(buffer)
        for at, size, count, delta, _, _, _ in batches:
            if buffer[at + 16] != 2:
                continue  # a legacy batch: its CRC covers it, and _validate checked it
            try:
                if count > delta + 1:
                    raise CorruptRecordError(
                        f"record count {count} exceeds the batch's offset span of {delta + 1}", position=at
                    )
                if buffer[at + 22] & COMPRESSION_CODEC_MASK:  # (the low byte of the attributes)
                    records = RecordBatch(view[at : at + size], at).records_section()
                else:
                    records = view[at + HEADER_SIZE : at + size]
                _codec.check_records(records, count, at)
            except CorruptRecordError as e:
                raise e.at(file=self.dir) from None

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.name} is closed", file=self.dir)
        if self.read_only:
            raise KafkaStorageError(f"log {self.name} is open read-only", file=self.dir)

    def _validate(self, buffer: bytearray, leader: bool, origin: str) -> list[_Facts]:
        """Kafka's LogValidator checks; returns what the append needs of each batch.

        One C walk over the whole buffer (``_scan.check_append``) makes every check of
        the general path below, fault for fault and in the same order; a buffer holding
        a legacy batch takes the general path."""
        c = self.config
        bounds = self._timestamp_bounds() if leader and c.message_timestamp_type == "CreateTime" else None
        facts = _scan.check_append(
            buffer, leader, origin != "client", c.compact, c.max_message_bytes, bounds, decompress, self.dir
        )
        return facts if facts is not None else self._validate_general(buffer, leader, origin, bounds)

    def _validate_general(
        self, buffer: bytearray, leader: bool, origin: str, bounds: tuple[int, int] | None
    ) -> list[_Facts]:
        """``_validate`` for any buffer, legacy batches too: the referee of the C walk.

        Each v2 header is unpacked once (``BatchIterator.headers``) and the checks read
        its fields: a batch object's property reads cost more than the CRC of 16 KiB."""
        out: list[_Facts] = []
        scan = BatchIterator(buffer)
        view = scan.view
        prev_last = -1
        max_bytes = self.config.max_message_bytes
        for at, end, head in scan.headers():
            size = end - at
            if size > max_bytes:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes {max_bytes}", file=self.dir, position=at
                )
            if head is not None:
                check_batch(view, at, end, head, at)
                out.append(self._validate_v2(view, at, end, head, leader, origin, bounds))
            else:
                legacy = LegacyBatch(view[at:end], at)
                legacy.validate()
                if leader:
                    raise InvalidRecordError(
                        f"magic {legacy.magic} batches cannot be appended; use v2", file=self.dir, position=at
                    )
                base = legacy.base_offset
                out.append((at, size, legacy.record_count, legacy.last_offset - base, legacy.max_timestamp, -1, base))
            if not leader:
                base, delta = out[-1][6], out[-1][3]
                if base <= prev_last:
                    raise UnexpectedAppendOffsetError(
                        f"batch offsets {base}.. do not follow {prev_last}", file=self.dir, offset=base
                    )
                prev_last = base + delta
        if scan.remaining:
            raise CorruptRecordError(
                f"{scan.remaining} bytes of a partial batch at the end of the append",
                file=self.dir,
                position=scan.position,
            )
        if not out:
            raise InvalidRecordError("an append must hold at least one batch", file=self.dir)
        return out

    def _validate_v2(
        self,
        view: memoryview,
        at: int,
        end: int,
        head: tuple,
        leader: bool,
        origin: str,
        bounds: tuple[int, int] | None,
    ) -> _Facts:
        base_offset, _, epoch, _, _, attributes, delta, base_ts, max_ts, _, _, _, count = head
        if leader:
            control = attributes & CONTROL_FLAG_MASK
            if control and origin == "client":
                raise self._invalid("clients may not write control batches", at)
            if delta != count - 1:
                raise self._invalid(f"last offset delta {delta} disagrees with the record count {count}", at)
            if attributes & COMPRESSION_CODEC_MASK:
                records = RecordBatch(view[at:end], at).records_section()
            else:
                records = view[at + HEADER_SIZE : end]
            min_delta, max_delta, bad_offset, null_key = _codec.check_records(records, count, at)
            if bad_offset >= 0:
                raise self._invalid(f"record {bad_offset} has an offset delta other than {bad_offset}", at)
            if null_key >= 0 and not control and self.config.compact:
                raise self._invalid("a compacted topic cannot accept a record without a key", at)
            if count and bounds is not None:
                self._check_timestamps(base_ts + min_delta, base_ts + max_delta, at, bounds)
                max_ts = base_ts + max_delta
        return (at, end - at, count, delta, max_ts, epoch, base_offset)

    def _invalid(self, message: str, position: int) -> InvalidRecordError:
        return InvalidRecordError(message, file=self.dir, position=position)

    def _timestamp_bounds(self) -> tuple[int, int]:
        """The CreateTime timestamps an append may carry: [now - message.timestamp.before.max.ms,
        now + message.timestamp.after.max.ms], within an int64 (the most a batch can hold)."""
        now, c = self._clock(), self.config
        low, high = now - c.message_timestamp_before_max_ms, now + c.message_timestamp_after_max_ms
        return (low if low > _INT64_MIN else _INT64_MIN, high if high < _INT64_MAX else _INT64_MAX)

    def _check_timestamps(self, lowest: int, highest: int, position: int, bounds: tuple[int, int]) -> None:
        if lowest < bounds[0] or highest > bounds[1]:
            raise InvalidTimestampError(
                f"timestamps {lowest}..{highest} are outside [{bounds[0]}, {bounds[1]}] "
                f"(message.timestamp.before.max.ms / after.max.ms)",
                file=self.dir,
                position=position,
            )

    def _append_locked(
        self,
        buffer: bytearray,
        entries: list[tuple[int, int, int, int]],
        first: int,
        last: int,
        max_ts: int,
        epochs: Sequence[tuple[int, int]],
    ) -> None:
        """Write validated batches with their offsets: ``entries`` is what the segment
        indexes, (position, size, last offset, max timestamp) of each; ``epochs`` the
        (leader epoch, start offset) of each batch, for the epoch cache."""
        segment = self._segments[-1]
        c = self.config
        if segment.should_roll(len(buffer), max_ts, last, c.segment_bytes, c.segment_ms):
            segment = self._roll(first)
            if not segment.offset_index.can_append_offset(last):
                raise RecordTooLargeError(
                    f"append spans offsets {first}..{last}, more than a segment can index", file=self.dir
                )
        # else the segment can index ``last``: should_roll checks that
        segment.append(buffer, entries)
        self._advance(last, epochs)

    def _advance(self, last: int, epochs: Sequence[tuple[int, int]]) -> None:
        """After an append whose last offset is ``last``: the epoch cache, the log end
        offset, the high watermark, and a flush if one is due."""
        c = self.config
        cache = self.leader_epoch_cache
        for epoch, start in epochs:
            if not cache.entries or cache.entries[-1][0] != epoch:  # else in force already (offsets only grow)
                cache.assign(epoch, start)
        self._next_offset = last + 1
        if self.hw_follows_leo:
            self._high_watermark = self._next_offset
        if last + 1 - self.recovery_point >= c.flush_messages or c.flush_ms < _NEVER:
            self._maybe_flush()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset."""
        with self._lock:
            self._check_open()
            return self._roll(self._next_offset)

    def _roll(self, expected_next_offset: int) -> LogSegment:
        base = max(expected_next_offset, self._next_offset)
        old = self._segments[-1]
        if old.base_offset == base and old.size == 0:
            return old  # an empty active segment at this offset already
        new = self._new_segment(base)
        old.on_become_inactive()
        old.active = False
        new.active = True
        self._set_segments((*self._segments, new))
        self.producer_state.on_roll(self._next_offset)  # after the roll, as Kafka: a failed one leaves none
        log.debug("%s: rolled a new segment at offset %d", self.name, base)
        return new

    # --- flushing ------------------------------------------------------------------------------

    def _maybe_flush(self) -> None:
        unflushed = self._next_offset - self.recovery_point
        if unflushed >= self.config.flush_messages or (
            self.config.flush_ms < _NEVER and self._clock() - self._last_flush_ms >= self.config.flush_ms
        ):
            self._flush_locked(self._next_offset)

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the log end)
        and move the recovery point there."""
        if offset is not None:
            check_int("flush offset", offset, 0, self._next_offset, file=self.dir)
        with self._lock:
            self._flush_locked(self._next_offset if offset is None else offset)

    def _flush_locked(self, offset: int) -> None:
        if offset <= self.recovery_point:
            return
        start = self._floor_segment(self.recovery_point)
        end = self._floor_segment(max(offset - 1, 0))
        for segment in self._segments[start : end + 1]:
            segment.flush()
        fileio.fsync_dir(self.dir)
        self.recovery_point = offset
        self._last_flush_ms = self._clock()

    def remove_expired_producers(self, now_ms: int) -> None:
        with self._lock:
            if not self.closed and not self.read_only:
                self.producer_state.remove_expired(now_ms)

    def flush_if_due(self) -> None:
        """The periodic flush for flush.ms (called by the log manager)."""
        with self._lock:
            if not self.closed:
                self._maybe_flush()

    # --- reading -------------------------------------------------------------------------------

    def _check_offset_arg(self, name: str, offset: object, low: int = 0) -> None:
        """An offset argument is an int64 >= ``low``. Reads take any int64: one the log
        does not hold is out of range (Kafka's OFFSET_OUT_OF_RANGE), not a bad request."""
        check_int(name, offset, low, INT64_MAX, file=self.dir)

    def _check_offset_args(self, start_offset: int | None, end_offset: int | None) -> None:
        if start_offset is not None:
            self._check_offset_arg("start offset", start_offset, INT64_MIN)
        if end_offset is not None:
            self._check_offset_arg("end offset", end_offset, INT64_MIN)

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}",
                log_start_offset=self.log_start_offset,
                log_end_offset=self._next_offset,
                file=self.dir,
                offset=offset,
            )

    def read(
        self,
        offset: int,
        max_bytes: int = 1024 * 1024,
        *,
        upper_bound: int | None = None,
        min_one_message: bool = True,
    ) -> FetchData:
        """Bytes of whole batches from the batch holding ``offset``, below ``upper_bound``
        (default: the high watermark). The slice starts at a batch boundary and holds at
        least the first batch whole when ``min_one_message``, however large.

        A segment deleted under the read (retention, a truncation, a cleaner's swap, with
        file.delete.delay.ms too short for this reader) is not a storage error: the read
        looks again at the segments there now, or raises OffsetOutOfRangeError when the
        offset fell below the log start (or past the end) meanwhile."""
        self._check_offset_arg("offset", offset, INT64_MIN)
        check_int("max_bytes", max_bytes, 0, INT32_MAX, file=self.dir)
        if upper_bound is not None:
            self._check_offset_arg("upper_bound", upper_bound, INT64_MIN)
        self._check_range(offset)
        attempts = 0
        while True:
            segments, bases = self._view
            try:
                return self._read_from(segments, bases, offset, max_bytes, upper_bound, min_one_message)
            except KafkaStorageError as e:
                attempts += 1
                if getattr(e, "errno", None) != errno.ENOENT or attempts == _READ_ATTEMPTS:
                    raise
                self._check_range(offset)
                if self._view[0] is segments:
                    raise  # the log still lists it: a file went behind the log's back

    def _read_from(
        self,
        segments: tuple[LogSegment, ...],
        bases: list[int],
        offset: int,
        max_bytes: int,
        upper_bound: int | None,
        min_one_message: bool,
    ) -> FetchData:
        end = self._high_watermark if upper_bound is None else min(upper_bound, self._next_offset)
        if offset >= end:
            return FetchData(offset, None)
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        end_segment = max(0, bisect.bisect_right(bases, end - 1) - 1)
        while i <= end_segment:
            segment = segments[i]
            max_position = self._position_of(segment, end) if i == end_segment else segment.size
            fetch = segment.read(offset, max_bytes, max_position, min_one_message)
            if fetch is not None:
                return fetch
            i += 1
        return FetchData(offset, None)

    def _position_of(self, segment: LogSegment, end: int) -> int:
        """The byte position in ``segment`` after the last batch holding offsets below
        ``end`` (a batch straddling ``end`` is included: its reader filters records).

        The size is taken first: a batch the writer appends meanwhile lies past it. (Taking
        the size when ``end`` is the log end offset would race with the writer, which grows
        the segment before it moves the log end offset.)"""
        size = segment.size
        try:
            header = segment.translate_offset(end)
        except CorruptRecordError as e:
            # damaged bytes before the batch holding ``end`` is found: the batches before
            # them are whole, and a read that goes on to the damage meets it there
            return size if e.position is None else min(e.position, size)
        if header is None or header.position >= size:
            return size
        try:
            first = segment.first_offset(header)
        except CorruptRecordError:
            return header.position  # a damaged legacy wrapper, whose first offset is unknown
        return header.position + header.size if first < end else header.position

    def batches(
        self,
        start_offset: int | None = None,
        end_offset: int | None = None,
        max_bytes: int = 4 * 1024 * 1024,
        *,
        check_crcs: bool = True,
    ) -> Iterator[AnyBatch]:
        """Whole batches holding offsets from ``start_offset`` (default: the log start)
        below ``end_offset`` (default: the high watermark).

        As ``read``: a start at the log end gives nothing, one past it or below the log
        start raises OffsetOutOfRangeError (at the call, not at the first batch). Each
        batch's CRC is checked, as Kafka's consumer does (``check.crcs=true``): a batch
        damaged on disk raises CorruptRecordError naming its file, position and offset
        rather than come back as data; ``check_crcs=False`` skips the check."""
        self._check_offset_args(start_offset, end_offset)
        check_int("max_bytes", max_bytes, 0, INT32_MAX, file=self.dir)
        offset = self.log_start_offset if start_offset is None else start_offset
        self._check_range(offset)
        end = self._high_watermark if end_offset is None else end_offset
        return self._batches(offset, end, max_bytes, check_crcs)

    def _batches(self, offset: int, end: int, max_bytes: int, check_crcs: bool) -> Iterator[AnyBatch]:
        while offset < end:
            fetch = self.read(offset, max_bytes, upper_bound=end)
            if fetch.slice is None:
                return
            last = offset - 1
            for batch in fetch.slice.batches():
                if check_crcs:
                    try:
                        batch.validate()
                    except CorruptRecordError as e:
                        raise e.at(file=fetch.slice.handle.path) from None
                yield batch
                last = batch.last_offset
            if last < offset:
                return
            offset = last + 1

    def records(
        self, start_offset: int | None = None, end_offset: int | None = None, *, check_crcs: bool = True
    ) -> Iterator[Record]:
        """Records from ``start_offset`` up to the high watermark (or ``end_offset``),
        skipping control records; the offsets and CRCs are checked as ``batches`` does."""
        self._check_offset_args(start_offset, end_offset)
        start = self.log_start_offset if start_offset is None else start_offset
        end = self._high_watermark if end_offset is None else end_offset
        return _records_of(self.batches(start, end, check_crcs=check_crcs), start, end)

    # --- a read-only log following its owner ------------------------------------------------------

    def refresh(self) -> bool:
        """Take in what the process owning the dir wrote since this read-only log was opened
        or last refreshed: batches appended to the active segment, segments rolled after it,
        segments that retention removed before it. Only bytes past the last whole batch
        known are scanned, and a partial batch at the end (an append under way) waits for
        the next call. A log that lost its end (a truncation) is loaded from its files again.
        Returns whether the log end offset moved."""
        with self._lock:
            if self.closed or not self.read_only:
                raise KafkaStorageError(f"only an open read-only log is refreshed, not {self.name}", file=self.dir)
            before = self._next_offset
            # listed before any size is read: a segment the owner rolled away from is whole by then
            listed = self._listed_segment_bases()
            segments = self._segments
            tail = segments[-1]
            known_end = self._followed_end(tail)
            if tail.base_offset not in listed or tail.reread_size() < known_end:
                self._reload_read_only()
                return self._next_offset != before
            newer = [LogSegment(self.dir, b, **self._segment_args()) for b in sorted(listed) if b > tail.base_offset]
            if newer:
                tail = newer[-1]
                end, next_offset = self._scan_tail(tail, 0)
                next_offset = tail.base_offset if next_offset is None else next_offset
            else:
                end, next_offset = self._scan_tail(tail, known_end)
            gone = [s for s in segments if s.base_offset not in listed]
            self._set_segments([*(s for s in segments if s.base_offset in listed), *newer])
            tail.active = True
            self._followed_tail = (tail, end)
            if next_offset is not None:
                self._next_offset = next_offset
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            if self.hw_follows_leo:
                self._high_watermark = self._next_offset
            for segment in gone:
                segment.close_handlers()
            return self._next_offset != before

    def _listed_segment_bases(self) -> set[int]:
        try:
            names = os.listdir(self.dir)
        except OSError as e:
            raise KafkaStorageError(f"cannot list the partition directory: {e.strerror}", file=self.dir) from None
        return {p[0] for p in map(parse_offset_file, names) if p is not None and p[1] == LOG_SUFFIX}

    def _followed_end(self, tail: LogSegment) -> int:
        """The position after the last whole batch of ``tail`` that this reader knows of."""
        if self._followed_tail is not None and self._followed_tail[0] is tail:
            return self._followed_tail[1]
        header = tail.translate_offset(self._next_offset - 1)
        return 0 if header is None else header.position + header.size

    @staticmethod
    def _scan_tail(segment: LogSegment, start: int) -> tuple[int, int | None]:
        """The end of the last whole batch from ``start`` on, and the offset after it (None: no batch)."""
        end, next_offset = start, None
        for header in segment.scan_headers(start):
            end, next_offset = header.position + header.size, header.next_offset
        return end, next_offset

    def _reload_read_only(self) -> None:
        for segment in self._segments:
            segment.close_handlers()
        self._followed_tail = None
        self._load(self.recovery_point, self.log_start_offset, True)
        self._high_watermark = self._next_offset

    # --- lookups by time -------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """Kafka's ListOffsets: (offset, timestamp) of the earliest record whose timestamp
        is >= ``timestamp``; None if there is none. Special targets: -2 earliest (the log
        start offset), -1 latest (the high watermark), -3 the record with the largest
        timestamp. The special ones answer with timestamp -1 (-3: the largest timestamp)."""
        check_int("target timestamp", timestamp, MAX_TIMESTAMP, INT64_MAX, InvalidTimestampError, file=self.dir)
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._high_watermark, -1
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        if timestamp < 0:
            raise InvalidTimestampError(f"invalid target timestamp {timestamp}", file=self.dir)
        segments = self._segments
        prefix = self._timestamp_prefix(segments)
        i = bisect.bisect_left(prefix, timestamp)
        start = self.log_start_offset
        while i < len(segments):
            found = segments[i].find_offset_by_timestamp(timestamp, start)
            if found is not None:
                ts, offset = found
                return (offset, ts) if offset < self._high_watermark else None
            i += 1
        return None

    def _timestamp_prefix(self, segments: tuple[LogSegment, ...]) -> list[int]:
        """Running max of the largest timestamps of the segments before the active one:
        monotonic, so the first segment with max timestamp >= t is found by bisect instead
        of a scan (past them all: the active one). Kept with the tuple it was made for,
        whose inactive segments no longer change; the active one's grows with appends, so
        it is left out rather than cached stale by a reader racing an append."""
        cached = self._ts_prefix
        if cached is not None and cached[0] is segments:
            return cached[1]
        prefix, running = [], -1
        for s in segments[:-1]:
            running = max(running, s.max_timestamp)
            prefix.append(running)
        self._ts_prefix = (segments, prefix)
        return prefix

    def _max_timestamp_offset(self) -> tuple[int, int] | None:
        segments = self._segments
        best = max(segments, key=lambda s: s.max_timestamp)
        max_ts, shallow = best.max_timestamp_and_offset
        if max_ts < 0:
            return None
        found = best.find_offset_by_timestamp(max_ts, max(shallow - (1 << 31), self.log_start_offset))
        return (found[1], found[0]) if found else (shallow, max_ts)

    # --- truncation ------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Drop every record at ``offset`` or after (a follower diverged). Returns
        whether anything was removed."""
        self._check_offset_arg("truncation offset", offset)
        with self._lock:
            self._check_open()
            if offset >= self._next_offset:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset)
                return True
            keep = self._floor_segment(offset)
            removed = self._segments[keep + 1 :]
            self._set_segments(self._segments[: keep + 1])
            self._remove_segments(removed)  # before the cut: a crash between leaves no gap
            segment = self._segments[keep]
            segment.truncate_to(offset)
            segment.active = True
            self._next_offset = segment.read_next_offset()
            self._after_truncation()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and start an empty log at ``offset``."""
        self._check_offset_arg("start offset", offset)
        with self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        # the new segment is made before the others go, so that a reader listing the dir
        # meanwhile finds one; a segment of its base offset makes way for it first
        old = self._segments
        self._remove_segments([s for s in old if s.base_offset == offset])
        self._set_segments([self._new_segment(offset)])
        self._remove_segments([s for s in old if s.base_offset != offset])
        self._next_offset = offset
        self.log_start_offset = offset
        self.leader_epoch_cache.clear()
        self._after_truncation()

    def _after_truncation(self) -> None:
        self.recovery_point = min(self.recovery_point, self._next_offset)
        self._high_watermark = min(self._high_watermark, self._next_offset)
        if self.hw_follows_leo:
            self._high_watermark = self._next_offset
        self.leader_epoch_cache.truncate_from_end(self._next_offset)
        self.producer_state.truncate_txn_index(self._segments[-1], self._next_offset)
        self._load_producer_state(False)

    def _load_producer_state(self, clean: bool, *, rebuild_txn_index: bool = False) -> None:
        self.producer_state.load_log(
            self._segments,
            self.log_start_offset,
            self._next_offset,
            self._clock(),
            clean_shutdown=clean,
            rebuild_txn_index=rebuild_txn_index,
        )

    # --- DeleteRecords, retention and the cleaner's swap ---------------------------------------------

    def delete_records(self, before_offset: int) -> int:
        """Kafka's DeleteRecords: make ``before_offset`` the log start offset (-1: the high
        watermark); reads below it are out of range from then on. As in Kafka, the segments
        wholly below it go with the next retention pass (``LogManager.delete_records`` runs
        one for this log at once). Returns the new log start offset; raises
        OffsetOutOfRangeError beyond the high watermark."""
        self._check_offset_arg("offset", before_offset, INT64_MIN)  # -1 and the like: out of range below
        with self._lock:
            self._check_open()
            target = self._high_watermark if before_offset == -1 else before_offset
            if target < 0 or target > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete the records of {self.name} before offset {before_offset}: "
                    f"not between 0 and the high watermark {self._high_watermark}",
                    log_start_offset=self.log_start_offset,
                    log_end_offset=self._high_watermark,
                    file=self.dir,
                    offset=before_offset,
                )
            self._increment_log_start_offset(target)
            return self.log_start_offset

    def delete_old_segments(self, should_delete: Callable[[LogSegment, LogSegment], bool]) -> list[LogSegment]:
        """Delete the oldest segments while ``should_delete(segment, next_segment)`` holds
        (Kafka's deleteOldSegments; retention.py has the predicates): never the active
        segment, never one holding offsets at or above the high watermark. The log start
        offset moves to the first segment kept. Returns the segments deleted."""
        with self._lock:
            if self.closed or self.read_only:
                return []
            return self._delete_prefix_locked(should_delete)

    def _delete_prefix_locked(self, should_delete: Callable[[LogSegment, LogSegment], bool]) -> list[LogSegment]:
        segments = self._segments
        count = 0
        while count + 1 < len(segments):
            following = segments[count + 1]
            if self._high_watermark < following.base_offset or not should_delete(segments[count], following):
                break
            count += 1
        if not count:
            return []
        deleted = list(segments[:count])
        self._increment_log_start_offset(segments[count].base_offset)
        self.producer_state.delete_snapshots_before(self.log_start_offset)
        self._set_segments(segments[count:])
        for segment in deleted:  # oldest first: a crash leaves the kept segments contiguous
            segment.change_suffix(DELETED_SUFFIX)
        log.info("%s: deleted %d segment(s) below offset %d", self.name, count, self.log_start_offset)
        self._delete_files_later(deleted)
        return deleted

    def _remove_segments(self, segments: Sequence[LogSegment]) -> None:
        """Segments a truncation drops go as retention's do: renamed ``.deleted`` (the
        newest first, so that a crash part way leaves the log contiguous) and removed
        after file.delete.delay.ms, since readers may still be reading them."""
        for segment in reversed(segments):
            segment.change_suffix(DELETED_SUFFIX)
        if segments:
            self._delete_files_later(list(segments))

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.recovery_point = max(self.recovery_point, offset)
        self.leader_epoch_cache.truncate_from_start(offset)

    def _delete_files_later(self, segments: list[LogSegment]) -> None:
        """Remove ``.deleted`` segments after file.delete.delay.ms: readers that took the
        segment list before they went may still be reading them."""

        def delete() -> None:
            for segment in segments:
                segment.delete()

        if self._schedule_delete is None:
            delete()
        else:
            self._schedule_delete(delete, self.config.file_delete_delay_ms)

    def replace_segments(self, new: LogSegment, old: Sequence[LogSegment]) -> bool:
        """Swap ``new``, a flushed ``.cleaned`` segment, in for ``old``, a run of inactive
        segments starting at its base offset, crash-safely (Kafka's LocalLog.replaceSegments):

        1. ``new`` is renamed ``.cleaned`` -> ``.swap`` and the dir fsynced. A restart before
           this discards ``new`` (``.cleaned`` files are removed); after it, completes the swap
           (a ``.swap`` log replaces the segments between its base and next offsets);
        2. ``new`` replaces ``old`` in the segment list, so readers see one or the other;
        3. the old files are renamed ``.deleted`` and removed after file.delete.delay.ms;
        4. ``new`` drops its ``.swap`` suffix and the dir is fsynced.

        Returns False, changing nothing, if ``old`` is no longer a run of inactive segments
        of this log (a truncation or the log's closing got there first)."""
        with self._lock:
            if self.closed or self.read_only or not old:
                return False
            segments = self._segments
            start = next((i for i, s in enumerate(segments) if s is old[0]), -1)
            end = start + len(old)
            if start < 0 or end >= len(segments):
                return False
            if any(a is not b for a, b in zip(segments[start:end], old, strict=True)):
                return False
            new.change_suffix(SWAP_SUFFIX)
            fileio.fsync_dir(self.dir)
            self._set_segments((*segments[:start], new, *segments[end:]))
            for segment in old:
                segment.change_suffix(DELETED_SUFFIX)
            new.change_suffix("")
            fileio.fsync_dir(self.dir)
            self._delete_files_later(list(old))
            return True

    # --- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every segment (the active one's indexes are trimmed)."""
        with self._lock:
            if self.closed:
                return
            if self.read_only:
                self.close_without_flush()
                return
            self._flush_locked(self._next_offset)
            self.producer_state.on_close(self._next_offset)
            for segment in self._segments:
                segment.close()
            self.closed = True

    def close_without_flush(self) -> None:
        """Release files as a crash would leave them (tests, and a failed dir)."""
        with self._lock:
            for segment in self._segments:
                segment.close_handlers()
            self.closed = True

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name}, start={self.log_start_offset}, end={self._next_offset}, "
            f"hw={self._high_watermark}, segments={len(self._segments)})"
        )
