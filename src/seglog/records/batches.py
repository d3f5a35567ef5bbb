"""Walking a buffer of batches: a segment, a fetch response, a produce request.

Every magic shares the first 17 bytes of framing (``layout.HEADER_SIZE_UP_TO_MAGIC``): ``offset int64, size int32``,
then 4 bytes (the v2 leader epoch, or the legacy CRC), then ``magic int8``.
So the walk reads offset, size and magic, hands the whole batch to
``RecordBatch`` (v2) or ``LegacyBatch`` (v0/v1) without copying, and steps
``12 + size`` bytes on. A trailing batch cut short (a torn write, a fetch
limited by max_bytes) ends the walk cleanly; ``position`` then tells how many
bytes were whole. Bad framing (an unknown magic, a size below the minimum or
above ``max_batch_size``) raises CorruptRecordError, since nothing after it
can be trusted to start a batch.

``stream_records`` gives a v2 batch's records as its compressed section is
inflated, for tools that walk every record of a file (dump-log), where a small
file may inflate to gigabytes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from ..errors import CorruptRecordError
from . import _codec
from .batch import Buffer, RecordBatch
from .compression import STREAM_CHUNK_BYTES, Compression, decompress_stream
from .layout import (
    HEADER,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
)
from .legacy import MIN_MESSAGE_SIZE, LegacyBatch
from .record import Record
from .varint import MAX_VARINT_BYTES, decode_varint

_FRAME = struct.Struct(">qi")
_MIN_SIZE = {0: MIN_MESSAGE_SIZE[0], 1: MIN_MESSAGE_SIZE[1], 2: MIN_BATCH_LENGTH}
HEADER_PEEK = HEADER_SIZE_UP_TO_MAGIC  # enough framing to learn a batch's size and magic

AnyBatch = RecordBatch | LegacyBatch


def peek_frame(buf: Buffer, pos: int, origin: int = 0) -> tuple[int, int, int]:
    """Read (offset, size, magic) of the batch at ``pos``; raise on bad framing."""
    offset, size = _FRAME.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    minimum = _MIN_SIZE.get(magic)
    if minimum is None:
        raise CorruptRecordError(f"bad magic {magic}", position=origin + pos, offset=offset)
    if size < minimum:
        raise CorruptRecordError(
            f"batch size {size} is below the minimum {minimum} for magic {magic}", position=origin + pos, offset=offset
        )
    return offset, size, magic


class BatchIterator:
    """Iterates the whole batches of a buffer, from ``start``.

    ``origin`` is added to positions (the buffer's place in its file).
    After the walk, ``position`` is the end of the last whole batch and
    ``remaining`` the bytes of a partial batch after it.
    """

    def __init__(self, buffer: Buffer, start: int = 0, *, origin: int = 0, max_batch_size: int | None = None) -> None:
        self.view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        self.position = start
        self.origin = origin
        self.max_batch_size = max_batch_size

    @property
    def remaining(self) -> int:
        return len(self.view) - self.position

    def __iter__(self) -> Iterator[AnyBatch]:
        # a generator, not self: its end costs no StopIteration instance, which for the
        # one batch of a typical produce request is a fifth of the walk
        while (batch := self._next()) is not None:
            yield batch

    def __next__(self) -> AnyBatch:
        batch = self._next()
        if batch is None:
            raise StopIteration
        return batch

    def _next(self) -> AnyBatch | None:
        pos, view = self.position, self.view
        if len(view) - pos < HEADER_PEEK:
            return None
        offset, size, magic = peek_frame(view, pos, self.origin)
        if self.max_batch_size is not None and size + LOG_OVERHEAD > self.max_batch_size:
            raise CorruptRecordError(
                f"batch size {size + LOG_OVERHEAD} exceeds the largest allowed {self.max_batch_size}",
                position=self.origin + pos,
                offset=offset,
            )
        end = pos + LOG_OVERHEAD + size
        if end > len(view):
            return None
        self.position = end
        if magic == 2:
            return RecordBatch(view[pos:end], self.origin + pos)
        return LegacyBatch(view[pos:end], self.origin + pos)

    def headers(self) -> Iterator[tuple[int, int, tuple | None]]:
        """Walk on as iterating does, without making v2 batch objects: yields (start, end,
        header) of each whole batch, start and end in the buffer, header a v2 batch's
        fields in ``HEADER`` order, unpacked once; None for a legacy message (make a
        ``LegacyBatch`` of ``view[start:end]`` to read it). Nothing is validated: check
        each v2 batch with ``check_batch``. For loops over every batch of an append or a
        recovered segment, where the property reads of a batch object would cost more
        than the CRC of a 16 KiB batch."""
        view, unpack, limit = self.view, HEADER.unpack_from, self.max_batch_size
        size = len(view)
        pos = self.position
        while pos < size:
            head = unpack(view, pos) if size - pos >= HEADER_SIZE and view[pos + MAGIC_OFFSET] == MAGIC else None
            end = pos + LOG_OVERHEAD + head[1] if head is not None else -1
            if head is None or head[1] < MIN_BATCH_LENGTH or end > size or (limit is not None and end - pos > limit):
                # anything but a whole v2 batch within bounds: the general path knows the
                # partial, legacy and bad cases (and stops or raises)
                batch = self._next()
                if batch is None:
                    return
                end = self.position
                yield pos, end, batch.header() if isinstance(batch, RecordBatch) else None
            else:
                self.position = end
                yield pos, end, head
            pos = end


def iter_batches(buffer: Buffer, start: int = 0, *, origin: int = 0) -> BatchIterator:
    """Shorthand for ``BatchIterator(buffer, start, origin=origin)``."""
    return BatchIterator(buffer, start, origin=origin)


# --- the records of a compressed batch, as a stream ---------------------------------

_MIN_RECORD_LENGTH = 6  # attributes, and a byte each for the timestamp and offset deltas, key and value lengths
_RECORD_FAULT = re.compile(r"record (\d+): (.*) at byte (\d+) of the records", re.DOTALL)


def stream_records(batch: RecordBatch, chunk: int = STREAM_CHUNK_BYTES) -> Iterator[Record]:
    """The records of a v2 batch, as ``batch.records()`` gives them, decoded as the compressed
    section is inflated (``decompress_stream``), as Kafka's DumpLogSegments streams them out of a
    compressed batch: memory is a ``chunk`` of inflated bytes and the records in it (a record larger
    than the chunk is held whole), not the batch's inflated size. A fault is raised where the stream
    meets it, after the records before it; once the batch's count of records is read, a byte more is
    a fault found without inflating the rest (Kafka's ``ensureNoneRemaining``), so the work a batch
    costs stops at its count. An uncompressed batch is ``batch.records()``."""
    head = batch.header()
    if batch.compression == Compression.NONE:
        yield from batch.records()
        return
    count = head[12]
    if count < 0:
        raise CorruptRecordError(f"record count {count} is negative", position=batch.position)
    pieces = _placed(decompress_stream(batch.compression, batch.buffer[HEADER_SIZE:], chunk), batch)
    decode = _StreamDecoder(batch.position, head)
    pending = bytearray()
    for piece in pieces:
        pending += piece
        yield from decode.whole_records(pending, count)
        if decode.records == count and pending:
            break
    if decode.records == count:
        rest = len(pending) + len(next(pieces, b""))  # a piece more tells that bytes follow, not how many
        if rest:
            more = "" if rest == len(pending) else "more than "
            raise CorruptRecordError(
                f"record count {count} disagrees with the batch: {more}{len(pending)} bytes follow the last record",
                position=batch.position,
            )
    elif pending:
        raise decode.fault(decode.records, "record length out of range (truncated record)", 0)
    else:
        raise CorruptRecordError(
            f"record count {count} disagrees with the batch: its records end after {decode.records}",
            position=batch.position,
        )


def _placed(pieces: Iterator[bytes], batch: RecordBatch) -> Iterator[bytes]:
    """A codec's faults named with the batch and its base offset, as ``records_section`` names them."""
    try:
        yield from pieces
    except CorruptRecordError as e:
        raise e.at(position=batch.position, offset=batch.base_offset) from None


class _StreamDecoder:
    """Decodes the whole records at the start of a buffer of inflated bytes, numbering records and
    bytes from the start of the batch's records (as the C decoder numbers them in a whole section)."""

    def __init__(self, position: int, head: tuple) -> None:
        self.position = position
        self.base_offset, self.base_timestamp, self.max_timestamp = head[0], head[7], head[8]
        self.log_append_time = bool(head[5] & TIMESTAMP_TYPE_MASK)
        self.records = 0  # records decoded so far
        self.consumed = 0  # bytes of the records section decoded so far

    def whole_records(self, pending: bytearray, count: int) -> list[Record]:
        """Decode and remove the whole records at the start of ``pending`` (at most the count's rest)."""
        n, end, fault = self._frame(pending, count - self.records)
        records = []
        if n:
            with memoryview(pending)[:end] as part:
                try:
                    records = _codec.decode_records(
                        part, n, self.base_offset, self.base_timestamp, self.log_append_time, self.max_timestamp,
                        Record, self.position,
                    )  # fmt: skip
                except CorruptRecordError as e:
                    raise self._rebased(e) from None
            del pending[:end]
            self.records += n
            self.consumed += end
        if fault is not None:  # after the records before it, where the C decoder may find an earlier fault
            raise fault
        return records

    def _frame(self, buf: bytearray, wanted: int) -> tuple[int, int, CorruptRecordError | None]:
        """(n, end, fault): the first n records of ``buf`` are whole and end at ``end``; ``fault`` is
        that of the length of the record after them. Only the length varints are read; the C decoder
        checks the rest."""
        n = pos = 0
        while n < wanted:
            try:
                length, after = decode_varint(buf, pos)
            except CorruptRecordError:
                if len(buf) - pos < MAX_VARINT_BYTES:
                    break  # cut by the chunk: the next piece ends it
                return n, pos, self.fault(self.records + n, "varint too long in the record length", pos)
            if length < _MIN_RECORD_LENGTH:
                return n, pos, self.fault(self.records + n, "record length out of range (truncated record)", pos)
            if after + length > len(buf):
                break
            n, pos = n + 1, after + length
        return n, pos, None

    def fault(self, record: int, fault: str, at: int) -> CorruptRecordError:
        """A fault of record ``record`` at byte ``at`` of the pending bytes, as the C decoder words it."""
        return CorruptRecordError(
            f"record {record}: {fault} at byte {self.consumed + at} of the records", position=self.position
        )

    def _rebased(self, e: CorruptRecordError) -> CorruptRecordError:
        """The C decoder's fault in a run of records, numbered from the batch's first record."""
        found = _RECORD_FAULT.fullmatch(e.message)
        if found is None:
            return e
        return self.fault(self.records + int(found[1]), found[2], int(found[3]))
