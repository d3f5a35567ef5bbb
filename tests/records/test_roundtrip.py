"""Batches seglog builds decode identically in kafka-python, and the reverse; property tests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from seglog.errors import InvalidRecordError, InvalidRequestError
from seglog.records import BatchIterator, Compression, Record, RecordBatch, TimestampType, build_batch

from .peer import both_headers

CODECS = list(Compression)
keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
header_keys = st.text(max_size=12)  # any Unicode but lone surrogates, which UTF-8 cannot carry
headers = st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=20)), max_size=4)
timestamps = st.integers(min_value=0, max_value=2**42)  # in any order: negative deltas too
records = st.lists(st.tuples(keys, values, timestamps, headers), min_size=1, max_size=40)


def _kp_decode(data):
    return [
        (r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in DefaultRecordBatch(bytes(data))
    ]


def _ours(data):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in RecordBatch(data).records()]


producer_states = st.one_of(
    st.just((-1, -1, -1, False)),  # no producer id
    st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(
    records=records,
    codec=st.sampled_from(CODECS),
    base=st.integers(0, 2**40),
    producer=producer_states,
    epoch=st.integers(-1, 2**31 - 1),
    log_append_time=st.none() | timestamps,
)
def test_seglog_batches_decode_the_same_in_kafka_python(records, codec, base, producer, epoch, log_append_time):
    producer_id, producer_epoch, base_sequence, transactional = producer
    data = build_batch(
        records,
        base_offset=base,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        partition_leader_epoch=epoch,
        timestamp_type=TimestampType.CREATE_TIME if log_append_time is None else TimestampType.LOG_APPEND_TIME,
        log_append_time=log_append_time,
    )
    batch = RecordBatch(data)
    batch.validate()
    stamp = (lambda ts: ts) if log_append_time is None else (lambda ts: log_append_time)
    expected = [(base + i, stamp(ts), k, v, list(h)) for i, (k, v, ts, h) in enumerate(records)]
    assert _ours(data) == expected
    assert _kp_decode(data) == expected
    ours, theirs = both_headers(data)
    assert ours == theirs
    assert DefaultRecordBatch(bytes(data)).validate_crc()
    assert batch.compression == codec and batch.record_count == len(records)
    assert batch.max_timestamp == (max(ts for _, _, ts, _ in records) if log_append_time is None else log_append_time)
    assert batch.base_timestamp == records[0][2]


@settings(max_examples=100, deadline=None)
@given(records=records, codec=st.sampled_from([0, 1, 2, 3, 4]), producer=producer_states)
def test_kafka_python_batches_decode_the_same_in_seglog(records, codec, producer):
    producer_id, producer_epoch, base_sequence, transactional = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (k, v, ts, h) in enumerate(records):
        builder.append(i, timestamp=ts, key=k, value=v, headers=[(hk, hv) for hk, hv in h])
    data = bytes(builder.build())
    RecordBatch(data).validate()
    assert _ours(data) == _kp_decode(data)
    ours, theirs = both_headers(data)
    assert ours == theirs


@settings(max_examples=100, deadline=None)
@given(records=records, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40), gaps=st.data())
def test_build_then_decode_is_the_identity(records, codec, base, gaps):
    # offsets with gaps (as compaction leaves them), kept through a rebuild byte for byte
    steps = gaps.draw(st.lists(st.integers(1, 1000), min_size=len(records), max_size=len(records)))
    offsets = [base + sum(steps[: i + 1]) - steps[0] for i in range(len(records))]
    originals = [Record(k, v, ts, tuple(h), o) for (k, v, ts, h), o in zip(records, offsets, strict=True)]
    data = build_batch(originals, base_offset=base, compression=codec, keep_offsets=True)
    decoded = RecordBatch(data).records()
    assert decoded == originals
    again = build_batch(decoded, base_offset=base, compression=codec, keep_offsets=True)
    assert RecordBatch(again).records() == originals
    if codec == Compression.NONE:
        assert bytes(again) == bytes(data)


@pytest.mark.parametrize("codec", CODECS)
def test_producer_fields_and_flags(codec):
    data = build_batch(
        [Record(b"k", b"v", 10), Record(None, None, 5)],
        compression=codec,
        producer_id=77,
        producer_epoch=3,
        base_sequence=2**31 - 1,
        transactional=True,
        partition_leader_epoch=9,
    )
    b = RecordBatch(data)
    kp = DefaultRecordBatch(bytes(data))
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (kp.producer_id, kp.producer_epoch, kp.base_sequence)
    assert b.is_transactional and kp.is_transactional
    assert b.last_sequence == 0  # the sequence wraps past int32 max, as Kafka's incrementSequence does
    assert b.partition_leader_epoch == 9
    assert b.max_timestamp == 10 and b.base_timestamp == 10


def test_log_append_time_batches():
    data = build_batch(
        [Record(b"a", b"1", 1), Record(b"b", b"2", 2)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=999,
    )
    assert [r.timestamp for r in RecordBatch(data).records()] == [999, 999]
    assert [r.timestamp for r in DefaultRecordBatch(bytes(data))] == [999, 999]


@pytest.mark.parametrize("codec", CODECS)
def test_in_place_edits_keep_the_crc_valid(codec):
    data = build_batch([Record(b"k", b"v", 100), Record(b"k2", b"v2", 200)], compression=codec)
    b = RecordBatch(data)
    b.set_base_offset(1234)
    b.set_partition_leader_epoch(7)
    crc = b.crc
    b.validate()
    assert b.crc == crc and [r.offset for r in b.records()] == [1234, 1235]
    b.set_max_timestamp(TimestampType.LOG_APPEND_TIME, 5555)
    b.validate()
    assert b.crc != crc and b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in b.records()] == [5555, 5555]
    assert [r.timestamp for r in DefaultRecordBatch(bytes(data))] == [5555, 5555]
    b.set_max_timestamp(TimestampType.CREATE_TIME, 200)
    b.validate()
    assert [r.timestamp for r in b.records()] == [100, 200]


@pytest.mark.parametrize("codec", CODECS)
def test_a_producers_stamp_keeps_the_crc_valid_and_reads_back_in_kafka_python(codec):
    data = build_batch([Record(b"k", b"v", 100), Record(b"k2", b"v2", 200)], compression=codec)
    b = RecordBatch(data)
    b.set_producer_state(4242, 3, 17, transactional=True)
    b.validate()
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (4242, 3, 17, 18)
    assert b.is_transactional and b.compression == codec
    peer = DefaultRecordBatch(bytes(data))
    assert peer.validate_crc() and (peer.producer_id, peer.producer_epoch, peer.base_sequence) == (4242, 3, 17)
    assert peer.is_transactional
    b.set_producer_state(4242, 4, 0)  # an epoch bump restarts the sequence, outside a transaction
    b.validate()
    assert (b.producer_epoch, b.base_sequence, b.is_transactional) == (4, 0, False)
    assert [(r.key, r.value, r.timestamp) for r in b.records()] == [(b"k", b"v", 100), (b"k2", b"v2", 200)]
    with pytest.raises(InvalidRequestError):
        b.set_producer_state(1, 2**15, 0)


def test_in_place_edits_of_real_broker_batches():
    from ..conftest import KAFKA_DATA

    path = KAFKA_DATA / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
    data = bytearray((path / "_confluent-monitoring-0" / "00000000000000000000.log").read_bytes())
    for batch in list(BatchIterator(memoryview(data)))[:20]:  # LZ4, LogAppendTime, idempotent
        before = batch.records()
        batch.set_base_offset(batch.base_offset + 10**12)
        batch.set_partition_leader_epoch(99)
        batch.validate()
        assert [r.offset for r in batch.records()] == [r.offset + 10**12 for r in before]
        batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, 1_800_000_000_000)
        batch.validate()
        assert {r.timestamp for r in batch.records()} == {1_800_000_000_000}
        assert {r.timestamp for r in DefaultRecordBatch(bytes(batch.buffer))} == {1_800_000_000_000}
        assert DefaultRecordBatch(bytes(batch.buffer)).validate_crc()


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batch_with_no_records_is_valid(codec):
    data = build_batch([], compression=codec, last_offset_delta=4)
    b = RecordBatch(data)
    b.validate()
    assert b.records() == [] and b.record_count == 0 and b.last_offset == 4


def test_header_keys_round_trip_byte_for_byte():
    weird = "caf\udce9"  # not valid UTF-8 on disk: kept through surrogateescape
    data = build_batch([Record(b"k", b"v", 1, [(weird, b"x"), ("ключ", None)])])
    (r,) = RecordBatch(data).records()
    assert r.headers == ((weird, b"x"), ("ключ", None))
    rebuilt = build_batch([r], keep_offsets=True)
    assert bytes(rebuilt)[61:] == bytes(data)[61:]


def test_keep_offsets_rebuilds_a_batch_with_gaps():
    data = build_batch(
        [Record(b"a", b"1", 5, (), 10), Record(b"b", b"2", 6, (), 13)], base_offset=10, keep_offsets=True
    )
    assert [r.offset for r in RecordBatch(data).records()] == [10, 13]
    assert RecordBatch(data).last_offset == 13
    with pytest.raises(InvalidRecordError):
        build_batch([Record(b"a", b"1", 5, (), 13), Record(b"b", b"2", 6, (), 12)], base_offset=10, keep_offsets=True)


def test_builder_rejects_bad_input():
    with pytest.raises(InvalidRecordError):
        build_batch([Record("text", b"v")])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError):
        build_batch([Record(b"k", b"v", 1, [("h",)])])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "stamps",
    [(-(2**63), 2**63 - 1), (2**63 - 1, -(2**63)), (-(2**63), -(2**63)), (0, 2**63 - 1, -1)],
)
def test_extreme_timestamps_wrap_as_java_does(stamps):
    # the first timestamp is the base whatever its value (-2**63 once collided with a sentinel),
    # and deltas past int64 wrap as Java's long arithmetic does, and read back the same
    data = build_batch([Record(b"k", b"v", ts) for ts in stamps])
    assert [r.timestamp for r in RecordBatch(data).records()] == list(stamps)
    assert RecordBatch(data).base_timestamp == stamps[0]


def test_keep_offsets_out_of_int64_range_is_refused():
    with pytest.raises(InvalidRecordError, match="does not follow"):
        build_batch([Record(b"k", b"v", 1, (), 2**63 - 1)], base_offset=0, keep_offsets=True)
    with pytest.raises(InvalidRequestError, match="base_offset"):
        build_batch([Record(b"k", b"v", 1, (), 2**63 - 1)], base_offset=-5, keep_offsets=True)
