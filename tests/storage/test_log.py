"""PartitionLog: appends and offsets, rolling, reads and lookups, follower appends,
truncation, leader epochs, the errors of bad input, and the log's invariants."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from seglog.config import BrokerConfig, LogConfig
from seglog.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
    UnknownTopicOrPartitionError,
)
from seglog.records import (
    BatchIterator,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message_set,
)
from seglog.storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, PartitionLog, fileio

from .conftest import MS, Clock, check_log, crash, new_log, open_logs, records


def direct_log(path: Path, config: dict | None = None, **kw) -> PartitionLog:
    """A PartitionLog without a manager (for what the manager does not expose)."""
    path.mkdir(exist_ok=True)
    kw.setdefault("clock", Clock())
    return PartitionLog(str(path), "t", 0, LogConfig(BrokerConfig(), config or {}), **kw)


def file_state(log: PartitionLog) -> dict[str, bytes]:
    return {name: (Path(log.dir) / name).read_bytes() for name in sorted(os.listdir(log.dir))}


def batches_of(fetch) -> list:
    return list(fetch.slice.batches()) if fetch.slice is not None else []


# --- appends and offsets ---------------------------------------------------------------------


def test_append_assigns_dense_offsets_and_rewrites_base_offsets(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    assert log.append(records(3)) == (0, 2)
    client = build_batch(records(4, start=3), base_offset=999)  # a producer's base offset is ignored
    info = log.append_batches(client + build_batch(records(2, start=7), base_offset=5))
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 8, 6)
    assert log.log_end_offset == log.high_watermark == 9
    assert [r.offset for r in log.records()] == list(range(9))
    assert [r.key for r in log.records()] == [b"k%d" % i for i in range(9)]
    check_log(log)
    manager.close()


def test_log_append_time_stamps_every_batch(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"message.timestamp.type": "LogAppendTime"}, clock=clock)
    info = log.append_batches(build_batch(records(3, ts=5)))
    assert info.log_append_time == MS and info.max_timestamp == MS
    (batch,) = list(log.batches())
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME and batch.is_valid
    assert {r.timestamp for r in log.records()} == {MS}
    assert log.offset_for_timestamp(MS) == (0, MS)
    manager.close()


def test_compressed_batches_are_stored_as_sent(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    for i, codec in enumerate(Compression):
        log.append(records(5, start=i * 5, ts=MS + i * 5), compression=codec)
    assert [b.compression for b in log.batches()] == list(Compression)
    assert [r.key for r in log.records()] == [b"k%d" % i for i in range(25)]
    assert log.offset_for_timestamp(MS + 12) == (12, MS + 12)
    check_log(log)
    manager.close()


def test_timestamps_outside_the_allowed_window_are_refused(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"message.timestamp.before.max.ms": 1000}, clock=clock)
    with pytest.raises(InvalidTimestampError):
        log.append([Record(b"k", b"v", MS + 3_600_001)])  # message.timestamp.after.max.ms: an hour
    with pytest.raises(InvalidTimestampError):
        log.append([Record(b"k", b"v", MS - 1001)])
    log.append([Record(b"k", b"v", MS + 3_600_000)])
    assert log.log_end_offset == 1
    manager.close()


# --- appending a whole file as a segment ------------------------------------------------------


def staged(tmp_path: Path, *batches: bytes | bytearray, name: str = "staged") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(batches))
    return str(path)


def check_reopened(path: Path, end: int) -> None:
    """The dir, opened again, holds offsets 0..end-1 as a valid log."""
    with open_logs(path) as reopened:
        log = reopened.partition("t", 0)
        assert [r.offset for r in log.records()] == list(range(end))
        check_log(log)


def test_a_staged_file_becomes_the_active_segment_with_its_offsets_assigned(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", config={"index.interval.bytes": 100}, clock=clock)
    log.append(records(3))
    batches = [build_batch(records(5, start=s, ts=MS + s, size=60), base_offset=777) for s in range(3, 23, 5)]
    info = log.append_segment_file(staged(tmp_path, *batches))
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 22, 20)
    assert not os.path.exists(tmp_path / "staged")
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.active_segment.log_path.endswith("00000000000000000003.log")
    assert log.log_end_offset == log.high_watermark == 23
    assert [r.key for r in log.records()] == [b"k%d" % i for i in range(23)]
    # the offset index holds entries as appends would have made: reads start mid-segment
    assert log.active_segment.offset_index.entries == 3
    assert [b.base_offset for b in batches_of(log.read(13, 1))] == [13]
    assert log.offset_for_timestamp(MS + 17) == (17, MS + 17)
    log.append(records(2, start=23))  # appends go on into the adopted segment
    assert [s.base_offset for s in log.segments] == [0, 3]
    check_log(log)
    manager.close()
    check_reopened(tmp_path / "logs", 25)


def test_a_staged_file_replaces_an_empty_active_segment(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", clock=clock)
    log.append_segment_file(staged(tmp_path, build_batch(records(4))))
    assert [s.base_offset for s in log.segments] == [0]
    log.append_segment_file(staged(tmp_path, build_batch(records(2, start=4))))
    log.roll()
    log.append_segment_file(staged(tmp_path, build_batch(records(2, start=6))))
    assert [s.base_offset for s in log.segments] == [0, 4, 6]
    assert sorted(n for n in os.listdir(log.dir) if n.endswith((".log", ".index", ".timeindex"))) == sorted(
        f"{b:020d}{suffix}" for b in (0, 4, 6) for suffix in (".log", ".index", ".timeindex")
    )
    check_log(log)
    manager.close()


def test_a_staged_file_the_log_refuses_stays_as_it_was(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", config={"segment.bytes": 2000}, clock=clock)
    log.append(records(2))
    before = file_state(log)
    good = build_batch(records(2, start=2))
    corrupt = bytearray(good)
    corrupt[-1] ^= 1  # the CRC no longer matches
    cases = {
        "corrupt": (bytes(good) + bytes(corrupt), CorruptRecordError),
        "torn": (bytes(good) + bytes(good)[:30], CorruptRecordError),
        "future": (build_batch(records(1, ts=MS + 10**12)), InvalidTimestampError),
        "large": (b"".join(build_batch(records(2, start=i)) for i in range(2, 40, 2)), RecordTooLargeError),
        "empty": (b"", InvalidRecordError),
        "legacy": (build_message_set([Record(b"k", b"v", MS)], magic=1), InvalidRecordError),
    }
    for name, (data, error) in cases.items():
        path = staged(tmp_path, data, name=name)
        with pytest.raises(error) as raised:
            log.append_segment_file(path)
        assert raised.value.file == path, name
        assert Path(path).read_bytes() == data, name
    assert file_state(log) == before
    assert log.log_end_offset == 2
    check_log(log)
    manager.close()


def test_a_staged_file_that_fails_to_become_a_segment_leaves_the_records_as_they_were(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", config={"index.interval.bytes": 100}, clock=clock)
    log.append(records(3))
    data = b"".join(build_batch(records(5, start=s, size=60)) for s in range(3, 23, 5))
    for op, path, error in (
        ("allocate", ".index", errno.ENOSPC),  # the roll's preallocation: before the rename
        ("rename", "staged", errno.EIO),
        ("write", ".timeindex", errno.EIO),  # indexing it: after the rename, so it is undone
    ):
        fileio.faults.inject(op, error, path=path)
        try:
            with pytest.raises(KafkaStorageError, match=os.strerror(error)):
                log.append_segment_file(staged(tmp_path, data))
        finally:
            fileio.faults.clear()
        assert log.log_end_offset == 3 and [r.offset for r in log.records()] == [0, 1, 2], op
        assert sum(s.size for s in log.segments) == log.segments[0].size, op
        check_log(log)
    info = log.append_segment_file(staged(tmp_path, data))  # and the log takes it once the disk does
    assert (info.first_offset, info.last_offset) == (3, 22)
    check_log(log)
    manager.close()
    check_reopened(tmp_path / "logs", 23)


def test_truncation_removes_adopted_segments(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", clock=clock)
    log.append(records(3))
    log.append_segment_file(staged(tmp_path, build_batch(records(5, start=3))))
    log.append_segment_file(staged(tmp_path, build_batch(records(5, start=8))))
    assert log.truncate_to(3)
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, log.segments[0].size), (3, 0)]
    assert log.log_end_offset == 3
    log.append(records(1, start=3))
    check_log(log)
    manager.close()


def test_an_adopted_segment_is_recovered_after_a_crash(tmp_path, clock):
    manager, log = new_log(tmp_path / "logs", clock=clock)
    log.append(records(3))
    log.append_segment_file(staged(tmp_path, build_batch(records(5, start=3))))
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00" * 17)  # a torn write after the adopted batches
    crash(manager)
    check_reopened(tmp_path / "logs", 8)


def test_try_append_batches_appends_only_what_cannot_wait(tmp_path, clock):
    """The event loop's append: None, log and data untouched, when it would wait on the
    lock, roll a segment or fsync; else the same append as append_batches."""
    manager, log = new_log(tmp_path, config={"flush.messages": 300}, clock=clock)
    info = log.try_append_batches(build_batch(records(2)))
    assert info is not None and (info.first_offset, info.last_offset) == (0, 1)

    data = bytearray(build_batch(records(10, start=2, ts=MS + 2)))
    refused = bytes(data)
    assert len(data) > 300  # as many messages as bytes, at most: an fsync could be due
    assert log.try_append_batches(data) is None
    assert log.log_end_offset == 2 and log.recovery_point == 0 and data == refused
    manager.close()

    manager, log = new_log(tmp_path / "roll", config={"segment.ms": 60_000}, clock=clock)
    log.append(records(1, ts=MS))
    late = build_batch(records(1, start=1, ts=MS + 60_001))  # due a roll by segment.ms
    assert log.try_append_batches(late) is None
    assert len(log.segments) == 1 and log.log_end_offset == 1
    assert log.try_append_batches(build_batch(records(1, start=1, ts=MS + 1))) is not None

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with log._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        assert log.try_append_batches(build_batch(records(1, start=2, ts=MS + 2))) is None
    finally:
        release.set()
        holder.join()
    assert log.log_end_offset == 2
    with pytest.raises(InvalidRequestError, match="origin"):
        log.try_append_batches(late, origin="replication")
    check_log(log)
    manager.close()


# --- rolling ------------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 1000}, clock=clock)
    for i in range(40):
        log.append(records(1, start=i, size=60))
    assert len(log.segments) > 3
    for segment in log.segments:
        assert 0 < segment.size <= 1000
    for older in log.segments[:-1]:  # a roll trims the old segment's indexes
        assert os.path.getsize(older.index_path) == older.offset_index.entries * 8
        assert os.path.getsize(older.time_index_path) == older.time_index.entries * 12
    check_log(log)
    manager.close()


def test_roll_on_segment_ms_counts_from_the_first_timestamp(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.ms": 60_000}, clock=clock)
    log.append(records(1, ts=MS))
    clock.advance(120_000)  # the wall clock does not matter when records carry timestamps
    log.append(records(1, start=1, ts=MS + 60_000))
    assert len(log.segments) == 1
    log.append(records(1, start=2, ts=MS + 60_001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    manager.close()


def test_roll_on_segment_ms_without_timestamps_uses_the_clock(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.ms": 60_000}, clock=clock)
    log.append(records(1, ts=-1))
    clock.advance(60_000)
    log.append(records(1, start=1, ts=-1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(records(1, start=2, ts=-1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    manager.close()


def test_roll_when_the_offset_index_is_full(tmp_path, clock):
    # 96 bytes: 12 offset entries; one entry per batch after the first; timestamps all equal
    config = {"segment.index.bytes": 96, "index.interval.bytes": 0}
    manager, log = new_log(tmp_path, config=config, clock=clock)
    for i in range(40):
        log.append([Record(b"k%d" % i, b"v", MS)])
    assert [s.base_offset for s in log.segments] == [0, 13, 26, 39]
    assert all(s.offset_index.entries == 12 for s in log.segments[:-1])
    check_log(log)
    manager.close()


def test_roll_when_the_time_index_is_full(tmp_path, clock):
    # 96 bytes: 8 time slots, 7 usable before the roll; every batch a new max timestamp
    config = {"segment.index.bytes": 96, "index.interval.bytes": 0}
    manager, log = new_log(tmp_path, config=config, clock=clock)
    for i in range(20):
        log.append([Record(b"k%d" % i, b"v", MS + i)])
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    # the roll entry would repeat the last max timestamp, so it is not written
    assert [s.time_index.entries for s in log.segments[:-1]] == [7, 7]
    check_log(log)
    manager.close()


def test_roll_when_an_offset_would_not_fit_32_bits_relative_to_the_base(tmp_path):
    log = direct_log(tmp_path / "t-0")
    log.append_as_follower(build_batch(records(1), base_offset=0))
    far = 0x80000000 + 5
    log.append_as_follower(build_batch(records(1), base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.segments[-1].log_path.endswith("00000000002147483653.log")
    assert [r.offset for r in log.records()] == [0, far]
    check_log(log, dense=False)
    # one append whose batches span more offsets than one segment can index
    wide = build_batch(records(1), base_offset=far + 1) + build_batch(records(1), base_offset=far + 1 + 0x80000000)
    with pytest.raises(RecordTooLargeError, match="index"):
        log.append_as_follower(wide)
    assert log.log_end_offset == far + 1
    log.close()


def test_explicit_roll_and_an_empty_active_segment_is_not_rolled_again(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    new = log.roll()
    assert new.base_offset == 2 and log.roll() is new
    assert len(log.segments) == 2
    manager.close()


# --- reads ------------------------------------------------------------------------------------------


def test_read_returns_the_batch_holding_the_offset(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 2000, "index.interval.bytes": 100}, clock=clock)
    for i in range(60):
        log.append(records(3, start=i * 3))
    for offset in range(0, 180, 7):
        fetch = log.read(offset, 500)
        first = batches_of(fetch)[0]
        assert first.base_offset <= offset <= first.last_offset
        segment = next(s for s in reversed(log.segments) if s.base_offset <= offset)
        assert fetch.slice.handle.path == segment.log_path
        assert fetch.slice.position == first.position
    manager.close()


def test_read_returns_one_whole_batch_past_max_bytes(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(10, size=500))
    log.append(records(1, start=10))
    fetch = log.read(3, max_bytes=1)
    (batch,) = batches_of(fetch)
    assert fetch.size == batch.size_in_bytes and batch.record_count == 10
    fetch = log.read(3, max_bytes=1, min_one_message=False)
    assert fetch.size == 1 and fetch.first_entry_incomplete
    manager.close()


def test_read_respects_max_bytes_and_does_not_cross_segments(tmp_path, clock):
    _manager, log = new_log(tmp_path, config={"segment.bytes": 3000}, clock=clock)
    for i in range(50):
        log.append(records(1, start=i, size=100))
    fetch = log.read(0, 1000)
    assert fetch.size == 1000  # a partial batch at the end, as Kafka sends it
    assert all(b.is_valid for b in batches_of(fetch))
    whole = log.read(0, 10**6)
    assert whole.size == log.segments[0].size


def test_read_never_passes_the_high_watermark(tmp_path):
    log = direct_log(tmp_path / "t-0", standalone=False)
    for i in range(10):
        log.append(records(2, start=i * 2))
    assert log.high_watermark == 0
    assert log.read(0).slice is None and list(log.records()) == []
    log.update_high_watermark(5)  # inside the batch 4..5: it is sent, its reader filters
    got = batches_of(log.read(0, 10**6))
    assert [b.base_offset for b in got] == [0, 2, 4]
    assert [r.offset for r in log.records()] == [0, 1, 2, 3, 4]
    assert log.read(5).slice is None
    assert [b.base_offset for b in batches_of(log.read(2, 10**6, upper_bound=4))] == [2]
    assert log.update_high_watermark(100) == 20  # clamped to the log end
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (20, -1)
    log.close()


def test_offset_out_of_range_carries_the_valid_range(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(5))
    log.truncate_fully_and_start_at(100)
    log.append(records(5))
    for bad in (0, 99, 106, -1):
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.read(bad)
        assert (e.value.log_start_offset, e.value.log_end_offset) == (100, 105)
        assert e.value.offset == bad and e.value.error_code == 1
    assert log.read(105).slice is None  # the log end offset itself is in range: nothing yet
    assert batches_of(log.read(100))[0].base_offset == 100
    manager.close()


def test_unknown_partitions(tmp_path):
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 2)
        with pytest.raises(UnknownTopicOrPartitionError, match="partitions \\[0, 1\\]"):
            manager.partition("t", 2)
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.partition("nope", 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.partitions("nope")
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.topic_config("nope")
        assert UnknownTopicOrPartitionError.error_code == 3


# --- lookups by time ---------------------------------------------------------------------------------


def brute_force_offset_for(log: PartitionLog, ts: int):
    found = [(r.offset, r.timestamp) for r in log.records() if r.timestamp >= ts]
    return min(found) if found else None


def test_offset_for_timestamp_agrees_with_a_scan(tmp_path, clock):
    import random

    rng = random.Random(7)
    config = {"segment.bytes": 1500, "index.interval.bytes": 200}
    manager, log = new_log(tmp_path, config=config, clock=clock)
    stamps = []
    for _ in range(120):  # timestamps wander: the earliest record >= t is not always the first batch
        batch = [Record(b"k", b"v" * 30, MS + rng.randrange(0, 5000)) for _ in range(rng.randrange(1, 4))]
        stamps += [r.timestamp for r in batch]
        log.append(batch)
    assert len(log.segments) > 4
    for target in [MS - 1, MS, *rng.sample(range(MS, MS + 5001), 60), MS + 5000, MS + 5001]:
        assert log.offset_for_timestamp(target) == brute_force_offset_for(log, target), target
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (log.log_end_offset, -1)
    top = max(stamps)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (stamps.index(top), top)
    with pytest.raises(InvalidTimestampError):
        log.offset_for_timestamp(-7)
    manager.close()


def test_a_leader_writes_the_records_largest_timestamp_into_the_header(tmp_path, clock):
    """Kafka's LogValidator sets a CreateTime batch's max timestamp to its records' largest:
    Sarama 1.22 sends -1 there, and lookups by time read the header."""
    _, log = new_log(tmp_path, clock=clock)
    sent = build_batch([Record(b"k", b"v", MS + 3), Record(b"k", b"w", MS + 9)])
    header_says = RecordBatch(bytearray(sent), 0)
    header_says.set_max_timestamp(TimestampType.LOG_APPEND_TIME, -1)  # -1, and the wrong type, as a producer may
    log.append_batches(header_says.buffer)
    stored = next(log.batches(0))
    assert (stored.max_timestamp, stored.timestamp_type) == (MS + 9, TimestampType.CREATE_TIME)
    stored.validate()  # the CRC was computed again
    assert log.offset_for_timestamp(MS + 5) == (1, MS + 9)


def test_offset_for_timestamp_skips_records_below_the_log_start(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(10, ts=MS))
    log.delete_records(4)
    assert log.offset_for_timestamp(MS) == (4, MS + 4)
    assert log.offset_for_timestamp(MS + 9) == (9, MS + 9)
    assert log.offset_for_timestamp(MS + 10) is None
    manager.close()


def overlapping_segments(path: Path) -> Path:
    """A dir whose segment names overlap in offsets (files copied in by hand, a tool's
    mistake): ``0.log`` holds offsets 0-9, ``5.log`` offsets 5-14. Reads of 5-14 go to
    ``5.log`` (the floor segment), so 5-9 of ``0.log`` are shadowed: timestamps MS+1 but
    offset 9's MS+30, where ``5.log`` has MS+10.. MS+19."""
    path.mkdir()
    stamps = [MS + i for i in range(5)] + [MS + 1] * 4 + [MS + 30]
    first = b"".join(build_batch([Record(b"a", b"%d" % o, ts)], base_offset=o) for o, ts in enumerate(stamps))
    second = b"".join(build_batch([Record(b"b", b"%d" % o, MS + 5 + o)], base_offset=o) for o in range(5, 15))
    (path / "00000000000000000000.log").write_bytes(first)
    (path / "00000000000000000005.log").write_bytes(second)
    return path


