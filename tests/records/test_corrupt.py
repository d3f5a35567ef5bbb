"""Corrupt input: a seglog error naming the fault and the position, never a crash, a hang or a huge allocation."""

from __future__ import annotations

import contextlib
import random
import re
import struct
import time
import zlib

import pytest
from crc32c import crc32c

from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import BatchIterator, Compression, Record, RecordBatch, build_batch
from seglog.records import _codec as codec_module
from seglog.records.batches import stream_records
from seglog.records.compression import compress, decompress_stream
from seglog.records.varint import decode_varint

from ..conftest import KAFKA_DATA

AT = 4096  # where the corrupt batch sits in its buffer: positions must count from the buffer's start


def _batch(codec=Compression.NONE, n=5):
    return build_batch(
        [Record(b"key%d" % i, b"value" * i, 1000 - 3 * i, [("h", b"x"), ("é", None)]) for i in range(n)],
        base_offset=100,
        compression=codec,
    )


def _fix_crc(data):
    """Re-seal a batch after an edit, so that the decoder itself meets the damage."""
    if len(data) >= 61 and data[16] == 2:
        struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    elif len(data) >= 17 and data[16] in (0, 1):
        struct.pack_into(">I", data, 12, zlib.crc32(memoryview(data)[16:]))
    return data


def _reframe(data):
    struct.pack_into(">i", data, 8, len(data) - 12)
    return _fix_crc(data)


def _one_batch_of(size: int) -> bytes:
    for value_size in range(size - 80, size):
        filler = build_batch([Record(None, b"x" * value_size, 1)])
        if len(filler) == size:
            return bytes(filler)
    raise AssertionError(f"no batch of {size} bytes")


PREFIX = _one_batch_of(AT)


def _placed(data):
    """The batch after a valid batch of AT bytes, as in a segment."""
    return PREFIX + bytes(data)


def _decode_all(data):
    scan = BatchIterator(bytes(data))
    for batch in scan:
        batch.validate()
        batch.records()
    return scan


def test_bad_magic_names_the_position():
    data = _placed(_batch())
    data = data[: AT + 16] + b"\x07" + data[AT + 17 :]
    with pytest.raises(CorruptRecordError, match="bad magic 7") as e:
        _decode_all(data)
    assert e.value.position == AT and e.value.offset == 100


def test_crc_mismatch_gives_both_values_and_the_place():
    data = bytearray(_placed(_batch()))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}") as e:
        _decode_all(data)
    assert (e.value.position, e.value.offset) == (AT, 100)
    assert "position 4096" in str(e.value)


@pytest.mark.parametrize("size", [-1, 0, 3, 48])
def test_size_below_the_minimum(size):
    data = bytearray(_placed(_batch()))
    struct.pack_into(">i", data, AT + 8, size)
    with pytest.raises(CorruptRecordError, match=f"batch size {size} is below the minimum 49") as e:
        _decode_all(data)
    assert e.value.position == AT


def test_size_above_a_limit():
    with pytest.raises(CorruptRecordError, match="exceeds the largest allowed 100") as e:
        list(BatchIterator(_placed(_batch()), max_batch_size=100))
    assert e.value.position == 0


def test_size_past_the_end_is_a_partial_batch_not_an_allocation():
    data = bytearray(_batch())
    struct.pack_into(">i", data, 8, 2**31 - 1)
    scan = BatchIterator(bytes(data))
    assert list(scan) == [] and scan.remaining == len(data)


def test_truncated_record():
    data = _batch()
    del data[-3:]
    _reframe(data)
    with pytest.raises(CorruptRecordError, match=r"record 4: .* at byte \d+ of the records") as e:
        _decode_all(_placed(data))
    assert e.value.position == AT


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id):
    data = _batch()
    struct.pack_into(">h", data, 21, codec_id)
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec id {codec_id}") as e:
        _decode_all(_placed(data))
    assert e.value.position == AT


def test_varint_too_long():
    data = _batch(n=1)
    data[61:66] = b"\xff\xff\xff\xff\xff"  # the record length varint never ends
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match="varint too long in the record length at byte 0") as e:
        _decode_all(_placed(data))
    assert e.value.position == AT


_NEVER_ENDS = b"\xff" * 5  # a varint of an int32 field that never ends


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        (b"", "key length"),
        (b"\x01", "value length"),  # after a null key
        (b"\x01\x01", "header count"),  # after a null key and a null value
        (b"\x01\x01\x02", "header key length"),  # then one header
        (b"\x01\x01\x02\x02h", "header value length"),  # whose key is "h"
    ],
)
def test_varint_too_long_in_a_length_field(fields, name):
    body = b"\x00\x00\x00" + fields + _NEVER_ENDS + b"\x00" * 4  # attributes, timestamp and offset deltas 0
    record = bytes([len(body) << 1]) + body
    data = _reframe(bytearray(_batch(n=1)[:61]) + record)
    fault = f"varint too long in the {name}"
    with pytest.raises(CorruptRecordError, match=f"record 0: {fault} at byte {1 + 3 + len(fields)} ") as e:
        _decode_all(_placed(data))
    assert e.value.position == AT
    with pytest.raises(CorruptRecordError, match=fault):
        codec_module.check_records(RecordBatch(data, AT).records_section(), 1, AT)


