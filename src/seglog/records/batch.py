"""Record batch v2 (magic 2): a lazy view over the bytes, and a builder.

The header's layout (offsets, sizes, attribute bits) is ``layout.py``'s.

baseOffset and partitionLeaderEpoch sit before the CRC'd range, so a broker
rewrites them in place without touching the CRC; maxTimestamp and the
LogAppendTime bit are inside it, so stamping LogAppendTime recomputes it.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from . import _codec
from ._codec import crc32c
from .compression import Compression, compress, decompress
from .layout import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_FLAG_MASK,
    HEADER,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from .limits import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, check_int
from .record import Record

if TYPE_CHECKING:
    from .control import ControlRecord

Buffer = bytes | bytearray | memoryview

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[self]  # Kafka's TimestampType.name


# enum members as module constants where every batch built asks: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
_LOG_APPEND_TIME, _NO_CODEC, _codec_of = TimestampType.LOG_APPEND_TIME, Compression.NONE, Compression.parse


def _i32(buf: Buffer, at: int) -> int:
    return _I32.unpack_from(buf, at)[0]


def _i64(buf: Buffer, at: int) -> int:
    return _I64.unpack_from(buf, at)[0]


def check_batch(buffer: Buffer, at: int, end: int, head: tuple, position: int) -> None:
    """``RecordBatch.validate`` of the batch ``buffer[at:end]`` whose header fields
    (``HEADER.unpack_from(buffer, at)``) are ``head``: magic, the length against the
    bytes framed, the CRC, the record count and last offset delta. Walks over many
    batches call it with each header unpacked once. ``buffer`` should be a memoryview
    (the CRC is taken over a slice of it)."""
    if head[3] != MAGIC:
        raise CorruptRecordError(f"bad magic {buffer[at + MAGIC_OFFSET]} in a v2 batch", position=position)
    if head[1] + LOG_OVERHEAD != end - at:
        raise CorruptRecordError(
            f"batch length {head[1]} disagrees with the {end - at} bytes framed", position=position
        )
    computed = crc32c(buffer[at + CRC_START : end])
    if head[4] != computed:
        raise CorruptRecordError(
            f"CRC mismatch: stored {head[4]:#010x}, computed {computed:#010x}", position=position, offset=head[0]
        )
    if head[12] < 0 or head[6] < -1:
        raise CorruptRecordError(
            f"record count {head[12]} / last offset delta {head[6]} out of range", position=position, offset=head[0]
        )


class RecordBatch:
    """A v2 batch over a buffer holding exactly its bytes; fields are read on access.

    ``position`` is where the batch starts in the file or buffer it came from,
    for error messages and indexes. Nothing is decoded until asked for; the
    in-place setters need a writable buffer (a ``bytearray`` or a writable
    ``memoryview``).
    """

    __slots__ = ("buffer", "position")
    magic = MAGIC

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        self.buffer = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        self.position = position
        if len(self.buffer) < HEADER_SIZE:
            raise CorruptRecordError(f"batch of {len(self.buffer)} bytes is shorter than a header", position=position)

    # --- header fields ---------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return _i64(self.buffer, BASE_OFFSET_OFFSET)

    @property
    def batch_length(self) -> int:
        return _i32(self.buffer, LENGTH_OFFSET)

    @property
    def partition_leader_epoch(self) -> int:
        return _i32(self.buffer, PARTITION_LEADER_EPOCH_OFFSET)

    @property
    def crc(self) -> int:
        return _U32.unpack_from(self.buffer, CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _I16.unpack_from(self.buffer, ATTRIBUTES_OFFSET)[0]

    @property
    def last_offset_delta(self) -> int:
        return _i32(self.buffer, LAST_OFFSET_DELTA_OFFSET)

    @property
    def base_timestamp(self) -> int:
        return _i64(self.buffer, BASE_TIMESTAMP_OFFSET)

    @property
    def max_timestamp(self) -> int:
        return _i64(self.buffer, MAX_TIMESTAMP_OFFSET)

    @property
    def producer_id(self) -> int:
        return _i64(self.buffer, PRODUCER_ID_OFFSET)

    @property
    def producer_epoch(self) -> int:
        return _I16.unpack_from(self.buffer, PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _i32(self.buffer, BASE_SEQUENCE_OFFSET)

    @property
    def record_count(self) -> int:
        return _i32(self.buffer, RECORDS_COUNT_OFFSET)

    # --- derived ---------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) & 0x7FFFFFFF  # wraps as Kafka's incrementSequence

    @property
    def compression(self) -> Compression:
        code = self.attributes & COMPRESSION_CODEC_MASK
        try:
            return Compression(code)
        except ValueError:
            raise CorruptRecordError(f"unknown compression codec id {code}", position=self.position) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    def compute_crc(self) -> int:
        return crc32c(self.buffer[CRC_START:])

    @property
    def is_valid(self) -> bool:
        return self.crc == self.compute_crc()

    def header(self) -> tuple:
        """Every header field at once, in layout order (one unpack instead of a property each)."""
        return HEADER.unpack_from(self.buffer)

    def validate(self) -> None:
        """Check framing and CRC; raise CorruptRecordError naming the fault."""
        check_batch(self.buffer, 0, len(self.buffer), HEADER.unpack_from(self.buffer), self.position)

    # --- records ---------------------------------------------------------------

    def records_section(self) -> Buffer:
        """The records' bytes, decompressed when the batch is compressed."""
        body = self.buffer[HEADER_SIZE:]
        codec = self.attributes & COMPRESSION_CODEC_MASK
        if codec == 0:
            return body
        try:
            return decompress(codec, body)
        except CorruptRecordError as e:
            raise e.at(position=self.position, offset=self.base_offset) from None

    def records(self) -> list[Record]:
        """Decode every record (control records too; see ``control_records``)."""
        head = HEADER.unpack_from(self.buffer, 0)
        attributes, base_timestamp, max_timestamp, count = head[5], head[7], head[8], head[12]
        return _codec.decode_records(
            self.records_section(),
            count,
            head[0],
            base_timestamp,
            bool(attributes & TIMESTAMP_TYPE_MASK),
            max_timestamp,
            Record,
            self.position,
        )

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_records(self) -> list[ControlRecord]:
        from .control import parse_control_record

        return [parse_control_record(r, self.position) for r in self.records()]

    # --- in-place edits a broker makes ----------------------------------------

    def set_base_offset(self, offset: int) -> None:
        _I64.pack_into(self.buffer, BASE_OFFSET_OFFSET, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I32.pack_into(self.buffer, PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp_type: TimestampType, timestamp: int) -> None:
        """Stamp the batch (LogAppendTime) or restore its max; recomputes the CRC."""
        attributes = self.attributes & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        _I16.pack_into(self.buffer, ATTRIBUTES_OFFSET, attributes)
        _I64.pack_into(self.buffer, MAX_TIMESTAMP_OFFSET, timestamp)
        _U32.pack_into(self.buffer, CRC_OFFSET, self.compute_crc())

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, *, transactional: bool = False
    ) -> None:
        """Stamp a built batch with its producer's id, epoch and first sequence (and the
        transactional bit), as Kafka's producer does when it drains a batch to send it (and again
        after an epoch bump); recomputes the CRC, which covers these fields."""
        check_int("producer_id", producer_id, -1, INT64_MAX)
        check_int("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
        check_int("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        attributes = self.attributes & ~TRANSACTIONAL_FLAG_MASK
        if transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        _I16.pack_into(self.buffer, ATTRIBUTES_OFFSET, attributes)
        _I64.pack_into(self.buffer, PRODUCER_ID_OFFSET, producer_id)
        _I16.pack_into(self.buffer, PRODUCER_EPOCH_OFFSET, producer_epoch)
        _I32.pack_into(self.buffer, BASE_SEQUENCE_OFFSET, base_sequence)
        _U32.pack_into(self.buffer, CRC_OFFSET, self.compute_crc())

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, size={self.size_in_bytes}, position={self.position})"
        )


