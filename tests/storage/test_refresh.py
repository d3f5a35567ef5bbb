"""A read-only log follows the dir's owner: ``PartitionLog.refresh`` takes in appends,
rolled segments, retention and truncation that the owner made since."""

from __future__ import annotations

import logging
import os

import pytest

import seglog
from seglog.errors import KafkaStorageError

from .conftest import MS, new_log, open_logs, records


def offsets(log) -> list[int]:
    return [r.offset for r in log.records()]


def test_refresh_takes_in_appends_and_rolled_segments(tmp_path, clock):
    writer, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    log.append(records(3))
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        assert not rlog.refresh() and offsets(rlog) == [0, 1, 2]
        log.append(records(2, start=3))  # into the same active segment
        assert rlog.log_end_offset == 3 and rlog.refresh()
        assert offsets(rlog) == list(range(5)) and rlog.high_watermark == 5
        for i in range(5, 40):  # several rolls
            log.append(records(1, start=i, ts=MS + i, size=60))
        assert len(log.segments) > 3 and rlog.refresh()
        assert [s.base_offset for s in rlog.segments] == [s.base_offset for s in log.segments]
        assert offsets(rlog) == list(range(40)) and rlog.log_end_offset == 40
        assert rlog.offset_for_timestamp(MS + 39) == (39, MS + 39)
        log.roll()  # an empty active segment: the end stays
        assert not rlog.refresh() and rlog.active_segment.base_offset == 40
        log.append(records(1, start=40))
        assert rlog.refresh() and offsets(rlog)[-1] == 40
    writer.close()


def test_refresh_waits_for_a_partial_batch(tmp_path, clock):
    writer, log = new_log(tmp_path, clock=clock)
    log.append(records(5))
    path, size = log.active_segment.log_path, log.active_segment.size
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        log.append(records(3, start=5))
        with open(path, "rb") as f:
            appended = f.read()[size:]
        os.truncate(path, size + len(appended) // 2)  # the append is under way
        assert not rlog.refresh() and offsets(rlog) == list(range(5))
        with open(path, "r+b") as f:
            f.seek(size)
            f.write(appended)
        assert rlog.refresh() and offsets(rlog) == list(range(8))
    writer.close()


def test_refresh_drops_segments_retention_deleted(tmp_path, clock):
    config = {"segment.bytes": 600, "file.delete.delay.ms": 0}
    writer, log = new_log(tmp_path, config=config, clock=clock)
    for i in range(30):
        log.append(records(1, start=i, size=60))
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        first = rlog.segments[0]
        writer.delete_records("t", 0, 20)
        kept = log.segments[0].base_offset
        assert kept > 0 and not os.path.exists(first.log_path)
        rlog.refresh()
        assert rlog.segments[0].base_offset == kept and rlog.log_start_offset == kept
        assert offsets(rlog) == list(range(kept, 30))
    writer.close()


def test_refresh_loads_a_truncated_log_again(tmp_path, clock):
    writer, log = new_log(tmp_path, clock=clock)
    for i in range(10):
        log.append(records(1, start=i))
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        assert rlog.refresh() is False
        log.truncate_to(4)
        assert rlog.refresh() and rlog.log_end_offset == 4 and offsets(rlog) == [0, 1, 2, 3]
        log.append(records(2, start=100))
        assert rlog.refresh() and [r.key for r in rlog.records()][-2:] == [b"k100", b"k101"]
    writer.close()


def test_only_a_read_only_log_is_refreshed(tmp_path, clock):
    with open_logs(tmp_path) as writer:
        writer.create_topic("t", 1)
        with pytest.raises(KafkaStorageError, match="only an open read-only log"):
            writer.partition("t", 0).refresh()


def test_a_reader_of_a_live_writers_active_segment_finds_its_indexes_sound(tmp_path, clock, caplog):
    """The owner's active segment has preallocated indexes with no entry yet: a reader
    counts no entry in them, rather than an all-zero one it then finds corrupt."""
    writer, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    log.append(records(1))
    with caplog.at_level(logging.WARNING), seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        for i in range(1, 12):
            log.append(records(1, start=i, size=60))
            rlog.refresh()
            assert offsets(rlog) == list(range(i + 1))
        assert len(rlog.segments) > 2
        assert rlog.active_segment.offset_index.entries == rlog.active_segment.time_index.entries == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    writer.close()
