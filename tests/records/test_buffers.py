"""The reader works over bytes, bytearray, memoryview and mmap without copying: a batch is a view
of the buffer it came from, and the broker's in-place edits land in that buffer."""

from __future__ import annotations

import mmap

import pytest

from seglog.records import BatchIterator, LegacyBatch, RecordBatch, TimestampType

from ..conftest import KAFKA_DATA

SEGMENT = KAFKA_DATA / "golden" / "v2_mixed_codecs_segment.bin"  # 5 batches, mixed codecs
LEGACY = KAFKA_DATA / "golden" / "v1_gzip.stored.bin"


def _decoded(batches):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for b in batches for r in b.records()]


def test_batches_over_an_mmap_are_views_of_the_map(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(SEGMENT.read_bytes() + LEGACY.read_bytes())
    expected = _decoded(BatchIterator(path.read_bytes()))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        scan = BatchIterator(mapped)
        batches = list(scan)
        assert [type(b) for b in batches] == [RecordBatch] * 5 + [LegacyBatch]
        assert all(b.buffer.obj is mapped for b in batches)  # slices of the map, no copy
        for b in batches:
            b.validate()
        assert _decoded(batches) == expected and scan.remaining == 0
        for b in batches:  # the map closes only when no view of it is left
            b.buffer.release()
        scan.view.release()


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_batches_are_views_of_the_buffer_given(kind):
    data = kind(SEGMENT.read_bytes())
    owner = data.obj if isinstance(data, memoryview) else data
    batches = list(BatchIterator(data))
    assert len(batches) == 5 and all(b.buffer.obj is owner for b in batches)
    assert [b.position for b in batches] == [0, *[b.position + b.size_in_bytes for b in batches[:-1]]]


def test_in_place_edits_write_through_to_the_buffer():
    data = bytearray(SEGMENT.read_bytes())
    before = _decoded(BatchIterator(bytes(data)))
    for batch in BatchIterator(data):
        assert isinstance(batch, RecordBatch)
        batch.set_base_offset(batch.base_offset + 1000)
        batch.set_partition_leader_epoch(7)
        batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, 1_800_000_000_000)
    again = list(BatchIterator(bytes(data)))  # a fresh read of the same bytearray sees every edit
    for batch in again:
        batch.validate()
        assert batch.partition_leader_epoch == 7 and batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(o, ts) for o, ts, *_ in _decoded(again)] == [(o + 1000, 1_800_000_000_000) for o, *_ in before]
    assert [rest for _, _, *rest in _decoded(again)] == [rest for _, _, *rest in before]


def test_a_read_only_buffer_refuses_edits():
    (batch, *_) = BatchIterator(SEGMENT.read_bytes())
    with pytest.raises(TypeError):
        batch.set_base_offset(5)
