"""A log segment: one ``.log`` of batches with its sparse ``.index`` and ``.timeindex``,
and the ``.txnindex`` of the aborted transactions whose markers it holds (``txn_index.py``).

The segment is named after its base offset, the first offset it holds or could
hold. Batches are only appended. Every time more than ``index.interval.bytes``
of batches were appended since the last entry, the batch being appended gets an
offset index entry (its last offset, its start position) and the time index
gets the largest timestamp so far, if it grew.

Files are opened lazily: a log of 10,000 segments opens without touching
them, and an index is mapped (and checked) on its first lookup. A missing or
corrupt index is rebuilt from the log.

A read returns a ``FileSlice`` — file, position, size — that starts at a batch
boundary: the broker can hand it to sendfile, Spark can map it, a test can
read it into memory. Reading and scanning the ``.log``'s bytes is
``file_records.py``'s (Kafka's FileRecords); a segment adds its indexes, its
place in the log and the roll rules.

States (``SegmentState``), and the only moves between them::

    state     what it is                                 event                    next
    ACTIVE    the log's last segment, appended to        roll                     SEALED
                                                          a reader sees newer      SEALED
                                                          delete                   DELETED
    SEALED    an older segment: read, retained, cleaned  load (the last one)      ACTIVE
                                                          truncation (now last)    ACTIVE
                                                          delete                   DELETED
    DELETED   files unlinked; a reader holding it        (none: final)
              meets ENOENT and looks again

A segment is made ACTIVE (``create``: an empty one, at a roll) or SEALED (opened
from its files); the log marks the last one ACTIVE. Staying in a state is
always allowed (a log loading again marks its last segment anew).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import itertools
import logging
import os
import random
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    IllegalStateTransitionError,
    KafkaStorageError,
    RecordTooLargeError,
    SeglogError,
)
from ..records import LegacyBatch
from ..records.batches import peek_frame
from ..records.compression import decompress
from ..records.layout import LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH
from . import _scan, file_records, fileio
from .file_records import (
    _V2_PEEK,
    BatchHeader,
    FetchDataInfo,
    FileSlice,
    LogOffsetMetadata,
    header_at_position,
)
from .index import MAX_RELATIVE_OFFSET, NO_TIMESTAMP, OffsetIndex, TimeIndex
from .naming import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_file_name
from .txn_index import TransactionIndex, TxnIndexSearchResult

log = logging.getLogger(__name__)


class SegmentState(enum.Enum):
    __hash__ = object.__hash__  # (members are singletons: the C hash, not Enum's by name, on every append)

    ACTIVE = "active"
    SEALED = "sealed"
    DELETED = "deleted"


ACTIVE, SEALED, DELETED = SegmentState.ACTIVE, SegmentState.SEALED, SegmentState.DELETED
# the table above: the states each state may move to
_NEXT_STATES = {
    ACTIVE: frozenset({ACTIVE, SEALED, DELETED}),
    SEALED: frozenset({SEALED, ACTIVE, DELETED}),
    DELETED: frozenset({DELETED}),
}

_new = tuple.__new__
_RECOVERY_CHUNK = 1024 * 1024
_TIME_SEARCH_READ = 1024 * 1024  # the most a lookup by time reads of a batch it expects to search
_NOT_ONE_BATCH = (-1, -1)  # what a lookup by time found where it expected one whole batch: something else

# what a recovery walk carries from chunk to chunk (see _scan_and_index)
_WalkState = tuple[int, int | None, int, int, int, int]
_TXN_INDEX_MADE = threading.Lock()  # a segment's transaction index is made once, whichever thread asks first


class _MisleadingEntry(Exception):
    """An offset index entry that does not name the batch ending at its offset."""


class LogSegment:
    """One segment of a partition log. Not thread-safe for writers: the
    partition log holds its lock around every mutation."""

    # Slots, not a dict: a lookup in a log of thousands of segments meets its segment (and
    # indexes) cold, and slots keep the attributes in the object, a cache line or page fewer
    # a lookup (bench/storage.py lookups: an index lookup 3.8 -> 2.5 us at 10,000 segments);
    # and the one-call append (_scan.append_batch) reads and writes the append's state there
    __slots__ = (
        "__weakref__", "_clock", "_cuts", "_first_header", "_handle", "_max_ts_and_offset", "_offset_index",
        "_rolling_based_timestamp", "_rolling_loaded", "_size", "_time_index", "_txn_index", "_warned_of_index",
        "base_offset", "bytes_since_last_index_entry", "created_ms", "dir", "index_interval_bytes", "max_index_size",
        "read_only", "roll_jitter_ms", "state", "suffix",
    )  # fmt: skip

    def __init__(
        self,
        dir: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        clock: Callable[[], int] | None = None,
        created: bool = False,
        suffix: str = "",
        read_only: bool = False,
    ) -> None:
        self.dir = dir
        self.read_only = read_only
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.suffix = suffix
        self._clock = clock or _wall_clock_ms
        self._handle: fileio.FileHandle | None = None
        # the first batch's header, kept, with the count of cuts it was read at (_from_first_batch)
        self._first_header: tuple[int, BatchHeader] | None = None
        self._cuts = 0  # truncations of the file begun and ended (odd: one under way)
        self._size: int | None = 0 if created else None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self._max_ts_and_offset: tuple[int, int] | None = (NO_TIMESTAMP, base_offset) if created else None
        self._rolling_based_timestamp: int | None = None
        self._rolling_loaded = created
        self.bytes_since_last_index_entry = 0
        self._warned_of_index = False
        self.created_ms = self._clock()
        self.state = ACTIVE if created else SEALED
        if created:
            try:
                self._handle = fileio.open_file(self.log_path, create=True)
                self._handle.truncate(0)
                self._reset_indexes()
                fileio.unlink(self.txn_index_path)  # a stale one's entries are not this segment's (Kafka's roll)
            except BaseException:
                self.close_handlers()  # (delete drops its files for readers; none has this one)
                self.delete()  # a failed create (a full disk) leaves no file open, nor behind
                raise

    # --- state (see the table at the top) -------------------------------------------------

    def _move(self, to: SegmentState) -> None:
        if to is self.state:
            return  # staying is always allowed (and a load marks 10,000 sealed segments sealed)
        if to not in _NEXT_STATES[self.state]:
            raise IllegalStateTransitionError(
                f"segment {self.base_offset} cannot go from {self.state.value} to {to.value}", file=self.log_path
            )
        self.state = to

    @property
    def active(self) -> bool:
        """Whether this is the log's last segment, the one appended to."""
        return self.state is ACTIVE

    @active.setter
    def active(self, value: bool) -> None:
        self._move(ACTIVE if value else SEALED)

    @property
    def deleted(self) -> bool:
        """Its files unlinked: a reader that took it earlier must look again."""
        return self.state is DELETED

    @classmethod
    def create(cls, dir: str, base_offset: int, **kw: object) -> LogSegment:
        """A new, empty segment; stale files of the same name are replaced."""
        return cls(dir, base_offset, created=True, **kw)  # type: ignore[arg-type]

    # --- paths and files ---------------------------------------------------------------

    def _path(self, suffix: str) -> str:
        return os.path.join(self.dir, offset_file_name(self.base_offset, suffix + self.suffix))

    @property
    def log_path(self) -> str:
        return self._path(LOG_SUFFIX)

    @property
    def index_path(self) -> str:
        return self._path(INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        return self._path(TIME_INDEX_SUFFIX)

    @property
    def txn_index_path(self) -> str:
        return self._path(TXN_INDEX_SUFFIX)

    @property
    def handle(self) -> fileio.FileHandle:
        if self._handle is None:
            if self.deleted:
                raise self._vanished()
            self._handle = fileio.open_file(self.log_path, writable=not self.read_only)
        return self._handle

    def _vanished(self) -> KafkaStorageError:
        """What a reader meets on a segment deleted since it took the segment list: the
        error of a file gone (ENOENT), which the log turns into a read of the segments now
        there, or into OffsetOutOfRangeError."""
        error = KafkaStorageError("the segment was deleted", file=self.log_path)
        error.errno = errno.ENOENT  # type: ignore[attr-defined]
        return error

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self.handle.size()
        return self._size

    @property
    def size_without_opening(self) -> int:
        """``size``, for a pass over thousands of segments (retention's, the cleaner's dirty
        bytes) that must not hold thousands of files open: a segment not opened yet is
        inactive and unchanged since (a truncation knows its size), so its file's status
        gives it, once. A file gone meanwhile: ``size``'s error."""
        if self._size is None and not self.active:
            status = fileio.stat(self.log_path)
            if status is not None:
                self._size = status.st_size
        return self.size

    def reread_size(self) -> int:
        """For a reader of a segment its owner appends to: the size (and, when next asked,
        the max timestamp) as the file has them now, not as first read."""
        self._size = self.handle.size()
        self._max_ts_and_offset = None
        return self._size

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        assert self._time_index is not None
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's ``.txnindex`` (its file may not exist: no aborted transaction)."""
        index = self._txn_index
        if index is None:
            with _TXN_INDEX_MADE:
                index = self._txn_index
                if index is None:
                    index = self._txn_index = TransactionIndex(
                        self.txn_index_path, self.base_offset, read_only=self.read_only
                    )
        return index

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    def _open_indexes(self, in_memory: bool = False) -> tuple[OffsetIndex, TimeIndex]:
        writable = in_memory or not self.read_only
        return (
            OffsetIndex(self.index_path, self.base_offset, self.max_index_size, writable, in_memory),
            TimeIndex(self.time_index_path, self.base_offset, self.max_index_size, writable, in_memory),
        )

    def _load_indexes(self) -> None:
        """Map both indexes; rebuild them from the log when missing or corrupt."""
        if os.path.exists(self.index_path) and os.path.exists(self.time_index_path):
            try:
                oi, ti = self._open_indexes()
                self._check_indexes(oi, ti)
                self._offset_index, self._time_index = oi, ti
                return
            except CorruptIndexError as e:
                log.warning("%s: corrupt index (%s): rebuilding the indexes from the log", self.log_path, e)
        else:
            if self.deleted or self.suffix == DELETED_SUFFIX:
                raise self._vanished()  # on its way out: its index files go first or went, no rebuild
            log.warning("%s: index files missing: rebuilding them from the log", self.log_path)
        self._reset_indexes()
        truncated = self._scan_and_index(truncate=False)
        if truncated:
            # Only recovery may truncate (this segment may be followed by others). The
            # batches before the invalid bytes stay readable; a read that reaches them
            # fails there (``translate_offset``). The active segment's writer would append
            # after them: its caller recovers it.
            if self.active and not self.read_only:
                raise CorruptRecordError(
                    f"{truncated} invalid bytes at the end of the segment while rebuilding its indexes",
                    file=self.log_path,
                    position=self.size - truncated,
                )
            log.warning("%s: %d invalid bytes at the end of the segment: reads stop there", self.log_path, truncated)
        if not self.active:
            # trimmed as at roll: left preallocated, the next start would rebuild them again
            self.on_become_inactive()

    def _check_indexes(self, oi: OffsetIndex, ti: TimeIndex) -> None:
        """Kafka's sanity checks, and cheap ones of seglog's. A file with unused
        (all-zero) slots must be an active segment's, preallocated to the full size:
        an inactive segment's indexes were trimmed at roll, and any segment's at a
        clean shutdown, so a zero-filled tail in any other file was zeroed or never
        trimmed. The last offset entry must name the batch that starts at its
        position, and the last time entry the max timestamp of the batch holding its
        offset (a few header reads), which a zeroed or stale index does not.

        A reader in another process takes a zero tail as its writer left it: the writer
        makes the next segment before it trims this one's indexes, and preallocates them
        to its own log.index.size.max.bytes. It trusts no entry past the bytes it knows
        of (``_known_entries``), and checks the rest as the writer would."""
        if self.read_only:
            self._known_entries(oi, ti)
        oi.verify(self.size)  # every entry in order and inside the log (lookups trust them)
        ti.sanity_check()
        for index in (oi, ti):
            unused = index.length - index.size_in_bytes
            preallocated = self.max_index_size // index.entry_size * index.entry_size
            if unused and not self.read_only and (not self.active or index.length != preallocated):
                raise CorruptIndexError(
                    f"{unused} bytes of unused slots in a file of {index.length} bytes", file=index.path
                )
        if oi.entries:
            offset, position = oi.entry(oi.entries - 1)
            header = header_at_position(self.handle, position)
            if header is None or header.last_offset != offset:
                raise CorruptIndexError(
                    f"last entry (offset {offset}, position {position}) is not the start of a batch ending there",
                    file=oi.path,
                )
        if ti.entries:
            # the batch holding the last time entry's offset carries its timestamp
            timestamp, offset = ti.last_entry
            try:
                holder = next((h for h in self.scan_headers(oi.lookup(offset)[1]) if h.last_offset >= offset), None)
            except CorruptRecordError:
                holder = None  # damaged bytes on the way: the rebuild finds them
            if holder is None or holder.max_timestamp != timestamp:
                raise CorruptIndexError(
                    f"last entry (timestamp {timestamp}, offset {offset}) is not the max timestamp of its batch",
                    file=ti.path,
                )

    def _known_entries(self, oi: OffsetIndex, ti: TimeIndex) -> None:
        """A reader's copies of a live segment's indexes, cut to the batches it knows of:
        the size it read may be older than the copies, whose writer indexes each append
        after writing its batch. Offset entries go from the first at or past that size,
        time entries from the first naming an offset past the last whole batch before it."""
        past = oi.fetch_upper_bound_offset(self.size)  # (positions in order: what verify checks next)
        if past is not None:
            oi.truncate_to(past)
        if not ti.entries:
            return
        start = oi.entry(oi.entries - 1)[1] if oi.entries else 0
        next_offset = self.base_offset
        try:
            for header in self.scan_headers(start):
                next_offset = header.next_offset
        except CorruptRecordError:
            return  # damaged bytes: the checks that follow find them
        ti.truncate_to(next_offset)

    def _reset_indexes(self, in_memory: bool = False) -> None:
        """Replace both indexes by empty ones: files preallocated, or maps in memory (for
        a reader that may not write, and for a recovery, which writes them at its end)."""
        self._offset_index = self._time_index = None
        in_memory = in_memory or self.read_only
        if not in_memory:
            for path in (self.index_path, self.time_index_path):
                fileio.unlink(path)
        self._offset_index, self._time_index = self._open_indexes(in_memory=in_memory)

    # --- appending -----------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, int, int, int]]) -> None:
        """Append whole batches. ``batches`` lists, for each batch in ``data``:
        (position in data, size, last offset, max timestamp)."""
        if not batches:
            return
        start = self._size if self._size is not None else self.size
        if len(batches) > 1 or self.bytes_since_last_index_entry > self.index_interval_bytes:
            oi, ti, n = self._offset_index or self.offset_index, self._time_index or self.time_index, len(batches)
            # (reserve_for's test, inlined: an entry is due every few appends, a chunk rarely)
            if (oi.entries + n) * oi.entry_size > oi.reserved or (ti.entries + n + 1) * ti.entry_size > ti.reserved:
                self._reserve_index_entries(n)  # a full disk fails here, before any write
        if start == 0 and self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = batches[0][3]
            self._rolling_loaded = True
        try:
            (self._handle or self.handle).pwrite(data, start)
        except KafkaStorageError:
            # a full disk can leave part of the data written: cut it off, so the
            # log stays exactly as it was before this append
            self.handle.truncate(start)
            raise
        self._size = start + len(data)
        self._index_batches(start, batches)

    def write_failed(self, err: int) -> NoReturn:
        """The one-call append's write (``_scan.append_batch``: a leader's usual batch,
        checked, written and indexed in C, this segment's state read and written in its
        slots) failed with errno ``err``, the segment's state as it was: cut off what part
        of the batch it wrote (a full disk), so the log stays exactly as it was, and raise."""
        handle = self.handle
        handle.truncate(self.size)
        raise fileio.storage_error("write", handle.path, OSError(err, os.strerror(err)))

    def _reserve_index_entries(self, count: int) -> None:
        """Blocks for ``count`` more entries in each index (and the time index's entry at
        roll): the indexes are sparse, and a store through their maps into a hole on a
        full disk would be a SIGBUS (see ``index.py``)."""
        (self._offset_index or self.offset_index).reserve_for(count)
        (self._time_index or self.time_index).reserve_for(count + 1)

    def _index_batches(self, start: int, batches: list[tuple[int, int, int, int]]) -> None:
        """Index the batches appended at byte ``start``: the offset entry of each batch
        that comes more than index.interval.bytes after the last entry, with a time entry
        of the max timestamp so far if it grew. Both indexes take their entries in one
        write each."""
        max_ts, max_ts_offset = self._max_ts_and_offset or self.max_timestamp_and_offset
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        if len(batches) == 1:  # an append's usual batch: at most one entry in each index
            rel, size, last_offset, batch_max_ts = batches[0]
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last_offset
            if since > interval:
                (self._offset_index or self.offset_index).append(last_offset, start + rel)
                # and the max timestamp so far, when it grew past the last entry
                (self._time_index or self.time_index).maybe_append(max_ts, max_ts_offset)
                since = 0
            self.bytes_since_last_index_entry = since + size
            self._max_ts_and_offset = (max_ts, max_ts_offset)
            return
        offsets, times, since, max_ts_and_offset = self._plan_index_entries(start, batches)
        if offsets:
            self.offset_index.append_entries(offsets)
        if times:
            self.time_index.append_entries(times)
        self.bytes_since_last_index_entry = since
        self._max_ts_and_offset = max_ts_and_offset

    def _plan_index_entries(
        self, start: int, batches: list[tuple[int, int, int, int]]
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int, tuple[int, int]]:
        """What indexing the batches appended at byte ``start`` adds, worked out without
        writing it: the offset entries, the time entries, the bytes since the last entry
        after them, and the max timestamp with its offset."""
        max_ts, max_ts_offset = self._max_ts_and_offset or self.max_timestamp_and_offset
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        indexed_ts = self.time_index.last_entry[0]
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        for rel, size, last_offset, batch_max_ts in batches:
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last_offset
            if since > interval:
                offsets.append((last_offset, start + rel))
                if max_ts > indexed_ts:
                    times.append((max_ts, max_ts_offset))
                    indexed_ts = max_ts
                since = 0
            since += size
        return offsets, times, since, (max_ts, max_ts_offset)

    def adopt(self, path: str, batches: list[tuple[int, int, int, int]]) -> None:
        """Make the file at ``path`` the log of this empty active segment: it holds whole
        batches with their offsets assigned, listed in ``batches`` as ``append`` takes
        them. The file is renamed over the segment's log and its batches indexed as
        appends would index them.

        The index entries are worked out, checked to fit and their blocks reserved before
        the rename, and written with ``pwrite`` after it, into that space (so a full disk
        cannot fail them). Should a write fail all the same, the segment is cut back to
        empty, as it was."""
        if self.size:
            raise AssertionError(f"{self.log_path}: only an empty segment adopts a file")
        offsets, times, since, max_ts_and_offset = self._plan_index_entries(0, batches)
        oi, ti = self.offset_index, self.time_index
        if len(offsets) > oi.max_entries - oi.entries or len(times) > ti.max_entries - ti.entries - 1:
            raise RecordTooLargeError(
                f"the file's batches need {len(offsets)} offset index entries, more than segment.index.bytes "
                f"holds ({oi.max_entries})",
                file=path,
            )
        oi.reserve_for(len(offsets))
        ti.reserve_for(len(times) + 1)
        fileio.rename(path, self.log_path)
        if self._handle is not None:
            self._handle.close()  # of the empty file the rename replaced
            self._handle = None
        try:
            if offsets:
                oi.append_entries(offsets, through_file=True)
            if times:
                ti.append_entries(times, through_file=True)
        except BaseException:
            oi.truncate_to(self.base_offset)
            ti.truncate_to(self.base_offset)
            self.handle.truncate(0)
            raise
        self._size = batches[-1][0] + batches[-1][1]
        self._rolling_based_timestamp, self._rolling_loaded = batches[0][3], True
        self.bytes_since_last_index_entry = since
        self._max_ts_and_offset = max_ts_and_offset

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """The largest timestamp in the segment and the offset that carried it."""
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self._load_max_timestamp()
        return self._max_ts_and_offset

    def _load_max_timestamp(self) -> tuple[int, int]:
        # the time index holds the max up to its last entry; batches after the last
        # offset index entry may hold a larger one (and a damaged time index a smaller)
        best = self.time_index.last_entry
        start = self.offset_index.lookup(self.offset_index.last_offset)[1] if self.offset_index.entries else 0
        try:
            for header in self.scan_headers(start):
                if header.max_timestamp > best[0]:
                    best = (header.max_timestamp, header.last_offset)
        except CorruptRecordError as e:
            # damaged bytes: the largest timestamp before them (a read meets the damage), so
            # that lookups by time in other segments, and retention, go on
            log.warning("%s: the largest timestamp is taken before damaged bytes: %s", self.log_path, e)
        return best

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    @property
    def last_modified_ms(self) -> int:
        status = fileio.stat(self.log_path)
        if status is None:
            raise self._vanished()  # deleted since the reader took it: the log looks again
        return int(status.st_mtime * 1000)

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp: segment.ms counts from it."""
        if not self._rolling_loaded:
            first = next(iter(self.scan_headers(0)), None)
            self._rolling_based_timestamp = first.max_timestamp if first else None
            self._rolling_loaded = True
        return self._rolling_based_timestamp

    def should_roll(
        self, batch_bytes: int, max_timestamp: int, max_offset: int, segment_bytes: int, segment_ms: int
    ) -> bool:
        """Kafka's roll rules, checked before an append of ``batch_bytes``."""
        size = self._size if self._size is not None else self.size
        if size > segment_bytes - batch_bytes:
            return size > 0
        if size > 0:
            rolling = self._rolling_based_timestamp if self._rolling_loaded else self.rolling_based_timestamp
            waited = (
                (max_timestamp - rolling) if rolling is not None and rolling >= 0 else (self._clock() - self.created_ms)
            )
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        oi, ti = self._offset_index or self.offset_index, self._time_index or self.time_index
        return oi.is_full or ti.is_full or not 0 <= max_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # --- reading ---------------------------------------------------------------------------

    def scan_headers(self, start: int = 0, end: int | None = None, first_read: int = 0) -> Iterator[BatchHeader]:
        """Batch headers from byte ``start`` up to ``end`` (default: the segment's size);
        see ``file_records.scan_headers``."""
        return file_records.scan_headers(self.handle, start, self.size if end is None else end, first_read)

    def _scan_from_index(self, offset: int) -> tuple[int, int, Iterator[BatchHeader]]:
        """The offset and position of the largest index entry at or below ``offset`` (-1
        and 0: none), and the headers from the batch it names. The batch holding
        ``offset`` starts at the next entry's position at the latest: when that is near,
        one read takes every header up to it; when it is far, the first batch is large,
        and its header is read alone."""
        entry_offset, position, _, following = self.offset_index.lookup_position(offset)
        first_read = file_records.first_read_for(following - position)
        headers = file_records.scan_headers(self._handle or self.handle, position, self.size, first_read)
        return entry_offset, position, headers

    def translate_offset(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset >= ``offset``, found through the index.

        The batch at an entry's position must end at the entry's offset: an entry in
        order and inside the log (what loading checks) can still name another batch, or
        the middle of one (a damaged file), and a read through it would skip records or
        fail. Such an entry is passed over with a warning, and the scan starts at the
        segment's first batch instead.

        When the entry above lies far on (the entry's batch is large), the batch that
        entry names is looked at first: when it starts at or below ``offset`` it is the
        answer (every batch before it holds lower offsets), found in one read of one
        header, where a scan from the entry below reads two, each likely a cold page.
        Else batches smaller than an index interval lie between (a batch larger than
        one gets the next batch an entry; or a compaction left a gap)."""
        index = self._offset_index or self.offset_index
        entry_offset, start, next_offset, following = index.lookup_position(offset)
        if entry_offset < 0:
            return self._from_first_batch(offset, next_offset, following)
        span = following - start
        if 0 <= entry_offset < offset and span > file_records.NEAR:
            header = self._entry_batch(next_offset, following)
            if header is not None and header.base_offset <= offset:
                return header
            first_read = file_records.first_read_between(span)
        else:
            first_read = file_records.first_read_for(span)
        headers = file_records.scan_headers(self._handle or self.handle, start, self.size, first_read)
        try:
            return self._first_reaching(offset, headers, start, entry_offset)
        except _MisleadingEntry:
            pass
        if not self._warned_of_index:  # once: every lookup through the entry comes here
            self._warned_of_index = True
            log.warning(
                "%s: the entry for offset %d does not name the batch ending there: lookups in this segment "
                "scan it from its start",
                self.index_path,
                entry_offset,
            )
        return self._first_reaching(offset, self.scan_headers(0), 0, -1)

    def _from_first_batch(self, offset: int, next_offset: int, following: int) -> BatchHeader | None:
        """``translate_offset`` below the first index entry (``next_offset`` at byte
        ``following``; -1: none): a scan from the segment's first batch. Batches larger than
        index.interval.bytes leave the first without an entry, and in a log of small
        segments a third of the lookups land in the first two batches, each read in a
        cold file (bench/storage.py lookups, 10,000 segments). So an owner keeps the first
        batch's header once read: nothing but a truncation or a recovery changes a
        segment's first batch (a truncation or a recovery, ``_cutting``), and a header read
        before or during one is not taken after it. (A reader in another process keeps
        none: its owner may truncate the file under it.)"""
        handle = self._handle or self.handle
        first = self._kept_first()
        if first is None:
            cuts = self._cuts
            headers = file_records.scan_headers(handle, 0, self.size, file_records.first_read_for(following))
            first = next(headers, None)  # (bad framing raises, as the scan below would)
            if first is None:
                return self._first_reaching(offset, headers, 0, -1)
            self._keep_first(cuts, first)
        if first.last_offset >= offset:
            return first
        after = first.size
        if following == after:
            # the first entry's batch follows the first: it holds the offset (the entry is
            # the floor's next, at or past it), one header read rather than a scan (a sixth
            # of the lookups in a log of 6-batch segments, bench/storage.py lookups)
            header = self._entry_batch(next_offset, following)
            if header is not None:
                return header
        span = following - after if following >= after else -1
        headers = file_records.scan_headers(handle, after, self.size, file_records.first_read_for(span))
        return self._first_reaching(offset, headers, after, -1)

    def _kept_first(self) -> BatchHeader | None:
        kept = self._first_header
        return kept[1] if kept is not None and kept[0] == self._cuts else None

    def _keep_first(self, cuts: int, header: BatchHeader) -> None:
        """Keep ``header``, read at ``cuts`` (the count before the read), unless a cut was
        under way: one tuple, stored at once, as readers race each other."""
        if not cuts & 1 and not self.read_only:
            self._first_header = (cuts, header)

    @contextlib.contextmanager
    def _cutting(self) -> Iterator[None]:
        """Around a cut of the file: the count of cuts odd meanwhile and moved on twice, so
        that a first batch header read before or during it is not taken after it."""
        self._cuts += 1
        try:
            yield
        finally:
            self._cuts += 1

    def _entry_batch(self, entry_offset: int, position: int) -> BatchHeader | None:
        """The header of the batch an offset index entry names, when it is one: a whole
        batch inside the segment, ending at the entry's offset; else None."""
        header = header_at_position(self._handle or self.handle, position)
        if header is None or header.last_offset != entry_offset or position + header.size > self.size:
            return None
        return header

    def _first_reaching(
        self, offset: int, headers: Iterator[BatchHeader], start: int, entry_offset: int
    ) -> BatchHeader | None:
        """The first of ``headers`` (read from byte ``start``) whose last offset >=
        ``offset``. With ``entry_offset`` (not -1: read from an index entry) the first must
        end there, or _MisleadingEntry is raised. None when no batch reaches the offset,
        provided the batches end where the file does: an inactive segment that ends in
        bytes that are no batch (cut short, overwritten) raises CorruptRecordError there,
        rather than let the read go on in the next segment."""
        if entry_offset >= 0:
            try:
                first = next(headers, None)
            except SeglogError:  # bad framing there, or a position no read can take
                raise _MisleadingEntry from None
            if first is None or first.last_offset != entry_offset:
                raise _MisleadingEntry
            if first.last_offset >= offset:
                return first
            start = first.position + first.size
        end = start
        for header in headers:
            if header.last_offset >= offset:
                return header
            end = header.position + header.size
        if end != self.size and not self.active:
            raise self._no_batch_after(end)
        return None

    def _no_batch_after(self, end: int) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self.size - end} bytes that are no batch at the end of the segment", file=self.log_path, position=end
        )

    def first_offset(self, header: BatchHeader) -> int:
        """A batch's first offset; a legacy wrapper must be opened to learn it."""
        return file_records.first_offset(self.handle, header)

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> FetchDataInfo | None:
        """Bytes from the batch holding ``start_offset``, at most ``max_size`` of them
        (or the whole first batch, with ``min_one_message``), never past ``max_position``,
        with where they start in the log. None when no batch at or after the offset lies
        before ``max_position``."""
        handle = self._handle or self.handle  # the slice's, taken first: the segment may be deleted meanwhile
        limit = self.size if max_position is None else max_position
        header = self.translate_offset(start_offset)
        if header is None or header.position >= limit:
            return None
        wanted = max(max_size, header.size) if min_one_message else max_size
        size = min(limit - header.position, wanted)
        # (tuple.__new__: half the cost of a named tuple's constructor, on every read)
        return _new(
            FetchDataInfo,
            (
                _new(LogOffsetMetadata, (start_offset, self.base_offset, header.position)),
                _new(FileSlice, (handle, header.position, size)),
                wanted < header.size,
                None,
            ),
        )

    def fetch_upper_bound_offset(self, position: int, fetch_size: int) -> int | None:
        """Kafka's ``fetchUpperBoundOffset``: an offset above every offset of the
        ``fetch_size`` bytes read from byte ``position`` (the first batch the offset index
        names at or past their end), or None when the index names none there."""
        return (self._offset_index or self.offset_index).fetch_upper_bound_offset(position + fetch_size)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions of this segment's ``.txnindex`` that overlap
        [``fetch_offset``, ``upper_bound_offset``) (Kafka's ``collectAbortedTxns``)."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= ``timestamp`` and
        offset >= ``starting_offset``, or None.

        The time index entry the search starts from is checked on the way: the batch
        holding its offset must carry its timestamp as its max. An entry whose timestamp
        is lower than that (a damaged file, still in order) would make the search skip
        records that reach the target; then the segment is searched from its start.
        An entry found right is marked so (``TimeIndex.mark_checked``), and not read
        again: its batch header is likely a cold page, a read costing as much as the
        rest of the lookup but for the batch searched."""
        time_index = self._time_index or self.time_index
        ts, ts_offset, slot = time_index.lookup(timestamp)
        if ts == NO_TIMESTAMP and starting_offset <= self.base_offset:
            found = self._search_from_start(timestamp, starting_offset)
            if found is not _NOT_ONE_BATCH:
                return found
        if ts == NO_TIMESTAMP or ts_offset < starting_offset:
            return self._search_time(self._scan_from_index(starting_offset)[2], timestamp, starting_offset)
        span = (self._offset_index or self.offset_index).positions_after(ts_offset) if ts < timestamp else None
        # The time index holds running maxima: no record up to ts_offset reaches the
        # timestamp, so the search starts at the batch after the one holding it. When
        # that one ends at ts_offset and it and the one after have offset index entries
        # (batches larger than index.interval.bytes), the next batch lies between the
        # next entry's position and the one after it, or the segment's end when no entry
        # follows (the last batch: a small segment's is a sixth of its lookups): one read
        # (``_search_batch_at``; else the scan below, from the index entry, as ever).
        if span is not None:
            following, after = span[1], span[2] if span[2] >= 0 else self.size
            if 0 < after - following <= _TIME_SEARCH_READ:
                handle = self._handle or self.handle
                if not time_index.checked(slot):
                    if self._holder_timestamp(handle, span[0]) != ts:
                        return self._search_time_afresh(timestamp, starting_offset, ts_offset)
                    time_index.mark_checked(slot)
                found = self._search_batch_at(handle, following, after, ts_offset + 1, timestamp, starting_offset)
                if found is not _NOT_ONE_BATCH:
                    return found
        headers = self._scan_from_index(ts_offset)[2]
        holder = next((h for h in headers if h.last_offset >= ts_offset), None)
        if holder is None or holder.max_timestamp != ts:
            return self._search_time_afresh(timestamp, starting_offset, ts_offset)
        return self._search_time(itertools.chain((holder,), headers), timestamp, starting_offset)

    def _search_batch_at(
        self, handle: fileio.FileHandle, start: int, end: int, first: int, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The search by time from the batch expected to fill bytes [``start``, ``end``)
        and to start at offset ``first``: read in one go and searched in C, then the
        batches after it scanned. _NOT_ONE_BATCH when the bytes there are not that one
        whole v2 batch (the caller scans instead)."""
        data = handle.pread(end - start, start)
        if len(data) >= _V2_PEEK.size and data[MAGIC_OFFSET] == 2:  # else the caller's scan finds out what it is
            base, size, _, max_ts = _V2_PEEK.unpack_from(data)
            if base == first and size + LOG_OVERHEAD == len(data):
                if max_ts >= timestamp:  # (RecordBatch.find_timestamp's C call, on the bytes read)
                    found = _scan.find_timestamp(data, timestamp, starting_offset, start, decompress)
                    if found is not None:
                        return found
                return self._search_time(self.scan_headers(end), timestamp, starting_offset)
        return _NOT_ONE_BATCH

    def _search_from_start(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """The search by time below the first time index entry, from the segment's start.
        When the first batch lies alone before the first offset index entry (batches
        larger than index.interval.bytes: the first gets no entry), it is read whole in
        one read and searched, and if the target lies past it, the batch that entry names,
        up to the entry after it: one read each, where a scan reads a header before each
        batch (two of a small segment's batches in six come here). The first batch is not
        read when its header, kept (``_from_first_batch``), says none of its records
        reaches the target. _NOT_ONE_BATCH when the bytes are not so (the caller scans)."""
        index = self._offset_index or self.offset_index
        _, _, entry_offset, following = index.lookup_position(self.base_offset - 1)
        if not 0 < following <= _TIME_SEARCH_READ:
            return _NOT_ONE_BATCH
        handle = self._handle or self.handle
        cuts, known = self._cuts, self._kept_first()
        if known is not None and known.size == following and known.magic == 2 and known.max_timestamp < timestamp:
            after_first = known.last_offset + 1
        else:
            data = handle.pread(following, 0)
            if len(data) < _V2_PEEK.size or data[MAGIC_OFFSET] != 2:
                return _NOT_ONE_BATCH
            first, size, delta, max_ts = _V2_PEEK.unpack_from(data)
            if size + LOG_OVERHEAD != len(data):
                return _NOT_ONE_BATCH
            if known is None and size >= MIN_BATCH_LENGTH:  # (_header_at's header)
                self._keep_first(cuts, BatchHeader(0, following, first, first + delta, max_ts, 2))
            if max_ts >= timestamp:
                found = _scan.find_timestamp(data, timestamp, starting_offset, 0, decompress)
                if found is not None:
                    return found
            after_first = first + delta + 1
        _, _, _, after = index.lookup_position(entry_offset)
        after = after if after >= 0 else self.size
        if not 0 < after - following <= _TIME_SEARCH_READ:
            return self._search_time(self.scan_headers(following), timestamp, starting_offset)
        return self._search_batch_at(handle, following, after, after_first, timestamp, starting_offset)

    @staticmethod
    def _holder_timestamp(handle: fileio.FileHandle, position: int) -> int:
        """The max timestamp of the batch at ``position`` (-1: no batch there). A v2
        header's is unpacked here: header_at_position's calls were a tenth of a lookup."""
        head = handle.pread(_V2_PEEK.size, position)
        fields = _V2_PEEK.unpack_from(head) if len(head) == _V2_PEEK.size and head[MAGIC_OFFSET] == 2 else None
        if fields is not None and fields[1] >= MIN_BATCH_LENGTH:
            return fields[3]
        holder = header_at_position(handle, position)  # no whole v2 header there: its rules
        return NO_TIMESTAMP if holder is None else holder.max_timestamp

    def _search_time_afresh(self, timestamp: int, starting_offset: int, ts_offset: int) -> tuple[int, int] | None:
        """The search by time when the time index entry for ``ts_offset`` misled."""
        if not self._warned_of_index:
            self._warned_of_index = True
            log.warning(
                "%s: the entry for offset %d is not the max timestamp of its batch: lookups by time in this "
                "segment search it from its start",
                self.time_index_path,
                ts_offset,
            )
        return self._search_time(self.scan_headers(0), timestamp, starting_offset)

    def _search_time(
        self, headers: Iterator[BatchHeader], timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The first record of the batches of ``headers`` with timestamp >= ``timestamp``
        and offset >= ``starting_offset``, as (timestamp, offset)."""
        return file_records.search_time(self.handle, headers, timestamp, starting_offset)

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty). A
        writer's segment must end with that batch: bytes after it that are no batch would
        lie between the batches it appends, so they raise CorruptRecordError (the log
        recovers the segment); a reader's may end in a batch its writer is appending."""
        start = self.offset_index.lookup(self.offset_index.last_offset)[1] if self.offset_index.entries else 0
        next_offset, end = self.base_offset, start
        for header in self.scan_headers(start):
            next_offset, end = header.next_offset, header.position + header.size
        if end != self.size and not self.read_only:
            raise self._no_batch_after(end)
        return next_offset

    # --- recovery and truncation ------------------------------------------------------------

    def recover(self, on_epoch: Callable[[int, int], None] | None = None) -> int:
        """Revalidate every batch, rebuild the indexes, truncate at the first invalid
        byte. Returns the bytes truncated. ``on_epoch(epoch, base_offset)`` hears of each
        v2 batch whose leader epoch differs from the batch before it.

        A batch's size is not bounded by today's max.message.bytes: the batch was valid
        when it was appended (the config may have been lowered since), and Kafka's
        recovery bounds it only by its int32 length field. Only framing, CRC and offsets
        make bytes invalid."""
        # The indexes are rebuilt in memory and each written to its file in one write at
        # the end: filled through the map of a preallocated file, they cost a page fault
        # (an unwritten extent converted) every 4 KiB, as much as the walk's CRCs.
        self._reset_indexes(in_memory=True)
        truncated = self._scan_and_index(truncate=True, on_epoch=on_epoch)
        # as Kafka's: the max timestamp entry a roll writes, and indexes of their entries only
        # (an inactive segment keeps them so; the log grows the active segment's back)
        self.on_become_inactive()
        if not self.read_only:
            for index in (self.offset_index, self.time_index):
                index.write_out()
        return truncated

    def _scan_and_index(
        self,
        truncate: bool,
        on_epoch: Callable[[int, int], None] | None = None,
    ) -> int:
        """Validate and index every batch from the start; returns the invalid bytes at the end.

        The file is read in chunks into one reused buffer, and each chunk walked in C
        (``_scan.recover_batches``: framing, CRC, offsets increasing, and the chunk's index
        entries packed for one write per index), without the GIL, so that the recovery
        threads of several partitions run at once; a legacy batch is walked here
        (``_recover_legacy``). This loop runs for every batch of every segment an unclean
        shutdown left."""
        self._size = None
        self._max_ts_and_offset = (NO_TIMESTAMP, self.base_offset)
        self.bytes_since_last_index_entry = 0
        size, valid, want = self.size, 0, _RECOVERY_CHUNK
        oi, ti = self.offset_index, self.time_index
        base, interval = self.base_offset, self.index_interval_bytes
        # carried from walk to walk: (last offset so far - base, leader epoch, bytes since
        # the last index entry, max timestamp, its offset, the time index's last timestamp)
        state: _WalkState = (-1, None, 0, NO_TIMESTAMP, base, ti.last_entry[0])
        fault: SeglogError | str = "a partial batch"
        buffer = bytearray(min(want, size))
        while valid < size:
            if len(buffer) < min(want, size - valid):
                buffer = bytearray(min(want, size - valid))  # a batch larger than a chunk
            chunk = memoryview(buffer)[: self.handle.readinto(memoryview(buffer)[:want], valid)]
            at = 0
            while True:
                at, state, offsets, times, epochs, stop = _scan.recover_batches(
                    chunk, at, valid, base, -1, interval, state
                )
                oi.append_packed(offsets)
                ti.append_packed(times)
                if on_epoch is not None:
                    for epoch, first in epochs:
                        on_epoch(epoch, first)
                if stop is not True:
                    break
                try:  # a legacy batch at ``at``
                    at, state = self._recover_legacy(chunk, at, valid, state)
                except CorruptRecordError as e:
                    stop = e
                    break
            valid += at
            if isinstance(stop, SeglogError):
                fault = stop
                break
            if at == 0:
                if len(chunk) < want:
                    break  # a partial batch at the end of the file
                want = LOG_OVERHEAD + peek_frame(chunk, 0, valid)[1]  # a batch larger than the chunk
                if want > size - valid:
                    break  # a length past the end of the file: not read in, it is cut
            else:
                want = _RECOVERY_CHUNK
        self.bytes_since_last_index_entry, self._max_ts_and_offset = state[2], (state[3], state[4])
        truncated = size - valid
        if truncated and truncate:
            log.warning("%s: truncating %d bytes at position %d: %s", self.log_path, truncated, valid, fault)
            with self._cutting():
                self.handle.truncate(valid)
                self._size = valid
        return truncated

    def _recover_legacy(self, chunk: memoryview, at: int, origin: int, state: _WalkState) -> tuple[int, _WalkState]:
        """The recovery walk's checks and indexing of the legacy batch at ``at`` of a chunk
        read at ``origin`` (framed, whole and within bounds: the C walk stopped at it).
        Returns where it ends and the walk's state after it."""
        size = LOG_OVERHEAD + peek_frame(chunk, at, origin)[1]
        legacy = LegacyBatch(chunk[at : at + size], origin + at)
        legacy.validate()
        first, last, max_ts = legacy.base_offset, legacy.last_offset, legacy.max_timestamp
        prev_last = self.base_offset + state[0]
        if first <= prev_last or not 0 <= last - self.base_offset <= MAX_RELATIVE_OFFSET:
            raise CorruptRecordError(
                f"batch offsets {first}..{last} do not follow {prev_last}", position=origin + at, offset=first
            )
        self.bytes_since_last_index_entry, self._max_ts_and_offset = state[2], (state[3], state[4])
        self._index_batches(origin, [(at, size, last, max_ts)])
        max_ts, max_ts_offset = self.max_timestamp_and_offset
        indexed_ts = self.time_index.last_entry[0]
        return at + size, (
            last - self.base_offset,
            state[1],
            self.bytes_since_last_index_entry,
            max_ts,
            max_ts_offset,
            indexed_ts,
        )

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose offsets reach ``offset`` or beyond, and the transaction
        index entries of the markers among them; returns bytes removed. The transaction
        index goes last: a corrupt one raises CorruptIndexError once the log is cut (its
        owner makes it again from the markers left)."""
        header = self.translate_offset(offset)
        removed = 0
        if header is not None:
            with self._cutting():
                removed = self._cut_at(offset, header.position)
        self.txn_index.truncate_to(offset)
        return removed

    def _cut_at(self, offset: int, position: int) -> int:
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        removed = self.size - position
        self.handle.truncate(position)
        self._size = position
        self.bytes_since_last_index_entry = 0 if position == 0 else self.bytes_since_last_index_entry
        self._max_ts_and_offset = None
        if position == 0:
            self._rolling_based_timestamp, self._rolling_loaded = None, True
        return removed

    # --- lifecycle ------------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """At roll: record the final max timestamp in the time index, trim both indexes."""
        max_ts, offset = self.max_timestamp_and_offset
        if max_ts != NO_TIMESTAMP:
            self.time_index.maybe_append(max_ts, offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def ensure_writable_indexes(self) -> None:
        """The active segment's indexes grow back to full size when it is reopened."""
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)

    def flush(self) -> None:
        self.handle.fsync()
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()  # (Kafka's: the entries as durable as the markers)

    def close(self) -> None:
        if self._offset_index is not None:
            self.on_become_inactive()
            self._offset_index.close()
            if self._time_index is not None:
                self._time_index.close()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def close_handlers(self) -> None:
        """Release files without trimming (a segment about to be deleted)."""
        self._offset_index = self._time_index = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def change_suffix(self, new_suffix: str) -> None:
        """Rename the segment's files from its current suffix to ``new_suffix``. The
        ``.txnindex`` goes first: the loader keeps a ``.txnindex.swap`` only beside a
        ``.log.swap`` (the offset and time indexes it rebuilds from the log), so a crash
        between renames must not leave the log renamed and its transaction index behind."""
        old = [self.txn_index_path, self.log_path, self.index_path, self.time_index_path]
        self.suffix = new_suffix
        new = [self.txn_index_path, self.log_path, self.index_path, self.time_index_path]
        for src, dst in zip(old, new, strict=True):
            if os.path.exists(src):
                fileio.rename(src, dst)
        for index, path in ((self._offset_index, new[2]), (self._time_index, new[3]), (self._txn_index, new[0])):
            if index is not None:
                index.path = path
        if self._handle is not None:
            self._handle.path = new[1]

    def delete(self) -> None:
        """Unlink the segment's files. Its open file and index maps are dropped, not
        closed: a reader holding them (a ``FileSlice``, a lookup under way) reads on,
        and they close when the last holder lets go."""
        self._move(DELETED)
        self._offset_index = self._time_index = None
        self._handle = None
        for path in (self.log_path, self.index_path, self.time_index_path, self.txn_index_path):
            fileio.unlink(path)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, dir={self.dir!r})"


def _wall_clock_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


def random_jitter(segment_jitter_ms: int, segment_ms: int) -> int:
    """Kafka's per-segment roll jitter: uniform in [0, min(jitter, segment.ms))."""
    if segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(segment_jitter_ms, segment_ms))


# the slots _scan.append_batch reads and writes (an append's state: see LogSegment.write_failed)
_scan.bind_segment(LogSegment, OffsetIndex, TimeIndex, fileio.FileHandle)
