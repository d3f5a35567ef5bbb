"""Sparse indexes of a segment: offset → position, and timestamp → offset.

Offset index (``.index``), 8-byte entries, big-endian::

    relative offset  int32   a batch's *last* offset - segment base offset
    position         int32   byte position where that batch *starts* in the .log

Time index (``.timeindex``), 12-byte entries::

    timestamp        int64   the largest timestamp in the segment so far
    relative offset  int32   an offset of the batch that carried it

Entries only grow: offsets strictly, timestamps strictly (a time entry is only
written for a larger timestamp). Both files are preallocated to
``segment.index.bytes`` rounded down to a whole entry, used through mmap, and
trimmed to their entries when the segment rolls or the log closes. A file left
at its preallocated size by a crash has a zero-filled tail: no valid entry
after the first is all zeros, so that tail is found by binary search and
ignored.

Preallocated as Kafka's are (``RandomAccessFile.setLength``): sparse, so that a
thousand partitions' active segments do not take 20 MiB of disk each. But a
store through the map into a hole takes a block when the page is first written,
and on a full disk that is a SIGBUS, which kills the process. So real blocks are
reserved (``posix_fallocate``) ahead of the entries, in chunks that double from
16 KiB to 1 MiB, and every store into the map lies below the reserved mark
(``reserved``): a full disk fails the reservation, a clean ``KafkaStorageError``
before anything is written, never a store. A segment reserves what an append may
add before it writes the append's batches (``reserve_for``).

Lookups are binary searches for the largest entry <= the target, with
Kafka's warm section: the last 8 KiB of entries are searched first, since
almost every lookup (a consumer at the tail, a follower) lands there, and
those pages are the ones sure to be in the page cache.

States (``IndexState``), and the only moves between them::

    state      what it is                                     event        next
    WRITABLE   the file, mapped read-write (a writer's; a     close        CLOSED
               full one of a page at most: a copy, below)
    IN_MEMORY  entries in an anonymous map: a recovery's      write_out    WRITABLE
               rebuild (written out whole at its end), or a   close        CLOSED
               reader's rebuild of an index it may not write
    READ_ONLY  a copy of the file (a reader in another        close        CLOSED
               process: a map would SIGBUS when the writer
               trims the file)
    CLOSED     map dropped                                    close        CLOSED

WRITABLE and IN_MEMORY indexes take entries; every state answers lookups but
CLOSED (no entries).

A writer's full index of a page at most (a small segment's, trimmed at its roll)
is held as a copy rather than mapped: a map costs a mapping (the kernel allows
65,530 a process: vm.max_map_count) and a page of address space, so a log of
10,000 small segments would need 20,000 mappings, and its lookups would each
touch a page, and a TLB entry, of their own.

Maps are ``_map.Map``s (through ``fileio``), which hold no fd: Python's mmap keeps
a dup of the fd it maps (until 3.13's trackfd), so a broker's active segments
held three fds a partition (log, offset and time index), and 10,000 partitions
passed a limit of 20,000 open files; now one (the log's). No entry comes to a full index
until a truncation makes room, and that maps it again (``resize``).
"""

from __future__ import annotations

import array
import enum
import logging
import mmap
import operator
import os
import struct
import sys

from ..errors import CorruptIndexError, IllegalStateTransitionError, KafkaStorageError
from . import _map, _scan, fileio

log = logging.getLogger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TWO_ENTRIES, _THREE_ENTRIES = struct.Struct(">iiii"), struct.Struct(">iiiiii")  # offset index entries in a row
_I32 = struct.Struct(">i")
_WARM_BYTES = 8192
NO_TIMESTAMP = -1
MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # an offset an index can hold: base offset + an int32
_BELOW_ANY = -(1 << 64)  # below every int64 offset: what an empty index's last offset is compared as
_RESERVE_MIN, _RESERVE_MAX = 16 * 1024, 1024 * 1024  # the chunks blocks are reserved in (see the top)
_COPY_BYTES = mmap.PAGESIZE  # a writer's full index this small is a copy (see the top)


