"""Converting between message formats, as a broker of Kafka 3.x does for its old clients.

Up, on a leader's append (Kafka's ``LogValidator`` with ``toMagic`` 2): the messages of a
legacy message set (Produce v0-2: magic 0 or 1, plain or compressed wrappers) become the
records of one v2 batch. Offsets run from 0 (the log assigns the real ones); a magic 0
message has no timestamp and its record keeps ``NO_TIMESTAMP`` (-1); the codec is the
producer's (the last compressed wrapper's) unless the topic's ``compression.type`` names one.

Down, for a fetch whose version can carry only an older format (Kafka's
``RecordsUtil.downConvert``; Fetch v0-1 read magic 0, v2-3 magic 1): every v2 batch is
rewritten as legacy messages of that magic, one per record, or one compressed wrapper per
compressed batch (same codec, inner offsets as that magic writes them). Control batches are
left out (an old client cannot read them); headers, producer ids and sequences have no place
in the old formats and are lost; a magic 0 message has no timestamp. Batches already of the
target magic or older pass as they are. The records of an uncompressed batch below the
fetch offset are left out; a compressed wrapper keeps them all (the client skips them).
"""

from __future__ import annotations

from ..errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from .batch import NO_TIMESTAMP, Buffer, RecordBatch, TimestampType, build_batch
from .batches import BatchIterator
from .compression import Compression, compress
from .legacy import build_message
from .record import Record

_LOG_APPEND_TIME = 0x08  # a magic 1 message's attribute bit 3


def to_v2_batch(message_set: Buffer, compression: Compression | None = None) -> bytearray:
    """Every record of ``message_set`` in one v2 batch of offsets 0.., compressed with
    ``compression`` or, when None (``compression.type`` "producer"), with the producer's codec.

    Each message's CRC is checked first (CorruptRecordError); a set without a whole message,
    or ending in a partial one, is InvalidRecordError / CorruptRecordError."""
    source = Compression.NONE
    records: list[Record] = []
    scan = BatchIterator(message_set)
    for batch in scan:
        batch.validate()
        if batch.compression != Compression.NONE:
            source = batch.compression
        # a magic 0 message reads NO_TIMESTAMP; a v2 batch mixed in keeps its headers
        records.extend(Record(r.key, r.value, r.timestamp, r.headers) for r in batch.records())
    if scan.remaining:
        raise CorruptRecordError(f"{scan.remaining} bytes of a partial message at the end", position=scan.position)
    if not records:
        raise InvalidRecordError("a message set must hold at least one message")
    return build_batch(records, compression=source if compression is None else compression)


def to_legacy(data: Buffer, magic: int, fetch_offset: int) -> bytes:
    """The batches of ``data`` (a fetch's bytes) in message format ``magic`` (0 or 1); a
    partial batch at the end is dropped. UnsupportedCompressionTypeError for a zstd batch,
    which no legacy format can carry (Kafka answers a Fetch below v10 so)."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    out = bytearray()
    for batch in BatchIterator(data):
        if batch.magic <= magic:
            out += batch.buffer
            continue
        assert isinstance(batch, RecordBatch)  # a magic 1 message down to 0 is not asked for: v0-1 read both
        if batch.is_control:
            continue
        codec = batch.compression
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionTypeError(
                f"a zstd batch at offset {batch.base_offset} cannot be converted to message format {magic}"
            )
        records = batch.records()
        if codec == Compression.NONE:
            records = [r for r in records if r.offset >= fetch_offset]
        if records:
            out += _messages(records, magic, codec, batch.timestamp_type, batch.max_timestamp)
    return bytes(out)


def _messages(
    records: list[Record], magic: int, codec: Compression, timestamp_type: TimestampType, max_timestamp: int
) -> bytes:
    """One batch's records as legacy messages: plain, or one wrapper whose offset is the last
    record's (inner offsets absolute in magic 0, relative to the first in magic 1)."""
    append_time = magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME
    attributes = _LOG_APPEND_TIME if append_time else 0

    def stamp(r: Record) -> int:
        if magic == 0:
            return NO_TIMESTAMP
        if append_time:
            return max_timestamp
        return NO_TIMESTAMP if r.timestamp is None else r.timestamp

    if codec == Compression.NONE:
        return b"".join(build_message(r.offset, magic, attributes, stamp(r), r.key, r.value) for r in records)
    first = records[0].offset
    inner = b"".join(
        build_message(r.offset - first if magic == 1 else r.offset, magic, attributes, stamp(r), r.key, r.value)
        for r in records
    )
    wrapper_ts = max_timestamp if append_time else max(stamp(r) for r in records)
    return build_message(records[-1].offset, magic, attributes | int(codec), wrapper_ts, None, compress(codec, inner))
