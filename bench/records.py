"""Record-format speed: seglog vs kafka-python 3.x's codec, same data, same run.

1,000-record batches of 100-byte values, uncompressed and lz4. Prints the
median of several repeats and the ratios the issue asks for:
validation >= 1 GB/s, decoding >= 4x kafka-python, building >= 3x.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from seglog.records import Compression, RecordBatch, build_batch

RECORDS = 1000
REPEATS = 7
TS = 1_700_000_000_000
VALUES = [bytes([i % 251]) * 100 for i in range(RECORDS)]
ROWS = [(None, v, TS + i, ()) for i, v in enumerate(VALUES)]
KP_CODEC = {Compression.NONE: 0, Compression.LZ4: 3}


def median_rate(fn: Callable[[], None], units: float, rounds: int) -> float:
    """Units per second: the median of REPEATS timings of ``rounds`` calls."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        times.append(time.perf_counter() - start)
    return units * rounds / statistics.median(times)


def kp_build(codec: Compression) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=KP_CODEC[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, v in enumerate(VALUES):
        b.append(i, timestamp=TS + i, key=None, value=v, headers=[])
    return bytes(b.build())


def kp_decode(data: bytes) -> None:
    for r in DefaultRecordBatch(data):
        (r.offset, r.timestamp, r.key, r.value, r.headers)


def seglog_decode(data: bytes) -> None:
    for r in RecordBatch(data).records():
        (r.offset, r.timestamp, r.key, r.value, r.headers)


def main() -> None:
    print(f"records: {RECORDS}-record batches of 100-byte values; medians of {REPEATS} runs\n")
    print(f"{'codec':6} {'measure':22} {'seglog':>14} {'kafka-python':>14} {'ratio':>7} target")
    for codec in (Compression.NONE, Compression.LZ4):
        ours = bytes(build_batch(ROWS, compression=codec))
        theirs = kp_build(codec)
        big = ours * 100  # 100 batches, to validate as a segment would
        gb_s = median_rate(lambda: [b.validate() for b in _views(big)], len(big), 5) / 1e9
        print(f"{codec.name:6} {'validation GB/s':22} {gb_s:14.2f} {'':>14} {'':>7} >= 1 GB/s")
        dec_ours = median_rate(lambda: seglog_decode(ours), RECORDS, 20)
        dec_kp = median_rate(lambda: kp_decode(theirs), RECORDS, 3)
        print(f"{'':6} {'decode records/s':22} {dec_ours:14,.0f} {dec_kp:14,.0f} {dec_ours / dec_kp:6.1f}x >= 4x")
        bld_ours = median_rate(lambda: build_batch(ROWS, compression=codec), RECORDS, 20)
        bld_kp = median_rate(lambda: kp_build(codec), RECORDS, 3)
        print(f"{'':6} {'build records/s':22} {bld_ours:14,.0f} {bld_kp:14,.0f} {bld_ours / bld_kp:6.1f}x >= 3x")


def _views(data: bytes) -> list[RecordBatch]:
    from seglog.records import BatchIterator

    return list(BatchIterator(data))


if __name__ == "__main__":
    main()
