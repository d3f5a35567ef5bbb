"""Storage engine speed, each figure against a raw baseline measured in the same run.

The data: v2 batches of 100 records (12-byte keys, 140-byte text values, one
millisecond apart), 16 KiB each, uncompressed, as a producer sends them.

1. append: prebuilt batches (bytearrays, as a broker holds a request: offsets
   are assigned in place) through ``PartitionLog.append_batches`` (framing,
   CRC, magic, offsets against the record count, max.message.bytes, every
   record walked, timestamps; offsets and epoch written; the segment written
   and indexed; no fsync), one batch a call, against ``os.write`` of the same
   bytes, one batch a call, to a fresh file. Target >= 60 %. The checks alone
   are timed too, to show what share of the budget they take.
2. read: a whole 1 GiB partition (128 MiB segments) as file slices:
   ``read(offset, 1 MiB)``, its ``FileSlice`` read into memory, for each fetch
   offset a reader asks for (each starts after the last whole batch of the
   fetch before; that walk over the slice's batch frames is the reader's own
   work, timed apart), against a raw sequential read of the same files in
   1 MiB ``pread`` calls. Target >= 80 %.
3. recovery of the same 1 GiB after an unclean shutdown: no
   ``.kafka_cleanshutdown``, recovery point 0, so every batch is framed and
   CRC-checked again and both indexes rebuilt; the time of ``seglog.open``,
   against the same raw read. The page cache is warm for both (the files were
   just written and read). Target >= 50 %.
4. lookups in logs of 10, 100 and 1,000 segments of 1 MiB (64 batches, 64
   offset index entries each), random targets, after one warm-up pass (which
   opens the segments: they open lazily). By offset: what Kafka's
   convertToOffsetMetadata does, a one-byte ``read`` (find the segment, binary
   search its offset index, scan to the batch holding the offset). By
   timestamp: ``offset_for_timestamp`` (the segment by its max timestamp, time
   index, offset index, then the records of one batch walked in C). Target
   >= 100,000/s, flat as the log grows.
5. opening a cleanly shut down log dir of 10,000 segments (one partition;
   and 100 partitions of 100). Target < 1 s.

Medians of REPEATS runs, each baseline run next to the run it is compared
with. Run: ``.venv/bin/python bench/storage.py [append|read|recovery|lookups|open ...]``
(all of them: about a minute and a half; it needs some 2.5 GB in /tmp,
removed at the end).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
import timeit
from collections.abc import Callable

import seglog
from seglog.records import RecordBatch, build_batch
from seglog.records.compression import decompress
from seglog.storage import _scan, checkpoint

REPEATS = 5
RECORDS = 100
VALUE_SIZE = 140
APPEND_BATCHES = 4096  # 64 MiB
LOG_BYTES = 1 << 30
FETCH_BYTES = 1 << 20
LOOKUPS = 20_000
MiB = 1 << 20
START_TS = int(time.time() * 1000) - 4 * 3_600_000  # the 1 GiB log spans about two hours

WORDS = [b"order", b"customer", b"amount", b"status", b"shipped", b"pending", b"eur", b"usd", b"item"]


def _values() -> list[bytes]:
    rng = random.Random(3)
    out = []
    for i in range(1000):
        text = b'{"id":%d,' % i + b" ".join(rng.choice(WORDS) + b"%d" % rng.randrange(10**6) for _ in range(20))
        out.append(text[: VALUE_SIZE - 1] + b"}")
    return out


VALUES = _values()


def make_batch(n: int) -> bytearray:
    """The ``n``-th batch of a partition: records ``n * RECORDS`` onwards, 1 ms apart."""
    first = n * RECORDS
    return build_batch(
        [
            (b"key-%08d" % ((first + i) % 100_000), VALUES[(first + i) % 1000], START_TS + first + i)
            for i in range(RECORDS)
        ]
    )


def median_of(measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(REPEATS))


def fill(directory: str, batches: int, segment_bytes: int) -> None:
    """A cleanly shut down log dir with one partition ``p-0`` of ``batches`` batches."""
    with seglog.open(directory, {"log.segment.bytes": segment_bytes}, background=False) as logs:
        logs.create_topic("p", 1)
        log = logs.partition("p", 0)
        for n in range(batches):
            log.append_batches(make_batch(n))
    os.sync()  # no writeback of what was just written runs under the timed loops


def log_files(directory: str) -> list[str]:
    part = os.path.join(directory, "p-0")
    return sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(".log"))


def raw_read(files: list[str], chunk: int = FETCH_BYTES) -> float:
    """Seconds to read ``files`` front to back in ``chunk``-byte preads."""
    start = time.perf_counter()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        position = 0
        while data := os.pread(fd, chunk, position):
            position += len(data)
        os.close(fd)
    return time.perf_counter() - start


# --- 1. append ---------------------------------------------------------------------------------


def append(tmp: str) -> list[tuple[str, str, bool]]:
    batches = [make_batch(n) for n in range(APPEND_BATCHES)]
    size = sum(len(b) for b in batches)
    print(f"1. append: {APPEND_BATCHES} batches of {len(batches[0]):,} bytes ({size / MiB:.0f} MiB), one a call")

    def raw() -> float:
        path = os.path.join(tmp, "raw-append")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for b in batches:
            os.write(fd, b)
        seconds = time.perf_counter() - start
        os.close(fd)
        os.unlink(path)
        return seconds

    def ours() -> float:
        directory = os.path.join(tmp, "append")
        with seglog.open(directory, background=False) as logs:
            logs.create_topic("p", 1)
            log = logs.partition("p", 0)
            start = time.perf_counter()
            for b in batches:
                log.append_batches(b)
            seconds = time.perf_counter() - start
        shutil.rmtree(directory)
        return seconds

    def checks() -> float:
        """The checks an append makes of its batches, alone: the C walk (CRC32C, every record)."""
        bounds = (START_TS - 3_600_000, START_TS + 100 * 3_600_000)
        start = time.perf_counter()
        for b in batches:
            _scan.check_append(b, True, False, False, 1 << 20, bounds, decompress, None)
        return time.perf_counter() - start

    raws, appends, walks = [], [], []
    for _ in range(REPEATS):
        raws.append(raw())
        appends.append(ours())
        walks.append(checks())
    raw_s, ours_s, walk_s = statistics.median(raws), statistics.median(appends), statistics.median(walks)
    per = 1e6 / APPEND_BATCHES
    print(f"   os.write          {raw_s * per:6.2f} µs/batch  {size / raw_s / 1e6:7.0f} MB/s")
    print(f"   append_batches    {ours_s * per:6.2f} µs/batch  {size / ours_s / 1e6:7.0f} MB/s")
    print(
        f"   (its checks alone, the batches cold in memory as in the runs: {walk_s * per:.2f} µs/batch; "
        f"os.write plus them: {raw_s / (raw_s + walk_s):.0%} of os.write)"
    )
    ratio = raw_s / ours_s
    return [("append >= 60 % of os.write", f"{ratio:.0%}", ratio >= 0.6)]


# --- 2. read -----------------------------------------------------------------------------------

_FRAME = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")


def next_fetch_offset(data: bytes, offset: int) -> int:
    """The offset after the last whole batch of a fetched slice (what a fetcher asks next)."""
    position, size = 0, len(data)
    while position + 61 <= size:
        base, length = _FRAME.unpack_from(data, position)
        end = position + 12 + length
        if end > size:
            break
        offset = base + _LAST_DELTA.unpack_from(data, position + 23)[0] + 1
        position = end
    return offset


def fetch_offsets(log: seglog.PartitionLog) -> list[int]:
    """The offsets a fetcher reading the whole partition asks for: each fetch starts
    after the last whole batch of the one before."""
    offsets, offset, end = [], log.log_start_offset, log.high_watermark
    while offset < end:
        offsets.append(offset)
        fetch = log.read(offset, FETCH_BYTES)
        assert fetch.slice is not None
        offset = next_fetch_offset(fetch.slice.read(), offset)
    return offsets


def read(big: str) -> list[tuple[str, str, bool]]:
    files = log_files(big)
    size = sum(os.path.getsize(f) for f in files)
    print(f"2. read: {size / MiB:.0f} MiB in {len(files)} segments, fetches of {FETCH_BYTES // 1024} KiB")
    with seglog.open(big, background=False) as logs:
        log = logs.partition("p", 0)
        offsets = fetch_offsets(log)

        def slices() -> tuple[float, int]:
            start, total = time.perf_counter(), 0
            for offset in offsets:
                fetch = log.read(offset, FETCH_BYTES)
                total += len(fetch.slice.read())  # type: ignore[union-attr]
            return time.perf_counter() - start, total

        def walking() -> float:
            start, offset, end = time.perf_counter(), log.log_start_offset, log.high_watermark
            while offset < end:
                data = log.read(offset, FETCH_BYTES).slice.read()  # type: ignore[union-attr]
                offset = next_fetch_offset(data, offset)
            return time.perf_counter() - start

        raws, reads, walks = [], [], []
        for _ in range(REPEATS):
            raws.append(raw_read(files))
            seconds, total = slices()
            reads.append(seconds)
            walks.append(walking())
    raw_s, ours_s, walk_s = statistics.median(raws), statistics.median(reads), statistics.median(walks)
    print(f"   raw pread                 {size / raw_s / 1e6:7.0f} MB/s")
    print(
        f"   read + slice read         {size / ours_s / 1e6:7.0f} MB/s  ({len(offsets)} fetches, {total / MiB:.0f} MiB)"
    )
    print(f"   with the fetcher's walk   {size / walk_s / 1e6:7.0f} MB/s  (its own work: framing each slice's batches)")
    ratio = raw_s / ours_s
    return [("read >= 80 % of raw pread", f"{ratio:.0%}", ratio >= 0.8)]


# --- 3. recovery -------------------------------------------------------------------------------


def make_unclean(directory: str) -> None:
    """As a crash leaves the dir: no clean-shutdown marker, nothing known flushed."""
    os.unlink(os.path.join(directory, ".kafka_cleanshutdown"))
    checkpoint.write_offsets(os.path.join(directory, "recovery-point-offset-checkpoint"), {("p", 0): 0})


def recovery(big: str) -> list[tuple[str, str, bool]]:
    files = log_files(big)
    size = sum(os.path.getsize(f) for f in files)
    print(f"3. recovery: {size / MiB:.0f} MiB in {len(files)} segments, page cache warm")
    raws, recoveries = [], []
    for _ in range(REPEATS):
        raws.append(raw_read(files))
        make_unclean(big)
        start = time.perf_counter()
        logs = seglog.open(big, background=False)
        recoveries.append(time.perf_counter() - start)
        logs.close()
    raw_s, ours_s = statistics.median(raws), statistics.median(recoveries)
    print(f"   raw pread         {size / raw_s / 1e6:7.0f} MB/s")
    print(f"   recovery          {size / ours_s / 1e6:7.0f} MB/s  ({ours_s:.2f} s)")
    ratio = raw_s / ours_s
    return [("recovery >= 50 % of raw pread", f"{ratio:.0%}", ratio >= 0.5)]


# --- 4. lookups --------------------------------------------------------------------------------


def lookups(tmp: str) -> list[tuple[str, str, bool]]:
    print(f"4. lookups: {LOOKUPS:,} random targets a pass, segments of 1 MiB")
    per_segment = MiB // len(make_batch(0))
    rows = []
    for segments in (10, 100, 1000):
        directory = os.path.join(tmp, f"lookup{segments}")
        fill(directory, segments * per_segment, MiB)
        with seglog.open(directory, background=False) as logs:
            log = logs.partition("p", 0)
            assert segments <= len(log.segments) <= segments + 1, len(log.segments)
            rng = random.Random(segments)
            end = log.log_end_offset
            offsets = [rng.randrange(end) for _ in range(LOOKUPS)]
            stamps = [START_TS + rng.randrange(end) for _ in range(LOOKUPS)]
            for o in range(0, end, RECORDS):  # warm-up: opens every segment and its indexes
                log.read(o, 1, min_one_message=False)
                log.offset_for_timestamp(START_TS + o)

            def by_offset() -> float:
                start = time.perf_counter()
                for o in offsets:
                    log.read(o, 1, min_one_message=False)
                return LOOKUPS / (time.perf_counter() - start)

            def by_timestamp() -> float:
                start = time.perf_counter()
                for t in stamps:
                    log.offset_for_timestamp(t)
                return LOOKUPS / (time.perf_counter() - start)

            for o, t in zip(offsets[:200], stamps[:200], strict=True):  # the answers are right
                fetch = log.read(o, 1, min_one_message=False)
                assert fetch.slice is not None
                head = fetch.slice.handle.pread(61, fetch.slice.position)
                base = _FRAME.unpack_from(head)[0]
                assert base <= o <= base + _LAST_DELTA.unpack_from(head, 23)[0], (o, fetch)
                found = log.offset_for_timestamp(t)
                assert found == (t - START_TS, t), (found, t)
            rate_offset, rate_time = median_of(by_offset), median_of(by_timestamp)
        shutil.rmtree(directory)
        print(f"   {segments:5,} segments: by offset {rate_offset:9,.0f}/s   by timestamp {rate_time:9,.0f}/s")
        for kind, rate in (("offset", rate_offset), ("timestamp", rate_time)):
            rows.append((f"lookups by {kind} >= 100,000/s, {segments:,} segments", f"{rate:,.0f}/s", rate >= 100_000))
    batch = RecordBatch(bytes(make_batch(0)))
    walk = median_of(
        lambda: (
            timeit.timeit(
                lambda: _scan.find_timestamp(batch.buffer, START_TS + RECORDS // 2, 0, 0, decompress), number=2000
            )
            / 2000
        )
    )
    print(f"   (a lookup by timestamp walks the {RECORDS} records of one batch in C: {walk * 1e6:.1f} µs of it)")
    return rows


# --- 5. opening --------------------------------------------------------------------------------


def write_segments(directory: str, topic: str, partitions: int, segments: int) -> None:
    """Segments as a cleanly shut down Kafka leaves them, written directly (one small batch
    each, an empty offset index, the time index entry a roll writes)."""
    ts = int(time.time() * 1000) - 60_000
    offsets = {}
    for p in range(partitions):
        part = os.path.join(directory, f"{topic}-{p}")
        os.makedirs(part)
        for base in range(segments):
            stem = os.path.join(part, f"{base:020d}")
            with open(stem + ".log", "wb") as f:
                f.write(build_batch([(b"k", b"v" * 100, ts)], base_offset=base))
            with open(stem + ".timeindex", "wb") as f:
                f.write(struct.pack(">qi", ts, 0))
            with open(stem + ".index", "wb"):
                pass
        offsets[(topic, p)] = segments
    checkpoint.write_offsets(os.path.join(directory, "recovery-point-offset-checkpoint"), offsets)
    with open(os.path.join(directory, ".kafka_cleanshutdown"), "wb"):
        pass
    os.sync()


def opening(tmp: str) -> list[tuple[str, str, bool]]:
    print("5. opening a cleanly shut down log dir")
    rows = []
    for partitions, segments in ((1, 10_000), (100, 100)):
        directory = os.path.join(tmp, f"open{partitions}")
        write_segments(directory, "o", partitions, segments)

        def open_once() -> float:
            start = time.perf_counter()
            logs = seglog.open(directory, background=False)
            seconds = time.perf_counter() - start
            assert logs.partition("o", 0).log_end_offset == segments
            logs.close()
            return seconds

        seconds = median_of(open_once)
        shutil.rmtree(directory)
        label = f"{partitions} x {segments:,} segments"
        rows.append((f"open < 1 s, {label}", f"{seconds:.2f} s", seconds < 1))
        print(f"   {label:24s} {seconds * 1000:7.0f} ms")
    return rows


PARTS = ("append", "read", "recovery", "lookups", "open")


def main(parts: list[str]) -> None:
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts {sorted(unknown)}: choose from {', '.join(PARTS)}")
    wanted = parts or list(PARTS)
    tmp = tempfile.mkdtemp(prefix="seglog-bench-storage-", dir="/tmp")
    rows: list[tuple[str, str, bool]] = []
    try:
        if "append" in wanted:
            rows += append(tmp)
        if "read" in wanted or "recovery" in wanted:
            big = os.path.join(tmp, "big")
            fill(big, LOG_BYTES // len(make_batch(0)), 128 * MiB)
            if "read" in wanted:
                rows += read(big)
            if "recovery" in wanted:
                rows += recovery(big)
            shutil.rmtree(big)
        if "lookups" in wanted:
            rows += lookups(tmp)
        if "open" in wanted:
            rows += opening(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntargets (same-run figures, medians of {REPEATS})")
    for label, figure, met in rows:
        print(f"   {label:48s} {figure:>10s}  {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main(sys.argv[1:])
