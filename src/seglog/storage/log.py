"""A partition's log (Kafka's UnifiedLog + LocalLog): an ordered run of segments.

Offsets are dense and increasing across segments (compaction may leave gaps);
the last segment is the active one, the only one appended to. Segments are
found by base offset in O(log n) (a binary search in C over their base offsets
packed in one buffer, ``_floor``). Opening the
directory is ``loader.py``'s (Kafka's LogLoader), an append's checks are
``validator.py``'s (LogValidator), reading the ``.log`` bytes is
``file_records.py``'s (FileRecords), a segment is ``segment.py``'s.

Concurrency: one writer at a time (``_lock`` around every mutation), any
number of readers. Readers never take the lock: they read ``_segments``,
a tuple that mutations replace whole, and they never read past the offset
bound (high watermark or log end) captured when the read started, so they
never see a half-written batch.

Offsets this log keeps, as Kafka names them (``log_end_offset_metadata`` and
``high_watermark_metadata`` also say where they are: segment and position):

- log start offset: the first offset a reader may ask for (raised by
  retention and DeleteRecords);
- log end offset (LEO): the offset the next appended record gets;
- high watermark (HW): the end of what consumers may read, moved by its owner.
  A broker's replica manager moves it (``maybe_increment_high_watermark`` to the
  min LEO of the ISR, a leader; ``update_high_watermark``, a follower); a log
  opened without a broker (``standalone``: the command line, Spark, the tests)
  is its partition's only replica, so its owner keeps it at the LEO through
  every append, truncation and refresh;
- recovery point: everything below it is known to be on disk (fsynced).

States (``LogState``), and the only moves between them::

    state      what it is                                       event          next
    OPEN       owned by this process: appends, truncation,      close          CLOSED
               retention, cleaning, flushes                     (a crash, a    CLOSED
                                                                failed dir)
    READ_ONLY  a reader beside the owning process: reads and    close          CLOSED
               ``refresh``; no file is written
    CLOSED     files released; appends, truncation and          close          CLOSED
               refresh refused, background work skips it

Roles (``Role``) of an OPEN log, and the only moves between them; a leader
epoch never goes back (``become_*`` with an older one raises
FENCED_LEADER_EPOCH), and a read-only or closed log's cannot change::

    role      appends it takes                                  event                     next
    LEADER    a producer's or a coordinator's (append_batches,  become_leader(e >= now)   LEADER
              append, try_append_batches, append_segment_file): become_follower(e >= now) FOLLOWER
              offsets assigned, batches stamped leader_epoch;
              a leader's copies too (append_as_follower)
    FOLLOWER  a leader's only (append_as_follower): offsets and become_follower(e >= now) FOLLOWER
              epochs kept; a producer's gets NOT_LEADER_OR_   become_leader(e >= now)   LEADER
              FOLLOWER

A log opens as LEADER at the latest epoch of its leader-epoch-checkpoint (0 when
none): a log without a broker leads itself.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import operator
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, NamedTuple, TypeVar, overload

from ..config import LogConfig
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    FencedLeaderEpochError,
    IllegalStateTransitionError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    SeglogError,
    UnexpectedAppendOffsetError,
)
from ..locks import RLock
from ..records import AnyBatch, Compression, Record, build_batch
from ..records.compression import decompress
from ..records.layout import ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK
from ..records.limits import INT32_MAX, INT64_MAX, INT64_MIN, check_int
from . import _scan, fileio
from .file_records import FetchDataInfo, LogOffsetMetadata
from .index import MAX_RELATIVE_OFFSET
from .leader_epoch import LeaderEpochCache
from .loader import LogLoader, reader_segment_bases
from .naming import DELETED_SUFFIX, SWAP_SUFFIX
from .producer_entry import AppendOrigin
from .producer_state import PRODUCER_ID_EXPIRATION_MS
from .producer_state_manager import ProducerStateManager, aborted_txns_rebuilt, first_unstable
from .segment import LogSegment, random_jitter
from .txn_index import AbortedTxn, search_aborted_txns
from .validator import LogValidator
from .vanishing import retry_while_vanishing, vanished

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_READ_ATTEMPTS = 5  # a read that finds its segments deleted looks again at most this often
_NEVER = 1 << 62  # a flush.ms at least this long: flushes by time never come
_SEGMENT_SIZE = operator.attrgetter("size")  # a segment's size (its property) in map
_new = tuple.__new__
_CLIENT = AppendOrigin.CLIENT  # (an enum member's lookup costs as much as a call, on every append)
_FAULTS = fileio.faults._faults  # the faults injected (a list changed in place; the appends stand aside)
_T = TypeVar("_T")


class LogState(enum.Enum):
    OPEN = "open"
    READ_ONLY = "read-only"
    CLOSED = "closed"


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


OPEN, READ_ONLY, CLOSED = LogState.OPEN, LogState.READ_ONLY, LogState.CLOSED
LEADER, FOLLOWER = Role.LEADER, Role.FOLLOWER
# the tables above: the states each state may move to (every role may move to every role)
_NEXT_STATES = {
    OPEN: frozenset({CLOSED}),
    READ_ONLY: frozenset({CLOSED}),
    CLOSED: frozenset({CLOSED}),
}


_now_ms = _scan.now_ms  # the default clock: time.time_ns() // 1_000_000, in C (every append reads it)
_CONTROL_BYTE = ATTRIBUTES_OFFSET + 1  # the attributes' low byte (an int16, big-endian): the control flag's
_floor_entry = _scan.floor_entry


def _pack(ints: list[int]) -> bytes:
    """Sorted int64s (segments' base offsets, or running max timestamps) packed as an
    index's keys for ``_floor``: a bisect over a list of 10,000 ints compares int objects
    scattered over the heap, each a cache miss a lookup (bench/storage.py lookups)."""
    return struct.pack(f">{len(ints)}q", *ints)


def _floor(packed: bytes, count: int, value: int) -> int:
    """The index of the largest of ``count`` packed int64s <= ``value``; 0 below the first
    (the first segment is a read's floor)."""
    i = _floor_entry(packed, count, 8, 8, value, 0)
    return i if i > 0 else 0


def _no_control(buffer: bytearray) -> bool:
    """Not a control batch: what the one-call append takes of a coordinator (it checks a
    batch as a producer's, which may send none; a coordinator's markers carry a producer id,
    which the one call leaves to ``_append_as_leader`` anyway)."""
    return len(buffer) > _CONTROL_BYTE and not buffer[_CONTROL_BYTE] & CONTROL_FLAG_MASK


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


# _scan.append_batch's rules: (config, clock, decompress, file, info type, end type), config the
# int64s it reads packed (_ONE_CALL_CONFIG): compact, max.message.bytes, message.timestamp.type
# (_TIMESTAMP_TYPES), before.max.ms, after.max.ms, segment.bytes, segment.ms
_OneCallRules = tuple[bytes, Callable[[], int], Callable, str, type[AppendInfo], type[LogOffsetMetadata]]
_ONE_CALL_CONFIG = struct.Struct("=7q")
_TIMESTAMP_TYPES = {"CreateTime": 1, "LogAppendTime": 2}  # (any other: 0, neither checked nor stamped)


class PartitionLog:
    """The log of one topic partition, in one directory.

    ``standalone``: no broker replicates the partition, and the log's owner keeps its
    high watermark at its log end (see the module's docstring); otherwise the high
    watermark starts at ``high_watermark`` (the replication-offset-checkpoint's) and
    moves only through ``update_high_watermark``. A read-only log's is its log end."""

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
        standalone: bool = True,
        clock: Callable[[], int] | None = None,
        scheduler_delete: Callable[[Callable[[], None], float], None] | None = None,
        read_only: bool = False,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = dir
        self._state = READ_ONLY if read_only else OPEN
        self._reader = read_only  # the log's kind, fixed: READ_ONLY, or CLOSED after it
        self.topic = topic
        self.partition = partition
        self._clock = clock or _now_ms
        self.validator = LogValidator(dir, config, self._clock)
        self._config = config
        self.standalone = standalone
        self._schedule_delete = scheduler_delete
        self._lock = RLock()
        self._hw_lock = threading.Lock()  # maybe_increment_high_watermark's compare and set
        self._segments: tuple[LogSegment, ...] = ()
        # readers take both at once (one attribute load): set separately, a reader could
        # pair a new segment tuple with old base offsets and read the wrong segment
        self._view: tuple[tuple[LogSegment, ...], bytes] = ((), b"")
        self._ts_prefix: tuple[tuple[LogSegment, ...], bytes, int] | None = None
        self.leader_epoch_cache = LeaderEpochCache(dir, read_only)
        self._role = LEADER
        self._leader_epoch = self.leader_epoch_cache.latest_epoch or 0
        self._refresh_one_call()
        self.recovery_point = recovery_point
        self._last_flush_ms = self._clock()
        self._high_watermark = 0  # set from the log end once loaded (a load may truncate, which reads it)
        self._hw_metadata: tuple[int, tuple[LogSegment, ...], LogOffsetMetadata] | None = None
        self._followed_tail: tuple[LogSegment, int] | None = None  # refresh(): the active segment, its end
        # idempotence and transactions: each producer's last batches, open transactions (a
        # read-only log's loaded when first asked, and again once the log moved: _reader_key)
        self.producer_state = ProducerStateManager(
            dir, producer_id_expiration_ms=producer_id_expiration_ms, read_only=read_only
        )
        self._reader_key: tuple[tuple[LogSegment, ...], int, int] | None = None
        snapshots = self._load(recovery_point, log_start_offset, had_clean_shutdown)
        self._high_watermark = self.log_end_offset
        if not read_only:
            self._load_producer_state(had_clean_shutdown, rebuild_txn_index=not had_clean_shutdown, snapshots=snapshots)
            # the index an ABORT marker's append adds to: one that does not read is made again now
            # (a sealed segment's, when a read meets it)
            self._txn_index_entries(self.segments, self.active_segment)
        if high_watermark is not None and not standalone and not read_only:
            self._high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic's config changed: the log and its checks take the new one."""
        self._config = self.validator.config = config
        self._refresh_one_call()

    def _refresh_one_call(self) -> None:
        """What the one-call append reads (in ``append_batches``), made again whenever the config,
        the state or the role changes: its rules (``_scan.append_batch``'s), None when the
        log takes no such append (not open, not leading, or flushed by time, which reads
        the clock after every append); flush.messages; and the epoch cache's list last
        found in force, forgotten."""
        c = self._config
        self._flush_messages = c.flush_messages
        self._one_call_epochs: list[tuple[int, int]] | None = None
        self._one_call_rules: _OneCallRules | None = None
        if self._state is not OPEN or self._role is not LEADER or c.flush_ms < _NEVER:
            return
        try:
            config = _ONE_CALL_CONFIG.pack(
                1 if c.compact else 0,
                min(max(c.max_message_bytes, -1), INT64_MAX),  # (as the walk takes it: past any buffer, no limit)
                _TIMESTAMP_TYPES.get(c.message_timestamp_type, 0),
                c.message_timestamp_before_max_ms,
                c.message_timestamp_after_max_ms,
                c.segment_bytes,
                c.segment_ms,
            )
        except struct.error:  # a setting past an int64: the general path's, which checks it as Python's ints
            return
        self._one_call_rules = (config, self._clock, decompress, self.dir, AppendInfo, LogOffsetMetadata)

    # --- state and role (see the tables at the top) -------------------------------------------

    def _move(self, to: LogState) -> None:
        if to not in _NEXT_STATES[self._state]:
            raise IllegalStateTransitionError(
                f"log {self.name} cannot go from {self._state.value} to {to.value}", file=self.dir
            )
        self._state = to
        self._refresh_one_call()

    @property
    def state(self) -> LogState:
        return self._state

    @property
    def closed(self) -> bool:
        return self._state is CLOSED

    @property
    def read_only(self) -> bool:
        """Opened beside the process that owns the dir (closed since, or not)."""
        return self._reader

    @property
    def role(self) -> Role:
        return self._role

    @property
    def leader_epoch(self) -> int:
        """The epoch a leader stamps on the batches it appends; changed only by
        ``become_leader`` and ``become_follower``."""
        return self._leader_epoch

    def become_leader(self, leader_epoch: int) -> None:
        """This replica leads the partition from ``leader_epoch`` on (Kafka's makeLeader):
        its appends get offsets here and carry the epoch. The high watermark stays with
        its owner (a broker's replica manager: the min LEO of the ISR)."""
        self._change_role(LEADER, leader_epoch)

    def become_follower(self, leader_epoch: int) -> None:
        """Another replica leads the partition at ``leader_epoch`` (Kafka's makeFollower):
        this log takes the leader's batches only (``append_as_follower``), and refuses a
        producer's with NOT_LEADER_OR_FOLLOWER."""
        self._change_role(FOLLOWER, leader_epoch)

    def _change_role(self, role: Role, leader_epoch: int) -> None:
        check_int("leader epoch", leader_epoch, 0, INT32_MAX, file=self.dir)
        with self._lock:
            self._check_open()
            if leader_epoch < self._leader_epoch:
                raise FencedLeaderEpochError(
                    f"{self.name} cannot become {role.value} at leader epoch {leader_epoch}: "
                    f"older than its epoch {self._leader_epoch}",
                    file=self.dir,
                )
            log.debug("%s: %s -> %s at leader epoch %d", self.name, self._role.value, role.value, leader_epoch)
            self._role, self._leader_epoch = role, leader_epoch
            self._refresh_one_call()

    def _check_leader(self) -> None:
        """Under the lock, before a leader's append: open, and leading."""
        if self._state is not OPEN:
            self._check_open()
        if self._role is not LEADER:
            raise NotLeaderOrFollowerError(
                f"{self.name} follows at leader epoch {self._leader_epoch}: it takes no producer's append",
                file=self.dir,
            )

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

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> list[int] | None:
        """Load the segments (``loader.py``), then the offsets that follow from them.
        Returns the producer state snapshots the loader listed (None when a truncation
        here may have deleted some: listed again then)."""
        loader = LogLoader(self.dir, self.name, self._segment_args, self.leader_epoch_cache, read_only=self.read_only)
        loaded = loader.load(recovery_point, log_start_offset, clean)
        self._set_segments(loaded.segments)
        self._next_offset = loaded.next_offset
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if self.log_start_offset > self._next_offset:
            # a checkpoint ahead of the data (the data went): start the log afresh there
            # (a reader, which may not touch the files, sees it empty there)
            if self.read_only:
                self._next_offset = self.log_start_offset
            else:
                self._truncate_fully(self.log_start_offset)
                loaded = loaded._replace(snapshot_offsets=None)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self._next_offset)
        if not self.read_only:
            self.leader_epoch_cache.truncate_from_end(self._next_offset)
        self._end_metadata = self._log_end_metadata()
        return loaded.snapshot_offsets

    # --- segments ------------------------------------------------------------------------------

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        for s in segments[:-1]:
            s.active = False
        self._segments = tuple(segments)
        self._view = (self._segments, _pack([s.base_offset for s in self._segments]))
        self._ts_prefix = None

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _floor_segment(self, offset: int) -> int:
        """Index of the segment whose base offset is the largest <= ``offset``."""
        segments, bases = self._view
        return _floor(bases, len(segments), offset)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        """The log end offset with where it is: the active segment and its size."""
        return self._end_metadata

    def _log_end_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(self._next_offset, active.base_offset, active.size)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark with where it is: the segment and position of the batch
        holding it (the log end's when it is there). Looked up when the high watermark
        or the segments changed since the last call."""
        hw, end, segments = self._high_watermark, self._end_metadata, self._segments
        if hw == end.message_offset:
            return end
        cached = self._hw_metadata
        if cached is not None and cached[0] == hw and cached[1] is segments:
            return cached[2]
        segment = segments[self._floor_segment(hw)]
        header = segment.translate_offset(hw)
        metadata = LogOffsetMetadata(hw, segment.base_offset, segment.size if header is None else header.position)
        self._hw_metadata = (hw, segments, metadata)
        return metadata

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark; clamped to [log start, log end]. Its owner calls it: a
        broker's replica manager, to the min LEO of the ISR (a leader) or the leader's
        high watermark (a follower). A standalone log's moves with its log end."""
        if type(offset) is not int or not 0 <= offset <= INT64_MAX:  # (no call on every append's way)
            check_int("high watermark", offset, 0, INT64_MAX, file=self.dir)
        # min(max(offset, log start), log end), without the builtins' calls (every append)
        hw = offset if offset > self.log_start_offset else self.log_start_offset
        self._high_watermark = hw = hw if hw < self._next_offset else self._next_offset
        self.producer_state.on_high_watermark_updated(hw)
        return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the high watermark to ``offset`` (clamped to the log end) if that is
        higher (Kafka's maybeIncrementHighWatermark): its owner's call after appends, safe
        against another thread's call with an older log end. Its own small lock, never
        held across I/O (the log's may be, by an fsync): an event loop may call it.
        Returns whether it moved."""
        check_int("high watermark", offset, 0, INT64_MAX, file=self.dir)
        with self._hw_lock:
            target = min(offset, self._next_offset)
            if target <= self._high_watermark:
                return False
            self._high_watermark = target
        self.producer_state.on_high_watermark_updated(target)
        return True

    @property
    def size_in_bytes(self) -> int:
        # map, not a generator: DescribeLogDirs asks it of every log, 10,000 of them a request
        return sum(map(_SEGMENT_SIZE, self._segments))

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

    @overload
    def append_batches(
        self, data: bytes | bytearray | memoryview, *, origin: AppendOrigin = ..., wait: Literal[True] = ...
    ) -> AppendInfo: ...

    @overload
    def append_batches(
        self, data: bytes | bytearray | memoryview, *, origin: AppendOrigin = ..., wait: bool
    ) -> AppendInfo | None: ...

    def append_batches(
        self, data: bytes | bytearray | memoryview, *, origin: AppendOrigin = AppendOrigin.CLIENT, wait: bool = True
    ) -> AppendInfo | None:
        """Append record batches as the leader: validate them, assign offsets by
        rewriting base offsets, stamp LogAppendTime if configured.

        ``origin`` is CLIENT (a producer: no control batches), or COORDINATOR (the
        coordinators' markers and offsets). ``wait`` False: ``try_append_batches``.

        As in Kafka (LogValidator runs under the log's lock), the batches are validated
        where their offsets are assigned: one C call (``_scan.check_and_assign``) makes every
        check of ``LogValidator.validate_general`` and then the edits, or none of them. A
        producer's usual append, and a coordinator's batch of records (an offset commit's), is
        one C call in all (``_scan.append_batch``, which reads and writes the segment's state
        in its slots), made in this one frame: this runs on every produce. An idempotent
        producer's batch next in order is too, when its producer state changes by no more than
        the batch kept (``_scan.append_batch`` finds that; ``on_in_order_append`` records it). The general path
        (``_append_as_leader``) takes what it does not: not that append, or something besides
        due (a roll, the leader epoch's first batch, a flush by time, an injected fault)."""
        if origin is not _CLIENT:
            self.validator.check_origin(origin)
        lock = self._lock
        if wait:
            buffer = data if isinstance(data, bytearray) else bytearray(data)
            lock.acquire()  # (not ``with``: its __enter__ and __exit__ cost 0.1 µs more, every append)
        elif not lock.acquire(False):  # (positional: a keyword is a dict made, every append)
            return None
        try:
            if not wait:
                c = self._config
                # a batch's records take more than a byte each: len(data) bounds their count
                if c.flush_ms < _NEVER or self._next_offset - self.recovery_point + len(data) >= c.flush_messages:
                    return None
                buffer = bytearray(data)  # (refused, the append leaves the caller's bytes untouched)
            rules = self._one_call_rules
            if (
                rules is not None
                and not _FAULTS
                and (origin is _CLIENT or _no_control(buffer))
                and (self.leader_epoch_cache.entries is self._one_call_epochs or self._epoch_in_force())
            ):
                # an idempotent producer's batch next in order too, found in its state (a coordinator's,
                # a transactional offset commit, as well: the general path checks no sequence of it)
                producers = self.producer_state
                done = _scan.append_batch(
                    buffer, self._segments[-1], rules, self._next_offset, self._leader_epoch, producers.producers
                )
                if isinstance(done, tuple):  # _advance's and the producer state's on_append, for it
                    info, self._end_metadata, end, entry = done
                    self._next_offset = end
                    if self.standalone:
                        self._high_watermark = end
                    if end - self.recovery_point >= self._flush_messages:
                        self._maybe_flush()
                    if entry is None:
                        producers.map_end_offset = end
                    else:
                        producers.on_in_order_append(entry, info, end)
                    return info
                if done is not None:  # the write failed (a full disk): what part of it was written is cut off
                    self._segments[-1].write_failed(done)
            return self._append_as_leader(buffer, origin, may_roll=wait)
        finally:
            lock.release()

    def try_append_batches(
        self, data: bytes | bytearray | memoryview, *, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendInfo | None:
        """``append_batches`` if it cannot wait on anything but memory, else None with the
        log and ``data`` untouched: when another thread holds the log's lock, or the append
        would roll a segment (files made) or be followed by an fsync (flush.messages or
        flush.ms). For an event loop, which hands the appends refused to a thread."""
        return self.append_batches(data, origin=origin, wait=False)

    def _epoch_in_force(self) -> bool:
        """Whether the one-call append may take a batch of the log's leader epoch, asked
        when the epoch cache's list changed since last asked (it replaces its list on every
        change): the epoch is in force there; else it is the epoch's first batch, which the
        general path assigns. Under the lock."""
        epochs = self.leader_epoch_cache.entries
        if not epochs or epochs[-1][0] != self._leader_epoch:
            return False
        self._one_call_epochs = epochs
        return True

    def _append_as_leader(self, buffer: bytearray, origin: AppendOrigin, *, may_roll: bool) -> AppendInfo | None:
        """Validate, assign offsets and append, under the lock; None (nothing written)
        when the append needs a roll and ``may_roll`` is False."""
        c = self._config
        bounds, stamp, assignment = self._leader_append_rules()
        assigned = _scan.check_and_assign(
            buffer,
            origin != AppendOrigin.CLIENT,
            c.compact,
            c.max_message_bytes,
            bounds,
            decompress,
            self.dir,
            assignment,
        )
        if assigned is None:  # legacy messages (Produce v0-2): converted to the log's format first
            buffer = self.validator.to_v2(buffer, bounds)  # (their timestamps checked there)
            assigned = _scan.check_and_assign(
                buffer, origin != "client", c.compact, c.max_message_bytes, None, decompress, self.dir, assignment
            )
            assert assigned is not None
        entries, first, last, max_ts, count = assigned
        producers = self.producer_state
        check = producers.analyze_append(buffer, entries, origin)
        if check.duplicate is not None:  # a producer's retry: acknowledged with the first append's offsets
            d = check.duplicate
            return AppendInfo(d.first_offset, d.last_offset, d.timestamp, 0, 0)
        if not may_roll and self._segments[-1].should_roll(len(buffer), max_ts, last, c.segment_bytes, c.segment_ms):
            return None
        self._append_locked(buffer, entries, first, last, max_ts, ((self._leader_epoch, first),))
        producers.on_append(check, last + 1, self._segments[-1], self._high_watermark)
        # (tuple.__new__: the named tuple's own constructor costs as much again, on every append)
        return _new(AppendInfo, (first, last, max_ts, count, len(buffer), -1 if stamp is None else stamp))

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
                    assigned = _scan.check_and_assign(
                        mapped, False, c.compact, c.max_message_bytes, bounds, decompress, path, assignment
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
            segment = self._roll(first)
            self._assign_epochs(((self._leader_epoch, first),))
            segment.adopt(path, entries)  # an empty active segment at the log end takes the file
            log.debug("%s: %s became the segment at offset %d", self.name, path, first)
            self._advance(last)
            self.producer_state.on_append(check, self._next_offset, self._segments[-1], self._high_watermark)
            return AppendInfo(first, last, max_ts, count, size, -1 if stamp is None else stamp)

    def _leader_append_rules(self) -> tuple[tuple[int, int] | None, int | None, tuple[int, int, int | None, int]]:
        """For a leader's append, under the lock: the CreateTime bounds its timestamps must
        lie in, the LogAppendTime it is stamped with, and its assignment (next offset,
        leader epoch, stamp, segment.bytes) as ``_scan.check_and_assign`` takes it."""
        if self._state is not OPEN or self._role is not LEADER:
            self._check_leader()
        bounds, stamp = self.validator.leader_rules()
        return bounds, stamp, (self._next_offset, self._leader_epoch, stamp, self._config.segment_bytes)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches copied from a leader: offsets and epochs are kept, and
        must continue the log."""
        buffer = data if isinstance(data, bytearray) else bytearray(data)
        batches = self.validator.validate(buffer, leader=False, origin=AppendOrigin.REPLICATION)
        self.validator.check_follower_records(buffer, batches)
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
            self.producer_state.on_append(check, self._next_offset, self._segments[-1], self._high_watermark)
            return AppendInfo(first, last, max_ts, sum(b[2] for b in batches), size)

    def _check_open(self) -> None:
        if self._state is CLOSED:
            raise KafkaStorageError(f"log {self.name} is closed", file=self.dir)
        if self._state is READ_ONLY:
            raise KafkaStorageError(f"log {self.name} is open read-only", file=self.dir)

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
        c = self._config
        if segment.should_roll(len(buffer), max_ts, last, c.segment_bytes, c.segment_ms):
            segment = self._roll(first)
            if not segment.offset_index.can_append_offset(last):
                raise RecordTooLargeError(
                    f"append spans offsets {first}..{last}, more than a segment can index", file=self.dir
                )
        # else the segment can index ``last``: should_roll checks that
        in_force = self.leader_epoch_cache.entries
        if len(epochs) > 1 or not in_force or in_force[-1][0] != epochs[0][0]:  # (the usual append: no call)
            self._assign_epochs(epochs)
        segment.append(buffer, entries)
        self._advance(last)

    def _assign_epochs(self, epochs: Sequence[tuple[int, int]]) -> None:
        """Before an append's batches are written, as Kafka's UnifiedLog.append: a new
        epoch's checkpoint that fails (a full disk) fails the append with nothing in the
        log; written after, it left a batch in the segment past the log end offset."""
        cache = self.leader_epoch_cache
        for epoch, start in epochs:
            if not cache.entries or cache.entries[-1][0] != epoch:  # else in force already (offsets only grow)
                cache.assign(epoch, start)

    def _advance(self, last: int) -> None:
        """After an append whose last offset is ``last``: the log end offset (and where
        it is), a standalone log's high watermark, and a flush if one is due."""
        c = self._config
        active = self._segments[-1]
        # (tuple.__new__: half the cost of the named tuple's constructor, on every append)
        self._end_metadata = _new(LogOffsetMetadata, (last + 1, active.base_offset, active.size))
        self._next_offset = last + 1
        if self.standalone:
            self._high_watermark = last + 1
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
        self._end_metadata = LogOffsetMetadata(self._next_offset, base, 0)
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

    @property
    def flushes_by_time(self) -> bool:
        """Whether flush.ms is set: the periodic flush has anything to do here (appends see to
        flush.messages themselves)."""
        return self._config.flush_ms < _NEVER

    def flush_if_due(self) -> None:
        """The periodic flush for flush.ms (called by the log manager)."""
        with self._lock:
            if self._state is not CLOSED:
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
        read_committed: bool = False,
    ) -> FetchDataInfo:
        """Bytes of whole batches from the batch holding ``offset``, below ``upper_bound``
        (default: the high watermark). The slice (``records``) starts at a batch boundary
        and holds at least the first batch whole when ``min_one_message``, however large;
        ``fetch_offset_metadata`` says where it starts (segment, position). A read with
        nothing to return has no slice, and the metadata of the log end when it asked
        for the log end offset, else the offset alone.

        ``read_committed`` (Kafka's ``FetchIsolation.TXN_COMMITTED``): the bound defaults to
        the last stable offset, and the answer's ``aborted_transactions`` are those that
        overlap what was read (Kafka's ``LocalLog.addAbortedTransactions``: from the
        ``.txnindex`` of the segment read on, up to an offset the segment's offset index
        puts past the bytes read, else the next segment's base offset or the log end).

        A segment deleted under the read (retention, a truncation, a cleaner's swap, with
        file.delete.delay.ms too short for this reader) is not a storage error: the read
        looks again at the segments there now, or raises OffsetOutOfRangeError when the
        offset fell below the log start (or past the end) meanwhile."""
        # The usual arguments pass an inline test, and the first attempt runs outside the
        # retry loop: check_int's calls and the loop's generator and context manager cost
        # a fifth of a one-batch lookup (bench/storage.py lookups).
        if not (
            type(offset) is int
            and type(max_bytes) is int
            and INT64_MIN <= offset <= INT64_MAX
            and 0 <= max_bytes <= INT32_MAX
        ):
            self._check_offset_arg("offset", offset, INT64_MIN)
            check_int("max_bytes", max_bytes, 0, INT32_MAX, file=self.dir)
        if upper_bound is not None:
            self._check_offset_arg("upper_bound", upper_bound, INT64_MIN)
        elif read_committed:
            upper_bound = self.last_stable_offset
        self._check_range(offset)
        segments, bases = self._view
        try:
            return self._read_from(segments, bases, offset, max_bytes, upper_bound, min_one_message, read_committed)
        except KafkaStorageError as e:
            if not vanished(e):
                raise
            self._check_range(offset)
            if self._view[0] is segments:
                raise  # the log still lists it: a file went behind its back
        for attempt in retry_while_vanishing(_READ_ATTEMPTS - 1):
            segments, bases = self._view
            with attempt:
                return self._read_from(segments, bases, offset, max_bytes, upper_bound, min_one_message, read_committed)
            self._check_range(offset)
            if self._view[0] is segments and attempt.error is not None:
                raise attempt.error  # the log still lists it: a file went behind its back
        raise AssertionError("unreachable: the last attempt raises")

    def _read_from(
        self,
        segments: tuple[LogSegment, ...],
        bases: bytes,
        offset: int,
        max_bytes: int,
        upper_bound: int | None,
        min_one_message: bool,
        read_committed: bool = False,
    ) -> FetchDataInfo:
        end = self._high_watermark if upper_bound is None else min(upper_bound, self._next_offset)
        if offset >= end:
            return self._nothing_at(offset, read_committed)
        n = len(segments)
        i = _floor(bases, n, offset)
        # the bound (high watermark, log end) lies in the last segment but for moments: no second search
        end_segment = n - 1 if end > segments[-1].base_offset else _floor(bases, n, end - 1)
        while i <= end_segment:
            segment = segments[i]
            max_position = self._position_of(segment, end) if i == end_segment else segment.size
            fetch = segment.read(offset, max_bytes, max_position, min_one_message)
            if fetch is not None:
                if read_committed:
                    return self._with_aborted_transactions(segments, i, offset, fetch)
                return fetch
            i += 1
        return self._nothing_at(offset, read_committed)

    def _nothing_at(self, offset: int, read_committed: bool = False) -> FetchDataInfo:
        end = self._end_metadata
        return FetchDataInfo(
            end if end.message_offset == offset else LogOffsetMetadata(offset),
            None,
            False,
            [] if read_committed else None,
        )

    def _with_aborted_transactions(
        self, segments: tuple[LogSegment, ...], i: int, offset: int, fetch: FetchDataInfo
    ) -> FetchDataInfo:
        """``fetch``, read from ``segments[i]``, with the aborted transactions of its range
        (Kafka's ``addAbortedTransactions``). The bound is coarse, as Kafka's: a consumer
        drops records by the aborted transactions it is told, so one more is harmless."""
        segment, records = segments[i], fetch.records
        assert records is not None
        upper = segment.fetch_upper_bound_offset(records.position, records.size)
        if upper is None:
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else self._next_offset
        return fetch._replace(aborted_transactions=self._collect_aborted(segments, i, offset, upper))

    # --- transactions (read_committed readers) ----------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """Kafka's ``UnifiedLog.lastStableOffset``: where a read_committed reader stops. The
        first offset of the earliest transaction not yet decided, or decided by a marker the
        high watermark has not passed (the producer state's ``first_unstable_offset``, at the
        log start offset at the least), when that is below the high watermark; else the high
        watermark. Taken without the log's lock: the producer state's transactions first,
        then the high watermark (see ``ProducerStateManager.unstable``)."""
        unstable = self._producers_for_readers().unstable
        hw = self._high_watermark
        first = first_unstable(unstable, hw)
        if first is None or first >= hw:
            return hw
        return max(first, self.log_start_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions that overlap [``start_offset``, ``upper_bound_offset``):
        ABORT marker at or after the start, first offset below the bound (Kafka's
        ``LocalLog.collectAbortedTransactions``, the fetch's form), in marker order. Read
        from the ``.txnindex`` of the segment holding ``start_offset`` and of those after
        it, until an entry's last stable offset reaches the bound (``txn_index.py``)."""
        self._check_offset_args(start_offset, upper_bound_offset)
        segments, bases = self._view
        return self._collect_aborted(
            segments, _floor(bases, len(segments), start_offset), start_offset, upper_bound_offset
        )

    def _collect_aborted(
        self, segments: tuple[LogSegment, ...], i: int, start: int, upper_bound: int
    ) -> list[AbortedTxn]:
        """``collect_aborted_transactions`` from ``segments[i]`` on. A read-only log's
        producer state replayed the markers from its snapshot on (``replayed_from``): those
        it met are taken from the replay, not from the indexes, which the owner writes just
        after the markers (a reader between the two, or after a crash between them, would
        miss the entry)."""
        replayed_from = None
        if self._reader:
            producers = self._producers_for_readers()
            replayed_from, replayed = producers.replayed_from, producers.replayed_aborts
        found: list[AbortedTxn] = []
        for segment in segments[i:]:
            if replayed_from is not None and segment.base_offset >= replayed_from:
                break
            try:
                result = segment.collect_aborted_txns(start, upper_bound)
            except CorruptIndexError:
                result = search_aborted_txns(self._txn_index_entries(segments, segment), start, upper_bound)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
        if replayed_from is not None:
            found = [t for t in found if t.last_offset < replayed_from]
            found += [t for t in replayed if t.last_offset >= start and t.first_offset < upper_bound]
        return found

    def _txn_index_entries(self, segments: tuple[LogSegment, ...], segment: LogSegment) -> list[AbortedTxn]:
        """The entries of ``segment``'s ``.txnindex``; a corrupt one is made again from the
        segment's markers (Kafka recovers a segment whose index fails its checks), with the
        producer state as of the segment's start: the latest snapshot at or before it, and
        the batch headers after. The owner writes it out (under the log's lock, unless a
        writer mended it first); a reader keeps what it found to itself."""
        try:
            return segment.txn_index.entries()
        except CorruptIndexError as e:
            log.warning("%s: %s; making it again from the segment's markers", self.name, e)
        entries = aborted_txns_rebuilt(
            self.dir, segments, segment, self.log_start_offset, self._next_offset, self._clock(),
            self.producer_state.producer_id_expiration_ms,
        )  # fmt: skip
        if not self._reader:
            with self._lock:
                try:
                    return segment.txn_index.entries()
                except CorruptIndexError:
                    segment.txn_index.write(entries)
        return entries

    def _producers_for_readers(self) -> ProducerStateManager:
        """The producer state that answers readers: the owner's, kept by its appends; a
        read-only log's loaded on first use and again when its segments or its end moved
        (``refresh``): the latest snapshot its owner wrote at or before the log end, and
        the batch headers after it, as the owner loads it (Kafka's way, not a walk of the
        whole log)."""
        producers = self.producer_state
        if not self._reader:
            return producers
        key = self._reader_key
        if key is None or key[0] is not self._segments or key[1:] != (self._next_offset, self.log_start_offset):
            with self._lock:
                segments, end, start = self._segments, self._next_offset, self.log_start_offset
                key = self._reader_key
                if key is None or key[0] is not segments or key[1:] != (end, start):
                    producers.load(segments, start, end, self._clock())
                    self._reader_key = (segments, end, start)
        return producers

    def _position_of(self, segment: LogSegment, end: int) -> int:
        """The byte position in ``segment`` after the last batch holding offsets below
        ``end`` (a batch straddling ``end`` is included: its reader filters records).

        The size is taken first: a batch the writer appends meanwhile lies past it. (Taking
        the size when ``end`` is the log end offset would race with the writer, which grows
        the segment before it moves the log end offset.)

        At the log end itself the place the last append left (``_end_metadata``, one
        snapshot of offset, segment and size) answers without a lookup: a consumer of a
        log whose high watermark is its end reads so, a fetch's 5 µs of index and header
        reads spared; cut to the size in case a truncation is under way."""
        known = self._end_metadata
        if known.message_offset == end and known.segment_base_offset == segment.base_offset:
            return min(known.relative_position_in_segment, segment.size)
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
            if self._state is not READ_ONLY:
                raise KafkaStorageError(f"only an open read-only log is refreshed, not {self.name}", file=self.dir)
            before = self._next_offset
            segments = self._segments
            tail = segments[-1]
            # listed before any size is read: a segment the owner rolled away from is whole by then
            listed = set(reader_segment_bases(self.dir, fileio.list_dir(self.dir), tail.base_offset))
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
            self._end_metadata = LogOffsetMetadata(self._next_offset, tail.base_offset, end)
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self._high_watermark = self._next_offset  # a reader's: what is whole on disk
            for segment in gone:
                segment.close_handlers()
            return self._next_offset != before

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
        if type(timestamp) is not int or not MAX_TIMESTAMP <= timestamp <= INT64_MAX:  # (inline: see read)
            check_int("target timestamp", timestamp, MAX_TIMESTAMP, INT64_MAX, InvalidTimestampError, file=self.dir)
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._high_watermark, -1
        if timestamp == MAX_TIMESTAMP:
            return self._looking_again_while_vanishing(self._max_timestamp_offset)
        if timestamp < 0:
            raise InvalidTimestampError(f"invalid target timestamp {timestamp}", file=self.dir)
        return self._looking_again_while_vanishing(lambda segments: self._first_at_or_after(segments, timestamp))

    def _looking_again_while_vanishing(self, lookup: Callable[[tuple[LogSegment, ...]], _T]) -> _T:
        """``lookup`` over the segments listed now; as ``read``: a segment deleted under it
        (retention, a truncation, a cleaner's swap) is no storage error, the lookup runs
        again over the segments listed then."""
        for attempt in retry_while_vanishing(_READ_ATTEMPTS):
            segments = self._segments
            with attempt:
                return lookup(segments)
            if self._segments is segments and attempt.error is not None:
                raise attempt.error  # the log still lists it: a file went behind its back
        raise AssertionError("unreachable: the last attempt raises")

    # Segments whose names overlap in offsets (a segment holding offsets at or past the next
    # one's base: files copied in by hand, or by a tool's mistake) are kept as they are, as
    # Kafka's LogLoader keeps them (its LogSegments are keyed by base offset, and nothing
    # checks the overlap). A read of an offset goes to the floor segment, so the next
    # segment shadows the tail of the one before it; lookups by time answer from the records
    # such a read returns: a segment's record at or past the next base offset is no answer.
    # Recovery drops none of the shadowed bytes (nothing proves the next segment holds the
    # same records), and a reader in another process, which recovers nothing, answers alike.

    def _first_at_or_after(self, segments: tuple[LogSegment, ...], timestamp: int) -> tuple[int, int] | None:
        # (the search is not misled by shadowed records: a segment's largest timestamp over
        # more records than a read returns can only send the search to it, never past it)
        prefix, count = self._timestamp_prefix(segments)
        i = _floor_entry(prefix, count, 8, 8, timestamp - 1, 0) + 1  # the first >= timestamp
        start = self.log_start_offset
        while i < len(segments):
            found = segments[i].find_offset_by_timestamp(timestamp, start)
            if found is not None and (i + 1 == len(segments) or found[1] < segments[i + 1].base_offset):
                ts, offset = found
                return (offset, ts) if offset < self._high_watermark else None
            i += 1  # (none, or a shadowed one: then none of this segment's readable records reaches it)
        return None

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0's answer (Kafka's ``legacyFetchOffsetsBefore``): up to
        ``max_num_offsets`` offsets, descending, from the segments' base offsets (the log
        start offset for the first) and the log end offset, each known by the time its file
        was last modified (the log end by now). -1 (latest) starts from the log end, -2
        (earliest) from the first segment alone, a time from the last whose mtime is at or
        before it: the granularity of old clients' offset lookups, a segment."""
        return self._looking_again_while_vanishing(
            lambda segments: self._legacy_offsets_in(segments, timestamp, max_num_offsets)
        )

    def _legacy_offsets_in(self, segments: tuple[LogSegment, ...], timestamp: int, max_num_offsets: int) -> list[int]:
        points = [(max(s.base_offset, self.log_start_offset), s.last_modified_ms) for s in segments]
        if segments[-1].size > 0:
            points.append((self._next_offset, self._clock()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(points) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(points) - 1
            while start >= 0 and points[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((points[start - j][0] for j in range(count)), reverse=True)

    def _timestamp_prefix(self, segments: tuple[LogSegment, ...]) -> tuple[bytes, int]:
        """Running max of the largest timestamps of the segments before the active one:
        monotonic, so the first segment with max timestamp >= t is found by binary search instead
        of a scan (past them all: the active one). Kept with the tuple it was made for,
        whose inactive segments no longer change; the active one's grows with appends, so
        it is left out rather than cached stale by a reader racing an append."""
        cached = self._ts_prefix
        if cached is not None and cached[0] is segments:
            return cached[1], cached[2]
        prefix, running = [], -1
        for s in segments[:-1]:
            running = max(running, s.max_timestamp)
            prefix.append(running)
        packed = _pack(prefix)
        self._ts_prefix = (segments, packed, len(prefix))
        return packed, len(prefix)

    def _max_timestamp_offset(self, segments: tuple[LogSegment, ...]) -> tuple[int, int] | None:
        bounds = [s.base_offset for s in segments[1:]] + [INT64_MAX]
        maxima = [self._readable_max_timestamp(s, bound) for s, bound in zip(segments, bounds, strict=True)]
        i = max(range(len(segments)), key=lambda i: maxima[i][0])
        best, (max_ts, shallow) = segments[i], maxima[i]
        if max_ts < 0:
            return None
        found = best.find_offset_by_timestamp(max_ts, max(shallow - (1 << 31), self.log_start_offset))
        return (found[1], found[0]) if found else (shallow, max_ts)

    @staticmethod
    def _readable_max_timestamp(segment: LogSegment, bound: int) -> tuple[int, int]:
        """The largest timestamp of ``segment``'s batches below ``bound`` (the next segment's
        base offset) and the offset carrying it: the segment's own, unless a shadowed batch
        carries that (overlapping segments, see above); then its batches are scanned."""
        max_ts, offset = segment.max_timestamp_and_offset
        if offset < bound:
            return max_ts, offset
        best = (-1, segment.base_offset)
        for header in segment.scan_headers():
            if header.base_offset >= bound:
                break
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
        return best

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
            # a corrupt .txnindex raises once the log is cut: made again below from the markers left
            with contextlib.suppress(CorruptIndexError):
                segment.truncate_to(offset)
            segment.active = True
            self._next_offset = segment.read_next_offset()
            self._after_truncation()
            self._txn_index_entries(self._segments, segment)
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
        self._end_metadata = self._log_end_metadata()
        self.recovery_point = min(self.recovery_point, self._next_offset)
        self._high_watermark = min(self._high_watermark, self._next_offset)
        if self.standalone:
            self._high_watermark = self._next_offset
        self.leader_epoch_cache.truncate_from_end(self._next_offset)
        self._load_producer_state(False)
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def _load_producer_state(
        self, clean: bool, *, rebuild_txn_index: bool = False, snapshots: list[int] | None = None
    ) -> None:
        self.producer_state.load_log(
            self._segments,
            self.log_start_offset,
            self._next_offset,
            self._clock(),
            clean_shutdown=clean,
            rebuild_txn_index=rebuild_txn_index,
            snapshot_offsets=snapshots,
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
            if self._state is not OPEN:
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
            if self._state is not OPEN or not old:
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
            if self._state is CLOSED:
                return
            if self._state is READ_ONLY:
                self.close_without_flush()
                return
            self._flush_locked(self._next_offset)
            self.producer_state.on_close(self._next_offset)
            for segment in self._segments:
                segment.close()
            self._move(CLOSED)

    def close_without_flush(self) -> None:
        """Release files as a crash would leave them (tests, and a failed dir)."""
        with self._lock:
            for segment in self._segments:
                segment.close_handlers()
            self._move(CLOSED)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name}, start={self.log_start_offset}, end={self._next_offset}, "
            f"hw={self._high_watermark}, segments={len(self._segments)}, {self._state.value}, "
            f"{self._role.value} at epoch {self._leader_epoch})"
        )
