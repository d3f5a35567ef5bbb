"""Time and size retention, the log start offset rule, and their configuration."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from seglog.config import BrokerConfig, LogConfig
from seglog.errors import OffsetOutOfRangeError
from seglog.records import Record
from seglog.storage import checkpoint
from seglog.storage.log import PartitionLog
from seglog.storage.retention import enforce_retention, segment_timestamp

NOW = 1_700_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def fill(log: PartitionLog, timestamps: list[int], *, per_segment: int = 1, value: bytes = b"v" * 20) -> None:
    """One record per timestamp, rolling after every ``per_segment`` records."""
    for i, ts in enumerate(timestamps):
        log.append([Record(b"k%d" % i, value, ts)])
        if (i + 1) % per_segment == 0:
            log.roll()


def set_mtime(log: PartitionLog, base_offset: int, ms: int) -> None:
    segment = next(s for s in log.segments if s.base_offset == base_offset)
    os.utime(segment.log_path, (ms / 1000, ms / 1000))


def offsets(log: PartitionLog) -> list[int]:
    return [r.offset for r in log.records()]


# --- configuration ---------------------------------------------------------------------------


def test_broker_retention_synonyms_precedence():
    assert LogConfig(BrokerConfig({})).retention_ms == 7 * DAY
    assert LogConfig(BrokerConfig({"log.retention.hours": 2})).retention_ms == 2 * HOUR
    both = BrokerConfig({"log.retention.hours": 2, "log.retention.minutes": 30})
    assert LogConfig(both).retention_ms == 30 * 60_000
    three = BrokerConfig({"log.retention.hours": 2, "log.retention.minutes": 30, "log.retention.ms": 1234})
    assert LogConfig(three).retention_ms == 1234
    assert LogConfig(three, {"retention.ms": 99}).retention_ms == 99  # the topic override wins
    assert LogConfig(BrokerConfig({"log.retention.bytes": 4096})).retention_bytes == 4096
    assert LogConfig(BrokerConfig({})).retention_bytes == -1


def test_broker_retention_applies_to_topics(tmp_path):
    clock = Clock()
    config = {"log.retention.minutes": 60, "log.retention.hours": 1000}
    with seglog.open(str(tmp_path), config, clock=clock, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, [NOW - 2 * HOUR, NOW - 2 * HOUR, NOW - 30 * 60_000])
        assert log.config.retention_ms == HOUR
        results = logs.enforce_retention()
        assert [(r.topic, r.segments_deleted, r.reasons) for r in results] == [("t", 2, ("time",))]
        assert log.log_start_offset == 2


# --- time -------------------------------------------------------------------------------------------


def test_time_retention_deletes_old_segments_only(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1, {"retention.ms": DAY})
        log = logs.partition("t", 0)
        fill(log, [NOW - 3 * DAY, NOW - 2 * DAY, NOW - DAY - 1, NOW - DAY + 1, NOW - HOUR])
        results = logs.enforce_retention()
        assert results[0].segments_deleted == 3 and results[0].log_start_offset == 3
        assert offsets(log) == [3, 4]
        assert log.log_start_offset == 3
        with pytest.raises(OffsetOutOfRangeError):
            log.read(2)
        assert logs.enforce_retention() == []  # nothing more is due
        # the log-start-offset-checkpoint was rewritten
        assert checkpoint.read_offsets(str(tmp_path / "log-start-offset-checkpoint"))[("t", 0)] == 3
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        assert logs.partition("t", 0).log_start_offset == 3


def test_time_retention_stops_at_first_segment_kept(tmp_path):
    """Kafka's prefix rule: an old segment after a young one waits."""
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1, {"retention.ms": DAY})
        log = logs.partition("t", 0)
        fill(log, [NOW - 3 * DAY, NOW - HOUR, NOW - 3 * DAY, NOW])
        logs.enforce_retention()
        assert offsets(log) == [1, 2, 3]


def test_never_the_active_segment(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1, {"retention.ms": 0})
        log = logs.partition("t", 0)
        fill(log, [NOW - 3 * DAY] * 3, per_segment=2)  # segments [0,1], [2] (active)
        assert len(log.segments) == 2
        logs.enforce_retention()
        assert len(log.segments) == 1 and offsets(log) == [2]
        assert log.active_segment.size > 0
        clock.now += DAY
        logs.enforce_retention()
        assert offsets(log) == [2]  # the active segment stays, however old


