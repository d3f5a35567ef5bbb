"""Lookups by offset in segments of batches larger than index.interval.bytes (every
batch but the first gets an offset index entry): the batch the entry above names is
taken in one read of its header when it holds the offset, and taken on trust never
(a damaged entry, a gap a compaction left, smaller batches between)."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

from seglog.records import BatchIterator, build_batch
from seglog.storage import fileio
from seglog.storage.segment import LogSegment

from .conftest import MS, check_log, crash, index_file_entries, new_log, open_logs, records

RECORD_BYTES = 1500  # four records a batch: some 6 KiB, past a scan's first read (4 KiB)


def large_segment(tmp_path: Path, bases: list[int]) -> LogSegment:
    seg = LogSegment.create(str(tmp_path), 0, index_interval_bytes=4096, max_index_size=4096)
    for base in bases:
        data = build_batch(records(4, start=base, ts=MS + base, size=RECORD_BYTES), base_offset=base)
        head = next(BatchIterator(data))
        seg.append(data, [(0, len(data), head.last_offset, head.max_timestamp)])
    return seg


def holder(seg: LogSegment, offset: int) -> tuple[int, int] | None:
    """(position, last offset) of the first batch whose last offset >= ``offset``, from the bytes."""
    batches = BatchIterator(Path(seg.log_path).read_bytes())
    return next(((b.position, b.last_offset) for b in batches if b.last_offset >= offset), None)


@pytest.fixture
def preads(monkeypatch) -> list[int]:
    """The sizes of the reads made of files, as they are made."""
    made: list[int] = []
    real = os.pread

    def counted(fd: int, size: int, position: int) -> bytes:
        made.append(size)
        return real(fd, size, position)

    monkeypatch.setattr(fileio.os, "pread", counted)
    return made


def test_a_lookup_by_offset_reads_one_header_among_large_batches(tmp_path, preads):
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    assert seg.offset_index.entries == 9  # every batch but the first
    for target in range(40):
        preads.clear()
        header = seg.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(seg, target)
        assert header.base_offset <= target
        # below the first entry (offset 7) the scan starts at the segment's start, whose
        # header is kept once read: then in the first batch (0..3) no read, in the second
        # (4..6) one, past the first batch
        assert len(preads) == (0 if 1 <= target < 4 else 1), (target, preads)
    assert seg.translate_offset(40) is None
    seg.close()


def test_the_first_batch_header_kept_goes_with_a_truncation(tmp_path):
    """The first batch's header, kept for lookups below the first index entry, is not
    trusted past a truncation that cut the batch: new batches of other sizes and offsets
    written there are found from their own bytes, by offset and by time."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    assert seg.translate_offset(2) is not None and seg.find_offset_by_timestamp(MS + 5, 0) == (MS + 5, 5)
    rewrite_from_zero(seg)
    for target in range(11):
        header = seg.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(seg, target), target
        assert seg.find_offset_by_timestamp(MS + 100 + target, 0) == (MS + 100 + target, target)
    assert seg.translate_offset(11) is None
    seg.close()


def test_offsets_in_a_gap_between_large_batches_find_the_batch_after_it(tmp_path):
    seg = large_segment(tmp_path, [0, 10, 14, 30, 34])  # gaps 4..9 and 18..29, as a compaction leaves
    for target in range(38):
        header = seg.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(seg, target), target
    assert seg.translate_offset(38) is None
    seg.close()


