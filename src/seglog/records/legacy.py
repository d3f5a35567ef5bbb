"""Legacy message sets, magic 0 and 1 (Kafka before 0.11), read-only in the log.

Each entry of a legacy message set is one message, big-endian::

    offset      int64
    size        int32    bytes after this field
    crc         uint32   CRC32 (zlib) of magic..end
    magic       int8     0 or 1
    attributes  int8     bits 0-2 codec (no zstd), bit 3 LogAppendTime (v1)
    timestamp   int64    v1 only; -1 = none
    key         int32 length (-1 = null) + bytes
    value       int32 length (-1 = null) + bytes

A compressed message is a wrapper whose value is a whole inner message set,
compressed. The wrapper's offset is the *last* inner offset; inner offsets are
absolute in v0 and relative (0, 1, ...) in v1, where the absolute offset is
``wrapper offset - last inner offset + inner offset``. In a v1 LogAppendTime
wrapper every inner message takes the wrapper's timestamp.

Kafka calls each shallow entry a batch (``AbstractLegacyRecordBatch``), and so
does seglog: ``LegacyBatch`` answers the same questions as ``RecordBatch``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence

from ..errors import CorruptRecordError
from .batch import NO_SEQUENCE, NO_TIMESTAMP, Buffer, TimestampType
from .compression import Compression, compress, decompress
from .layout import LOG_OVERHEAD
from .record import Record

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08

# a magic 1 message's timestamp: after the framing, crc, magic and attributes
TIMESTAMP_OFFSET = _HEAD.size
# the smallest message: crc + magic + attributes [+ timestamp] + two lengths
MIN_MESSAGE_SIZE = {0: 14, 1: 22}


class LegacyBatch:
    """One shallow legacy message (plain, or a compressed wrapper) over its bytes."""

    __slots__ = ("buffer", "position")
    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    is_transactional = False
    is_control = False
    has_delete_horizon = False

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        self.buffer = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        self.position = position
        magic = self.buffer[16] if len(self.buffer) > 16 else -1
        if magic not in MIN_MESSAGE_SIZE or len(self.buffer) < LOG_OVERHEAD + MIN_MESSAGE_SIZE[magic]:
            raise CorruptRecordError(
                f"not a legacy message (magic {magic}, {len(self.buffer)} bytes)", position=position
            )

    @property
    def magic(self) -> int:
        return self.buffer[16]

    @property
    def attributes(self) -> int:
        return self.buffer[17]

    @property
    def offset(self) -> int:
        """The offset field: for a wrapper, the last inner offset."""
        return _I64.unpack_from(self.buffer, 0)[0]

    @property
    def crc(self) -> int:
        return _HEAD.unpack_from(self.buffer, 0)[2]

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def compression(self) -> Compression:
        code = self.attributes & _CODEC_MASK
        if code > Compression.LZ4:
            raise CorruptRecordError(f"unknown legacy compression codec id {code}", position=self.position)
        return Compression(code)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & _LOG_APPEND_TIME else TimestampType.CREATE_TIME

    @property
    def timestamp(self) -> int:
        return _I64.unpack_from(self.buffer, 18)[0] if self.magic == 1 else NO_TIMESTAMP

    max_timestamp = timestamp

    def _key_value(self) -> tuple[bytes | None, bytes | None]:
        pos = 18 + (8 if self.magic == 1 else 0)
        key, pos = self._bytes_at(pos, "key")
        value, pos = self._bytes_at(pos, "value")
        if pos != len(self.buffer):
            raise CorruptRecordError(
                f"{len(self.buffer) - pos} bytes follow the value of a legacy message", position=self.position
            )
        return key, value

    def _bytes_at(self, pos: int, what: str) -> tuple[bytes | None, int]:
        if pos + 4 > len(self.buffer):
            raise CorruptRecordError(f"legacy message truncated before its {what} length", position=self.position)
        (length,) = _I32.unpack_from(self.buffer, pos)
        pos += 4
        if length == -1:
            return None, pos
        if length < -1 or pos + length > len(self.buffer):
            raise CorruptRecordError(f"legacy message {what} length {length} out of range", position=self.position)
        return bytes(self.buffer[pos : pos + length]), pos + length

    @property
    def key(self) -> bytes | None:
        return self._key_value()[0]

    @property
    def value(self) -> bytes | None:
        return self._key_value()[1]

    def compute_crc(self) -> int:
        return zlib.crc32(self.buffer[16:])

    @property
    def is_valid(self) -> bool:
        return self.crc == self.compute_crc()

    def validate(self) -> None:
        stored, computed = self.crc, self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"CRC mismatch: stored {stored:#010x}, computed {computed:#010x}",
                position=self.position,
                offset=self.offset,
            )

    def records(self) -> list[Record]:
        if self.compression == Compression.NONE:
            key, value = self._key_value()
            return [Record(key, value, self.timestamp, (), self.offset)]
        return self._inner_records()

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def _inner_records(self) -> list[Record]:
        from .batches import BatchIterator

        _, wrapped = self._key_value()
        if wrapped is None:
            raise CorruptRecordError("compressed legacy message has a null value", position=self.position)
        try:
            inner_bytes = decompress(self.compression, wrapped)
        except CorruptRecordError as e:
            raise e.at(position=self.position, offset=self.offset) from None
        inner: list[LegacyBatch] = []
        scan = BatchIterator(inner_bytes)
        for message in scan:
            if not isinstance(message, LegacyBatch) or message.magic != self.magic:
                raise CorruptRecordError(
                    "compressed legacy message holds a message of another magic", position=self.position
                )
            if message.compression != Compression.NONE:
                raise CorruptRecordError("compressed legacy message holds a compressed message", position=self.position)
            message.validate()
            inner.append(message)
        if scan.remaining:
            raise CorruptRecordError("compressed legacy message ends in a partial message", position=self.position)
        # a producer's wrapper carries offset 0 (the broker assigns the real one):
        # its relative inner offsets are then read as they are, as Kafka does
        shift = self.offset - inner[-1].offset if self.magic == 1 and inner and self.offset else 0
        stamp = self.timestamp if self.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        out = []
        for m in inner:
            key, value = m._key_value()
            ts = stamp if stamp is not None else m.timestamp
            out.append(Record(key, value, ts, (), m.offset + shift))
        return out

    @property
    def base_offset(self) -> int:
        if self.compression == Compression.NONE:
            return self.offset
        records = self._inner_records()
        return records[0].offset if records else self.offset

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def record_count(self) -> int:
        return 1 if self.compression == Compression.NONE else len(self._inner_records())

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, offset={self.offset}, size={self.size_in_bytes}, "
            f"position={self.position})"
        )


def build_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One magic 0 or 1 message with its framing (offset, size) and CRC32: an entry of a
    message set, or the wrapper of a compressed one (its value the compressed inner set)."""
    body = bytearray([magic, attributes])
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        body += _I32.pack(-1) if field is None else _I32.pack(len(field)) + field
    return _I64.pack(offset) + _I32.pack(len(body) + 4) + struct.pack(">I", zlib.crc32(body)) + bytes(body)


def build_message_set(
    records: Sequence[Record],
    *,
    magic: int,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
) -> bytes:
    """Encode a legacy message set as a pre-0.11 broker stored it (for tests and tools).

    Compressed sets become one wrapper whose offset is the last inner offset.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")

    def ts(r: Record) -> int:
        return NO_TIMESTAMP if r.timestamp is None else r.timestamp

    if compression == Compression.NONE:
        return b"".join(build_message(base_offset + i, magic, 0, ts(r), r.key, r.value) for i, r in enumerate(records))
    inner = b"".join(
        build_message(i if magic == 1 else base_offset + i, magic, 0, ts(r), r.key, r.value)
        for i, r in enumerate(records)
    )
    wrapper_ts = max((ts(r) for r in records), default=NO_TIMESTAMP)
    last = base_offset + len(records) - 1
    return build_message(last, magic, int(compression), wrapper_ts, None, compress(compression, inner))