@pytest.mark.parametrize("read_only", [False, True], ids=["recovered", "read-only"])
def test_offset_for_timestamp_answers_from_the_records_reads_return_over_overlapping_segments(tmp_path, read_only):
    dir = overlapping_segments(tmp_path / "t-0")
    logs = ["00000000000000000000.log", "00000000000000000005.log"]
    before = [(dir / name).read_bytes() for name in logs]
    log = direct_log(dir, {"index.interval.bytes": 1}, had_clean_shutdown=False, read_only=read_only)
    read = {o: next(log.read(o, 1).records.batches()).max_timestamp for o in range(log.log_end_offset)}
    assert read == {o: MS + o if o < 5 else MS + 5 + o for o in range(15)}
    for target in range(MS - 1, MS + 32):  # the first offset whose read record reaches the target
        first = min((o for o, ts in read.items() if ts >= target), default=None)
        assert log.offset_for_timestamp(target) == (None if first is None else (first, read[first])), target
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (14, MS + 19)  # not offset 9's shadowed MS+30
    log.close()
    assert [(dir / name).read_bytes() for name in logs] == before  # the policy drops nothing


# --- follower appends --------------------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    log = direct_log(tmp_path / "t-0")
    data = build_batch(records(3), base_offset=0, partition_leader_epoch=4)
    data += build_batch(records(2), base_offset=3, partition_leader_epoch=4)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 4)
    info = log.append_as_follower(build_batch(records(1), base_offset=10, partition_leader_epoch=6))
    assert info.first_offset == 10 and log.log_end_offset == 11  # a gap (a compacted leader) is fine
    assert [b.partition_leader_epoch for b in log.batches()] == [4, 4, 6]
    assert log.leader_epoch_cache.entries == [(4, 0), (6, 10)]
    check_log(log, dense=False)
    log.close()


