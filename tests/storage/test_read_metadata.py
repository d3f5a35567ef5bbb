"""Reads say where they are (Kafka's FetchDataInfo and LogOffsetMetadata): the segment and
byte position a read starts at, and where the log end and the high watermark are."""

from __future__ import annotations

from pathlib import Path

from seglog.config import BrokerConfig, LogConfig
from seglog.records import BatchIterator
from seglog.storage import FetchDataInfo, LogOffsetMetadata, PartitionLog, fileio

from .conftest import new_log, records


def positions(log_path: str) -> dict[int, int]:
    """Each batch's base offset -> its position, from the file's bytes."""
    return {b.base_offset: b.position for b in BatchIterator(Path(log_path).read_bytes())}


def test_a_read_carries_its_segment_and_position(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    for i in range(12):
        log.append(records(2, start=2 * i, size=40))
    assert len(log.segments) > 2
    for segment in log.segments:
        for base, position in positions(segment.log_path).items():
            fetch = log.read(base + 1, 100)
            assert isinstance(fetch, FetchDataInfo)
            assert fetch.fetch_offset_metadata == LogOffsetMetadata(base + 1, segment.base_offset, position)
            assert fetch.records is fetch.slice and fetch.records.position == position
    manager.close()


def test_the_log_end_says_where_it_is_through_appends_rolls_and_truncation(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)

    def expected() -> LogOffsetMetadata:
        active = log.segments[-1]
        return LogOffsetMetadata(log.log_end_offset, active.base_offset, Path(active.log_path).stat().st_size)

    assert log.log_end_offset_metadata == LogOffsetMetadata(0, 0, 0)
    for i in range(12):
        log.append(records(2, start=2 * i, size=40))
        assert log.log_end_offset_metadata == expected()
    log.roll()
    assert log.log_end_offset_metadata == LogOffsetMetadata(24, 24, 0)
    log.truncate_to(8)  # (a batch starts there)
    assert log.log_end_offset_metadata == expected() and log.log_end_offset_metadata.message_offset == 8
    empty = log.read(8)  # at the log end: nothing, and where it would be
    assert empty.records is None and empty.fetch_offset_metadata == log.log_end_offset_metadata
    manager.close()


def test_the_high_watermark_says_where_it_is(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    log = PartitionLog(str(d), "t", 0, LogConfig(BrokerConfig(), {"segment.bytes": 600}), standalone=False)
    for i in range(12):
        log.append(records(2, start=2 * i, size=40))
    assert log.high_watermark_metadata == LogOffsetMetadata(0, 0, 0)
    for hw in (4, 10, 24):
        log.maybe_increment_high_watermark(hw)
        segment = [s for s in log.segments if s.base_offset <= hw][-1]
        where = positions(segment.log_path)
        position = where.get(hw, Path(segment.log_path).stat().st_size)
        assert log.high_watermark_metadata == LogOffsetMetadata(hw, segment.base_offset, position)
    assert log.high_watermark_metadata is log.log_end_offset_metadata  # at the log end: the same place
    log.close()


def test_a_read_bounded_by_the_log_end_looks_nothing_up_at_the_end(tmp_path, clock, monkeypatch):
    """The log end's place is known from the last append: a consumer's read of a log whose
    high watermark is its end reads batch headers where it starts only (else its bound
    would be looked up at the end of the segment on every read)."""
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 0}, clock=clock)
    for i in range(50):
        log.append(records(2, start=2 * i, size=40))
    assert log.high_watermark == log.log_end_offset
    starts = positions(log.segments[-1].log_path)
    read_at: list[int] = []
    real = fileio.os.pread
    monkeypatch.setattr(fileio.os, "pread", lambda fd, n, at: read_at.append(at) or real(fd, n, at))
    fetch = log.read(10, 1 << 20)
    monkeypatch.undo()
    assert fetch.records is not None and fetch.records.position == starts[10]
    assert fetch.records.size == Path(log.segments[-1].log_path).stat().st_size - starts[10]  # to the end
    assert read_at and max(read_at) <= starts[12]  # near the start only
    manager.close()