def _whole_pages(size: int) -> int:
    """``size`` rounded down to whole pages: of bytes known to have blocks, those a store
    through the map may touch (it takes every block of its page; a filesystem's blocks may
    be smaller than a page)."""
    return size // mmap.PAGESIZE * mmap.PAGESIZE


class IndexState(enum.Enum):
    __hash__ = object.__hash__  # (members are singletons: the C hash, not Enum's by name, on every append)

    WRITABLE = "writable"
    IN_MEMORY = "in memory"
    READ_ONLY = "read-only"
    CLOSED = "closed"


WRITABLE, IN_MEMORY, READ_ONLY, CLOSED = (
    IndexState.WRITABLE,
    IndexState.IN_MEMORY,
    IndexState.READ_ONLY,
    IndexState.CLOSED,
)
# the table above: the states each state may move to
_NEXT_STATES = {
    WRITABLE: frozenset({CLOSED}),
    IN_MEMORY: frozenset({WRITABLE, CLOSED}),
    READ_ONLY: frozenset({CLOSED}),
    CLOSED: frozenset({CLOSED}),
}
_TAKE_ENTRIES = frozenset({WRITABLE, IN_MEMORY})


class _Index:
    """What both indexes share: the mmap, the entry count, resizing and search."""

    # (slots: as LogSegment's, for lookups across many segments)
    __slots__ = ("_mmap", "base_offset", "entries", "length", "max_index_size", "path", "reserved", "state")

    entry_size: int
    _key_size: int  # of the key at the start of an entry: relative offset (4), timestamp (8)

    def __init__(
        self, path: str, base_offset: int, max_index_size: int, writable: bool = True, in_memory: bool = False
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.state = IN_MEMORY if in_memory else WRITABLE if writable else READ_ONLY
        self._mmap: _map.Map | bytes | None = None
        self.length = 0
        self.entries = 0
        self.reserved = 0  # bytes from the start with real blocks: stores into the map stay below
        if in_memory:
            self.length = self.reserved = self._round(max_index_size)
            self._mmap = _map.Map(-1, self.length, True)
        else:
            self._open()

    # --- state (see the table at the top) ----------------------------------------------

    def _move(self, to: IndexState) -> None:
        if to not in _NEXT_STATES[self.state]:
            raise IllegalStateTransitionError(f"index cannot go from {self.state.value} to {to.value}", file=self.path)
        self.state = to

    @property
    def writable(self) -> bool:
        """Whether it takes entries."""
        return self.state in _TAKE_ENTRIES

    @property
    def in_memory(self) -> bool:
        return self.state is IN_MEMORY

    # --- file and mapping ---------------------------------------------------------

    def _open(self) -> None:
        newly_created = not os.path.exists(self.path)
        writable = self.state is WRITABLE
        if newly_created and not writable:
            raise CorruptIndexError("index file is missing", file=self.path)
        handle = fileio.open_file(self.path, create=newly_created, writable=writable)
        try:
            if newly_created:
                if self.max_index_size < self.entry_size:
                    raise ValueError(f"invalid max index size {self.max_index_size}")
                handle.truncate(self._round(self.max_index_size))  # sparse, as Kafka's
                # the first chunk now: a full disk fails the roll, not the append after it
                handle.reserve(0, min(_RESERVE_MIN, self._round(self.max_index_size)))
                self.reserved = min(_RESERVE_MIN, self._round(self.max_index_size))
            self.length = handle.size()
            if not writable:
                # a reader copies the file: a writer may trim it at any moment, and a
                # mapped page past the new end would be a SIGBUS, not an error
                self._mmap = handle.pread(self.length, 0)
                # whole entries: a trim racing the copy cuts it anywhere past the entries
                self.length = self._round(len(self._mmap))
            elif self.length:
                self._mmap = handle.mmap(self.length, True)
        finally:
            handle.close()
        if not newly_created:
            self.entries = self._count_written_entries()
            # what was written has blocks; past it the file may be sparse (Kafka's, a crash's)
            self.reserved = _whole_pages(self.entries * self.entry_size)
        if isinstance(self._mmap, _map.Map) and self.length > self.entries * self.entry_size:
            # a preallocated tail: without this, the first store into it faults in the kernel's
            # read-around window of the file (read_ahead_kb, MiBs of zero-filled holes: ms)
            self._mmap.madvise(mmap.MADV_RANDOM)
        self._copy_if_full()

    def _copy_if_full(self) -> None:
        """A full mapped index of a page at most becomes a copy (see the top). The map
        goes with its last holder (a reader mid-lookup may hold it)."""
        mm, full = self._mmap, self.entries * self.entry_size == self.length
        if isinstance(mm, _map.Map) and self.state is WRITABLE and full and self.length <= _COPY_BYTES:
            self._mmap = mm[:]

    def _round(self, size: int) -> int:
        return size // self.entry_size * self.entry_size

    @property
    def max_entries(self) -> int:
        return self.length // self.entry_size

    def _count_written_entries(self) -> int:
        """Entries up to the zero-filled tail a crash leaves in a preallocated file."""
        slots = self.max_entries
        if slots <= 1 or self._mmap is None:
            return slots
        zero = bytes(self.entry_size)
        mm, size = self._mmap, self.entry_size
        if mm[(slots - 1) * size : slots * size] != zero:
            return slots
        if mm[:size] == zero and mm[size : 2 * size] == zero:
            # a preallocated file not yet written to (as a reader in another process sees a
            # live writer's active segment): slot 0 of zeros is no entry, a segment's first
            # batch is never indexed (its only chance: a sole time entry of timestamp 0)
            return 0
        lo, hi = 1, slots - 1  # the first all-zero slot after slot 0 lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if mm[mid * size : (mid + 1) * size] == zero:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def resize(self, new_size: int) -> None:
        """Set the file (and mapping) to ``new_size`` rounded down to whole entries."""
        size = self._round(new_size)
        if size == self.length or self.state is IN_MEMORY:
            return
        handle = fileio.open_file(self.path, writable=True)
        try:
            handle.truncate(size)  # grown sparse: blocks are reserved ahead of the entries
            self.reserved = _whole_pages(min(self.reserved, size))
            # readers holding the old mapping keep it alive and only read entries
            # below `entries`, which exist in the new file too
            self._mmap = handle.mmap(size, True) if size else None
            self.length = size
        finally:
            handle.close()
        self._copy_if_full()

    def write_out(self) -> None:
        """An index built in memory becomes its file: the entries in one write, the file
        cut to them, then mapped as an index opened from its file is."""
        if self.state is not IN_MEMORY:
            return
        n = self.entries
        data = self._mmap[: n * self.entry_size] if self._mmap is not None else b""
        handle = fileio.open_file(self.path, create=True)
        try:
            handle.pwrite(data, 0)
            handle.truncate(len(data))
        finally:
            handle.close()
        self._mmap, self.length = None, 0
        self._move(WRITABLE)
        self._open()
        self.entries = n

    def trim_to_valid_size(self) -> None:
        if self.state is WRITABLE:
            self.resize(self.entries * self.entry_size)

    def flush(self) -> None:
        if self.state is not WRITABLE or self._mmap is None:
            return
        if isinstance(self._mmap, _map.Map):
            self._mmap.flush()
            return
        handle = fileio.open_file(self.path)  # a copy: its entries went to the file's pages before
        try:
            handle.fsync()
        finally:
            handle.close()

    def close(self) -> None:
        self.trim_to_valid_size()
        self._mmap = None
        self._move(CLOSED)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def reserve_for(self, count: int) -> None:
        """Real blocks for ``count`` entries more, reserved now (see the top): a caller
        about to write what they index calls this first, so a full disk fails before it."""
        end = (self.entries + count) * self.entry_size
        if end > self.reserved:
            self._reserve(end)

    def _reserve(self, end: int) -> None:
        """Reserve blocks up to ``end`` at least: the next chunk, page-aligned (a store
        takes a page's blocks), within the file. A full disk raises KafkaStorageError."""
        if self.state is not WRITABLE:
            return  # an anonymous map (all of it reserved) or no map to store into
        step = min(max(self.reserved, _RESERVE_MIN), _RESERVE_MAX)
        page = mmap.PAGESIZE
        target = min(self.length, -(-max(end, self.reserved + step) // page) * page)
        if target <= self.reserved:
            return  # reserved to the end of the file (its own checks refuse entries past it)
        handle = fileio.open_file(self.path)
        try:
            handle.reserve(self.reserved, target - self.reserved)
        finally:
            handle.close()
        self.reserved = target

    def _write_through_file(self, position: int, data: bytes) -> None:
        """Entries written with ``pwrite``; the map shows them (one page cache). Stores
        into the map of a freshly preallocated file fault on each new page, and on ext4
        the fault converts an unwritten extent, which waits for the journal and so for
        whatever data the filesystem is writing back: tens of milliseconds right after
        a large write, where ``pwrite`` takes microseconds."""
        handle = fileio.open_file(self.path)
        try:
            handle.pwrite(data, position)
        finally:
            handle.close()

    def _appended(self, entries: int) -> None:
        """Entries written through the file (``pwrite``, which meets a full disk as an
        error): they have blocks, so the reserved mark moves past their whole pages."""
        self.entries = entries
        self.reserved = max(self.reserved, _whole_pages(entries * self.entry_size))

    def _writable_map(self) -> _map.Map:
        if not isinstance(self._mmap, _map.Map) or self.state not in _TAKE_ENTRIES:
            raise CorruptIndexError("index is not open for writing", file=self.path)
        return self._mmap

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(f"offset {offset} does not fit relative to base {self.base_offset}", file=self.path)
        return rel

    def _check_fits(self, smallest: int, largest: int) -> None:
        """Raise unless offsets from ``smallest`` to ``largest`` all fit relative to the base."""
        if smallest < self.base_offset or largest - self.base_offset > MAX_RELATIVE_OFFSET:
            self.relative_offset(smallest if smallest < self.base_offset else largest)

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # --- search --------------------------------------------------------------------

    def _largest_lower_bound(self, target: int) -> int:
        """Slot of the largest entry whose key <= target; -1 if none. The warm section
        first (see the module's docstring); the search runs in C (``_scan.floor_entry``)."""
        mm = self._mmap
        if mm is None:
            return -1
        return _scan.floor_entry(mm, self.entries, self.entry_size, self._key_size, target, _WARM_BYTES)

    def _truncate_to_slot(self, slot_count: int) -> None:
        """Drop the entries from ``slot_count`` on. Kafka's ``truncateToEntries`` only moves the
        position; here the dropped slots are zeroed too: the active segment's file stays
        preallocated, and a reader in another process counts its entries up to the first
        all-zero slot (``_count_written_entries``), so left as they were they would read as
        live, fail the load checks and make every such reader rebuild the index from the log.
        (Their pages were written, so these stores take no new blocks.)"""
        mm, size = self._mmap, self.entry_size
        if isinstance(mm, _map.Map) and slot_count < self.entries:
            mm[slot_count * size : self.entries * size] = bytes((self.entries - slot_count) * size)
        elif mm is not None and self.state is WRITABLE and slot_count < self.entries:  # a copy (see the top)
            zeros = bytes((self.entries - slot_count) * size)
            self._write_through_file(slot_count * size, zeros)
            self._mmap = mm[: slot_count * size] + zeros
        self.entries = slot_count


class OffsetIndex(_Index):
    """Maps offsets to byte positions in the segment's .log."""

    __slots__ = ()
    entry_size = _OFFSET_ENTRY.size
    _key_size = 4

    def entry(self, slot: int) -> tuple[int, int]:
        """(absolute offset, position) of a slot."""
        if not 0 <= slot < self.entries or self._mmap is None:
            raise IndexError(f"slot {slot} of {self.entries}")
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mmap, slot * 8)
        return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1)[0] if self.entries else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """The largest entry with offset <= ``offset``; (base offset, 0) below the first."""
        base, mm = self.base_offset, self._mmap
        slot = self._largest_lower_bound(offset - base)
        if slot < 0 or mm is None:
            return base, 0
        rel, position = _OFFSET_ENTRY.unpack_from(mm, slot * 8)
        return base + rel, position

    def lookup_position(self, offset: int) -> tuple[int, int, int, int]:
        """The largest entry with offset <= ``offset``, as its offset and position ((-1, 0)
        below the first), and the next entry's offset and position ((-1, -1) after the
        last). A reader checks the batch at a position against the entry's offset: an
        index whose entries are in order can still name the wrong batch (see
        ``LogSegment``)."""
        slot, mm = self._largest_lower_bound(offset - self.base_offset), self._mmap
        if mm is None or not self.entries:
            return -1, 0, -1, -1
        if slot < 0:
            rel, following = _OFFSET_ENTRY.unpack_from(mm, 0)
            return -1, 0, self.base_offset + rel, following
        if slot + 1 < self.entries:
            rel, position, next_rel, following = _TWO_ENTRIES.unpack_from(mm, slot * 8)
            return self.base_offset + rel, position, self.base_offset + next_rel, following
        rel, position = _OFFSET_ENTRY.unpack_from(mm, slot * 8)
        return self.base_offset + rel, position, -1, -1

    def positions_after(self, offset: int) -> tuple[int, int, int] | None:
        """When an entry has offset ``offset``: its position, and the positions of the
        next two entries (-1 past the last), where the two batches after the one ending at
        ``offset`` start if each has an entry. None when no entry has that offset, or none
        follows it."""
        rel, mm, n = offset - self.base_offset, self._mmap, self.entries
        if mm is None:
            return None
        slot = _scan.floor_entry(mm, n, 8, 4, rel, _WARM_BYTES)  # (_largest_lower_bound's search)
        if slot < 0 or slot + 1 >= n:
            return None
        if slot + 2 < n:
            found, position, _, following, _, after = _THREE_ENTRIES.unpack_from(mm, slot * 8)
        else:
            (found, position, _, following), after = _TWO_ENTRIES.unpack_from(mm, slot * 8), -1
        return (position, following, after) if found == rel else None

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """Kafka's ``fetchUpperBoundOffset``: the offset of the first entry whose batch starts
        at or after byte ``position`` (its last offset: every offset of the bytes before
        ``position`` lies below it), or None when no entry does. Entries' positions grow
        with their offsets: a binary search, from the last entry (a read that ends at the
        segment's end, the usual one, has none after it)."""
        n, mm = self.entries, self._mmap
        if mm is None or n == 0 or _I32.unpack_from(mm, n * 8 - 4)[0] < position:
            return None
        lo, hi = 0, n - 1  # the answer's slot lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if _I32.unpack_from(mm, mid * 8 + 4)[0] >= position:
                hi = mid
            else:
                lo = mid + 1
        return self.base_offset + _I32.unpack_from(mm, lo * 8)[0]

    def append(self, offset: int, position: int) -> None:
        """One entry (an append of one batch writes one at the most): the checks of
        ``append_entries``, unrolled."""
        n, mm, rel = self.entries, self._mmap, offset - self.base_offset
        if self.state not in _TAKE_ENTRIES or not isinstance(mm, _map.Map):
            mm = self._writable_map()  # raises
        if n and rel <= _I32.unpack_from(mm, n * 8 - 8)[0]:
            previous = self.base_offset + _I32.unpack_from(mm, n * 8 - 8)[0]
            raise CorruptIndexError(
                f"offset {offset} appended after {previous}: index offsets must increase", file=self.path
            )
        if n >= self.length >> 3:
            raise CorruptIndexError(f"index is full ({n} entries)", file=self.path)
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            self.relative_offset(offset)  # raises
        if n * 8 + 8 > self.reserved:
            self._reserve(n * 8 + 8)
        _OFFSET_ENTRY.pack_into(mm, n * 8, rel, position)
        self.entries = n + 1

    def append_entries(self, entries: list[tuple[int, int]], through_file: bool = False) -> None:
        """Append (offset, position) entries, offsets increasing, in one write: the
        indexed batches of one append. ``through_file``: with ``pwrite`` rather than
        through the map (see ``_write_through_file``)."""
        n, mm, base = self.entries, self._writable_map(), self.base_offset
        previous = base + _I32.unpack_from(mm, n * 8 - 8)[0] if n else _BELOW_ANY
        flat: list[int] = []
        for offset, position in entries:
            if offset <= previous:
                raise CorruptIndexError(
                    f"offset {offset} appended after {previous}: index offsets must increase", file=self.path
                )
            flat += (offset - base, position)
            previous = offset
        if n + len(entries) > self.length >> 3:
            raise CorruptIndexError(f"index is full ({n} entries)", file=self.path)
        self._check_fits(entries[0][0], previous)
        if through_file:
            self._write_through_file(n * 8, struct.pack(f">{len(flat)}i", *flat))
            return self._appended(n + len(entries))
        self.reserve_for(len(entries))
        if len(entries) == 1:
            _OFFSET_ENTRY.pack_into(mm, n * 8, *flat)
        else:
            struct.pack_into(f">{len(flat)}i", mm, n * 8, *flat)
        self.entries = n + len(entries)

    def append_packed(self, packed: bytes) -> None:
        """Append entries already packed as the file holds them, relative offsets
        increasing: the recovery walk's (``_scan.recover_batches``), one write a chunk.
        The checks of ``append_entries`` that the walk cannot make: the first entry
        follows the last, the last fits, the index has room."""
        n, mm = self.entries, self._writable_map()
        count = len(packed) >> 3
        if not count:
            return
        first, last = _I32.unpack_from(packed, 0)[0], _I32.unpack_from(packed, len(packed) - 8)[0]
        previous = _I32.unpack_from(mm, n * 8 - 8)[0] if n else -1
        if first <= previous or len(packed) & 7:
            raise CorruptIndexError(
                f"offset {self.base_offset + first} appended after {self.base_offset + previous}: "
                f"index offsets must increase",
                file=self.path,
            )
        if n + count > self.length >> 3:
            raise CorruptIndexError(f"index is full ({n} entries)", file=self.path)
        self._check_fits(self.base_offset + first, self.base_offset + last)
        self.reserve_for(count)
        mm[n * 8 : (n + count) * 8] = packed
        self.entries = n + count

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``."""
        slot = self._largest_lower_bound(offset - self.base_offset)
        if slot < 0:
            self._truncate_to_slot(0)
        elif self.entry(slot)[0] == offset:
            self._truncate_to_slot(slot)
        else:
            self._truncate_to_slot(slot + 1)

    def sanity_check(self) -> None:
        """Kafka's cheap load-time checks: whole entries, last offset not below the base."""
        if self.length % self.entry_size:
            raise CorruptIndexError(
                f"index file size {self.length} is not a multiple of {self.entry_size}", file=self.path
            )
        if self.entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"last offset {self.last_offset} is below the base offset", file=self.path)

    def verify(self, log_size: int) -> None:
        """Every entry: offsets and positions increase, positions lie inside the log of
        ``log_size`` bytes. Run when an index is loaded (Kafka checks the last entry only;
        an entry out of order misleads the binary search, one outside the log a read), so
        its loops run in C: the entries unpacked at once, compared pairwise by ``map``."""
        self.sanity_check()
        n = self.entries
        if not n or self._mmap is None:
            return
        flat = array.array("i", self._mmap[: n * 8])
        if sys.byteorder == "little":
            flat.byteswap()
        offsets, positions = flat[0::2], flat[1::2]
        in_order = all(map(operator.lt, offsets, offsets[1:])) and all(map(operator.lt, positions, positions[1:]))
        if not in_order or offsets[0] < 0 or positions[0] < 0 or positions[-1] >= log_size:
            raise CorruptIndexError(
                f"entries out of order or past the log of {log_size} bytes (positions {positions[0]}.."
                f"{positions[-1]}, offsets {self.base_offset + offsets[0]}..{self.base_offset + offsets[-1]})",
                file=self.path,
            )


