"""Record-format speed: seglog against kafka-python 3.x's codec, on the same data in the same run.

Batches of 1,000 records with 100-byte values (text-like, so that lz4 finds
something to squeeze, as in real topics), uncompressed and lz4. Three figures,
each the median of several timed repeats:

- validation: what a broker does to an appended or recovered segment without
  decoding records: frame every batch, check its header and its CRC32C over the
  whole batch. GB/s of batch bytes as stored (compressed bytes for lz4).
- decoding: every record of a batch to (offset, timestamp, key, value,
  headers), both readers on the same kafka-python-built bytes. records/s.
- building: the same 1,000 records into one batch. records/s.

Targets (issue #2): validation >= 1 GB/s, decoding >= 4x kafka-python,
building >= 3x kafka-python. Run: ``.venv/bin/python bench/records.py``.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from seglog.records import BatchIterator, Compression, RecordBatch, build_batch

RECORDS = 1000
VALUE_SIZE = 100
BATCHES_PER_SEGMENT = 100
REPEATS = 9
TS = 1_700_000_000_000
KP_CODEC = {Compression.NONE: 0, Compression.LZ4: 3}


def _values() -> list[bytes]:
    rng = random.Random(42)
    words = [b"order", b"customer", b"amount", b"status", b"shipped", b"pending", b"eur", b"usd", b"item"]
    values = []
    for i in range(RECORDS):
        text = b'{"id":%d,' % i + b" ".join(rng.choice(words) + b"%d" % rng.randrange(10**6) for _ in range(12))
        values.append((text + b"}" * VALUE_SIZE)[:VALUE_SIZE])
    return values


VALUES = _values()
ROWS = [(None, v, TS + i, ()) for i, v in enumerate(VALUES)]


def median_seconds(fn: Callable[[], object], rounds: int) -> float:
    """Median over REPEATS of the time of ``rounds`` calls, per call."""
    fn()  # warm up (imports, caches)
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        times.append((time.perf_counter() - start) / rounds)
    return statistics.median(times)


def kp_build(codec: Compression) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=KP_CODEC[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, v in enumerate(VALUES):
        builder.append(i, timestamp=TS + i, key=None, value=v, headers=[])
    return bytes(builder.build())


def kp_decode(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in DefaultRecordBatch(data)]


def seglog_decode(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in RecordBatch(data).records()]


def seglog_validate(segment: bytes) -> None:
    for batch in BatchIterator(segment):
        batch.validate()


def kp_validate(segment: bytes) -> None:
    pos = 0
    while pos < len(segment):  # kafka-python's batch object, header read and CRC checked
        batch = DefaultRecordBatch(segment[pos : pos + 12 + int.from_bytes(segment[pos + 8 : pos + 12], "big")])
        assert batch.validate_crc()
        pos += batch.size_in_bytes


def main() -> None:
    print(
        f"{RECORDS}-record batches, {VALUE_SIZE}-byte values; medians of {REPEATS} repeats; "
        f"validation over {BATCHES_PER_SEGMENT} batches in a row\n"
    )
    header = f"{'codec':5} {'measure':17} {'seglog':>13} {'kafka-python':>13} {'ratio':>7}  target"
    print(header)
    print("-" * len(header))
    for codec in (Compression.NONE, Compression.LZ4):
        shared = kp_build(codec)  # the bytes both readers decode
        assert seglog_decode(shared) == [(o, t, k, v, tuple(h)) for o, t, k, v, h in kp_decode(shared)]
        ours = bytes(build_batch(ROWS, compression=codec))
        segment = ours * BATCHES_PER_SEGMENT
        val_ours = len(segment) / median_seconds(lambda: seglog_validate(segment), 10)
        val_kp = len(segment) / median_seconds(lambda: kp_validate(segment), 3)
        dec_ours = RECORDS / median_seconds(lambda: seglog_decode(shared), 50)
        dec_kp = RECORDS / median_seconds(lambda: kp_decode(shared), 5)
        bld_ours = RECORDS / median_seconds(lambda: build_batch(ROWS, compression=codec), 50)
        bld_kp = RECORDS / median_seconds(lambda: kp_build(codec), 5)
        rows = [
            ("validate GB/s", val_ours / 1e9, val_kp / 1e9, ">= 1 GB/s", val_ours >= 1e9, "{:13.2f}"),
            ("decode records/s", dec_ours, dec_kp, ">= 4x", dec_ours >= 4 * dec_kp, "{:13,.0f}"),
            ("build records/s", bld_ours, bld_kp, ">= 3x", bld_ours >= 3 * bld_kp, "{:13,.0f}"),
        ]
        for i, (measure, a, b, target, met, fmt) in enumerate(rows):
            name = codec.name.lower() if i == 0 else ""
            verdict = "ok" if met else "MISSED"
            print(f"{name:5} {measure:17} {fmt.format(a)} {fmt.format(b)} {a / b:6.1f}x  {target} {verdict}")
        print(f"{'':5} {'batch bytes':17} {len(ours):13,} {len(shared):13,}")


if __name__ == "__main__":
    main()