def build_batch(
    records: Sequence[Record | tuple],
    *,
    base_offset: int = 0,
    compression: Compression | int = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    keep_offsets: bool = False,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytearray:
    """Encode records as one v2 batch and return its bytes (writable).

    Records are ``Record``s or tuples ``(key, value[, timestamp, headers, offset])``;
    a timestamp of ``None`` is now. With ``keep_offsets`` each record's offset is
    kept (as the log cleaner needs); otherwise offsets run from ``base_offset``.
    ``last_offset_delta`` overrides the computed one, for batches whose last
    records were removed but whose offset range must stay (the cleaner again).
    """
    if not (  # in one expression (a coordinator builds a batch per commit); else the checks that name the bad one
        type(base_offset) is int
        and 0 <= base_offset <= INT64_MAX
        and type(producer_id) is int
        and -1 <= producer_id <= INT64_MAX
        and type(producer_epoch) is int
        and INT16_MIN <= producer_epoch <= INT16_MAX
        and type(base_sequence) is int
        and INT32_MIN <= base_sequence <= INT32_MAX
        and type(partition_leader_epoch) is int
        and INT32_MIN <= partition_leader_epoch <= INT32_MAX
    ):
        check_int("base_offset", base_offset, 0, INT64_MAX)
        check_int("producer_id", producer_id, -1, INT64_MAX)
        check_int("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
        check_int("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        check_int("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
    if last_offset_delta is not None:
        check_int("last_offset_delta", last_offset_delta, 0, INT32_MAX)
    if log_append_time is not None:
        check_int("log_append_time", log_append_time, INT64_MIN, INT64_MAX, InvalidTimestampError)
    if delete_horizon_ms is not None:
        check_int("delete_horizon_ms", delete_horizon_ms, INT64_MIN, INT64_MAX, InvalidTimestampError)
    now = int(time.time() * 1000)
    try:
        body, count, base_ts, max_ts, last_delta = _codec.encode_records(
            records, base_offset, delete_horizon_ms, now, keep_offsets, HEADER_SIZE
        )
    except OverflowError as e:
        raise _overflow(records, e) from None
    except (TypeError, ValueError) as e:  # a record of the wrong shape, an offset out of order
        raise InvalidRecordError(str(e)) from None
    return _seal(
        body,
        count,
        base_ts,
        now if timestamp_type == _LOG_APPEND_TIME and log_append_time is None else max_ts,
        last_delta if last_offset_delta is None else last_offset_delta,
        base_offset=base_offset,
        compression=compression,
        log_append_time=timestamp_type == _LOG_APPEND_TIME,
        max_timestamp_override=log_append_time,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        control=control,
        partition_leader_epoch=partition_leader_epoch,
        delete_horizon=delete_horizon_ms is not None,
    )


def _overflow(records: Sequence[Record | tuple], e: OverflowError) -> InvalidRecordError | InvalidTimestampError:
    """The error for a record whose timestamp or offset is no int64 (the encoder only
    knows that some value overflowed): found again here, on the error path alone."""
    for i, record in enumerate(records):
        timestamp = record[2] if len(record) > 2 else None
        if isinstance(timestamp, int) and not INT64_MIN <= timestamp <= INT64_MAX:
            return InvalidTimestampError(f"record {i}: timestamp {timestamp} does not fit in an int64")
        offset = record[4] if len(record) > 4 else None
        if isinstance(offset, int) and not INT64_MIN <= offset <= INT64_MAX:
            return InvalidRecordError(f"record {i}: offset {offset} does not fit in an int64")
    return InvalidRecordError(f"a record field does not fit its type: {e}")


def build_batches_from_columns(
    rows: int,
    key: tuple | None,
    value: tuple | None,
    timestamps: tuple | None = None,
    headers: tuple | None = None,
    *,
    compression: Compression | int = Compression.NONE,
    max_bytes: int = 512 * 1024,
) -> list[bytearray]:
    """Encode rows held in Arrow-layout buffers as v2 batches of about ``max_bytes`` each.

    ``key`` and ``value`` are ``None`` (all null) or ``(validity | None, int32 offsets,
    data, array offset)`` as ``pyarrow.Array.buffers()`` gives them; ``timestamps`` is
    ``None`` (now) or ``(validity | None, int64 microseconds, array offset)``; ``headers``
    ``None`` (none) or ``(int32 counts, one a row; how many in all; keys; values)``, keys and
    values as ``key`` and ``value`` are, every row's headers one after another. The
    records layer stays free of pyarrow: buffers in, batches out.
    """
    now = int(time.time() * 1000)
    chunks = _codec.encode_columns(rows, key, value, timestamps, now, max_bytes, HEADER_SIZE, headers)
    return [
        _seal(body, count, base_ts, max_ts, last_delta, compression=compression)
        for body, count, base_ts, max_ts, last_delta in chunks
    ]


def _seal(
    body: bytearray,
    count: int,
    base_ts: int,
    max_ts: int,
    last_delta: int,
    *,
    base_offset: int = 0,
    compression: Compression | int = Compression.NONE,
    log_append_time: bool = False,
    max_timestamp_override: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    delete_horizon: bool = False,
) -> bytearray:
    """Compress a records section (after HEADER_SIZE bytes of room) and write the header and CRC."""
    codec = int(_codec_of(compression))
    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
        if max_timestamp_override is not None:
            max_ts = max_timestamp_override
    if transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    if codec != _NO_CODEC:
        compressed = compress(codec, memoryview(body)[HEADER_SIZE:])
        body = bytearray(HEADER_SIZE)
        body += compressed
    HEADER.pack_into(
        body,
        0,
        base_offset,
        len(body) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    _U32.pack_into(body, CRC_OFFSET, crc32c(memoryview(body)[CRC_START:]))
    return body
