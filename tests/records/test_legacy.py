"""Legacy message sets (magic 0 and 1): read as kafka-python reads them, and refused when broken."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from seglog.errors import CorruptRecordError
from seglog.records import (
    BatchIterator,
    Compression,
    LegacyBatch,
    Record,
    TimestampType,
    build_message_set,
)
from seglog.records.compression import compress

from .peer import kafka_python_records, seglog_records

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def _fix_crc(message: bytearray) -> bytearray:
    struct.pack_into(">I", message, 12, zlib.crc32(memoryview(message)[16:]))
    return message


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_message_sets_read_like_kafka_python(magic, codec):
    records = [Record(b"k%d" % i, b"v" * i if i % 3 else None, 1000 + i) for i in range(7)]
    data = build_message_set(records, magic=magic, base_offset=40, compression=codec)
    assert seglog_records(data) == kafka_python_records(data)
    assert [r[0] for r in seglog_records(data)] == list(range(40, 47))
    first = next(iter(BatchIterator(data)))
    assert isinstance(first, LegacyBatch) and first.magic == magic and first.compression == codec
    assert first.timestamp_type == (TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME)
    assert first.timestamp_type.label == ("NoTimestampType" if magic == 0 else "CreateTime")  # Kafka's names


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_producer_bytes_read_the_same(magic, codec):
    # a producer's wrapper carries offset 0 and relative inner offsets; v0 lz4 carries KAFKA-3160's checksum
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=1700000000000 + i, key=None if i == 2 else b"key%d" % i, value=b"x" * (i * 50))
    data = bytes(builder.build())
    assert seglog_records(data) == kafka_python_records(data)
    assert [r[0] for r in seglog_records(data)] == [0, 1, 2, 3, 4]
    for batch in BatchIterator(data):
        batch.validate()


def test_log_append_time_wrapper_stamps_every_inner_message():
    data = bytearray(build_message_set([Record(b"a", b"1", 10), Record(b"b", b"2", 20)], magic=1, compression=1))
    data[17] |= 0x08  # LogAppendTime, as a broker sets it
    struct.pack_into(">q", data, 18, 5555)
    _fix_crc(data)
    (wrapper,) = BatchIterator(data)
    assert wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in wrapper.records()] == [5555, 5555]
    assert seglog_records(data) == kafka_python_records(data)


def test_v0_inner_offsets_are_absolute():
    data = build_message_set([Record(b"a", b"1"), Record(b"b", b"2")], magic=0, base_offset=77, compression=1)
    assert [r.offset for b in BatchIterator(data) for r in b.records()] == [77, 78]


def _wrapper(magic: int, inner: bytes, codec: int = 1, value: bytes | None = None) -> bytearray:
    body = bytearray([magic, codec]) + (struct.pack(">q", 0) if magic == 1 else b"")
    payload = compress(codec, inner) if value is None else value
    body += struct.pack(">i", -1) + struct.pack(">i", len(payload)) + payload
    return _fix_crc(bytearray(struct.pack(">qiI", 9, len(body) + 4, 0)) + body)


@pytest.mark.parametrize(
    ("make", "fault"),
    [
        (lambda: _wrapper(1, build_message_set([Record(b"k", b"v", 1)], magic=0)), "another magic"),
        (
            lambda: _wrapper(1, build_message_set([Record(b"k", b"v", 1)], magic=1, compression=Compression.GZIP)),
            "holds a compressed message",
        ),
        (lambda: _wrapper(1, build_message_set([Record(b"k", b"v", 1)], magic=1)[:-3]), "partial message"),
        (lambda: _wrapper(1, b"", codec=4, value=b"\x00" * 20), "unknown legacy compression codec id 4"),
        (lambda: _wrapper(0, b"", value=b"not gzip at all"), "gzip"),
    ],
)
def test_broken_wrappers_raise_corrupt_record_error(make, fault):
    (wrapper,) = BatchIterator(make())
    with pytest.raises(CorruptRecordError, match=fault) as e:
        wrapper.records()
    assert e.value.position == 0


def test_inner_message_with_a_bad_crc_is_refused():
    inner = bytearray(build_message_set([Record(b"k", b"v", 1)], magic=1))
    inner[-1] ^= 1
    (wrapper,) = BatchIterator(_wrapper(1, bytes(inner)))
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        wrapper.records()


def test_compressed_wrapper_with_a_null_value():
    message = bytearray([1, 1]) + struct.pack(">qii", 0, -1, -1)
    message = _fix_crc(bytearray(struct.pack(">qiI", 0, len(message) + 4, 0)) + message)
    with pytest.raises(CorruptRecordError, match="null value"):
        next(iter(BatchIterator(message))).records()


@pytest.mark.parametrize(
    ("key_length", "fault"), [(1000, "key length 1000 out of range"), (-2, "key length -2 out of range")]
)
def test_lengths_out_of_range(key_length, fault):
    data = bytearray(build_message_set([Record(b"key", b"value", 1)], magic=1))
    struct.pack_into(">i", data, 26, key_length)
    with pytest.raises(CorruptRecordError, match=fault):
        next(iter(BatchIterator(data))).records()


def test_bytes_after_the_value_are_refused():
    data = bytearray(build_message_set([Record(b"key", b"value", 1)], magic=0)) + b"xx"
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(CorruptRecordError, match="2 bytes follow the value"):
        next(iter(BatchIterator(data))).records()


def test_crc_mismatch_names_both_values():
    data = bytearray(build_message_set([Record(b"k", b"v", 5)], magic=1))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError, match=r"CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"):
        next(iter(BatchIterator(data))).validate()
