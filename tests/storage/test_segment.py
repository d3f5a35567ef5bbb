"""LogSegment: appending and sparse indexing, reads as file slices, lookups,
recovery, truncation, trimming and lazy loading."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from seglog.errors import CorruptRecordError
from seglog.records import BatchIterator, Record, build_batch
from seglog.storage.segment import LogSegment

from .conftest import MS, index_file_entries, records, time_index_file_entries


def batch(base: int, n: int = 1, ts: int = MS, size: int = 20) -> bytearray:
    return build_batch(records(n, start=base, ts=ts, size=size), base_offset=base)


def append(segment: LogSegment, *batches: bytearray) -> None:
    """Append whole batches as the partition log does: one write, one list of entries."""
    data, entries = bytearray(), []
    for b in batches:
        parsed = next(BatchIterator(b))
        entries.append((len(data), len(b), parsed.last_offset, parsed.max_timestamp))
        data += b
    segment.append(data, entries)


def segment(tmp_path, base=0, **kw) -> LogSegment:
    kw.setdefault("index_interval_bytes", 4096)
    kw.setdefault("max_index_size", 4096)
    return LogSegment.create(str(tmp_path), base, **kw)


def reopen(old: LogSegment, **kw) -> LogSegment:
    kw.setdefault("index_interval_bytes", old.index_interval_bytes)
    kw.setdefault("max_index_size", old.max_index_size)
    return LogSegment(old.dir, old.base_offset, **kw)


def test_files_are_named_after_the_base_offset(tmp_path):
    seg = segment(tmp_path, base=42)
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]
    assert seg.size == 0 and seg.read_next_offset() == 42


def test_sparse_entry_once_more_than_index_interval_bytes_were_appended(tmp_path):
    seg = segment(tmp_path, base=0, index_interval_bytes=250)
    sizes, positions = [], []
    for i in range(12):
        b = batch(i * 3, n=3, ts=MS + i)
        positions.append(seg.size)
        sizes.append(len(b))
        append(seg, b)
    # Kafka's rule: a batch is indexed when more than interval bytes came since the last entry
    expected, since = [], 0
    for i, (pos, size) in enumerate(zip(positions, sizes, strict=True)):
        if since > 250:
            expected.append((i * 3 + 2, pos))
            since = 0
        since += size
    assert expected, "the test should produce entries"
    seg.close()
    assert index_file_entries(seg.index_path) == expected  # relative offset = batch last offset - 0
    times = time_index_file_entries(seg.time_index_path)
    assert times[-1] == (MS + 11 + 2, 35)  # the entry written at close: the max timestamp


def test_index_interval_zero_indexes_every_batch_but_the_first(tmp_path):
    seg = segment(tmp_path, base=10, index_interval_bytes=0)
    positions = []
    for i in range(5):
        positions.append(seg.size)
        append(seg, batch(10 + i * 2, n=2))
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [
        (10 + i * 2 + 1, positions[i]) for i in range(1, 5)
    ]


def test_one_append_of_many_batches_is_indexed_batch_by_batch(tmp_path):
    seg = segment(tmp_path, index_interval_bytes=100)
    append(seg, *[batch(i * 2, n=2, size=60) for i in range(10)])
    positions = {b.position: b.last_offset for b in BatchIterator(Path(seg.log_path).read_bytes())}
    assert seg.offset_index.entries > 3
    for slot in range(seg.offset_index.entries):
        offset, pos = seg.offset_index.entry(slot)
        assert positions[pos] == offset


def test_read_starts_at_the_batch_holding_the_offset(tmp_path):
    seg = segment(tmp_path, base=100, index_interval_bytes=64)
    starts = {}
    for i in range(20):
        starts[100 + i * 5] = seg.size
        append(seg, batch(100 + i * 5, n=5))
    for offset in (100, 101, 104, 105, 152, 199):
        fetch = seg.read(offset, 10_000)
        assert fetch.slice.position == starts[offset - (offset - 100) % 5]
        first = next(fetch.slice.batches())
        assert first.base_offset <= offset <= first.last_offset
    assert seg.read(200, 1000) is None


def test_read_limits(tmp_path):
    seg = segment(tmp_path)
    big = batch(0, n=5, size=200)
    append(seg, big, batch(5))
    fetch = seg.read(0, 10)
    assert fetch.slice.size == 10 and fetch.first_entry_incomplete
    fetch = seg.read(0, 10, min_one_message=True)
    assert fetch.slice.size == len(big) and not fetch.first_entry_incomplete
    assert fetch.slice.read() == bytes(big)
    assert seg.read(5, 10_000, max_position=len(big)) is None  # nothing before max_position
    assert seg.read(0, 10_000, max_position=len(big)).slice.size == len(big)


def test_find_offset_by_timestamp_reads_records_not_just_batches(tmp_path):
    seg = segment(tmp_path, index_interval_bytes=0)
    # records in a batch out of order: the lookup answers the first one >= target
    append(seg, build_batch([(b"a", b"1", MS + 50), (b"b", b"2", MS + 10), (b"c", b"3", MS + 70)], base_offset=0))
    append(seg, build_batch([(b"d", b"4", MS + 60), (b"e", b"5", MS + 80)], base_offset=3))
    assert seg.find_offset_by_timestamp(MS, 0) == (MS + 50, 0)
    assert seg.find_offset_by_timestamp(MS + 51, 0) == (MS + 70, 2)
    assert seg.find_offset_by_timestamp(MS + 71, 0) == (MS + 80, 4)
    assert seg.find_offset_by_timestamp(MS + 55, 3) == (MS + 60, 3)  # not below the starting offset
    assert seg.find_offset_by_timestamp(MS + 81, 0) is None
    assert seg.max_timestamp_and_offset == (MS + 80, 4)


def test_close_trims_indexes_and_reopen_finds_everything(tmp_path):
    seg = segment(tmp_path, index_interval_bytes=100, max_index_size=8000)
    for i in range(30):
        append(seg, batch(i, ts=MS + i))
    assert os.path.getsize(seg.index_path) == 8000
    entries = seg.offset_index.entries
    seg.close()
    assert os.path.getsize(seg.index_path) == entries * 8
    assert os.path.getsize(seg.time_index_path) % 12 == 0
    again = reopen(seg)
    assert not again.indexes_loaded  # opening touches nothing
    assert again.read_next_offset() == 30
    assert again.offset_index.entries == entries
    assert again.max_timestamp_and_offset == (MS + 29, 29)
    again.active = True
    again.ensure_writable_indexes()  # the active segment grows its indexes back
    assert os.path.getsize(again.index_path) == 8000
    append(again, batch(30, ts=MS + 30))
    assert again.read_next_offset() == 31


def test_missing_indexes_are_rebuilt_from_the_log(tmp_path, caplog):
    seg = segment(tmp_path, index_interval_bytes=100)
    for i in range(30):
        append(seg, batch(i))
    seg.close()
    expected = index_file_entries(seg.index_path)
    os.unlink(seg.index_path)
    os.unlink(seg.time_index_path)
    again = reopen(seg)
    with caplog.at_level(logging.WARNING):
        assert again.read(17, 100).slice is not None
    assert "index files missing" in caplog.text
    assert [again.offset_index.entry(i) for i in range(again.offset_index.entries)] == [(o, p) for o, p in expected]


def test_recover_truncates_at_the_first_invalid_byte(tmp_path, caplog):
    seg = segment(tmp_path)
    for i in range(10):
        append(seg, batch(i))
    good = seg.size
    seg.close()
    data = bytearray(Path(seg.log_path).read_bytes())
    data[good - 3] ^= 0xFF  # the last batch's CRC no longer matches
    Path(seg.log_path).write_bytes(bytes(data) + b"garbage")
    again = reopen(seg)
    with caplog.at_level(logging.WARNING):
        removed = again.recover()
    last = list(BatchIterator(bytes(data)))[-1]
    assert removed == good + 7 - last.position
    assert "CRC" in caplog.text and f"at position {last.position}" in caplog.text
    assert again.size == last.position == os.path.getsize(seg.log_path)
    assert again.read_next_offset() == 9


def test_recover_refuses_offsets_that_go_backwards(tmp_path):
    seg = segment(tmp_path)
    append(seg, batch(0, n=3))
    append(seg, batch(3))
    seg.close()
    with open(seg.log_path, "ab") as f:
        f.write(bytes(batch(2)))  # a valid batch whose offsets do not follow
    again = reopen(seg)
    assert again.recover() > 0
    assert again.read_next_offset() == 4


def test_rebuilding_indexes_of_a_damaged_segment_does_not_truncate_it(tmp_path, caplog):
    """Outside recovery a segment is never cut: rebuilding its index reports the damage,
    the batches before it stay readable, and a read that reaches it fails there."""
    seg = segment(tmp_path)
    append(seg, batch(0), batch(1))
    seg.close()
    valid = os.path.getsize(seg.log_path)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\xff" * 20)  # a size below any minimum
    os.unlink(seg.index_path)
    again = reopen(seg)
    size = os.path.getsize(seg.log_path)
    again.offset_index  # noqa: B018
    assert "invalid bytes at the end of the segment" in caplog.text
    assert again.translate_offset(1).last_offset == 1
    with pytest.raises(CorruptRecordError) as e:
        again.translate_offset(2)
    assert e.value.position == valid
    assert os.path.getsize(seg.log_path) == size


def test_truncate_to(tmp_path):
    seg = segment(tmp_path, index_interval_bytes=0)
    positions = []
    for i in range(10):
        positions.append(seg.size)
        append(seg, batch(i * 2, n=2, ts=MS + i))
    assert positions[9] + len(batch(18, n=2)) == seg.size
    removed = seg.truncate_to(9)  # the batch 8..9 holds 9: it goes whole
    assert seg.size == positions[4] and removed == positions[10 - 1] + len(batch(18, n=2)) - positions[4]
    assert seg.read_next_offset() == 8
    assert seg.offset_index.last_offset == 7
    assert seg.max_timestamp_and_offset == (MS + 4, 7)
    assert seg.truncate_to(100) == 0
    append(seg, batch(8, ts=MS + 100))
    assert seg.read(8, 100).slice.position == positions[4]
    assert seg.truncate_to(0) > 0
    assert seg.size == 0 and seg.offset_index.entries == 0 and seg.time_index.entries == 0
    assert seg.read_next_offset() == 0


def test_legacy_batches_are_read_and_indexed(tmp_path):
    from seglog.records import build_message_set

    seg = segment(tmp_path, index_interval_bytes=0)
    data = build_message_set([Record(b"k%d" % i, b"v", MS + i) for i in range(5)], magic=1, base_offset=0)
    entries = [(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp) for b in BatchIterator(data)]
    seg.append(data, entries)
    assert seg.read_next_offset() == 5
    assert seg.find_offset_by_timestamp(MS + 3, 0) == (MS + 3, 3)
    assert seg.read(2, 1).slice.position == entries[2][0]


def test_should_roll(tmp_path):
    clock = [MS]
    seg = segment(tmp_path, base=0, clock=lambda: clock[0])
    assert not seg.should_roll(100, MS, 0, 1000, 60_000)  # empty: never rolls for time
    append(seg, batch(0, ts=MS))
    size = seg.size
    assert seg.should_roll(1000 - size + 1, MS, 1, 1000, 60_000)  # would exceed segment.bytes
    assert not seg.should_roll(1000 - size, MS, 1, 1000, 60_000)
    assert not seg.should_roll(10, MS + 60_000, 1, 10**6, 60_000)  # age counts from the first timestamp
    assert seg.should_roll(10, MS + 60_001, 1, 10**6, 60_000)
    assert seg.should_roll(10, MS, 0x80000000, 10**6, 60_000)  # the offset would not fit in 32 bits
    # without timestamps the age is the segment's, by the clock
    untimed = segment(tmp_path, base=100, clock=lambda: clock[0])
    append(untimed, batch(100, ts=-1))
    assert untimed.rolling_based_timestamp == -1
    assert not untimed.should_roll(10, -1, 101, 10**6, 60_000)
    clock[0] += 60_001
    assert untimed.should_roll(10, -1, 101, 10**6, 60_000)


def test_change_suffix_and_delete(tmp_path):
    seg = segment(tmp_path, base=5)
    append(seg, batch(5))
    seg.change_suffix(".deleted")
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000005.index.deleted",
        "00000000000000000005.log.deleted",
        "00000000000000000005.timeindex.deleted",
    ]
    assert seg.read(5, 100).slice.read()[:8] == (5).to_bytes(8, "big")  # open handles follow
    seg.delete()
    assert os.listdir(tmp_path) == []


def test_a_zeroed_one_entry_time_index_is_caught_by_its_last_entry(tmp_path, caplog):
    """A zeroed file of one entry has no all-zero tail to give it away; its entry names a
    timestamp (0) that the batch at its offset does not carry."""
    seg = segment(tmp_path)
    append(seg, batch(0, n=3, ts=MS))
    seg.close()
    assert time_index_file_entries(seg.time_index_path) == [(MS + 2, 2)]
    Path(seg.time_index_path).write_bytes(bytes(12))
    again = reopen(seg)
    with caplog.at_level(logging.WARNING):
        assert again.find_offset_by_timestamp(MS + 1, 0) == (MS + 1, 1)
    assert "is not the max timestamp of its batch" in caplog.text
    again.close()
    assert time_index_file_entries(seg.time_index_path) == [(MS + 2, 2)]  # rebuilt, trimmed


def test_a_lookup_by_time_through_the_next_batchs_span_checks_the_entrys_batch(tmp_path, caplog):
    """The one-read path (the batch after the entry's lies between the next two offset
    index entries) still checks the entry against its batch's max timestamp: an entry
    whose timestamp is below it (damaged, still in order) would skip that batch's records."""
    seg = segment(tmp_path, index_interval_bytes=0)
    for base in range(0, 15, 3):
        append(seg, batch(base, n=3, ts=MS + base))
    seg.close()
    entries = time_index_file_entries(seg.time_index_path)
    assert entries[:3] == [(MS + 5, 5), (MS + 8, 8), (MS + 11, 11)]
    with open(seg.time_index_path, "r+b") as f:
        f.write((MS + 4).to_bytes(8, "big"))  # the entry for offset 5 says MS + 4
    again = reopen(seg)
    with caplog.at_level(logging.WARNING):
        assert again.find_offset_by_timestamp(MS + 5, 0) == (MS + 5, 5)
    assert "is not the max timestamp of its batch" in caplog.text
    assert again.find_offset_by_timestamp(MS + 9, 0) == (MS + 9, 9)
    again.close()


def test_recovery_leaves_trimmed_indexes_with_the_max_timestamp_entry(tmp_path):
    seg = segment(tmp_path, index_interval_bytes=0, max_index_size=4000)
    for i in range(5):
        append(seg, batch(i * 2, n=2, ts=MS + 10 - i))  # timestamps fall: only the first is a max
    seg.flush()
    again = reopen(seg)
    assert again.recover() == 0
    assert os.path.getsize(seg.index_path) == 4 * 8
    assert time_index_file_entries(seg.time_index_path) == [(MS + 11, 1)]
