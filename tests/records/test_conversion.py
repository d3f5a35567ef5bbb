"""Message format conversion: legacy message sets up to one v2 batch (a Produce v0-2 append),
v2 batches down to magic 0/1 (a Fetch v0-3), each checked by kafka-python's reader."""

from __future__ import annotations

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from seglog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from seglog.records import (
    BatchIterator,
    Compression,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message_set,
    end_transaction_marker,
)
from seglog.records.conversion import to_legacy, to_v2_batch

from .peer import kafka_python_batches, kafka_python_records

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
MS = 1_700_000_000_000


def producer_message_set(magic: int, codec: Compression, n: int, start: int = 0) -> bytes:
    """A message set as an old producer sends it (kafka-python's builder: wrapper offset 0)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i in range(n):
        key = None if i % 4 == 3 else b"k%d" % (start + i)
        builder.append(i, timestamp=MS + start + i if magic else None, key=key, value=b"v%d" % (start + i) * (i % 5))
    return bytes(builder.build())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_message_set_becomes_one_v2_batch_of_the_producers_codec(magic, codec):
    data = producer_message_set(magic, codec, 6)
    batch = RecordBatch(to_v2_batch(data))
    batch.validate()
    assert batch.compression == codec and batch.record_count == 6 and batch.base_offset == 0
    got = [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]
    want = [(i, MS + i if magic else -1, k, v) for i, (_, _, k, v, _) in enumerate(kafka_python_records(data))]
    assert got == want  # a magic 0 message keeps NO_TIMESTAMP


def test_several_messages_and_wrappers_become_one_batch_the_topics_codec_wins():
    data = producer_message_set(1, Compression.GZIP, 3) + producer_message_set(1, Compression.NONE, 2, start=3)
    assert RecordBatch(to_v2_batch(data)).compression == Compression.GZIP
    batch = RecordBatch(to_v2_batch(data, Compression.LZ4))
    assert batch.compression == Compression.LZ4
    assert [r.key for r in batch.records()] == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    assert [r.offset for r in batch.records()] == [0, 1, 2, 3, 4]
    assert RecordBatch(to_v2_batch(producer_message_set(0, Compression.SNAPPY, 2), Compression.NONE)).compression == 0


def test_a_corrupt_or_partial_message_set_is_refused():
    data = bytearray(producer_message_set(1, Compression.NONE, 2))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        to_v2_batch(data)
    with pytest.raises(CorruptRecordError, match="partial"):
        to_v2_batch(producer_message_set(1, Compression.NONE, 2)[:-3])


def stored(codec: Compression, timestamp_type: TimestampType = TimestampType.CREATE_TIME) -> bytes:
    """What a log holds: two batches at offsets 10.. and 13.., headers on some records, and a
    transaction marker between them."""
    first = build_batch(
        [Record(b"a", b"1", MS, [("h", b"x")]), Record(None, b"2", MS + 1), Record(b"c", None, MS + 2)],
        base_offset=10,
        compression=codec,
        timestamp_type=timestamp_type,
        log_append_time=MS + 50,
    )
    marker = build_batch(
        [end_transaction_marker(True)],
        base_offset=13,
        producer_id=7,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    second = build_batch([Record(b"d", b"4", MS + 3)], base_offset=14, compression=codec)
    return bytes(first + marker + second)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v2_batches_down_to_legacy_read_by_kafka_python(magic, codec):
    down = to_legacy(stored(codec), magic, 10)
    batches = kafka_python_batches(down)
    assert {b.magic for b in batches} == {magic}
    assert {b.compression_type for b in batches} == {int(codec)}
    assert len(batches) == (2 if codec else 4)  # one wrapper per batch, or a message per record
    ts = [MS, MS + 1, MS + 2, MS + 3] if magic else [-1] * 4
    assert kafka_python_records(down) == [
        (10, ts[0], b"a", b"1", []),
        (11, ts[1], None, b"2", []),
        (12, ts[2], b"c", None, []),
        (14, ts[3], b"d", b"4", []),
    ]  # the marker (13) is left out; headers are lost
    for batch in BatchIterator(down):
        assert isinstance(batch, LegacyBatch) and batch.is_valid


def test_log_append_time_is_every_magic_1_messages_timestamp():
    down = to_legacy(stored(Compression.GZIP, TimestampType.LOG_APPEND_TIME), 1, 0)
    wrapper = next(iter(BatchIterator(down)))
    assert wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME and wrapper.timestamp == MS + 50
    assert [r[1] for r in kafka_python_records(down)][:3] == [MS + 50] * 3


def test_uncompressed_records_below_the_fetch_offset_are_left_out_a_wrapper_keeps_them():
    assert [r[0] for r in kafka_python_records(to_legacy(stored(Compression.NONE), 1, 12))] == [12, 14]
    assert [r[0] for r in kafka_python_records(to_legacy(stored(Compression.GZIP), 1, 12))] == [10, 11, 12, 14]


def test_legacy_batches_pass_as_they_are_and_a_partial_batch_is_dropped():
    legacy = build_message_set([Record(b"k", b"v", MS)], magic=0, base_offset=3)
    data = stored(Compression.NONE)
    assert to_legacy(legacy + data[:-5], 1, 0)[: len(legacy)] == legacy
    assert [r[0] for r in kafka_python_records(to_legacy(legacy + data[:-5], 1, 0))] == [3, 10, 11, 12]


def test_zstd_cannot_be_converted():
    with pytest.raises(UnsupportedCompressionTypeError):
        to_legacy(stored(Compression.ZSTD), 1, 0)