def test_follower_append_refuses_offsets_that_do_not_increase(tmp_path):
    log = direct_log(tmp_path / "t-0")
    log.append_as_follower(build_batch(records(3), base_offset=0))
    before = file_state(log)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(build_batch(records(1), base_offset=2))  # below the log end
    pair = build_batch(records(2), base_offset=3) + build_batch(records(1), base_offset=4)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(pair)  # overlapping batches
    assert file_state(log) == before and log.log_end_offset == 3
    log.close()


def test_follower_keeps_legacy_batches_the_leader_converts_to_v2(tmp_path):
    # a follower copies the leader's bytes; a leader converts a Produce v0-2 message set to one
    # v2 batch of the producer's codec (Kafka's LogValidator), offsets its own
    leader = direct_log(tmp_path / "t-0")
    legacy = build_message_set([Record(b"k", b"v", MS), Record(b"k2", b"v2", MS + 1)], magic=1)
    leader.append(records(3))
    info = leader.append_batches(build_message_set([Record(b"k", b"v", None)], magic=0) + legacy)
    assert (info.first_offset, info.last_offset) == (3, 5)
    (converted,) = batches_of(leader.read(3, 1 << 20))[:1]
    assert converted.magic == 2 and converted.compression == Compression.NONE and converted.record_count == 3
    assert [(r.offset, r.timestamp, r.key) for r in leader.records()][3:] == [
        (3, -1, b"k"),
        (4, MS, b"k"),
        (5, MS + 1, b"k2"),
    ]
    gzip = build_message_set([Record(b"z", b"v", MS)], magic=1, compression=Compression.GZIP)
    assert batches_of(leader.read(leader.append_batches(gzip).first_offset, 1 << 20))[0].compression == Compression.GZIP
    leader.close()
    follower = direct_log(tmp_path / "t-1")
    follower.append_as_follower(legacy)
    assert [(r.offset, r.key) for r in follower.records()] == [(0, b"k"), (1, b"k2")]
    assert batches_of(follower.read(0, 1 << 20))[0].magic == 1
    follower.close()