def test_segment_without_timestamps_goes_by_mtime(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1, {"retention.ms": DAY})
        log = logs.partition("t", 0)
        fill(log, [-1, -1, NOW])
        set_mtime(log, 0, NOW - 2 * DAY)
        set_mtime(log, 1, NOW - HOUR)
        assert segment_timestamp(log.segments[0], NOW) == NOW - 2 * DAY
        logs.enforce_retention()
        assert offsets(log) == [1, 2]


def test_future_timestamp_goes_by_mtime_and_stops_blocking(tmp_path):
    clock = Clock()
    far = NOW + 365 * DAY
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1, {"retention.ms": DAY, "message.timestamp.after.max.ms": 400 * DAY})
        log = logs.partition("t", 0)
        fill(log, [NOW - 3 * DAY, far, NOW - 3 * DAY, NOW])
        # written recently: the future segment is young by its mtime, and holds back the next
        set_mtime(log, 1, NOW - HOUR)
        logs.enforce_retention()
        assert offsets(log) == [1, 2, 3]
        # a day later by the clock, its last write is old enough: it goes, and so does the next
        clock.now += DAY
        logs.enforce_retention()
        assert offsets(log) == [3]


# --- size ---------------------------------------------------------------------------------------------


def test_size_retention(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, [NOW] * 6, per_segment=1)  # six full segments and an empty active one
        seg = log.segments[0].size
        # the oldest go while what is left stays at least retention.bytes
        logs.alter_topic_config("t", {"retention.bytes": 3 * seg + seg // 2})  # no reopen needed
        results = logs.enforce_retention()
        assert results[0].reasons == ("size",) and results[0].segments_deleted == 2
        assert results[0].bytes_deleted == 2 * seg
        assert offsets(log) == [2, 3, 4, 5]
        assert logs.enforce_retention() == []
        logs.alter_topic_config("t", {"retention.bytes": 3 * seg})
        assert logs.enforce_retention()[0].segments_deleted == 1
        assert offsets(log) == [3, 4, 5]


def open_files(under) -> list[str]:
    """The files under ``under`` this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # (the listing's own)
            continue
        if target.startswith(str(under)):
            found.append(target)
    return sorted(found)


def test_a_size_pass_over_a_reopened_log_sizes_its_segments_without_opening_them(tmp_path):
    # retention (and the cleaner's dirty bytes) over thousands of segments must not hold their files open
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1)
        fill(logs.partition("t", 0), [NOW] * 6, per_segment=1)
        sizes = [s.size for s in logs.partition("t", 0).segments]
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        total = sum(sizes)
        opened = open_files(tmp_path)
        # (no time rule: it reads the oldest segment's max timestamp, which may open its file)
        logs.alter_topic_config("t", {"retention.bytes": total, "retention.ms": -1})
        assert logs.enforce_retention() == []
        assert open_files(tmp_path) == opened
        logs.alter_topic_config("t", {"retention.bytes": total - sizes[0], "retention.ms": -1})  # the oldest over
        assert logs.enforce_retention()[0].segments_deleted == 1
        assert offsets(logs.partition("t", 0)) == [1, 2, 3, 4, 5]


def test_broker_retention_bytes(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), {"log.retention.bytes": 1}, clock=clock, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        fill(log, [NOW] * 4, per_segment=2)  # [0, 1] [2, 3] and an empty active segment
        logs.enforce_retention()
        assert offsets(log) == [2, 3]  # deleting [2, 3] too would leave less than retention.bytes
        assert log.log_start_offset == 2


def test_compact_only_topics_keep_old_segments(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("c", 1, {"cleanup.policy": "compact", "retention.ms": 1, "retention.bytes": 1})
        log = logs.partition("c", 0)
        fill(log, [NOW - DAY] * 3)
        assert logs.enforce_retention() == []
        logs.alter_topic_config("c", {"cleanup.policy": "compact,delete"})
        assert logs.enforce_retention()[0].segments_deleted == 3


# --- mechanics ---------------------------------------------------------------------------------------


def test_deleted_files_wait_for_file_delete_delay(tmp_path):
    scheduled: list[tuple[object, float]] = []
    config = LogConfig(BrokerConfig({}), {"retention.ms": DAY, "file.delete.delay.ms": 12345})
    d = tmp_path / "t-0"
    d.mkdir()
    log = PartitionLog(
        str(d), "t", 0, config, clock=lambda: NOW, scheduler_delete=lambda fn, ms: scheduled.append((fn, ms))
    )
    fill(log, [NOW - 2 * DAY, NOW])
    first = log.segments[0]
    result = enforce_retention(log, NOW)
    assert result is not None and result.segments_deleted == 1
    names = sorted(os.listdir(d))
    assert "00000000000000000000.log.deleted" in names and "00000000000000000000.log" not in names
    assert [ms for _, ms in scheduled] == [12345]
    scheduled[0][0]()  # the delayed removal
    assert not any(n.startswith("00000000000000000000.") for n in os.listdir(d))
    assert first not in log.segments
    log.close()


def test_nothing_at_or_above_the_high_watermark(tmp_path):
    config = LogConfig(BrokerConfig({}), {"retention.ms": 1})
    d = tmp_path / "t-0"
    d.mkdir()
    log = PartitionLog(str(d), "t", 0, config, clock=lambda: NOW, standalone=False)
    fill(log, [NOW - DAY] * 4)
    log.update_high_watermark(2)
    enforce_retention(log, NOW)
    assert log.log_start_offset == 2  # segments [0] and [1] lie below the high watermark
    assert [s.base_offset for s in log.segments] == [2, 3, 4]
    log.close()


def test_leftover_deleted_files_are_removed_at_start(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=True) as logs:
        logs.create_topic("t", 1, {"retention.ms": DAY, "file.delete.delay.ms": 3_600_000})
        log = logs.partition("t", 0)
        fill(log, [NOW - 2 * DAY, NOW])
        logs.enforce_retention()
        d = log.dir
        assert any(n.endswith(".deleted") for n in os.listdir(d))
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        assert not any(n.endswith(".deleted") for n in os.listdir(d))
        assert offsets(logs.partition("t", 0)) == [1]


# --- the properties ---------------------------------------------------------------------------------


def _random_log(d, ages, rolls, overrides) -> PartitionLog:
    d.mkdir()
    log = PartitionLog(str(d), "t", 0, LogConfig(BrokerConfig({}), overrides), clock=lambda: NOW)
    for i, age in enumerate(ages):
        log.append([Record(b"k", b"x" * 50, NOW - age)])
        if rolls[i % len(rolls)]:
            log.roll()
    return log


ages_st = st.lists(st.integers(0, 10 * DAY), min_size=1, max_size=30)
rolls_st = st.lists(st.booleans(), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ages=ages_st, rolls=rolls_st, retention_ms=st.integers(0, 10 * DAY), later=st.integers(0, 3 * DAY))
def test_time_retention_never_deletes_data_within_retention(tmp_path_factory, ages, rolls, retention_ms, later):
    log = _random_log(tmp_path_factory.mktemp("ret") / "t-0", ages, rolls, {"retention.ms": retention_ms})
    active = log.active_segment
    before = {r.offset: r.timestamp for r in log.records()}
    now = NOW + later
    enforce_retention(log, now)
    after = offsets(log)
    assert after == list(range(log.log_start_offset, log.log_end_offset))  # a suffix of the log
    assert log.active_segment is active
    assert {o for o, ts in before.items() if now - ts <= retention_ms} <= set(after)
    # and it went as far as the prefix rule allows
    first = log.segments[0]
    assert first is active or now - first.max_timestamp <= retention_ms
    log.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ages=ages_st, rolls=rolls_st, retention_bytes=st.integers(0, 3000))
def test_size_retention_takes_only_the_excess(tmp_path_factory, ages, rolls, retention_bytes):
    overrides = {"retention.bytes": retention_bytes, "retention.ms": -1}
    log = _random_log(tmp_path_factory.mktemp("ret") / "t-0", ages, rolls, overrides)
    before = sum(s.size for s in log.segments)
    result = enforce_retention(log, NOW)
    size = sum(s.size for s in log.segments)
    assert offsets(log) == list(range(log.log_start_offset, log.log_end_offset))
    if result is not None:
        assert size >= retention_bytes and before - size == result.bytes_deleted
    if len(log.segments) > 1:
        assert size - log.segments[0].size < retention_bytes  # one more would be too many
    log.close()
