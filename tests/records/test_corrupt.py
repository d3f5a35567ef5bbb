"""Corrupt input: a seglog error naming the fault and the position, never a crash or a hang."""

from __future__ import annotations

import random
import struct
import time

import pytest
from crc32c import crc32c

from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import BatchIterator, Compression, Record, RecordBatch, build_batch

from ..conftest import KAFKA_DATA


def _batch(codec=Compression.NONE, n=5):
    return build_batch(
        [Record(b"key%d" % i, b"value" * i, 1000 + i, [("h", b"x")]) for i in range(n)], compression=codec
    )


def _fix_crc(data):
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return data


def _decode_all(data):
    scan = BatchIterator(bytes(data))
    for batch in scan:
        batch.validate()
        batch.records()
    return scan


def test_bad_magic_names_the_position():
    data = bytearray(_batch()) * 2
    data[len(data) // 2 + 16] = 7
    with pytest.raises(CorruptRecordError, match="bad magic 7") as e:
        _decode_all(data)
    assert e.value.position == len(data) // 2


def test_crc_mismatch_gives_both_values():
    data = _batch()
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"):
        RecordBatch(data).validate()


def test_size_out_of_range():
    data = _batch()
    struct.pack_into(">i", data, 8, 3)
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        list(BatchIterator(data))


def test_truncated_record():
    data = _batch()
    del data[-3:]
    struct.pack_into(">i", data, 8, len(data) - 12)
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match="record 4"):
        RecordBatch(data).records()


def test_unknown_codec():
    data = _batch()
    struct.pack_into(">h", data, 21, 6)
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match="codec"):
        RecordBatch(data).records()


def test_varint_too_long():
    data = _batch(n=1)
    data[61:66] = b"\xff\xff\xff\xff\xff"  # the record length varint never ends
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match="varint too long"):
        RecordBatch(data).records()


@pytest.mark.parametrize("count", [3, 6, 2**31 - 1])
def test_record_count_disagreeing_with_the_batch(count):
    data = _batch(n=5)
    struct.pack_into(">i", data, 57, count)
    _fix_crc(data)
    with pytest.raises(CorruptRecordError, match=r"record count|record [0-9]+"):
        RecordBatch(data).records()


def test_hostile_compressed_sizes_are_refused_quickly():
    import lz4.frame

    bomb = lz4.frame.compress(bytes(300 * 1024 * 1024))  # 300 MiB of zeros in about a MiB
    data = build_batch([], compression=Compression.NONE)
    data = bytearray(data[:61]) + bomb
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, int(Compression.LZ4))
    struct.pack_into(">i", data, 57, 1)
    _fix_crc(data)
    started = time.perf_counter()
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        RecordBatch(data).records()
    assert time.perf_counter() - started < 30  # a bound against hangs, not a speed target


def _mutations(rng, data):
    kind = rng.randrange(5)
    d = bytearray(data)
    if kind == 0:  # bit flips anywhere
        for _ in range(rng.randrange(1, 4)):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del d[rng.randrange(len(d)) :]
    elif kind == 2:  # a random length field
        struct.pack_into(">i", d, 8, rng.randrange(-(2**31), 2**31))
    elif kind == 3:  # random bytes in the records, CRC fixed so the decoder itself is exercised
        if len(d) > 61:
            for _ in range(rng.randrange(1, 6)):
                d[rng.randrange(61, len(d))] = rng.randrange(256)
            if d[16] == 2:
                _fix_crc(d)
    else:  # random header fields with a valid CRC
        if len(d) >= 61 and d[16] == 2:
            struct.pack_into(">i", d, 57, rng.randrange(-5, 2**31))
            struct.pack_into(">h", d, 21, rng.randrange(0, 128))
            _fix_crc(d)
    return bytes(d)


def _seeds():
    real = KAFKA_DATA / "real_segments"
    seeds = [bytes(_batch(c, n)) for c in Compression for n in (1, 7)]
    for path in list(real.glob("**/*.log"))[:12]:
        data = path.read_bytes()
        for batch in list(BatchIterator(data))[:3]:
            seeds.append(bytes(batch.buffer))
    for path in (KAFKA_DATA / "golden").glob("v[01]_*.stored.bin"):
        seeds.append(path.read_bytes())
    return seeds


def test_fuzzed_real_batches_raise_only_seglog_errors():
    rng = random.Random(20261122)
    seeds = _seeds()
    started = time.perf_counter()
    outcomes = {"ok": 0, "error": 0}
    for _ in range(4000):
        data = _mutations(rng, rng.choice(seeds))
        try:
            _decode_all(data)
            outcomes["ok"] += 1
        except SeglogError:
            outcomes["error"] += 1
    assert outcomes["error"] > 500 and outcomes["ok"] > 100
    assert time.perf_counter() - started < 60