class TimeIndex(_Index):
    """Maps timestamps to offsets. The last slot is kept for the entry written on roll."""

    entry_size = _TIME_ENTRY.size
    _key_size = 8
    __slots__ = ("_checked",)  # per slot: 1 when ``mark_checked`` (an index's own once marked)

    def __init__(
        self, path: str, base_offset: int, max_index_size: int, writable: bool = True, in_memory: bool = False
    ) -> None:
        self._checked: bytes | bytearray = b""
        super().__init__(path, base_offset, max_index_size, writable, in_memory)

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of a slot."""
        if not 0 <= slot < self.entries or self._mmap is None:
            raise IndexError(f"slot {slot} of {self.entries}")
        ts, rel = _TIME_ENTRY.unpack_from(self._mmap, slot * 12)
        return ts, self.base_offset + rel

    @property
    def last_entry(self) -> tuple[int, int]:
        n, mm = self.entries, self._mmap
        if not n or mm is None:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = _TIME_ENTRY.unpack_from(mm, n * 12 - 12)
        return ts, self.base_offset + rel

    @property
    def is_full(self) -> bool:
        return self.entries >= self.length // 12 - 1  # the last slot is the roll's

    def lookup(self, timestamp: int) -> tuple[int, int, int]:
        """The largest entry with timestamp <= ``timestamp``, and its slot; (-1, base
        offset, -1) below the first."""
        mm = self._mmap
        if mm is None:
            return NO_TIMESTAMP, self.base_offset, -1
        slot = _scan.floor_entry(mm, self.entries, 12, 8, timestamp, _WARM_BYTES)  # (_largest_lower_bound's search)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset, -1
        ts, rel = _TIME_ENTRY.unpack_from(mm, slot * 12)
        return ts, self.base_offset + rel, slot

    def checked(self, slot: int) -> bool:
        """Whether the batch entry ``slot`` names was found to carry its timestamp as its
        max (``mark_checked``): a lookup by time checks the entry it starts from once."""
        marks = self._checked
        return slot < len(marks) and marks[slot] == 1

    def mark_checked(self, slot: int) -> None:
        """Entry ``slot`` agrees with its batch. Until a truncation drops the slot: the
        entries below it, and the log bytes they name, change no other way. (A reader
        racing a truncation may mark a slot the writer then fills anew: with an entry
        the writer made, right by construction.)"""
        marks = self._checked
        if slot >= len(marks) or not isinstance(marks, bytearray):  # grown by doubling: linear in all
            marks = self._checked = bytearray(marks) + bytes(max(slot + 1, 2 * len(marks), 64) - len(marks))
        marks[slot] = 1

    def _truncate_to_slot(self, slot_count: int) -> None:
        if len(self._checked) > slot_count:
            self._checked = self._checked[:slot_count]
        super()._truncate_to_slot(slot_count)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append when ``timestamp`` is larger than the last entry's (an empty index's last
        entry is (-1, base offset), as Kafka's: batches without timestamps get no entry)."""
        n, mm = self.entries, self._mmap
        if n and mm is not None:
            last_ts, rel = _TIME_ENTRY.unpack_from(mm, n * 12 - 12)
            last_offset = self.base_offset + rel
        else:
            last_ts, last_offset = NO_TIMESTAMP, _BELOW_ANY
        if timestamp <= last_ts:
            return
        if skip_full_check and self.state in _TAKE_ENTRIES and not self.length:
            # the final entry of a segment whose time index file is empty (Kafka makes one
            # so, when it is missing): as in Kafka's LogSegment.close, left out, no error
            log.warning("%s: no room for the time index's final entry; left out", self.path)
            return
        # append_entries's checks, unrolled for the one entry
        if self.state not in _TAKE_ENTRIES or not isinstance(mm, _map.Map):
            mm = self._writable_map()  # raises
        if offset < last_offset:
            raise CorruptIndexError(
                f"entry (timestamp {timestamp}, offset {offset}) appended after "
                f"(timestamp {last_ts}, offset {last_offset}) in a time index",
                file=self.path,
            )
        if n + 1 > self.length // 12 - (0 if skip_full_check else 1):
            raise CorruptIndexError(f"time index is full ({n} entries)", file=self.path)
        rel = offset - self.base_offset
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            self.relative_offset(offset)  # raises
        if n * 12 + 12 > self.reserved:
            try:
                self._reserve(n * 12 + 12)
            except KafkaStorageError as e:
                if not skip_full_check:
                    raise
                # the roll's (or close's) entry on a full disk: left out as when there is no
                # room for it; the segment's max timestamp is read from its batches then
                log.warning("%s: no room for the time index's final entry (%s); left out", self.path, e)
                return
        _TIME_ENTRY.pack_into(mm, n * 12, timestamp, rel)
        self.entries = n + 1

    def append_entries(
        self, entries: list[tuple[int, int]], skip_full_check: bool = False, through_file: bool = False
    ) -> None:
        """Append (timestamp, offset) entries in one write: timestamps increasing (past
        the last entry's), offsets not decreasing. The last slot is left for the entry
        a roll writes, unless ``skip_full_check`` (that entry). ``through_file``: with
        ``pwrite`` rather than through the map (see ``_write_through_file``)."""
        n, mm, base = self.entries, self._writable_map(), self.base_offset
        last_ts, last_offset = self.last_entry if n else (NO_TIMESTAMP, _BELOW_ANY)
        flat: list[int] = []
        for timestamp, offset in entries:
            if timestamp <= last_ts or offset < last_offset:
                raise CorruptIndexError(
                    f"entry (timestamp {timestamp}, offset {offset}) appended after "
                    f"(timestamp {last_ts}, offset {last_offset}) in a time index",
                    file=self.path,
                )
            flat += (timestamp, offset - base)
            last_ts, last_offset = timestamp, offset
        if n + len(entries) > self.max_entries - (0 if skip_full_check else 1):
            raise CorruptIndexError(f"time index is full ({n} entries)", file=self.path)
        self._check_fits(entries[0][1], last_offset)
        if through_file:
            self._write_through_file(n * 12, struct.pack(">" + "qi" * len(entries), *flat))
            return self._appended(n + len(entries))
        self.reserve_for(len(entries))
        if len(entries) == 1:
            _TIME_ENTRY.pack_into(mm, n * 12, *flat)
        else:
            struct.pack_into(">" + "qi" * len(entries), mm, n * 12, *flat)
        self.entries = n + len(entries)

    def append_packed(self, packed: bytes) -> None:
        """Append entries already packed as the file holds them, timestamps increasing
        and offsets not decreasing: the recovery walk's (``_scan.recover_batches``). The
        checks of ``append_entries`` that the walk cannot make: the first entry follows
        the last, the last fits, the index has room (but for the slot kept for a roll)."""
        n, mm = self.entries, self._writable_map()
        count = len(packed) // 12
        if not count:
            return
        timestamp, first = _TIME_ENTRY.unpack_from(packed, 0)
        last = _I32.unpack_from(packed, len(packed) - 4)[0]
        last_ts, last_offset = self.last_entry if n else (NO_TIMESTAMP, _BELOW_ANY)
        base = self.base_offset
        if timestamp <= last_ts or base + first < last_offset or len(packed) % 12:
            raise CorruptIndexError(
                f"entry (timestamp {timestamp}, offset {base + first}) appended after "
                f"(timestamp {last_ts}, offset {last_offset}) in a time index",
                file=self.path,
            )
        if n + count > self.max_entries - 1:
            raise CorruptIndexError(f"time index is full ({n} entries)", file=self.path)
        self._check_fits(base + first, base + last)
        self.reserve_for(count)
        mm[n * 12 : (n + count) * 12] = packed
        self.entries = n + count

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset`` (offsets never decrease, so bisect)."""
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[1] >= offset:
                hi = mid
            else:
                lo = mid + 1
        self._truncate_to_slot(lo)

    def sanity_check(self) -> None:
        """Kafka's cheap load-time checks."""
        if self.length % self.entry_size:
            raise CorruptIndexError(
                f"time index file size {self.length} is not a multiple of {self.entry_size}", file=self.path
            )
        if self.entries:
            first_ts, _ = self.entry(0)
            last_ts, last_offset = self.last_entry
            if last_ts < first_ts or last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"last entry (timestamp {last_ts}, offset {last_offset}) is below the first",
                    file=self.path,
                )

    def verify(self) -> None:
        """Every entry: timestamps strictly increase, offsets do not decrease."""
        self.sanity_check()
        prev_ts, prev_offset = None, self.base_offset
        for slot in range(self.entries):
            ts, offset = self.entry(slot)
            if (prev_ts is not None and ts <= prev_ts) or offset < prev_offset:
                raise CorruptIndexError(
                    f"entry {slot} (timestamp {ts}, offset {offset}) is out of order", file=self.path
                )
            prev_ts, prev_offset = ts, offset
