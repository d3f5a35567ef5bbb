"""Recovery and index checks at open: only bytes that are really invalid are cut, and
an index entry that points outside its segment makes the index be rebuilt."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from seglog.errors import CorruptRecordError
from seglog.records import BatchIterator, Compression, Record, build_batch, build_message_set

from .conftest import MS, check_log, crash, new_log, open_logs, records


def test_recovery_keeps_batches_larger_than_a_lowered_max_message_bytes(tmp_path):
    """A batch was valid when it was appended: lowering max.message.bytes later must not
    make recovery cut the log there (Kafka's recovery does not bound stored batches by
    the config)."""
    manager, log = new_log(tmp_path, config={"max.message.bytes": 2 * 1024 * 1024})
    value = os.urandom(1_500_000)
    log.append([Record(b"small", b"v", MS)])
    for i in range(4):
        log.append([Record(b"big%d" % i, value, MS + i)], compression=Compression.NONE)
    log.append([Record(b"after", b"v", MS + 9)])
    manager.alter_topic_config("t", {"max.message.bytes": 1024 * 1024})
    crash(manager)
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert log.log_end_offset == 6
        assert [r.key for r in log.records()] == [b"small", b"big0", b"big1", b"big2", b"big3", b"after"]
        check_log(log)


def test_recovery_of_a_length_field_claiming_more_than_the_file_cuts_there(tmp_path):
    """Without the config's bound, a garbage length is still invalid bytes: recovery
    truncates at it and keeps every batch before it."""
    manager, log = new_log(tmp_path)
    for i in range(5):
        log.append(records(3, start=3 * i))
    segment = log.active_segment
    positions = [h.position for h in segment.scan_headers()]
    crash(manager)
    with open(segment.log_path, "r+b") as f:
        f.seek(positions[3] + 8)
        f.write(struct.pack(">i", 0x7FFFFFF0))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert log.log_end_offset == 9
        assert [r.offset for r in log.records()] == list(range(9))
        check_log(log)


def _last_index_entry_position(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        data = f.read()
        assert len(data) >= 8 and len(data) % 8 == 0
        f.seek(len(data) - 4)
        f.write(struct.pack(">i", position))


def _indexed_dir(tmp_path) -> tuple[str, list]:
    """A cleanly closed dir whose one segment has several offset index entries."""
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 100})
    for i in range(20):
        log.append(records(4, start=4 * i, size=60))
    expected = [(r.offset, r.key, r.value) for r in log.records()]
    path = log.active_segment.index_path
    manager.close()
    return path, expected


def test_a_negative_position_in_the_last_index_entry_rebuilds_the_index(tmp_path):
    path, expected = _indexed_dir(tmp_path)
    _last_index_entry_position(path, -5)
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert [(r.offset, r.key, r.value) for r in log.records()] == expected
        assert [(r.offset, r.key, r.value) for r in log.records(37)] == expected[37:]
        check_log(log)


def test_an_index_entry_past_the_end_of_the_log_rebuilds_the_index(tmp_path):
    path, expected = _indexed_dir(tmp_path)
    log_size = os.path.getsize(path.replace(".index", ".log"))
    with open(path, "r+b") as f:  # an entry in the middle, past the log's end
        f.seek(8 * 2 + 4)
        f.write(struct.pack(">i", log_size + 4096))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert [(r.offset, r.key, r.value) for r in log.records()] == expected
        for start in range(0, 80, 7):
            assert [r.offset for r in log.records(start)] == list(range(start, 80))
        check_log(log)


def test_index_entries_out_of_order_rebuild_the_index(tmp_path):
    path, _ = _indexed_dir(tmp_path)
    with open(path, "r+b") as f:  # the second entry's offset above the third's
        f.seek(8)
        f.write(struct.pack(">i", 70))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        for start in range(0, 80, 3):
            assert [r.offset for r in log.records(start)] == list(range(start, 80))
        check_log(log)


def test_an_index_entry_pointing_at_another_batch_is_caught_when_used(tmp_path):
    """An entry still in order and inside the log, but naming the start of a later batch
    than its own (a flipped low bit): a lookup through it must not skip the records of
    the batches between."""
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 700})
    for i in range(20):
        log.append(records(4, start=4 * i, size=60))
    segment = log.active_segment
    manager.close()
    positions = [b.position for b in BatchIterator(Path(segment.log_path).read_bytes())]
    data = Path(segment.index_path).read_bytes()
    position = struct.unpack_from(">ii", data, 8)[1]
    following = struct.unpack_from(">ii", data, 16)[1]
    later = positions[positions.index(position) + 1]
    assert later < following  # a batch between this entry's and the next entry's
    with open(segment.index_path, "r+b") as f:
        f.seek(8 + 4)
        f.write(struct.pack(">i", later))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        for start in range(80):
            assert [r.offset for r in log.records(start)] == list(range(start, 80))


def _three_segments(tmp_path):
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 100000})
    for i in range(3):
        log.append(records(5, start=10 * i))
        log.append(records(5, start=10 * i + 5))
        log.roll()
    segments = [s.log_path for s in log.segments]
    manager.close()
    return segments


def test_a_swap_file_without_a_valid_batch_is_discarded_not_renamed_over_a_segment(tmp_path):
    segments = _three_segments(tmp_path)
    Path(segments[0] + ".swap").write_bytes(os.urandom(200))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert [r.offset for r in log.records()] == list(range(30))
    assert not os.path.exists(segments[0] + ".swap")


def test_an_inactive_segment_cut_short_stops_reads_at_the_cut(tmp_path):
    """A clean dir whose middle segment lost the end of its last batch: the batches
    before the cut are read, then the read fails there rather than go on at the next
    segment as if the records between did not exist."""
    segments = _three_segments(tmp_path)
    os.truncate(segments[1], os.path.getsize(segments[1]) - 7)
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        got = []
        with pytest.raises(CorruptRecordError) as e:
            got.extend(r.offset for r in log.records())
        assert got == list(range(15))
        assert e.value.file == segments[1]
        assert [r.offset for r in log.records(20)] == list(range(20, 30))


def test_an_active_segment_ending_in_a_partial_batch_is_recovered_at_a_clean_open(tmp_path):
    """Appends go at the end of the file: bytes there that are no batch would lie between
    the batches before and after them."""
    segments = _three_segments(tmp_path)
    with open(segments[-1], "ab") as f:
        f.write(build_batch(records(3, start=30), base_offset=30)[:40])
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert log.log_end_offset == 30
        log.append(records(2, start=30))
        assert [r.offset for r in log.records()] == list(range(32))
        check_log(log)


def test_a_lookup_by_time_before_damaged_bytes_finds_its_record(tmp_path):
    """The largest timestamp of a damaged segment is the one before the damage, so that a
    lookup by time in the segments before it (and retention) still works."""
    segments = _three_segments(tmp_path)
    with open(segments[1], "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">i", 1))  # the length of its first batch
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert log.offset_for_timestamp(MS + 3) == (3, MS + 3)
        with pytest.raises(CorruptRecordError):
            list(log.records(10))


@pytest.mark.parametrize("batch_bytes", [60, 600], ids=["small batches", "indexed batches"])
def test_a_time_index_entry_lowered_but_in_order_does_not_skip_records(tmp_path, batch_bytes):
    """A time entry's timestamp made lower (flipped bits) but still above the entry before
    it: a lookup between the two timestamps must not start after the entry's offset."""
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 200})
    for i in range(30):
        log.append(records(2, start=2 * i, ts=MS + 2 * i, size=batch_bytes // 2))
    path = log.active_segment.time_index_path
    manager.close()
    data = Path(path).read_bytes()
    entries = [struct.unpack_from(">qi", data, at) for at in range(0, len(data), 12)]
    assert len(entries) >= 4
    (before, low), (_, rel) = entries[1], entries[2]
    with open(path, "r+b") as f:
        f.seek(24)
        f.write(struct.pack(">q", before + 1))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        for offset in range(low + 1, rel + 1):
            assert log.offset_for_timestamp(MS + offset) == (offset, MS + offset)


def test_a_read_that_ends_where_a_damaged_legacy_wrapper_begins_is_served(tmp_path):
    """A compressed magic 1 wrapper must be opened to learn its first offset: a damaged
    one after the read's end bound is left out of the read rather than fail it."""
    manager, log = new_log(tmp_path)
    for i in range(3):
        recs = [Record(b"k%d" % o, b"v" * 50, MS + o) for o in range(5 * i, 5 * i + 5)]
        log.append_as_follower(build_message_set(recs, magic=1, base_offset=5 * i, compression=Compression.GZIP))
    segment = log.active_segment
    manager.close()
    second = [b.position for b in BatchIterator(Path(segment.log_path).read_bytes())][1]
    with open(segment.log_path, "r+b") as f:
        f.seek(second + 60)
        byte = f.read(1)[0]
        f.seek(second + 60)
        f.write(bytes([byte ^ 0x10]))
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        assert [r.offset for r in log.records(0, 5)] == list(range(5))
        with pytest.raises(CorruptRecordError):
            list(log.records(0, 15))
