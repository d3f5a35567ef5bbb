"""Bad arguments at the storage API's entry points: each is a seglog error with Kafka's code
and the place, raised before anything changed (never a ValueError, struct.error or
OverflowError, and never an offset outside int64 taken into the log)."""

from __future__ import annotations

import os

import pytest

from seglog.errors import (
    InvalidPartitionsError,
    InvalidRequestError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    SeglogError,
    UnsupportedCompressionTypeError,
)
from seglog.records import Record, build_batch

from .conftest import check_log, crash, new_log, open_logs, records

INT64_MAX = 2**63 - 1


@pytest.fixture
def log_with_records(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(5))
    yield manager, log
    manager.close()


def _unchanged(log, end: int = 5) -> None:
    assert log.log_start_offset == 0 and log.log_end_offset == end
    assert [r.offset for r in log.records()] == list(range(end))
    check_log(log)


@pytest.mark.parametrize(
    "call",
    [
        lambda log: log.truncate_fully_and_start_at(-5),
        lambda log: log.truncate_fully_and_start_at(2**63),
        lambda log: log.truncate_fully_and_start_at("7"),
        lambda log: log.truncate_to(-1),
        lambda log: log.truncate_to(2**64),
        lambda log: log.delete_records(2**63),
        lambda log: log.update_high_watermark(-3),
        lambda log: log.flush(-1),
        lambda log: log.flush(6),
        lambda log: log.read(0, max_bytes=-1),
        lambda log: log.read(0, max_bytes=2**31),
        lambda log: log.read(2**63),
        lambda log: log.read(1.0),
        lambda log: log.read(True),
        lambda log: log.read(0, max_bytes=True),
        lambda log: log.read(0, max_bytes=1.5),
        lambda log: log.read(-(2**63) - 1),
        lambda log: list(log.records(-(2**70))),
        lambda log: list(log.records(0, 2**63)),
        lambda log: list(log.batches(0, None, max_bytes=-5)),
        lambda log: log.leader_epoch_cache.assign(2**31, 0),
        lambda log: log.leader_epoch_cache.assign(3, -1),
        lambda log: log.append_batches(build_batch(records(1)), origin="x"),
    ],
)
def test_out_of_range_arguments_are_a_bad_request(log_with_records, call):
    _, log = log_with_records
    with pytest.raises(InvalidRequestError) as e:
        call(log)
    assert e.value.error_code == 42 and e.value.file is not None
    _unchanged(log)


def test_a_negative_start_offset_is_never_acknowledged(tmp_path, clock):
    """truncate_fully_and_start_at(-5) took the append at offset -5 and left -000...5.log
    files that lost it on the next open."""
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    with pytest.raises(InvalidRequestError, match="start offset -5"):
        log.truncate_fully_and_start_at(-5)
    assert log.append(records(1, start=2)) == (2, 2)
    crash(manager)
    with open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert [r.offset for r in log.records()] == [0, 1, 2]
        assert all(not name.startswith("-") for name in os.listdir(log.dir))


def test_reads_outside_the_log_stay_out_of_range(log_with_records):
    """An int64 offset the log does not hold is Kafka's OFFSET_OUT_OF_RANGE, not a bad request."""
    _, log = log_with_records
    for offset in (-1, 6, INT64_MAX):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(offset)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(-2)  # Kafka's DeleteRecords answer to an offset below 0 (but -1)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"compression": 7}, UnsupportedCompressionTypeError, "compression type 7"),
        ({"compression": "brotli"}, UnsupportedCompressionTypeError, "brotli"),
        ({"producer_id": 1, "producer_epoch": 70000}, InvalidRequestError, "producer_epoch 70000"),
        ({"producer_id": 1, "producer_epoch": 0, "base_sequence": 2**40}, InvalidRequestError, "base_sequence"),
        ({"producer_id": 2**63}, InvalidRequestError, "producer_id"),
    ],
)
def test_append_arguments_that_fit_no_batch(log_with_records, kwargs, error, text):
    _, log = log_with_records
    with pytest.raises(error, match=text) as e:
        log.append(records(1, start=5), **kwargs)
    assert e.value.file == log.dir
    _unchanged(log)


@pytest.mark.parametrize("timestamp", [2**63, -(2**63) - 1, 2**100])
def test_a_timestamp_past_int64_is_an_invalid_timestamp(log_with_records, timestamp):
    _, log = log_with_records
    with pytest.raises(InvalidTimestampError) as e:
        log.append([Record(b"k", b"v", timestamp)])
    assert e.value.error_code == 32 and str(timestamp) in str(e.value)
    with pytest.raises(InvalidTimestampError):
        log.offset_for_timestamp(timestamp)
    with pytest.raises(InvalidTimestampError):
        log.offset_for_timestamp(bool(timestamp))
    _unchanged(log)


def test_a_partition_count_past_int32_makes_no_dir(tmp_path, clock):
    with open_logs(tmp_path, clock=clock) as manager:
        for count in (2**31, 0, -1, 1.5, True, "2"):
            with pytest.raises(InvalidPartitionsError) as e:
                manager.create_topic("t", count)
            assert e.value.error_code == 37
        assert manager.topics() == []
        assert [n for n in os.listdir(tmp_path) if n.startswith("t")] == []


def test_every_refusal_is_a_seglog_error(log_with_records):
    """A sweep of the argument types a caller may get wrong: only seglog errors come out."""
    _, log = log_with_records
    bad_values = [None, "1", 1.5, -(2**64), 2**64, [], b"\x00"]
    calls = [
        log.truncate_to,
        log.truncate_fully_and_start_at,
        log.delete_records,
        log.update_high_watermark,
        log.read,
        log.offset_for_timestamp,
    ]
    ranges = [lambda v: list(log.records(v)), lambda v: list(log.batches(0, v))]
    for call in calls:
        for value in bad_values:
            with pytest.raises(SeglogError):
                call(value)
    for call in ranges:
        for value in bad_values[1:]:  # None is the default of the start and end offsets
            with pytest.raises(SeglogError):
                call(value)
    _unchanged(log)