@pytest.mark.parametrize(
    ("count", "fault"),
    [
        (0, r"record count 0 disagrees with the batch: \d+ bytes follow the last record"),
        (3, r"record count 3 disagrees with the batch: \d+ bytes follow the last record"),
        (6, "record count 6 disagrees with the batch: its records end after 5"),
        (7, "record count 7 disagrees with the batch: its records end after 5"),
        (-1, r"record count -1 (/ last offset delta 4 out of range|does not fit in \d+ bytes of records)"),
        (2**31 - 1, r"record count 2147483647 does not fit in \d+ bytes of records"),
    ],
)
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_record_count_disagreeing_with_the_batch(count, fault, codec):
    data = _batch(codec, n=5)
    struct.pack_into(">i", data, 57, count)
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match=f"^{fault} \\(position {AT}(, offset 100)?\\)$") as e:
        _decode_all(_placed(data))
    assert e.value.position == AT
    # the append check names the fault alike (the Arrow decoder's test is in tests/spark/test_arrow.py)
    batch = RecordBatch(data, AT)
    with pytest.raises(CorruptRecordError, match=f"^{fault} \\(position {AT}\\)$"):
        codec_module.check_records(batch.records_section(), count, AT)


@pytest.mark.parametrize("codec", list(Compression))
def test_every_truncation_stops_cleanly_or_fails_as_corrupt(codec):
    data = bytes(_batch(codec, n=4))
    for cut in range(1, len(data)):
        # cut short in a buffer: the walk stops, the partial batch left over
        scan = BatchIterator(data[:cut])
        assert list(scan) == [] and scan.remaining == cut
        # cut short and re-framed and re-sealed: the decoder itself meets the missing bytes
        if cut >= 61:
            with pytest.raises(CorruptRecordError):
                _decode_all(_reframe(bytearray(data[:cut])))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_a_decompression_bomb_in_a_batch_is_refused(codec, monkeypatch):
    from seglog.records import compression

    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    data = bytearray(_batch(n=0)[:61]) + compress(codec, bytes(2 << 20))
    struct.pack_into(">h", data, 21, int(codec))
    struct.pack_into(">i", data, 57, 1)
    _reframe(data)
    with pytest.raises(CorruptRecordError, match="decompress to more than") as e:
        _decode_all(_placed(data))
    assert (e.value.position, e.value.offset) == (AT, 100)


# --- fuzzing ---------------------------------------------------------------------------


def _seeds() -> list[bytes]:
    seeds = [bytes(_batch(c, n)) for c in Compression for n in (0, 1, 7)]
    for path in sorted((KAFKA_DATA / "real_segments").glob("**/*.log"))[:16]:
        seeds += [bytes(b.buffer) for b in list(BatchIterator(path.read_bytes()))[:3]]
    for path in sorted((KAFKA_DATA / "real_segments").glob("**/*.checkpoint")):
        batches = list(BatchIterator(path.read_bytes()))
        seeds += [bytes(batches[0].buffer), bytes(batches[-1].buffer)]  # the snapshot's control records
    monitoring = KAFKA_DATA / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
    monitoring /= "_confluent-monitoring-0/00000000000000000000.log"  # LZ4, LogAppendTime, idempotent
    seeds += [bytes(b.buffer) for b in list(BatchIterator(monitoring.read_bytes()))[:4]]
    golden = sorted((KAFKA_DATA / "golden").glob("v*.bin"))
    seeds += [p.read_bytes() for p in golden if p.stat().st_size < 2048]
    return seeds


def _mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    d = bytearray(data)
    kind = rng.randrange(8)
    if kind == 0:  # bit flips anywhere
        for _ in range(rng.randrange(1, 4)):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del d[rng.randrange(len(d)) :]
    elif kind == 2:  # a random length field
        struct.pack_into(">i", d, 8, rng.randrange(-(2**31), 2**31))
    elif kind == 3:  # random bytes in the records section, CRC fixed
        start = 61 if d[16] == 2 else 17
        for _ in range(rng.randrange(1, 6)):
            if len(d) > start:
                d[rng.randrange(start, len(d))] = rng.randrange(256)
        _fix_crc(d)
    elif kind == 4:  # random header fields (count, attributes), CRC fixed
        if len(d) >= 61 and d[16] == 2:
            struct.pack_into(">i", d, 57, rng.choice([-1, 0, 1, 2**31 - 1, rng.randrange(-5, 2**31)]))
            struct.pack_into(">h", d, 21, rng.randrange(0, 128))
        _fix_crc(d)
    elif kind == 5:  # damage inside the compression: decompress, edit the records, compress again
        d = _damage_records(rng, d)
    elif kind == 6:  # two batches spliced
        other = rng.choice(seeds)
        d = d[: rng.randrange(len(d))] + other[rng.randrange(len(other)) :]
        _fix_crc(d)
    else:  # a records section of random bytes behind a header that fits it
        if len(d) >= 61 and d[16] == 2:
            d = d[:61] + rng.randbytes(rng.randrange(0, 60))
            struct.pack_into(">i", d, 57, rng.randrange(0, 10))
            _reframe(d)
    return bytes(d)