def test_a_magic_0_message_has_no_timestamp_to_bound(tmp_path, clock):
    # Kafka's LogValidator checks message.timestamp.before.max.ms on records with a timestamp only
    log = direct_log(tmp_path / "t-0", {"message.timestamp.before.max.ms": 1000}, clock=clock)
    assert log.append_batches(build_message_set([Record(b"k", b"v", None)], magic=0)).first_offset == 0
    with pytest.raises(InvalidTimestampError):
        log.append_batches(build_message_set([Record(b"k", b"v", MS - 5000)], magic=1))
    assert log.append_batches(build_message_set([Record(b"k", b"v", MS - 500)], magic=1)).first_offset == 1
    assert [r.timestamp for r in log.records()] == [-1, MS - 500]
    log.close()


def test_leader_converts_legacy_messages_to_the_topics_codec(tmp_path):
    log = direct_log(tmp_path / "t-0", {"compression.type": "lz4"})
    log.append_batches(build_message_set([Record(b"k", b"v", MS)], magic=1, compression=Compression.SNAPPY))
    log.append_batches(build_message_set([Record(b"k", b"v", MS)], magic=0))
    assert [b.compression for b in batches_of(log.read(0, 1 << 20))] == [Compression.LZ4, Compression.LZ4]
    log.close()


