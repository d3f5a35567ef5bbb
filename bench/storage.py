"""Storage engine speed, each figure against a raw baseline measured in the same run.

The data: v2 batches of 100 records (12-byte keys, 140-byte text values, one
millisecond apart), 16 KiB each, uncompressed, as a producer sends them.

1. append: prebuilt batches (bytearrays, as a broker holds a request: offsets
   are assigned in place) through ``PartitionLog.append_batches`` (framing,
   CRC, magic, offsets against the record count, max.message.bytes, every
   record walked, timestamps; offsets and epoch written; the segment written
   and indexed; no fsync: the leader epoch's first batch, whose checkpoint is
   fsynced once an epoch, goes in untimed), one batch a call, against
   ``os.write`` of the same bytes, one batch a call, to a fresh file. Target
   >= 60 %. And against the work itself in series: the C checks and offset
   assignment an append makes (``_scan.check_and_assign``, as the log calls
   it) then ``os.write`` of the batch, one batch at a time. Target >= 90 %
   (Python may add a tenth on top of the work). All in the thread's CPU time
   (the page cache takes the writes: nothing waits on the disk); the three
   take turns of 64 batches (each first in turn), each over its own copy of
   the batches, so that other processes' load falls on each alike, and a
   ratio is the median of the passes' ratios. The checks alone are timed too,
   and (printed, not a target) an idempotent producer's batches (in order: all
   but its first take the one call too, their producer state found and recorded
   beside it) through ``append_batches`` in passes of their own beside the same
   series.
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
4. lookups in one partition of 60,000 batches (0.9 GiB) cut into 10, 100,
   1,000 and 10,000 segments (6,000 batches, and as many offset index entries,
   a segment down to 6), random targets (the same in each log), after one
   warm-up pass (which opens the segments: they open lazily). By offset: what
   Kafka's convertToOffsetMetadata does, a one-byte ``read`` (find the segment,
   binary search its offset index, read the header of the batch holding the
   offset). By timestamp: ``offset_for_timestamp`` (the segment by its max
   timestamp, time index, offset index, then the records of one batch walked in
   C). The data stay the same so that the segment count is all that changes: in
   logs of 1 MiB segments, 10 of them fit in the CPU's L3 cache and 1,000 do
   not, and a lookup's reads of cold pages, not its segment search, made most
   of the difference. Each log's passes alternate with the 10-segment log's
   (the baseline, printed beside each row as a ratio), timed in the thread's
   CPU time (a lookup waits on nothing: the page cache is warm), so that other
   processes' load moves both alike. Targets: >= 100,000/s at 10 segments, and
   of that rate >= 85 % at 1,000 segments and >= 75 % at 10,000.
   Printed beside each row, not timed apart: the user and kernel CPU time a
   lookup of the same passes (``getrusage``), where what the segments add goes.
5. opening a cleanly shut down log dir of 10,000 segments (one partition;
   and 100 partitions of 100). Target < 1 s.

Medians of REPEATS runs, each baseline run next to the run it is compared
with. Run: ``.venv/bin/python bench/storage.py [append|read|recovery|lookups|open ...]``
(all of them: about three minutes; it needs some 2.5 GB in /tmp, removed at the end).
"""

from __future__ import annotations

import os
import random
import resource
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
APPEND_CHUNK = 64  # batches a side appends in its turn (1 MiB)
LOG_BYTES = 1 << 30
FETCH_BYTES = 1 << 20
LOOKUPS = 20_000
LOOKUP_BATCHES = 60_000  # a partition that cuts into whole segments of 6,000 / 600 / 60 / 6 batches
BASE_SEGMENTS = 10
LOOKUP_TARGETS = {100: None, 1000: 0.85, 10_000: 0.75}  # segments: share of the 10-segment rate
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