def _damage_records(rng: random.Random, d: bytearray) -> bytearray:
    if len(d) < 61 or d[16] != 2:
        return d
    batch = RecordBatch(d)
    try:
        body = bytearray(batch.records_section())
    except SeglogError:
        return d
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(body) + 1)
        edit = rng.randrange(3)
        if edit == 0 and at < len(body):
            body[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif edit == 1:
            body[at:at] = rng.randbytes(rng.randrange(1, 6))
        else:
            del body[at : at + rng.randrange(1, 6)]
    codec = batch.attributes & 7
    return _reframe(d[:61] + (bytes(body) if codec == 0 else compress(codec, body)))


def _exercise(data: bytes) -> None:
    """Everything a reader of a batch may ask; only seglog errors may come out."""
    try:
        batches = list(BatchIterator(data))
    except SeglogError:  # bad framing ends the walk; the batches before it are still there to ask
        scan = BatchIterator(data)
        batches = []
        while scan.remaining >= 17 and len(batches) < 1000:
            try:
                batches.append(next(scan))
            except (SeglogError, StopIteration):
                break
    for batch in batches:
        for ask in (
            lambda b: (b.base_offset, b.last_offset, b.record_count, b.max_timestamp, b.timestamp_type),
            lambda b: (b.compression, b.is_valid, b.last_sequence, b.crc, b.is_control),
            lambda b: b.validate(),
            lambda b: b.records(),
            lambda b: list(stream_records(b, 7)) if isinstance(b, RecordBatch) else None,
            lambda b: b.control_records() if isinstance(b, RecordBatch) and b.is_control else None,
            lambda b: (
                codec_module.check_records(b.records_section(), b.record_count, b.position)
                if isinstance(b, RecordBatch)
                else None
            ),
        ):
            with contextlib.suppress(SeglogError):
                ask(batch)


def test_fuzzed_real_batches_raise_only_seglog_errors():
    rng = random.Random(20261122)
    seeds = _seeds()
    started = time.perf_counter()
    outcomes = {"whole": 0, "refused": 0}
    for _ in range(10_000):
        data = _mutate(rng, rng.choice(seeds), seeds)
        try:  # the strict reader: every fault refuses the buffer
            _decode_all(data)
            outcomes["whole"] += 1
        except SeglogError:
            outcomes["refused"] += 1
        _exercise(data)  # the lenient one: every question on its own
    assert outcomes["refused"] > 5000 and outcomes["whole"] > 1000, outcomes
    assert time.perf_counter() - started < 30  # no hang; a bound, not a speed target


def test_fuzzed_batches_stream_the_records_a_whole_decode_gives():
    """``stream_records`` (dump-log's deep iteration) agrees with ``records()``: the same records when
    the batch is whole; a fault when it is not, after a prefix of the records, worded alike when the
    whole decode's fault is a record's."""
    rng = random.Random(25)
    seeds = [s for s in _seeds() if len(s) >= 61 and s[16] == 2 and s[22] & 7]  # compressed v2 batches
    agreed = {"whole": 0, "refused": 0}
    for _ in range(3000):
        data = _mutate(rng, rng.choice(seeds), seeds)
        for batch in _whole_v2_batches(data):
            try:
                whole = batch.records()
            except SeglogError as e:
                whole = e
            streamed: list[Record] = []
            try:
                streamed.extend(stream_records(batch, rng.choice([1, 7, 1 << 16])))
                fault = None
            except SeglogError as e:
                fault = e
            if isinstance(whole, list):
                assert fault is None and streamed == whole
                agreed["whole"] += 1
                continue
            assert fault is not None, whole
            assert streamed == _records_before(batch, len(streamed))
            if re.match(r"record \d+: ", whole.message):
                assert (fault.message, fault.position) == (whole.message, whole.position)
            agreed["refused"] += 1
    assert agreed["whole"] > 200 and agreed["refused"] > 1000, agreed


def _whole_v2_batches(data: bytes) -> list[RecordBatch]:
    batches: list[RecordBatch] = []
    scan = BatchIterator(data)
    with contextlib.suppress(SeglogError):
        batches.extend(b for b in scan if isinstance(b, RecordBatch) and b.attributes & 7 in range(1, 5))
    return batches


def _records_before(batch: RecordBatch, n: int) -> list[Record]:
    """The first n records of a batch broken after them: what inflates before the fault, decoded whole."""
    if n == 0:
        return []
    inflated = bytearray()
    with contextlib.suppress(SeglogError):
        for piece in decompress_stream(
            batch.compression, batch.buffer[61:], 1
        ):  # what inflates before the fault depends on the chunk: take it all
            inflated += piece
    end = 0
    for _ in range(n):
        length, after = decode_varint(inflated, end)
        end = after + length
    head = batch.header()
    return codec_module.decode_records(
        bytes(inflated[:end]), n, head[0], head[7], bool(head[5] & 8), head[8], Record, 0
    )
