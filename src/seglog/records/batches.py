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
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ..errors import CorruptRecordError
from .batch import Buffer, RecordBatch
from .layout import HEADER, HEADER_SIZE, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC, MAGIC_OFFSET, MIN_BATCH_LENGTH
from .legacy import MIN_MESSAGE_SIZE, LegacyBatch

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