def test_an_entry_naming_another_large_batch_is_not_taken(tmp_path):
    """The entry of the batch holding offsets 12..15 damaged to name the next batch's
    start (in order, inside the log: what loading checks): lookups below it, which look
    at the entry above first, and at it, find the right batches."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    seg.close()
    positions = [b.position for b in BatchIterator(Path(seg.log_path).read_bytes())]
    with open(seg.index_path, "r+b") as f:
        data = f.read()
        slot = next(i for i in range(len(data) // 8) if struct.unpack_from(">i", data, 8 * i)[0] == 15)
        f.seek(8 * slot + 4)
        f.write(struct.pack(">i", positions[4]))
    again = LogSegment(seg.dir, 0, index_interval_bytes=4096, max_index_size=4096)
    for target in range(40):
        header = again.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(again, target), target
    again.close()


def test_a_damaged_first_entry_is_not_taken_below_it(tmp_path):
    """The first entry (the second batch's, offsets 4..7) damaged to say offset 6: a lookup
    below it, which takes the batch after the first in one header read when the entry
    names it, finds that batch ends elsewhere and scans from the first batch instead."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    seg.close()
    with open(seg.index_path, "r+b") as f:
        f.write(struct.pack(">i", 6))
    again = LogSegment(seg.dir, 0, index_interval_bytes=4096, max_index_size=4096)
    assert again.offset_index.lookup_position(5)[2] == 6  # the damaged entry is loaded, not rebuilt
    for target in range(40):
        header = again.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(again, target), target
    again.close()


def test_a_time_entry_found_right_is_not_read_again(tmp_path, preads):
    """The one-read path of a lookup by time reads the entry's batch header once; later
    lookups through the entry read only the batch they search."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    target = MS + 13  # in the batch of offsets 12..15, after the entry of the batch 8..11
    assert seg.find_offset_by_timestamp(target, 0) == (target, 13)
    assert len(preads) == 2  # the entry's batch header, the batch after it
    preads.clear()
    assert seg.find_offset_by_timestamp(target + 1, 0) == (target + 1, 14)
    assert len(preads) == 1 and preads[0] > 4096
    seg.close()


def first_at_or_after(seg: LogSegment, timestamp: int, start: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record at or after ``timestamp`` and ``start``, from the bytes."""
    for batch in BatchIterator(Path(seg.log_path).read_bytes()):
        for _key, _value, ts, _headers, offset in batch.records():
            if ts is not None and ts >= timestamp and offset >= start:
                return ts, offset
    return None


@pytest.mark.parametrize("bases", [list(range(0, 40, 4)), [0, 10, 14, 30, 34]], ids=["whole", "gaps"])
def test_a_lookup_by_time_among_large_batches_reads_the_batch_it_searches(tmp_path, preads, bases):
    """Below the first time entry the first batch (alone before the first offset entry:
    the first batch gets none) is read whole in one read, and past it the batch the first
    entry names in one more (in that one only, once the first batch's header is kept);
    the last batch, which no entry follows, up to the segment's
    end in one. Every target, from every starting offset, finds what the bytes hold (and
    in the gaps a compaction leaves, the record after)."""
    seg = large_segment(tmp_path, bases)
    end = bases[-1] + 4
    for start in (0, 5, 13):
        for target in range(end + 1):
            expected = first_at_or_after(seg, MS + target, start)
            assert seg.find_offset_by_timestamp(MS + target, start) == expected, (start, target)
    if bases[1] == 4:  # whole batches: each time entry checked by now, the reads of each lookup
        entry_timestamps = {base + 3 for base in bases[1:]}  # the time index's: such a lookup scans
        for target in (t for t in range(end) if t not in entry_timestamps):
            preads.clear()
            assert seg.find_offset_by_timestamp(MS + target, 0) == (MS + target, target)
            # (the second batch's too: the first batch's header, kept, says to pass it)
            assert len(preads) == 1, (target, preads)
            assert min(preads) > 4096  # each a whole batch, no header read alone
    seg.close()


def test_a_damaged_time_entry_is_never_marked_checked(tmp_path, caplog):
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    seg.close()
    with open(seg.time_index_path, "r+b") as f:  # the entry of the batch 8..11 says MS + 10, not MS + 11
        data = f.read()
        slot = next(i for i in range(len(data) // 12) if struct.unpack_from(">qi", data, 12 * i)[1] == 11)
        f.seek(12 * slot)
        f.write(struct.pack(">q", MS + 10))
    again = LogSegment(seg.dir, 0, index_interval_bytes=4096, max_index_size=4096)
    for _ in range(2):
        with caplog.at_level(logging.WARNING):
            assert again.find_offset_by_timestamp(MS + 11, 0) == (MS + 11, 11)
        assert not again.time_index.checked(slot)
    assert "is not the max timestamp of its batch" in caplog.text
    again.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


SMALL_SEGMENTS = {"segment.bytes": 2500, "index.interval.bytes": 100}  # a few 700-byte batches a segment


def fill_small(log, batches: int = 150) -> None:
    for i in range(batches):
        log.append(records(5, start=5 * i, ts=MS + 5 * i, size=100))


def test_small_sealed_segments_hold_one_fd_each(tmp_path):
    """A small segment's indexes, full once trimmed at its roll, are copies, not maps (a
    map holds an fd): written in this process, or mapped on their first lookup."""
    before = open_fds()
    manager, log = new_log(tmp_path, config=SMALL_SEGMENTS)
    fill_small(log)
    segments = len(log.segments)
    assert segments > 30
    assert open_fds() - before < segments + 10  # a .log each; the active segment's maps
    manager.close()
    before = open_fds()
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        for offset in range(0, 750, 3):
            assert log.read(offset, 1).fetch_offset_metadata.message_offset == offset
            assert log.offset_for_timestamp(MS + offset) == (offset, MS + offset)
        assert open_fds() - before < segments + 10
        check_log(log)


def test_truncating_into_a_segment_whose_index_is_a_copy_zeroes_the_entries_cut(tmp_path):
    """A follower's truncation into a sealed small segment: its indexes map again, grown
    for entries, and the entries cut are zeros in the files, as a reopening after a crash
    (or a reader in another process) counts entries up to the first zero slot."""
    manager, log = new_log(tmp_path, config=SMALL_SEGMENTS)
    fill_small(log)
    middle = log.segments[len(log.segments) // 2]
    entries = middle.offset_index.entries
    assert entries >= 2
    cut = middle.offset_index.entry(1)[0] - 4  # from the batch of entry 1 on: entry 0 stays
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert log.active_segment is middle and middle.offset_index.entries == 1
    assert index_file_entries(middle.index_path)[1:] == []
    for i in range(20):  # the follower catches up
        log.append_as_follower(build_batch(records(5, start=cut + 5 * i, ts=MS), base_offset=cut + 5 * i))
    crash(manager)
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        check_log(log)
        assert [r.offset for r in log.records(cut - 3)][:8] == list(range(cut - 3, cut + 5))


def rewrite_from_zero(seg: LogSegment) -> None:
    """Cut ``seg`` to nothing and write other batches there: the first larger, then two smaller."""
    seg.truncate_to(0)
    for base, count in ((0, 6), (6, 2), (8, 3)):
        data = build_batch(records(count, start=base, ts=MS + 100 + base, size=RECORD_BYTES), base_offset=base)
        head = next(BatchIterator(data))
        seg.append(data, [(0, len(data), head.last_offset, head.max_timestamp)])


def test_a_first_batch_header_read_before_a_cut_is_not_kept_past_it(tmp_path, monkeypatch):
    """A reader whose read of the first batch's header races a truncation (the owner's
    writer cuts the segment between the reader's read and its keeping the header) keeps
    nothing the lookups after the cut take."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    real, raced = os.pread, []

    def cut_after_reading(fd: int, size: int, position: int) -> bytes:
        data = real(fd, size, position)
        if position == 0 and not raced:
            raced.append(True)
            rewrite_from_zero(seg)  # (its own reads come back here: raced already)
        return data

    monkeypatch.setattr(fileio.os, "pread", cut_after_reading)
    seg.translate_offset(2)  # answered from the bytes before the cut, as a racing reader is
    assert raced
    check_rewritten(seg)
    seg.close()


def test_a_first_batch_header_read_during_a_cut_is_not_kept_past_it(tmp_path, monkeypatch):
    """As above, the reader's read falling inside the cut: after the writer began it, before
    the file is cut."""
    seg = large_segment(tmp_path, list(range(0, 40, 4)))
    real, raced = os.ftruncate, []

    def read_then_cut(fd: int, size: int) -> None:
        if not raced:
            raced.append(seg.translate_offset(2))  # the bytes before the cut
        real(fd, size)

    monkeypatch.setattr(fileio.os, "ftruncate", read_then_cut)
    rewrite_from_zero(seg)
    assert raced and raced[0] is not None and raced[0].last_offset == 3
    check_rewritten(seg)
    seg.close()


def check_rewritten(seg: LogSegment) -> None:
    """``seg``'s lookups find the batches ``rewrite_from_zero`` wrote."""
    for target in range(11):
        header = seg.translate_offset(target)
        assert header is not None and (header.position, header.last_offset) == holder(seg, target), target
        assert seg.find_offset_by_timestamp(MS + 100 + target, 0) == (MS + 100 + target, target)


def test_reads_leave_the_access_time_alone(tmp_path):
    """A segment's reads write no access time to its inode (O_NOATIME: the owner's files)."""
    seg = large_segment(tmp_path, [0, 4, 8])
    seg.close()
    long_ago = 1_000_000_000  # before the mtime: a read would set the atime (relatime)
    os.utime(seg.log_path, (long_ago, os.stat(seg.log_path).st_mtime))
    again = LogSegment(seg.dir, 0, index_interval_bytes=4096, max_index_size=4096)
    assert again.read(5, 1 << 20) is not None and again.find_offset_by_timestamp(MS + 9, 0) == (MS + 9, 9)
    assert os.stat(seg.log_path).st_atime == long_ago
    again.close()