def test_legacy_offsets_before_are_segment_bases_and_the_log_end(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    for i in range(12):
        log.append(records(2, start=i * 2, size=40))
    log.update_high_watermark(log.log_end_offset)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    assert log.legacy_offsets_before(LATEST_TIMESTAMP, 1) == [24]
    assert log.legacy_offsets_before(EARLIEST_TIMESTAMP, 5) == [0]
    assert log.legacy_offsets_before(LATEST_TIMESTAMP, 100) == [24, *reversed(bases)]
    assert log.legacy_offsets_before(LATEST_TIMESTAMP, 2) == [24, bases[-1]]
    assert log.legacy_offsets_before(1000, 10) == []  # every file was written after
    # the log end counts as written now (the clock's); segments by their files' mtimes
    os.utime(log.segments[0].log_path, ns=(0, 5_000_000))  # 5 ms after the epoch
    assert log.legacy_offsets_before(6, 10) == [0]
    log.delete_records(3)  # the first segment's offset is the log start offset then
    assert log.legacy_offsets_before(EARLIEST_TIMESTAMP, 1) == [3]
    manager.close()


# --- truncation ----------------------------------------------------------------------------------------


def test_truncate_to(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    for i in range(30):
        log.append(records(2, start=i * 2, size=40))
    segments = len(log.segments)
    assert log.truncate_to(33)  # inside batch 32..33: the whole batch goes
    assert log.log_end_offset == 32 and log.high_watermark == 32
    assert len(log.segments) < segments
    assert [r.offset for r in log.records()][-1] == 31
    assert not log.truncate_to(40)
    log.append(records(1, start=99))
    assert log.log_end_offset == 33
    check_log(log)
    survivors = {s.log_path for s in log.segments}
    assert {p for p in os.listdir(log.dir) if p.endswith(".log")} == {os.path.basename(p) for p in survivors}
    manager.close()


def test_truncate_to_below_the_first_segment_starts_afresh(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.truncate_fully_and_start_at(50)
    log.append(records(5))
    assert log.truncate_to(10)
    assert log.log_start_offset == log.log_end_offset == 10
    assert [s.base_offset for s in log.segments] == [10]
    manager.close()


def test_truncate_fully_and_start_at(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 500}, clock=clock)
    for i in range(20):
        log.append(records(1, start=i, size=50))
    log.truncate_fully_and_start_at(1000)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 1000
    assert [s.base_offset for s in log.segments] == [1000]
    assert sorted(p for p in os.listdir(log.dir) if p.endswith((".log", ".index", ".timeindex"))) == [
        "00000000000000001000.index",
        "00000000000000001000.log",
        "00000000000000001000.timeindex",
    ]
    assert log.append(records(1)) == (1000, 1000)
    manager.close()
    with open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert (log.log_start_offset, log.log_end_offset) == (1000, 1001)


def test_truncation_of_a_closed_or_read_only_log_is_refused(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    manager.close()
    with pytest.raises(KafkaStorageError, match="closed"):
        log.truncate_to(0)
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append(records(1))


# --- leader epochs -------------------------------------------------------------------------------------


def test_leader_epoch_checkpoint_contents(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    path = Path(log.dir) / "leader-epoch-checkpoint"
    log.become_leader(3)
    log.append(records(4))
    assert path.read_text() == "0\n1\n3 0\n"
    log.become_leader(5)
    log.append(records(2))
    log.append(records(2))
    assert path.read_text() == "0\n2\n3 0\n5 4\n"
    assert {b.partition_leader_epoch for b in log.batches(4)} == {5}
    assert log.leader_epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 4)
    assert log.leader_epoch_cache.end_offset_for(5, log.log_end_offset) == (5, 8)
    log.truncate_to(4)
    assert path.read_text() == "0\n1\n3 0\n"
    log.truncate_fully_and_start_at(20)
    assert path.read_text() == "0\n0\n"
    manager.close()


def test_leader_epochs_are_rebuilt_from_batches_on_recovery(tmp_path, clock):
    from .conftest import crash

    manager, log = new_log(tmp_path, clock=clock)
    log.become_leader(2)
    log.append(records(3))
    log.become_leader(7)
    log.append(records(3))
    crash(manager)
    (Path(log.dir) / "leader-epoch-checkpoint").write_text("garbage\n")
    with open_logs(tmp_path) as manager:
        assert manager.partition("t", 0).leader_epoch_cache.entries == [(2, 0), (7, 3)]


# --- bad input -------------------------------------------------------------------------------------------


def test_corrupt_batches_are_refused_and_the_log_is_unchanged(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(3))
    before = file_state(log)
    good = build_batch(records(2))
    flipped = bytearray(good)
    flipped[-1] ^= 1  # CRC mismatch
    bad_magic = bytearray(good)
    bad_magic[16] = 7
    short_length = bytearray(good)
    short_length[8:12] = (3).to_bytes(4, "big")
    cases = {
        "crc": bytes(good) + bytes(flipped),
        "partial": bytes(good) + bytes(good)[:-5],
        "magic": bytes(bad_magic),
        "length": bytes(short_length),
        "garbage": b"\x07" * 100,
    }
    for name, data in cases.items():
        with pytest.raises(CorruptRecordError):
            log.append_batches(data)
        assert file_state(log) == before, name
    assert log.log_end_offset == 3 and log.append(records(1)) == (3, 3)
    manager.close()


def test_batches_the_log_refuses(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    with pytest.raises(InvalidRecordError, match="empty"):
        log.append([])
    with pytest.raises(InvalidRecordError):
        log.append_batches(b"")
    control = build_batch([Record(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], control=True)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_batches(control)
    lying = build_batch(records(3), last_offset_delta=5)  # 3 records claiming 6 offsets
    with pytest.raises(InvalidRecordError, match="last offset delta"):
        log.append_batches(lying)
    with pytest.raises(InvalidRequestError, match="origin"):
        log.append_batches(build_batch(records(1)), origin="replication")
    assert log.log_end_offset == 0
    manager.close()


def test_keyless_records_on_a_compacted_topic(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"cleanup.policy": "compact"}, clock=clock)
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append([Record(b"k", b"v", MS), Record(None, b"v", MS)])
    log.append([Record(b"k", None, MS)])  # a tombstone has a key: fine
    assert log.log_end_offset == 1
    manager.create_topic("plain", 1)
    manager.partition("plain", 0).append([Record(None, b"v", MS)])  # not compacted: fine
    manager.close()


def test_oversize_batches(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"max.message.bytes": 1000, "segment.bytes": 1500}, clock=clock)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes") as e:
        log.append([Record(b"k", b"x" * 1000, MS)])
    assert e.value.error_code == 10
    one = build_batch([Record(b"k", b"x" * 800, MS)])
    with pytest.raises(RecordTooLargeError, match=r"segment\.bytes"):
        log.append_batches(one + one)  # each batch fits max.message.bytes; together not a segment
    assert log.log_end_offset == 0 and log.segments[0].size == 0
    log.append_batches(one)
    assert log.log_end_offset == 1
    manager.close()


# --- flushing ----------------------------------------------------------------------------------------------


def test_flush_messages_moves_the_recovery_point(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"flush.messages": 5}, clock=clock)
    log.append(records(3))
    assert log.recovery_point == 0
    log.append(records(2))
    assert log.recovery_point == 5
    log.append(records(1))
    log.flush()
    assert log.recovery_point == 6
    manager.close()


def test_flush_ms_by_the_clock(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"flush.ms": 1000}, clock=clock)
    log.append(records(3))
    assert log.recovery_point == 0
    clock.advance(1000)
    manager.flush_due()
    assert log.recovery_point == 3
    manager.close()


def test_batches_and_records_between_offsets(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 400}, clock=clock)
    for i in range(20):
        log.append(records(3, start=i * 3))
    assert [r.offset for r in log.records(10, 20)] == list(range(10, 20))
    assert [b.base_offset for b in log.batches(10, 20)] == [9, 12, 15, 18]
    assert check_log(log)[-1][1] == 59
    assert sum(1 for _ in BatchIterator(Path(log.segments[0].log_path).read_bytes())) >= 1
    manager.close()


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("count", [4, 5, 100])
def test_an_append_past_the_last_int64_offset_is_refused_and_loses_nothing(tmp_path, count):
    """Offsets are int64 and so is the log end offset a fetch asks for: the last record a partition can
    take is at INT64_MAX - 1. An append that would pass it is refused with Kafka's INVALID_RECORD, the
    log untouched (not an OverflowError from the C walk, nor a log end offset no protocol can carry)."""
    log = direct_log(tmp_path / "t-0")
    log.truncate_fully_and_start_at(INT64_MAX - 3)
    before = file_state(log)
    with pytest.raises(InvalidRecordError, match="offsets are used up") as refused:
        log.append(records(count))
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert refused.value.offset == INT64_MAX - 3 and refused.value.file == log.dir
    assert log.log_end_offset == INT64_MAX - 3 and file_state(log) == before
    assert log.append(records(2)) == (INT64_MAX - 3, INT64_MAX - 2)
    with pytest.raises(InvalidRecordError):
        log.append(records(2, start=2))
    assert log.append(records(1, start=2)) == (INT64_MAX - 1, INT64_MAX - 1)
    assert log.log_end_offset == INT64_MAX
    with pytest.raises(InvalidRecordError):
        log.append(records(1, start=3))
    assert [r.key for r in log.records(INT64_MAX - 3)] == [b"k0", b"k1", b"k2"]
