"""Varints, legacy message sets and control records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from seglog.errors import CorruptRecordError
from seglog.records import (
    BatchIterator,
    Compression,
    ControlRecordType,
    EndTransactionMarker,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message_set,
    end_transaction_marker,
    parse_control_record,
)
from seglog.records.control import LeaderChange, leader_change
from seglog.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n):
    data = encode_varint(n)
    assert decode_varint(data) == (n, len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n):
    data = encode_varlong(n)
    assert decode_varlong(data) == (n, len(data))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (64, b"\x80\x01"), (-65, b"\x81\x01")],
)
def test_zigzag_boundaries(value, encoded):
    assert encode_varint(value) == encoded


def test_varint_too_long_and_truncated():
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\xff" * 6)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varlong(b"\xff\xff")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_legacy_message_sets_read_like_kafka_python(magic, codec):
    records = [Record(b"k%d" % i, b"v" * i if i % 3 else None, 1000 + i) for i in range(7)]
    data = build_message_set(records, magic=magic, base_offset=40, compression=codec)
    ours = [(r.offset, r.timestamp, r.key, r.value) for b in BatchIterator(data) for r in b.records()]
    theirs, mr = [], MemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        theirs += [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in batch]
    assert ours == theirs
    assert [o for o, *_ in ours] == list(range(40, 47))
    (first, *_) = BatchIterator(data)
    assert isinstance(first, LegacyBatch) and first.magic == magic
    assert first.timestamp_type == (TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME)


def test_legacy_crc_mismatch():
    data = bytearray(build_message_set([Record(b"k", b"v", 5)], magic=1))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        next(BatchIterator(data)).validate()


def test_transaction_markers():
    for commit in (True, False):
        data = build_batch(
            [end_transaction_marker(commit, coordinator_epoch=4)],
            control=True,
            transactional=True,
            producer_id=5,
            producer_epoch=1,
        )
        batch = RecordBatch(data)
        assert batch.is_control and batch.is_transactional
        (marker,) = batch.control_records()
        assert marker == EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 4)


def test_leader_change_round_trip():
    record = leader_change(3, (1, 2, 3), timestamp=1)
    parsed = parse_control_record(Record(record.key, record.value, 1, (), 0))
    assert parsed == LeaderChange(3, (1, 2, 3), (1, 2, 3))


def test_control_record_with_short_key():
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(b"\x00", b"", 1, (), 0))
