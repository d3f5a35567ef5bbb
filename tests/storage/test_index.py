"""OffsetIndex and TimeIndex: byte format, append rules, lookups, truncation, sizing."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError
from seglog.storage.index import OffsetIndex, TimeIndex

from .conftest import index_file_entries, time_index_file_entries


def offset_index(tmp_path, base=100, size=4096, name="x.index") -> OffsetIndex:
    return OffsetIndex(str(tmp_path / name), base, size)


def time_index(tmp_path, base=100, size=4096, name="x.timeindex") -> TimeIndex:
    return TimeIndex(str(tmp_path / name), base, size)


# --- the offset index ---------------------------------------------------------------------


def test_offset_index_file_format_is_relative_offset_then_position(tmp_path):
    index = offset_index(tmp_path, base=1000)
    index.append(1005, 0)
    index.append(1010, 4242)
    index.close()
    data = (tmp_path / "x.index").read_bytes()
    assert data == struct.pack(">iiii", 5, 0, 10, 4242)


def test_new_index_is_preallocated_rounded_down_to_whole_entries(tmp_path):
    index = offset_index(tmp_path, size=1001)
    assert os.path.getsize(index.path) == 1000
    assert index.max_entries == 125 and index.entries == 0
    tindex = time_index(tmp_path, size=1001)
    assert os.path.getsize(tindex.path) == 996  # 83 entries of 12 bytes


def test_offset_index_append_rules(tmp_path):
    index = offset_index(tmp_path, base=100, size=24)
    index.append(100, 0)  # the base offset itself is a legal entry
    with pytest.raises(CorruptIndexError, match="must increase"):
        index.append(100, 10)
    with pytest.raises(CorruptIndexError, match="must increase"):
        index.append(99, 10)
    index.append(105, 10)
    index.append(200, 20)
    assert index.is_full
    with pytest.raises(CorruptIndexError, match="full"):
        index.append(300, 30)
    assert index.entries == 3


def test_offset_index_rejects_offsets_that_do_not_fit_in_32_bits(tmp_path):
    index = offset_index(tmp_path, base=10)
    assert index.can_append_offset(10 + 0x7FFFFFFF)
    assert not index.can_append_offset(10 + 0x80000000)
    assert not index.can_append_offset(9)
    with pytest.raises(CorruptIndexError, match="does not fit"):
        index.append(10 + 0x80000000, 0)
    with pytest.raises(CorruptIndexError, match="does not fit"):
        index.append(5, 0)
    index.append(10 + 0x7FFFFFFF, 7)
    assert index.entry(0) == (10 + 0x7FFFFFFF, 7)


def test_offset_index_takes_many_entries_in_one_write_or_none(tmp_path):
    index = offset_index(tmp_path, base=100, size=40)  # 5 slots
    index.append_entries([(100, 0), (103, 10), (107, 20)])
    for bad, fault in [
        ([(108, 30), (108, 40)], "must increase"),
        ([(106, 30)], "must increase"),
        ([(110, 30), (111, 40), (112, 50)], "full"),
        ([(110, 30), (100 + 0x80000000, 40)], "does not fit"),
    ]:
        with pytest.raises(CorruptIndexError, match=fault):
            index.append_entries(bad)
        assert index.entries == 3  # nothing of a refused write lands
    index.append_entries([(110, 30), (100 + 0x7FFFFFFF, 40)])
    assert [index.entry(i) for i in range(5)] == [(100, 0), (103, 10), (107, 20), (110, 30), (100 + 0x7FFFFFFF, 40)]
    assert index.is_full


def test_offset_index_lookup_is_largest_entry_at_or_below(tmp_path):
    index = offset_index(tmp_path, base=100)
    for offset, pos in [(104, 0), (110, 500), (120, 1000), (130, 1500)]:
        index.append(offset, pos)
    assert index.lookup(99) == (100, 0)  # below the base
    assert index.lookup(100) == (100, 0)
    assert index.lookup(103) == (100, 0)  # below the first entry
    assert index.lookup(104) == (104, 0)
    assert index.lookup(109) == (104, 0)
    assert index.lookup(110) == (110, 500)
    assert index.lookup(129) == (120, 1000)
    assert index.lookup(130) == (130, 1500)
    assert index.lookup(10**12) == (130, 1500)


def test_empty_offset_index_lookup_answers_base_offset_and_position_zero(tmp_path):
    index = offset_index(tmp_path, base=7)
    assert index.lookup(7) == (7, 0)
    assert index.lookup(1000) == (7, 0)
    assert index.last_offset == 7


@given(st.lists(st.integers(1, 50), min_size=1, max_size=3000), st.data())
@settings(max_examples=40, deadline=None)
def test_offset_index_lookup_matches_a_linear_scan_past_the_warm_section(tmp_path_factory, gaps, data):
    """3,000 entries span more than the 8 KiB warm section, so both halves are searched."""
    path = tmp_path_factory.mktemp("idx")
    index = OffsetIndex(str(path / "x.index"), 1000, 8 * 4000)
    entries, offset = [], 1000
    for n, gap in enumerate(gaps):
        offset += gap
        entries.append((offset, n * 10))
        index.append(offset, n * 10)
    for target in data.draw(st.lists(st.integers(990, offset + 60), min_size=20, max_size=20)):
        below = [e for e in entries if e[0] <= target]
        assert index.lookup(target) == (below[-1] if below else (1000, 0))


def test_offset_index_truncate_to(tmp_path):
    index = offset_index(tmp_path, base=0)
    for offset in (10, 20, 30, 40):
        index.append(offset, offset * 10)
    index.truncate_to(31)  # drops entries >= 31
    assert [index.entry(i) for i in range(index.entries)] == [(10, 100), (20, 200), (30, 300)]
    index.truncate_to(30)  # an exact hit goes too
    assert index.entries == 2
    index.append(25, 250)  # and appends go on after the new last entry
    assert index.lookup(27) == (25, 250)
    index.truncate_to(5)
    assert index.entries == 0 and index.lookup(50) == (0, 0)


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_a_truncated_preallocated_index_reopens_with_only_its_kept_entries(tmp_path, kind):
    """The active segment's index stays preallocated after a truncation: a reader in another
    process, counting entries up to the first all-zero slot, sees the kept entries only (the
    dropped slots were zeroed; left as they were, they came back as live entries)."""
    make = offset_index if kind == "offset" else time_index
    index = make(tmp_path, base=0)
    for n in range(1, 11):
        if kind == "offset":
            index.append(n * 10, n * 100)
        else:
            index.maybe_append(n * 1000, n * 10)
    index.truncate_to(41)
    index.flush()
    reader = type(index)(index.path, 0, 4096, writable=False)
    assert reader.entries == index.entries == 4
    assert [reader.entry(i) for i in range(4)] == [index.entry(i) for i in range(4)]


def test_trim_and_regrow(tmp_path):
    index = offset_index(tmp_path, base=0, size=800)
    index.append(3, 0)
    index.append(9, 77)
    index.trim_to_valid_size()
    assert os.path.getsize(index.path) == 16 and index.is_full
    index.resize(800)
    assert os.path.getsize(index.path) == 800 and not index.is_full
    assert index.lookup(100) == (9, 77)
    index.append(12, 99)
    index.close()
    assert index_file_entries(index.path) == [(3, 0), (9, 77), (12, 99)]
    assert os.path.getsize(index.path) == 24


def test_reopening_a_preallocated_index_finds_its_entries_before_the_zero_tail(tmp_path):
    """A crash leaves the file at its preallocated size: the written entries are the
    ones before the first all-zero slot (slot 0 may be all zeros: base offset at 0)."""
    index = offset_index(tmp_path, base=0, size=8000)
    index.append(0, 0)
    for n in range(1, 300):
        index.append(n * 3, n * 50)
    index.flush()
    del index
    again = offset_index(tmp_path, base=0, size=8000)
    assert os.path.getsize(again.path) == 8000
    assert again.entries == 300
    assert again.lookup(4) == (3, 50)


def test_sanity_check_and_verify(tmp_path):
    path = tmp_path / "y.index"
    path.write_bytes(struct.pack(">ii", 5, 0) + b"\0\0\0")  # 11 bytes: not whole entries
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(str(path), 0, 4096).sanity_check()
    path.write_bytes(struct.pack(">iiii", 5, 0, 3, 10))  # offsets go backwards
    index = OffsetIndex(str(path), 0, 4096)
    index.sanity_check()  # the cheap check only looks at the last entry
    with pytest.raises(CorruptIndexError, match="out of order"):
        index.verify(100)
    path.write_bytes(struct.pack(">iiii", 5, 0, 8, 500))
    index = OffsetIndex(str(path), 0, 4096)
    index.verify(501)
    with pytest.raises(CorruptIndexError, match="past the log"):
        index.verify(500)
    path.write_bytes(struct.pack(">ii", -5, 0))
    with pytest.raises(CorruptIndexError, match="below the base"):
        OffsetIndex(str(path), 0, 4096).sanity_check()


def test_read_only_index_reads_a_copy(tmp_path):
    index = offset_index(tmp_path, base=0)
    index.append(5, 10)
    index.close()
    reader = OffsetIndex(index.path, 0, 4096, writable=False)
    assert reader.entries == 1 and reader.lookup(6) == (5, 10)
    os.truncate(index.path, 0)  # a writer trims it under the reader: no SIGBUS
    assert reader.lookup(6) == (5, 10)
    with pytest.raises(CorruptIndexError, match="missing"):
        OffsetIndex(str(tmp_path / "none.index"), 0, 4096, writable=False)


# --- the time index -------------------------------------------------------------------------


def test_time_index_file_format_is_timestamp_then_relative_offset(tmp_path):
    index = time_index(tmp_path, base=50)
    index.maybe_append(1_700_000_000_000, 55)
    index.close()
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qi", 1_700_000_000_000, 5)


def test_time_index_appends_only_larger_timestamps(tmp_path):
    index = time_index(tmp_path, base=0)
    index.maybe_append(100, 1)
    index.maybe_append(100, 2)  # not larger: ignored
    index.maybe_append(90, 3)  # smaller: ignored
    index.maybe_append(150, 3)
    assert [index.entry(i) for i in range(index.entries)] == [(100, 1), (150, 3)]
    with pytest.raises(CorruptIndexError, match="appended after"):
        index.maybe_append(200, 2)  # a larger timestamp at a smaller offset


def test_time_index_keeps_its_last_slot_for_the_roll_entry(tmp_path):
    index = time_index(tmp_path, base=0, size=36)  # 3 slots
    index.maybe_append(10, 1)
    index.maybe_append(20, 2)
    assert index.is_full  # max_entries - 1 are used
    with pytest.raises(CorruptIndexError, match="full"):
        index.maybe_append(30, 3)
    index.maybe_append(30, 3, skip_full_check=True)  # the entry written on roll
    assert index.entries == 3
    with pytest.raises(CorruptIndexError, match="full"):
        index.maybe_append(40, 4, skip_full_check=True)


def test_time_index_takes_many_entries_in_one_write_or_none(tmp_path):
    index = time_index(tmp_path, base=100, size=60)  # 5 slots, the last one kept for the roll entry
    index.append_entries([(1000, 100), (1005, 100), (1010, 104)])
    for bad in ([(1010, 105)], [(1020, 103)], [(1020, 105), (1030, 106)]):  # not later, offset back, no room
        with pytest.raises(CorruptIndexError):
            index.append_entries(bad)
        assert index.entries == 3
    index.append_entries([(1020, 105)])
    assert index.is_full
    index.append_entries([(1030, 106)], skip_full_check=True)  # the roll entry
    assert [index.entry(i) for i in range(5)] == [(1000, 100), (1005, 100), (1010, 104), (1020, 105), (1030, 106)]


def test_time_index_lookup(tmp_path):
    index = time_index(tmp_path, base=1000)
    for ts, offset in [(100, 1000), (200, 1010), (300, 1010), (400, 1040)]:
        index.maybe_append(ts, offset)
    assert index.lookup(99) == (-1, 1000, -1)  # below the first: the base offset
    assert index.lookup(100) == (100, 1000, 0)
    assert index.lookup(250) == (200, 1010, 1)
    assert index.lookup(10**15) == (400, 1040, 3)
    assert time_index(tmp_path, name="empty.timeindex").lookup(5) == (-1, 100, -1)


def test_time_index_marks_of_checked_entries_go_with_the_entries_truncated(tmp_path):
    index = time_index(tmp_path, base=0)
    for ts, offset in [(100, 0), (200, 10), (300, 20), (400, 40)]:
        index.maybe_append(ts, offset)
    assert not any(index.checked(slot) for slot in range(5))
    for slot in (1, 3, 200):  # past a first allocation of marks
        index.mark_checked(slot)
    assert [slot for slot in range(300) if index.checked(slot)] == [1, 3, 200]
    index.truncate_to(20)  # drops the entries from slot 2 on, and their marks
    assert [slot for slot in range(300) if index.checked(slot)] == [1]
    index.maybe_append(500, 30)  # slot 2 again, a new entry
    assert not index.checked(2)


def test_time_index_truncate_to(tmp_path):
    index = time_index(tmp_path, base=0)
    for ts, offset in [(100, 0), (200, 10), (300, 10), (400, 40)]:
        index.maybe_append(ts, offset)
    index.truncate_to(40)
    assert index.last_entry == (300, 10)
    index.truncate_to(10)
    assert index.last_entry == (100, 0)
    index.truncate_to(0)
    assert index.entries == 0 and index.last_entry == (-1, 0)


def test_time_index_verify(tmp_path):
    path = tmp_path / "z.timeindex"
    path.write_bytes(struct.pack(">qiqi", 200, 5, 100, 6))  # timestamps go backwards
    with pytest.raises(CorruptIndexError):
        TimeIndex(str(path), 0, 4096).verify()
    path.write_bytes(struct.pack(">qiqi", 100, 5, 200, 4))  # offsets go backwards
    index = TimeIndex(str(path), 0, 4096)
    index.sanity_check()
    with pytest.raises(CorruptIndexError, match="out of order"):
        index.verify()
    path.write_bytes(struct.pack(">qiqi", 100, 5, 200, 6))
    TimeIndex(str(path), 0, 4096).verify()
    path.write_bytes(struct.pack(">qi", 100, 5) + b"\0")
    with pytest.raises(CorruptIndexError, match="multiple"):
        TimeIndex(str(path), 0, 4096).sanity_check()


def test_time_index_trim_on_close(tmp_path):
    index = time_index(tmp_path, base=0, size=1200)
    index.maybe_append(5, 0)
    index.maybe_append(7, 3)
    index.close()
    assert time_index_file_entries(index.path) == [(5, 0), (7, 3)]
    assert os.path.getsize(index.path) == 24


def test_time_index_gets_no_entry_without_a_timestamp(tmp_path):
    """Kafka's empty time index has a last entry of (-1, base offset): messages without a
    timestamp (-1, from old producers) never make an entry."""
    index = time_index(tmp_path, base=0)
    index.maybe_append(-1, 0)
    assert index.entries == 0
    index.maybe_append(0, 1)
    assert index.entries == 1


# --- sparse files, blocks reserved ahead of the entries --------------------------------------

_MiB = 1024 * 1024


def _blocks_bytes(path) -> int:
    return os.stat(path).st_blocks * 512


def test_a_new_index_is_sparse_with_a_small_chunk_reserved(tmp_path):
    """Kafka's length (segment.index.bytes), but not its blocks: 10 MiB preallocated
    with real blocks for each index of each active segment took ~60 GB for a
    1,000-partition RF=3 topic on one machine."""
    index, tindex = offset_index(tmp_path, size=10 * _MiB), time_index(tmp_path, size=10 * _MiB)
    assert os.path.getsize(index.path) == 10 * _MiB and os.path.getsize(tindex.path) == 10 * _MiB // 12 * 12
    for i in (index, tindex):
        assert _blocks_bytes(i.path) <= 64 * 1024, i.path


def test_blocks_are_reserved_ahead_of_the_entries_as_they_grow(tmp_path):
    index = offset_index(tmp_path, base=0, size=10 * _MiB)
    for n in range(20_000):  # 160,000 bytes of entries
        index.append(n, n * 100)
        assert index.reserved >= (n + 1) * 8
    assert 160_000 <= _blocks_bytes(index.path) <= 2 * 160_000 + 64 * 1024
    index.close()
    assert os.path.getsize(index.path) == 160_000


def test_a_sparse_index_left_by_a_crash_reopens_with_its_entries(tmp_path):
    """A crash leaves the file at its full length, a reserved chunk of zeros after the
    entries and a hole after that: both read as the zero-filled tail of today."""
    index = offset_index(tmp_path, base=0, size=10 * _MiB)
    index.append(0, 0)
    for n in range(1, 3000):
        index.append(n * 3, n * 50)
    index.flush()
    del index  # no close: not trimmed
    again = offset_index(tmp_path, base=0, size=10 * _MiB)
    assert os.path.getsize(again.path) == 10 * _MiB and again.entries == 3000
    assert again.reserved <= 3000 * 8  # what was written; more is reserved before the next store
    again.append(9000, 150_000)
    assert again.lookup(8999) == (8997, 149_950) and again.reserved >= 3001 * 8


def _resident_pages(path: str) -> int:
    """Pages of the file in the page cache (mincore over a private map of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.path.getsize(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        pages = -(-size // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        address = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        assert libc.mincore(ctypes.c_void_p(address), size, vec) == 0, ctypes.get_errno()
        del address
        return sum(v & 1 for v in vec)


@pytest.mark.parametrize("make", [offset_index, time_index])
def test_an_entry_into_a_preallocated_index_faults_in_its_page_only(tmp_path, make):
    # the map of a preallocated index is random access: without the advice, the first
    # store faulted in the kernel's read-around window of the file's holes (read_ahead_kb:
    # 8 MiB on the project's VM, 2 ms of zero-filled pages before an append could go on)
    index = make(tmp_path, base=0, size=4 << 20)
    if isinstance(index, TimeIndex):
        index.maybe_append(1000, 5)
    else:
        index.append(5, 0)
    assert _resident_pages(index.path) <= 4
    index.close()
