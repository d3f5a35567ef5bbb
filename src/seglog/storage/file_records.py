"""Reading a ``.log`` file of batches (Kafka's FileRecords) and what a read answers.

A segment's log is read with ``pread``, never mapped (a file truncated under a
mapping would kill the reader with SIGBUS). What this module knows of the bytes
is the framing every magic shares and the few v2 header fields a scan needs:

- ``scan_headers`` walks batch headers from a position without decoding records
  (Kafka's ``FileRecords.batchesFrom``), reading in chunks that follow the batches;
- ``search_time`` finds the first record at or after a timestamp in the batches a
  scan names (Kafka's ``FileRecords.searchForTimestamp``), the records walked in C;
- a read's answer is a ``FileSlice`` (Kafka's ``FileRecords.slice``: file, position,
  size, starting at a batch boundary) inside a ``FetchDataInfo``, which says where the
  read is in the log (``LogOffsetMetadata``: offset, segment, byte position), as
  Kafka's ``FetchDataInfo`` and ``LogOffsetMetadata`` do for the fetch purgatory and
  the replica fetchers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from ..errors import CorruptRecordError
from ..records import BatchIterator
from ..records.batches import HEADER_PEEK, peek_frame
from ..records.compression import decompress
from ..records.layout import (
    BASE_TIMESTAMP_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_LENGTH,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
)
from ..records.legacy import TIMESTAMP_OFFSET as LEGACY_TIMESTAMP_OFFSET
from . import _scan, fileio
from .index import NO_TIMESTAMP
from .txn_index import AbortedTxn

# baseOffset, batchLength, then (skipping epoch, magic, crc, attributes) lastOffsetDelta,
# and (skipping baseTimestamp) maxTimestamp: what a scan needs of a v2 header, at layout's offsets
_V2_PEEK = struct.Struct(
    f">qi{LAST_OFFSET_DELTA_OFFSET - PARTITION_LEADER_EPOCH_OFFSET}xi{MAX_TIMESTAMP_OFFSET - BASE_TIMESTAMP_OFFSET}xq"
)
assert _V2_PEEK.size == MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
_LEGACY_TS = struct.Struct(">q")
_V1_PEEK = (
    LEGACY_TIMESTAMP_OFFSET + _LEGACY_TS.size
)  # a magic 1 message's framing, crc, magic, attributes and timestamp
_HEADER_READ = 64  # a read for one v2 header (the _V2_PEEK.size bytes a scan needs)
_FIRST_SCAN_CHUNK = 4 * 1024
NEAR = _FIRST_SCAN_CHUNK  # a batch at most this far on is reached by a scan's first read
_SCAN_CHUNK = 64 * 1024

# Named tuples rather than dataclasses: a lookup makes one of each, and a frozen
# dataclass costs a microsecond to build, a tenth of a lookup's budget.


class BatchHeader(NamedTuple):
    """What a scan of batch headers learns without decoding records."""

    position: int
    size: int
    base_offset: int  # for a legacy wrapper: its offset field (the last inner offset)
    last_offset: int
    max_timestamp: int
    magic: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class FileSlice(NamedTuple):
    """A byte range of a segment file, starting at a batch boundary.

    The slice holds the segment's open file: a truncation, retention or compaction
    that deletes the segment meanwhile unlinks the file but leaves the fd open while
    the slice is held (see ``fileio.FileHandle``), so its bytes stay readable. Bytes a
    truncation cuts from the segment that stays are gone, as in Kafka: a slice over
    them reads short, and ``batches`` leaves the partial batch out."""

    handle: fileio.FileHandle
    position: int
    size: int

    def read(self) -> bytes:
        return self.handle.pread(self.size, self.position)

    def batches(self) -> BatchIterator:
        """The whole batches of the slice (a last partial batch is left out)."""
        return BatchIterator(self.read(), origin=self.position)


class LogOffsetMetadata(NamedTuple):
    """Where an offset is in the log (Kafka's ``LogOffsetMetadata``): the offset, the
    base offset of the segment holding it and the byte position there of the batch
    holding it. An offset whose place was not looked up carries -1 for both (Kafka's
    "message offset only"): comparing positions needs both ends on known places."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class FetchDataInfo(NamedTuple):
    """A read's answer (Kafka's ``FetchDataInfo``): where it starts in the log, and the
    bytes (``records``; ``None``: nothing to read). ``first_entry_incomplete``: the
    slice ends inside its first batch (max_bytes smaller than it, no min_one_message).
    ``aborted_transactions``: a read_committed read's, the aborted transactions that
    overlap what it read (None for other reads)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def offset(self) -> int:
        """The offset the read asked for."""
        return self.fetch_offset_metadata.message_offset

    @property
    def slice(self) -> FileSlice | None:
        """``records``, by the name seglog's callers knew it by first."""
        return self.records

    @property
    def size(self) -> int:
        return self.records.size if self.records else 0


def _header_at(buf: bytes | memoryview, at: int, position: int) -> BatchHeader:
    if len(buf) - at >= _V2_PEEK.size and buf[at + MAGIC_OFFSET] == 2:
        offset, size, delta, max_ts = _V2_PEEK.unpack_from(buf, at)
        if size >= MIN_BATCH_LENGTH:
            return BatchHeader(position, size + LOG_OVERHEAD, offset, offset + delta, max_ts, 2)
    offset, size, magic = peek_frame(buf, at, position - at)
    if magic == 2:
        raise CorruptRecordError("v2 batch header truncated", position=position)
    ts = (
        _LEGACY_TS.unpack_from(buf, at + LEGACY_TIMESTAMP_OFFSET)[0]
        if magic == 1 and len(buf) - at >= _V1_PEEK
        else NO_TIMESTAMP
    )
    return BatchHeader(position, size + LOG_OVERHEAD, offset, offset, ts, magic)


def header_at_position(handle: fileio.FileHandle, position: int) -> BatchHeader | None:
    """The header of the batch starting at ``position``, in one small read; None when
    the bytes there are too few or frame no batch."""
    head = handle.pread(_HEADER_READ, position)
    try:
        return _header_at(head, 0, position) if len(head) >= HEADER_PEEK else None
    except CorruptRecordError:
        return None


def scan_headers(handle: fileio.FileHandle, start: int, limit: int, first_read: int = 0) -> Iterator[BatchHeader]:
    """Batch headers from byte ``start`` up to ``limit``, reading in chunks.
    Stops at a partial batch; bad framing raises CorruptRecordError.

    Reads follow the batches: past a batch larger than a first chunk, the next
    read takes one header (as Kafka reads a header at a time: copying the body
    of a large batch to learn where the next starts would cost more than the
    call); while batches are small, reads grow from a first chunk (or from
    ``first_read`` bytes, when the caller knows how far the batch it wants lies
    at the most)."""
    pread = handle.pread
    pos, want = start, first_read or _FIRST_SCAN_CHUNK
    while pos + HEADER_PEEK <= limit:
        chunk = pread(min(want, limit - pos), pos)
        n, at, size = len(chunk), 0, 0
        while at + HEADER_PEEK <= n:
            if n - at < _V2_PEEK.size and (
                chunk[at + MAGIC_OFFSET] == 2 or (n - at < _V1_PEEK and chunk[at + MAGIC_OFFSET] == 1)
            ):
                break  # the header fields we read (a v2 batch's, a v1 timestamp) lie past the chunk
            header = _header_at(chunk, at, pos + at)
            size = header.size
            at += size
            if pos + at > limit:
                return
            yield header
        if at == 0:
            return  # a v2 header cut short by the end of the data: a partial batch
        pos += at
        want = _HEADER_READ if size > _FIRST_SCAN_CHUNK else max(_FIRST_SCAN_CHUNK, min(want * 4, _SCAN_CHUNK))


def first_read_for(span: int) -> int:
    """How much a scan reads first to reach a batch at most ``span`` bytes on (-1: no
    bound known): every header up to it in one read when near, one header when far."""
    return 0 if span < 0 else span + _V2_PEEK.size if span <= NEAR else _HEADER_READ


def first_read_between(span: int) -> int:
    """How much a scan reads first to reach a batch ``span`` bytes on when batches
    smaller than an index interval lie before it: all of them in one read, within
    twice a near span (else one header, as ``first_read_for``)."""
    return span if span <= 2 * NEAR else _HEADER_READ


def first_offset(handle: fileio.FileHandle, header: BatchHeader) -> int:
    """A batch's first offset; a legacy wrapper must be opened to learn it."""
    if header.magic == 2:
        return header.base_offset
    data = handle.pread(header.size, header.position)
    return next(BatchIterator(data, origin=header.position)).base_offset


def search_time(
    handle: fileio.FileHandle, headers: Iterator[BatchHeader], timestamp: int, starting_offset: int
) -> tuple[int, int] | None:
    """The first record of the batches of ``headers`` with timestamp >= ``timestamp``
    and offset >= ``starting_offset``, as (timestamp, offset)."""
    for header in headers:
        if header.max_timestamp < timestamp or header.last_offset < starting_offset:
            continue
        data = handle.pread(header.size, header.position)
        if header.magic == 2:  # the records walked in C, none decoded
            found = _scan.find_timestamp(data, timestamp, starting_offset, header.position, decompress)
            if found is not None:
                return found
            continue
        for _key, _value, record_ts, _headers, offset in next(BatchIterator(data, origin=header.position)).records():
            if record_ts is not None and record_ts >= timestamp and offset >= starting_offset:
                return record_ts, offset
    return None
