"""The header walks of the storage hot paths (append validation, recovery, lookups)
against the slow path they shortcut: ``BatchIterator.headers`` and ``check_batch``
against iterating batch objects and ``validate``; index lookups and segment scans
against a brute-force search of the segment's bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.records import BatchIterator, Record, RecordBatch, build_batch, build_message_set
from seglog.records.batch import check_batch
from seglog.storage import fileio
from seglog.storage.segment import LogSegment

from .conftest import MS, records


def walk_objects(buffer: bytes, **kw) -> tuple[list[tuple[int, int, tuple | None]], int]:
    it = BatchIterator(buffer, **kw)
    out = []
    for b in it:
        b.validate()
        head = b.header() if isinstance(b, RecordBatch) else None
        out.append((b.position, b.position + b.size_in_bytes, head))
    return out, it.position


def walk_headers(buffer: bytes, **kw) -> tuple[list[tuple[int, int, tuple | None]], int]:
    it = BatchIterator(buffer, **kw)
    view = it.view
    out = []
    for start, end, head in it.headers():
        if head is None:
            next(BatchIterator(view[start:end])).validate()
        else:
            check_batch(view, start, end, head, start)
        out.append((start, end, head))
    return out, it.position


pieces = st.one_of(
    st.builds(lambda n, size: bytes(build_batch(records(n, size=size))), st.integers(1, 5), st.integers(0, 300)),
    st.builds(lambda n: build_message_set(records(n), magic=1), st.integers(1, 3)),
    st.builds(lambda n: build_message_set(records(n), magic=0), st.integers(1, 2)),
)


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(pieces, max_size=6), cut=st.integers(0, 80))
def test_headers_walk_as_iterating_does(parts, cut):
    """Same batches, same end position, same stop at a partial batch at the end."""
    buffer = b"".join(parts)
    buffer = buffer[: max(0, len(buffer) - cut)]
    assert walk_headers(buffer) == walk_objects(buffer)


@pytest.mark.parametrize(
    "damage",
    ["crc", "magic", "length_short", "length_huge", "count", "delta", "too_large"],
)
def test_headers_and_check_batch_raise_as_validate_does(damage):
    good = build_batch(records(3))
    bad = bytearray(good) + build_batch(records(1))
    kw = {}
    if damage == "crc":
        bad[40] ^= 1
    elif damage == "magic":
        bad[16] = 7
    elif damage == "length_short":
        bad[8:12] = (10).to_bytes(4, "big")
    elif damage == "length_huge":
        bad[8:12] = (10**6).to_bytes(4, "big")  # past the end: a partial batch, not an error
    elif damage == "count":
        struct.pack_into(">i", bad, 57, -2)
    elif damage == "delta":
        struct.pack_into(">i", bad, 23, -3)
    elif damage == "too_large":
        kw["max_batch_size"] = len(good) - 1
    if damage in ("count", "delta"):  # inside the CRC: fix it, so the field check is what fails
        struct.pack_into(">I", bad, 17, crc32c(memoryview(bad)[21 : len(good)]))
    buffer = bytes(bad)
    try:
        expected = walk_objects(buffer, **kw)
    except CorruptRecordError as e:
        with pytest.raises(CorruptRecordError) as caught:
            walk_headers(buffer, **kw)
        assert str(caught.value) == str(e)
    else:
        assert walk_headers(buffer, **kw) == expected


# --- lookups through the index, against the segment's bytes -----------------------------------------


def brute_force(seg: LogSegment) -> list[tuple[int, int, int, int, list[Record]]]:
    """(position, base offset, last offset, max timestamp, records) of every batch, from the file."""
    data = Path(seg.log_path).read_bytes()
    return [(b.position, b.base_offset, b.last_offset, b.max_timestamp, b.records()) for b in BatchIterator(data)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3000)), min_size=1, max_size=25),
    interval=st.sampled_from([0, 100, 4096, 20_000]),
    jumps=st.lists(st.integers(0, 3), min_size=25, max_size=25),
)
def test_translate_and_timestamp_lookups_find_what_a_full_scan_finds(tmp_path_factory, sizes, interval, jumps):
    """Batches smaller and larger than index.interval.bytes (one indexed batch in many,
    or every one), offsets with gaps, timestamps out of order within a batch."""
    seg = LogSegment.create(str(tmp_path_factory.mktemp("seg")), 100, index_interval_bytes=interval)
    offset, ts = 100, MS
    for (n, size), jump in zip(sizes, jumps, strict=False):
        rows = [Record(b"k", b"v" * size, ts + (7 * i) % 5) for i in range(n)]
        data = build_batch(rows, base_offset=offset)
        head = RecordBatch(data)
        seg.append(data, [(0, len(data), head.last_offset, head.max_timestamp)])
        offset, ts = head.last_offset + 1 + jump, ts + 3
    batches = brute_force(seg)
    for target in range(99, offset + 1):
        holder = next((b for b in batches if b[2] >= target), None)
        header = seg.translate_offset(target)
        assert (header.position if header else None) == (holder[0] if holder else None)
        fetch = seg.read(target, 1)
        assert (fetch.slice.position if fetch else None) == (holder[0] if holder else None)
    for target in range(MS - 1, ts + 6):
        found = next(((r.timestamp, r.offset) for b in batches for r in b[4] if r.timestamp >= target), None)
        assert seg.find_offset_by_timestamp(target, 0) == found
    seg.close()


def test_lookup_position_names_the_entry_and_the_next(tmp_path):
    seg = LogSegment.create(str(tmp_path), 10, index_interval_bytes=0)
    assert seg.offset_index.lookup_position(10) == (-1, 0, -1, -1)  # empty
    positions = []
    for i in range(4):
        data = build_batch(records(2, start=10 + 2 * i), base_offset=10 + 2 * i)
        positions.append(seg.size)
        seg.append(data, [(0, len(data), 11 + 2 * i, MS)])
    # index.interval.bytes 0: every batch but the first gets an entry (its last offset, its start)
    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert entries == [(13, positions[1]), (15, positions[2]), (17, positions[3])]
    assert seg.offset_index.lookup_position(12) == (-1, 0, 13, positions[1])
    assert seg.offset_index.lookup_position(13) == (13, positions[1], 15, positions[2])
    assert seg.offset_index.lookup_position(16) == (15, positions[2], 17, positions[3])
    assert seg.offset_index.lookup_position(99) == (17, positions[3], -1, -1)


def test_a_short_write_is_completed(tmp_path, monkeypatch):
    handle = fileio.open_file(str(tmp_path / "f"), create=True)
    real = fileio.os.pwrite
    calls = []

    def short(fd, data, position):
        calls.append(len(data))
        return real(fd, memoryview(data)[:7], position)  # at most 7 bytes a call

    monkeypatch.setattr(fileio.os, "pwrite", short)
    handle.pwrite(b"0123456789abcdefghij", 3)
    handle.pwrite(memoryview(b"XYZ"), 0)
    monkeypatch.undo()
    assert handle.pread(100, 0) == b"XYZ0123456789abcdefghij"
    assert calls == [20, 13, 6, 3]
    handle.close()
