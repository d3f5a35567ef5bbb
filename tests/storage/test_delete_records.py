"""DeleteRecords: raising the log start offset, and what it makes unreadable and deletable."""

from __future__ import annotations

import os

import pytest

import seglog
from seglog.config import BrokerConfig, LogConfig
from seglog.errors import OffsetOutOfRangeError
from seglog.records import Record
from seglog.storage import checkpoint
from seglog.storage.log import PartitionLog
from seglog.storage.retention import enforce_retention

NOW = 1_700_000_000_000


def fill(log: PartitionLog, count: int, per_segment: int) -> None:
    for i in range(count):
        log.append([Record(b"k%d" % i, b"v%d" % i, NOW + i)])
        if (i + 1) % per_segment == 0:
            log.roll()


def test_delete_records_raises_the_log_start_offset(tmp_path):
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, 10, per_segment=4)  # segments 0-3, 4-7, 8-9 (active)
        assert log.delete_records(6) == 6
        assert log.log_start_offset == 6
        assert [r.offset for r in log.records()] == [6, 7, 8, 9]
        for below in (0, 3, 5):
            with pytest.raises(OffsetOutOfRangeError) as e:
                log.read(below)
            assert e.value.log_start_offset == 6
        assert log.read(6).slice is not None  # the batch holding 6 is readable
        assert log.offset_for_timestamp(-2) == (6, -1)  # earliest
        # PartitionLog.delete_records leaves segment deletion to the next retention pass
        assert [s.base_offset for s in log.segments] == [0, 4, 8]
        result = logs.enforce_retention()
        assert result[0].reasons == ("log-start-offset",) and result[0].segments_deleted == 1
        assert [s.base_offset for s in log.segments] == [4, 8]
        assert log.log_start_offset == 6  # the log start offset does not fall back to a segment base


def test_delete_records_below_current_start_is_a_no_op(tmp_path):
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, 5, per_segment=10)
        assert log.delete_records(3) == 3
        assert log.delete_records(1) == 3
        assert log.log_start_offset == 3


def test_delete_records_never_past_the_high_watermark(tmp_path):
    config = LogConfig(BrokerConfig({}))
    d = tmp_path / "t-0"
    d.mkdir()
    log = PartitionLog(str(d), "t", 0, config, clock=lambda: NOW, standalone=False)
    fill(log, 10, per_segment=3)
    log.update_high_watermark(7)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(8)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(-5)
    assert log.log_start_offset == 0
    assert log.delete_records(-1) == 7  # -1: up to the high watermark
    assert log.delete_records(7) == 7
    enforce_retention(log, NOW)
    assert [s.base_offset for s in log.segments] == [6, 9]
    log.close()


def test_manager_delete_records_deletes_segments_at_once_and_persists(tmp_path):
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("t", 2)
        log = logs.partition("t", 1)
        fill(log, 12, per_segment=4)
        log.leader_epoch_cache.assign(0, 0)
        assert logs.delete_records("t", 1, 9) == 9
        assert [s.base_offset for s in log.segments] == [8, 12]
        assert not any(n.startswith(("00000000000000000000.", "00000000000000000004.")) for n in os.listdir(log.dir))
        assert checkpoint.read_offsets(str(tmp_path / "log-start-offset-checkpoint"))[("t", 1)] == 9
        assert log.leader_epoch_cache.entries[0][1] == 9  # the epoch in force at 9 now starts there
        assert logs.partition("t", 0).log_start_offset == 0
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        log = logs.partition("t", 1)
        assert log.log_start_offset == 9
        assert [r.offset for r in log.records()] == [9, 10, 11]
        with pytest.raises(OffsetOutOfRangeError):
            log.read(8)


def test_delete_records_on_a_compacted_topic(tmp_path):
    """Compaction keeps old segments, but not those below the log start offset."""
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("c", 1, {"cleanup.policy": "compact"})
        log = logs.partition("c", 0)
        fill(log, 9, per_segment=3)
        logs.delete_records("c", 0, 5)
        assert [s.base_offset for s in log.segments] == [3, 6, 9]
        assert [r.offset for r in log.records()] == [5, 6, 7, 8]
        logs.clean(force=True)
        assert [r.offset for r in log.records()] == [5, 6, 7, 8]
        assert log.log_start_offset == 5


def test_delete_records_to_the_end(tmp_path):
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, 6, per_segment=2)
        assert logs.delete_records("t", 0, -1) == 6
        assert list(log.records()) == []
        assert [s.base_offset for s in log.segments] == [6]  # only the (empty) active segment
        log.append([Record(b"k", b"after", NOW)])
        assert [(r.offset, r.value) for r in log.records()] == [(6, b"after")]
