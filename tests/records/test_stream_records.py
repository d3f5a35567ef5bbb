"""A compressed batch's records decoded as they are inflated (``stream_records``): the same records
as ``RecordBatch.records()``, memory bounded by a chunk, and the work of a damaged batch by its count."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from crc32c import crc32c

from seglog.errors import CorruptRecordError
from seglog.records import BatchIterator, Compression, Record, RecordBatch, TimestampType, build_batch
from seglog.records.batches import stream_records
from seglog.records.compression import compress

from ..conftest import KAFKA_DATA

CODECS = [c for c in Compression if c != Compression.NONE]
AT = 4096  # the batch's place in its file: faults name it


def _records(n: int, value_size: int = 30) -> list[Record]:
    return [
        Record(
            None if i % 5 == 0 else b"key%d" % i,
            None if i % 7 == 3 else bytes([i % 251]) * (value_size + i % 13),
            1_700_000_000_000 + i,
            [(f"h{i}", b"v"), ("n", None)] if i % 2 else [],
        )
        for i in range(n)
    ]


def _sealed(header_of: bytearray, section: bytes, codec: Compression, count: int) -> RecordBatch:
    """A batch with ``header_of``'s header around ``section`` compressed, claiming ``count`` records."""
    data = bytearray(header_of[:61]) + compress(codec, section)
    struct.pack_into(">h", data, 21, int(codec))
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return RecordBatch(data, AT)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("chunk", [1, 7, 100, 1 << 16])
def test_the_same_records_as_a_whole_decode(codec, chunk):
    records = [*_records(300), Record(b"big", bytes(200_000), 5, [])]  # one record larger than a chunk
    for timestamp_type in TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME:
        batch = RecordBatch(build_batch(records, base_offset=42, compression=codec, timestamp_type=timestamp_type))
        assert list(stream_records(batch, chunk)) == batch.records()


def test_the_compressed_batches_of_real_segments_and_captures():
    compared = set()
    for path in sorted(KAFKA_DATA.glob("**/*")):
        if path.suffix not in (".log", ".bin", ".checkpoint") or path.stat().st_size > 3_000_000:
            continue
        scan = BatchIterator(path.read_bytes())
        while True:
            try:
                batch = next(scan)
            except (StopIteration, CorruptRecordError):
                break
            if isinstance(batch, RecordBatch) and batch.attributes & 7 and batch.is_valid:
                assert list(stream_records(batch, 1000)) == batch.records(), (path, batch.position)
                compared.add(batch.compression)
    assert compared == set(CODECS)


def test_an_uncompressed_batch_is_its_records():
    batch = RecordBatch(build_batch(_records(10)))
    assert list(stream_records(batch)) == batch.records()


@pytest.mark.parametrize("codec", CODECS)
def test_memory_is_a_chunk_not_the_inflated_batch(codec):
    # 16 MiB of zero-valued records in a few KiB compressed (a "decompression bomb")
    batch = RecordBatch(build_batch([(None, bytes(4096))] * 4096, compression=codec))
    assert batch.size_in_bytes < 1 << 20
    tracemalloc.start()
    try:
        seen = sum(1 for _ in stream_records(batch))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 4096
    assert peak < 2 << 20, peak  # a chunk, the records decoded from it, and an lz4 block: not 16 MiB


@pytest.mark.parametrize("codec", CODECS)
def test_bytes_past_the_count_end_the_batch_without_inflating_the_rest(codec):
    whole = build_batch([(None, bytes(4096))] * 8192)  # 32 MiB of records
    batch = _sealed(whole, bytes(whole[61:]), codec, count=1)
    tracemalloc.start()
    try:
        stream = stream_records(batch)
        first = next(stream)
        with pytest.raises(
            CorruptRecordError, match=r"^record count 1 disagrees with the batch: (more than )?\d+ bytes"
        ):
            next(stream)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first.value == bytes(4096)
    assert peak < 8 << 20, peak  # a piece or two (lz4's blocks are its largest), not 32 MiB


def test_the_exact_count_of_bytes_past_the_count_when_the_stream_has_ended():
    whole = build_batch(_records(5))
    batch = _sealed(whole, bytes(whole[61:]), Compression.GZIP, count=3)
    section = RecordBatch(whole).records_section()
    rest = len(section) - sum(_record_sizes(section)[:3])
    with pytest.raises(CorruptRecordError, match=f"^record count 3 disagrees with the batch: {rest} bytes follow"):
        list(stream_records(batch))


def _record_sizes(section: bytes) -> list[int]:
    from seglog.records.varint import decode_varint

    sizes, pos = [], 0
    while pos < len(section):
        length, after = decode_varint(section, pos)
        sizes.append(after + length - pos)
        pos = after + length
    return sizes


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_faults_are_worded_and_placed_as_a_whole_decode_words_them(codec, chunk):
    whole = build_batch(_records(40), base_offset=100)
    section = bytearray(RecordBatch(whole).records_section())
    sizes = _record_sizes(bytes(section))
    tenth = sum(sizes[:10])
    cases = {
        "a record cut short": (section[: tenth + 5], 40),
        "a length below a record's least": (section[:tenth] + b"\x02" + section[tenth + 1 :], 40),
        "a length varint too long": (section[:tenth] + b"\xff" * 6 + section[tenth:], 40),
        "a key length out of range": (section[:tenth] + _bad_key(section[tenth : tenth + sizes[10]]), 40),
        "fewer records than the count": (section, 41),
    }
    for name, (damaged, count) in cases.items():
        batch = _sealed(whole, bytes(damaged), codec, count)
        with pytest.raises(CorruptRecordError) as whole_decode:
            batch.records()
        streamed = []
        with pytest.raises(CorruptRecordError) as stream:
            streamed.extend(stream_records(batch, chunk))
        assert stream.value.message == whole_decode.value.message, name
        assert (stream.value.position, stream.value.offset) == (AT, None), name
        assert streamed == RecordBatch(whole).records()[: len(streamed)], name  # the records before the fault


def _bad_key(record: bytes) -> bytes:
    """The record with its key length (after the length, attributes and two one-byte deltas) made huge."""
    from seglog.records.varint import decode_varint, encode_varint

    _, after = decode_varint(record, 0)
    at = after + 1
    _, at = decode_varint(record, at)
    _, at = decode_varint(record, at)
    _, key_end = decode_varint(record, at)
    return record[:at] + encode_varint(1 << 20) + record[key_end:]


def test_a_codec_fault_names_the_batch_and_its_offset():
    whole = build_batch(_records(40), base_offset=100, compression=Compression.GZIP)
    data = bytearray(whole[:-12])  # the gzip trailer and the last deflate bytes cut
    struct.pack_into(">i", data, 8, len(data) - 12)
    batch = RecordBatch(data, AT)
    with pytest.raises(CorruptRecordError, match=r"^gzip") as e:
        list(stream_records(batch))
    assert (e.value.position, e.value.offset) == (AT, 100)


def test_a_section_of_zeros_fails_at_its_first_record():
    batch = _sealed(build_batch([]), bytes(64 << 20), Compression.ZSTD, count=5)  # 64 MiB of zeros
    with pytest.raises(
        CorruptRecordError, match=r"^record 0: record length out of range \(truncated record\) at byte 0"
    ):
        next(stream_records(batch))