def make_batch(n: int, producer_id: int = -1) -> bytearray:
    """The ``n``-th batch of a partition: records ``n * RECORDS`` onwards, 1 ms apart; with a
    ``producer_id``, an idempotent producer's (epoch 0, the records' sequences in order)."""
    first = n * RECORDS
    return build_batch(
        [
            (b"key-%08d" % ((first + i) % 100_000), VALUES[(first + i) % 1000], START_TS + first + i)
            for i in range(RECORDS)
        ],
        producer_id=producer_id,
        producer_epoch=-1 if producer_id < 0 else 0,
        base_sequence=-1 if producer_id < 0 else first,
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

    bounds = (START_TS - 3_600_000, START_TS + 100 * 3_600_000)
    # each side its own copy (every pass reads its batches cold from memory, as a broker's)
    copies = [batches, [bytearray(b) for b in batches], [bytearray(b) for b in batches]]

    def run(copies: list[list[bytearray]]) -> list[float]:
        """One pass of each side over its batches, the three taking turns a chunk at a time
        (each first in turn), so that the load of other processes falls on each alike: the
        seconds of thread CPU time of os.write alone, of the checks then os.write, and of
        append_batches."""
        fds = [os.open(os.path.join(tmp, f"raw-{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for i in (0, 1)]
        directory = os.path.join(tmp, "append")
        write, check_and_assign, clock, next_offset = os.write, _scan.check_and_assign, time.thread_time, 0
        with seglog.open(directory, background=False) as logs:
            logs.create_topic("p", 1)
            log = logs.partition("p", 0)
            append_batches = log.append_batches
            # the leader epoch's first batch, untimed: it writes the epoch's checkpoint with an
            # fsync (once an epoch, as Kafka's assign), some 3 ms of CPU, 0.7 µs on each batch here
            append_batches(make_batch(-1))  # (the records before batch 0's)

            def raw(chunk: list[bytearray]) -> float:
                start, fd = clock(), fds[0]
                for b in chunk:
                    write(fd, b)
                return clock() - start

            def series(chunk: list[bytearray]) -> float:
                nonlocal next_offset
                start, fd = clock(), fds[1]
                for b in chunk:  # as PartitionLog.append_batches calls it: (next offset, epoch, stamp, segment.bytes)
                    assigned = check_and_assign(
                        b, False, False, 1 << 20, bounds, decompress, tmp, (next_offset, 0, None, 1 << 30)
                    )
                    next_offset = assigned[2] + 1  # its last offset
                    write(fd, b)
                return clock() - start

            def ours(chunk: list[bytearray]) -> float:
                start = clock()
                for b in chunk:
                    append_batches(b)
                return clock() - start

            sides = (raw, series, ours)
            seconds = [0.0, 0.0, 0.0]
            for turn, at in enumerate(range(0, APPEND_BATCHES, APPEND_CHUNK)):
                for k in range(3):
                    side = (turn + k) % 3
                    seconds[side] += sides[side](copies[side][at : at + APPEND_CHUNK])
        shutil.rmtree(directory)
        for i, fd in enumerate(fds):
            os.close(fd)
            os.unlink(os.path.join(tmp, f"raw-{i}"))
        return seconds

    def checks() -> float:
        """The checks an append makes of its batches, alone: the C walk (CRC32C, every record)."""
        start = time.thread_time()
        for b in batches:
            _scan.check_append(b, True, False, False, 1 << 20, bounds, decompress, None)
        return time.thread_time() - start

    raws, series, appends, walks = [], [], [], []
    for _ in range(REPEATS):
        raw_s, series_s, ours_s = run(copies)
        raws.append(raw_s)
        series.append(series_s)
        appends.append(ours_s)
        walks.append(checks())
    raw_s, series_s = statistics.median(raws), statistics.median(series)
    ours_s, walk_s = statistics.median(appends), statistics.median(walks)
    per = 1e6 / APPEND_BATCHES
    print(f"   os.write                    {raw_s * per:6.2f} µs/batch  {size / raw_s / 1e6:7.0f} MB/s")
    print(f"   checks + os.write in series {series_s * per:6.2f} µs/batch  {size / series_s / 1e6:7.0f} MB/s")
    print(f"   append_batches              {ours_s * per:6.2f} µs/batch  {size / ours_s / 1e6:7.0f} MB/s")
    print(f"   (its checks alone, the batches cold in memory as in the runs: {walk_s * per:.2f} µs/batch)")
    # an idempotent producer's batches (librdkafka's default), the same passes: not a target
    producer = [copies[0], copies[1], [make_batch(n, producer_id=1) for n in range(APPEND_BATCHES)]]
    passes = [run(producer) for _ in range(REPEATS)]
    idempotent = statistics.median(w / o for _, w, o in passes)
    print(f"   (an idempotent producer's batches: {statistics.median(o for *_, o in passes) * per:.2f} µs/batch,")
    print(f"    {idempotent:.0%} of the series in the same passes)")
    # each pass's ratio (its sides took turns: the same load), the median of them
    ratio = statistics.median(r / o for r, o in zip(raws, appends, strict=True))
    work = statistics.median(w / o for w, o in zip(series, appends, strict=True))
    return [
        ("append >= 60 % of os.write", f"{ratio:.0%}", ratio >= 0.6),
        ("append >= 90 % of checks + os.write in series", f"{work:.0%}", work >= 0.9),
    ]


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


# open files a segment holds: its .log's; its indexes, rolled (full) and of a page at most,
# are copies (index.py), larger ones maps, each holding an fd (Python's mmap keeps a dup)
FILES_A_SEGMENT = 1


class TooFewFiles(Exception):
    """The process may not open the files a log of that many segments holds."""


def _thread_usage() -> tuple[float, float]:
    usage = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    return usage.ru_utime, usage.ru_stime


def _split_since(usage: tuple[float, float]) -> tuple[float, float]:
    """User and kernel CPU µs a lookup since ``usage`` (a pass of LOOKUPS)."""
    now = _thread_usage()
    return (now[0] - usage[0]) / LOOKUPS * 1e6, (now[1] - usage[1]) / LOOKUPS * 1e6


class Lookups:
    """Random lookups in the lookup partition cut into ``segments`` segments: the same
    targets in every log, the segments opened by a warm-up pass, a sample of answers
    checked."""

    def __init__(self, tmp: str, segments: int) -> None:
        files_needed = FILES_A_SEGMENT * segments + 1000  # and the 10-segment log's (mapped: 3 each)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < files_needed:
            if hard != resource.RLIM_INFINITY and hard < files_needed:
                raise TooFewFiles(f"{files_needed:,} open files needed, the hard limit is {hard:,}")
            resource.setrlimit(resource.RLIMIT_NOFILE, (files_needed, hard))
        self.directory = os.path.join(tmp, f"lookup{segments}")
        batch_bytes = len(make_batch(0))
        fill(self.directory, LOOKUP_BATCHES, LOOKUP_BATCHES // segments * batch_bytes)
        self.logs = seglog.open(self.directory, background=False)
        self.log = log = self.logs.partition("p", 0)
        assert segments <= len(log.segments) <= segments + 1, len(log.segments)
        rng = random.Random(4)
        end = log.log_end_offset
        self.offsets = [rng.randrange(end) for _ in range(LOOKUPS)]
        self.stamps = [START_TS + rng.randrange(end) for _ in range(LOOKUPS)]
        for o in range(0, end, RECORDS):  # warm-up: opens every segment and its indexes
            log.read(o, 1, min_one_message=False)
            log.offset_for_timestamp(START_TS + o)
        for o, t in zip(self.offsets[:200], self.stamps[:200], strict=True):  # the answers are right
            fetch = log.read(o, 1, min_one_message=False)
            assert fetch.slice is not None
            head = fetch.slice.handle.pread(61, fetch.slice.position)
            base = _FRAME.unpack_from(head)[0]
            assert base <= o <= base + _LAST_DELTA.unpack_from(head, 23)[0], (o, fetch)
            found = log.offset_for_timestamp(t)
            assert found == (t - START_TS, t), (found, t)
        # (printed, not timed apart) each pass's user and kernel CPU time a lookup: where
        # what the segments add goes (the kernel's share is the header's pread in a cold file)
        self.splits: dict[str, list[tuple[float, float]]] = {}
        self.reset_splits()

    def by_offset(self) -> float:
        read, usage, start = self.log.read, _thread_usage(), time.thread_time()
        for o in self.offsets:
            read(o, 1, min_one_message=False)
        rate = LOOKUPS / (time.thread_time() - start)
        self.splits["by_offset"].append(_split_since(usage))
        return rate

    def by_timestamp(self) -> float:
        find, usage, start = self.log.offset_for_timestamp, _thread_usage(), time.thread_time()
        for t in self.stamps:
            find(t)
        rate = LOOKUPS / (time.thread_time() - start)
        self.splits["by_timestamp"].append(_split_since(usage))
        return rate

    def reset_splits(self) -> None:
        self.splits = {"by_offset": [], "by_timestamp": []}

    def split(self, kind: str) -> str:
        """The median user + kernel µs a lookup of ``kind``'s passes so far."""
        passes = self.splits[kind]
        user, kernel = (statistics.median(p[k] for p in passes) for k in (0, 1))
        return f"{user:.2f} + {kernel:.2f}"

    def close(self) -> None:
        self.logs.close()
        shutil.rmtree(self.directory)


def alternated(base: Callable[[], float], other: Callable[[], float]) -> tuple[float, float]:
    """Medians of REPEATS runs of each, each run of ``other`` right after one of ``base``."""
    bases, others = [], []
    for _ in range(REPEATS):
        bases.append(base())
        others.append(other())
    return statistics.median(bases), statistics.median(others)


def share_label(kind: str, segments: int, target: float) -> str:
    return f"lookups {kind}, {segments:,} segs >= {target:.0%} of {BASE_SEGMENTS}"


def lookups(tmp: str) -> list[tuple[str, str, bool]]:
    size = LOOKUP_BATCHES * len(make_batch(0))
    print(
        f"4. lookups: {LOOKUPS:,} random targets a pass, one partition of {LOOKUP_BATCHES:,} batches "
        f"({size / MiB:.0f} MiB) in {BASE_SEGMENTS} / {' / '.join(f'{n:,}' for n in LOOKUP_TARGETS)} segments"
    )
    base = Lookups(tmp, BASE_SEGMENTS)
    rate_offset, rate_time = median_of(base.by_offset), median_of(base.by_timestamp)
    print(f"   {BASE_SEGMENTS:6,} segments: by offset {rate_offset:9,.0f}/s          by timestamp {rate_time:9,.0f}/s")
    rows = [
        (f"lookups by {kind} >= 100,000/s, {BASE_SEGMENTS} segments", f"{rate:,.0f}/s", rate >= 100_000)
        for kind, rate in (("offset", rate_offset), ("timestamp", rate_time))
    ]
    try:
        for segments, target in LOOKUP_TARGETS.items():
            try:
                other = Lookups(tmp, segments)
            except TooFewFiles as e:
                print(f"   {segments:6,} segments: not measured: {e}")
                if target is not None:
                    rows += [(share_label(k, segments, target), "no fds", False) for k in ("by offset", "by timestamp")]
                continue
            try:
                base.reset_splits()  # (the row's alternated passes only)
                shares = []
                for kind in ("by_offset", "by_timestamp"):
                    base_rate, rate = alternated(getattr(base, kind), getattr(other, kind))
                    shares.append((kind.replace("_", " "), rate, rate / base_rate))
            finally:
                other.close()
            print(f"   {segments:6,} segments: " + "   ".join(f"{k} {r:9,.0f}/s ({s:4.0%})" for k, r, s in shares))
            splits = (
                f"{k.replace('_', ' ')} {other.split(k)} / {base.split(k)}" for k in ("by_offset", "by_timestamp")
            )
            print("          CPU µs a lookup, user + kernel, this log / the 10-segment one: " + "   ".join(splits))
            if target is not None:
                rows += [(share_label(k, segments, target), f"{s:.0%}", s >= target) for k, _, s in shares]
    finally:
        base.close()
    print(f"   (each share: of the {BASE_SEGMENTS}-segment rate in runs alternated with the row's)")
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
