"""Compaction and retention speed, with the baseline measured in the same run.

1. Compaction throughput, MB/s of input (the segments the cleaner reads), for
   several record sizes, against a raw sequential read plus write (and fsync)
   of the same segment files. Target: >= 40 % of the raw rate. For the lz4
   log, also the codec ceiling: lz4's own work alone, in liblz4's one-call
   frame functions (python-lz4) with Kafka's settings (64 KiB independent
   blocks, no checksums, the fast level): decompressing each input batch
   twice (the map pass and the rewrite each read it) and compressing each
   output batch once, which bounds what any cleaning of it can reach; printed
   beside the cleaning, alternated with it. Both in the cleaning thread's CPU
   time (the codec waits on nothing; the cleaning's fsyncs run in a thread of
   their own), so that other processes' load moves both alike. Target: the
   cleaning >= 90 % of the ceiling.
2. Memory of a cleaning whose dedupe buffer is smaller than its dirty section
   needs (so it cleans in several passes): tracemalloc's peak and the growth
   of the peak RSS, against log.cleaner.dedupe.buffer.size.
3. A retention pass over 10,000 segments when nothing is due. Target: < 100 ms.

Each log: 64 MiB of 100-record batches whose keys are drawn from 100,000, a
first cleaning (every offset dirty). Medians of a few repeats, interleaved
with the baseline so both see the same machine.

Run: ``.venv/bin/python bench/cleaner.py [lz4]`` (``lz4``: the lz4 row of 1. alone).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc

import lz4.frame

import seglog
from seglog.records import BatchIterator, Compression, RecordBatch, build_batch
from seglog.records.layout import HEADER_SIZE
from seglog.storage import checkpoint

NOW = 1_700_000_000_000
LOG_BYTES = 64 << 20
KEYS = [b"key-%012d" % i for i in range(100_000)]
REPEATS = 5


WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"user", b"order", b"status", b"shipped", b"42", b"true", b"null"]


def values(size: int, count: int = 1000) -> list[bytes]:
    """JSON-like values: they compress about 3:1, as real ones do."""
    rng = random.Random(2)
    out = []
    for i in range(count):
        text = b'{"id": %d, "body": "' % i
        while len(text) < size - 2:
            text += rng.choice(WORDS) + b" %d " % rng.randrange(10**6)
        out.append(text[: size - 2] + b'"}')
    return out


def build(directory: str, value_size: int, codec: Compression) -> int:
    rng = random.Random(1)
    pool = values(value_size)
    with seglog.open(directory, clock=lambda: NOW, background=False) as logs:
        logs.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 256 << 20})
        log = logs.partition("c", 0)
        while log.size_in_bytes < LOG_BYTES:
            records = [(KEYS[rng.randrange(len(KEYS))], pool[rng.randrange(len(pool))], NOW) for _ in range(100)]
            log.append_batches(build_batch(records, compression=codec))
        log.roll()
        return log.size_in_bytes


def raw_copy_rate(directory: str) -> float:
    """MB/s of reading every segment file in 1 MiB chunks and writing it to one file, fsynced."""
    part = os.path.join(directory, "c-0")
    files = sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(".log"))
    out_path = os.path.join(directory, "raw.out")
    buffer = bytearray(1 << 20)
    start = time.perf_counter()
    total = 0
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            position = 0
            while n := os.preadv(fd, [buffer], position):
                os.write(out, memoryview(buffer)[:n])
                position += n
            os.close(fd)
            total += position
        os.fsync(out)
    finally:
        os.close(out)
    rate = total / (time.perf_counter() - start) / 1e6
    os.unlink(out_path)
    return rate


def clean_rate(source: str, work: str, config: dict | None = None) -> tuple[float, int, int, float]:
    """MB/s of input of one forced cleaning of a fresh copy; bytes read, bytes written, and the
    cleaning thread's CPU seconds."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    with seglog.open(work, config, clock=lambda: NOW, background=False) as logs:
        start, cpu = time.perf_counter(), time.thread_time()
        stats = logs.clean(force=True)
        seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
    read = sum(s.bytes_read for s in stats)
    return read / seconds / 1e6, read, sum(s.bytes_written for s in stats), cpu


def log_batches(directory: str) -> list[RecordBatch]:
    part = os.path.join(directory, "c-0")
    out = []
    for name in sorted(f for f in os.listdir(part) if f.endswith(".log")):
        with open(os.path.join(part, name), "rb") as f:
            out += [b for b in BatchIterator(f.read()) if isinstance(b, RecordBatch) and b.record_count]
    return out


def codec_seconds(source: str, cleaned: str) -> tuple[float, float]:
    """lz4's work in a cleaning, alone, in liblz4's own calls: seconds to decompress each input
    batch twice, and to compress each output batch's records once with Kafka's settings."""
    inputs = [bytes(b.buffer[HEADER_SIZE:]) for b in log_batches(source)]
    sections = [lz4.frame.decompress(b.buffer[HEADER_SIZE:]) for b in log_batches(cleaned)]
    start = time.thread_time()
    for _ in range(2):
        for frame in inputs:
            lz4.frame.decompress(frame)
    middle = time.thread_time()
    for section in sections:
        lz4.frame.compress(
            section,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    return middle - start, time.thread_time() - middle


LOGS = [
    ("100 B values", 100, Compression.NONE),
    ("1 KiB values", 1024, Compression.NONE),
    ("4 KiB values", 4096, Compression.NONE),
    ("1 KiB values, lz4", 1024, Compression.LZ4),
]


def throughput(tmp: str, logs: list[tuple[str, int, Compression]]) -> tuple[list[tuple[str, float, float]], float]:
    """The rows (label, raw MB/s, clean MB/s) and the lz4 cleaning's share of its codec ceiling."""
    print("1. compaction throughput (MB/s of input; raw = read + write + fsync of the same files; medians)")
    print(f"   {'records':24s} {'in MB':>6s} {'out MB':>6s} {'raw MB/s':>9s} {'clean MB/s':>10s} {'ratio':>6s}")
    rows = []
    codec_notes = []
    share = 0.0
    for label, size, codec in logs:
        source = os.path.join(tmp, "source")
        work = os.path.join(tmp, "work")
        shutil.rmtree(source, ignore_errors=True)
        build(source, size, codec)
        raws, cleans, cpus, codecs = [], [], [], []
        for _ in range(REPEATS):
            raws.append(raw_copy_rate(source))
            rate, read, written, cpu = clean_rate(source, work)
            cleans.append(rate)
            cpus.append(cpu)
            if codec == Compression.LZ4:
                codecs.append(codec_seconds(source, work))
        raw, clean = statistics.median(raws), statistics.median(cleans)
        ratio = clean / raw
        rows.append((label, raw, clean))
        print(f"   {label:24s} {read / 1e6:6.1f} {written / 1e6:6.1f} {raw:9.0f} {clean:10.1f} {ratio:6.0%}")
        if codecs:
            decompress = statistics.median(d for d, _ in codecs)
            compress_ = statistics.median(c for _, c in codecs)
            cpu = statistics.median(cpus)
            share = (decompress + compress_) / cpu
            codec_notes.append(
                f"   {label}, CPU time: codec ceiling (liblz4 alone: 2 x decompress {decompress * 1e3:.0f} ms + "
                f"compress out {compress_ * 1e3:.0f} ms) {read / (decompress + compress_) / 1e6:.0f} MB/s of input; "
                f"the cleaning {cpu * 1e3:.0f} ms, {read / cpu / 1e6:.0f} MB/s: {share:.0%} of the ceiling"
            )
    for note in codec_notes:
        print(note)
    return rows, share


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def memory_child(work: str, budget: int) -> None:
    """In a fresh process: the cleaning's tracemalloc peak and peak RSS growth."""
    with seglog.open(work, {"log.cleaner.dedupe.buffer.size": budget}, clock=lambda: NOW, background=False) as logs:
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (Linux): what the cleaning adds is measured alone
        rss_before = _vm("VmRSS")
        tracemalloc.start()
        stats = logs.clean(force=True)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        growth = _vm("VmHWM") - rss_before
    records = sum(s.map_records_read for s in stats)
    print(len(stats), records, peak, growth)


def memory(tmp: str) -> None:
    budget = 2 << 20
    print(f"2. memory of a cleaning of 100 B records with a {budget >> 20} MiB dedupe buffer (a fresh process)")
    source = os.path.join(tmp, "source")
    shutil.rmtree(source, ignore_errors=True)
    build(source, 100, Compression.NONE)
    work = os.path.join(tmp, "work")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", work, str(budget)], capture_output=True, text=True, check=True
    )
    passes, records, peak, growth = (int(x) for x in out.stdout.split())
    mib = 2**20
    print(f"   {passes} passes over {records:,} records (100,000 keys)")
    print(f"   tracemalloc peak {peak / mib:5.1f} MiB = dedupe buffer {budget / mib:.1f} + {(peak - budget) / mib:.1f}")
    print(f"   peak RSS growth  {growth / mib:5.1f} MiB (the page cache of the files read is not RSS)")


def build_segments(directory: str, partitions: int, segments: int) -> None:
    """Segments written as Kafka leaves them (cleanly shut down), without an append each."""
    recent = int(time.time() * 1000) - 3_600_000
    for p in range(partitions):
        part = os.path.join(directory, f"r-{p}")
        os.makedirs(part)
        for base in range(segments + 1):
            name = os.path.join(part, f"{base:020d}")
            with open(name + ".log", "wb") as f:
                if base < segments:
                    f.write(build_batch([(b"k", b"v" * 50, recent)], base_offset=base))
            open(name + ".index", "wb").close()  # no entry: the segment is smaller than index.interval.bytes
            with open(name + ".timeindex", "wb") as f:
                if base < segments:
                    f.write(struct.pack(">qi", recent, 0))  # the entry a roll leaves
    checkpoint.write_offsets(
        os.path.join(directory, "recovery-point-offset-checkpoint"), {("r", p): segments for p in range(partitions)}
    )
    with open(os.path.join(directory, ".kafka_cleanshutdown"), "wb"):
        pass


def retention(tmp: str) -> list[tuple[str, float]]:
    print("3. a retention pass when nothing is due (retention.ms 7 days, data an hour old)")
    rows = []
    for partitions, segments in [(1, 10_000), (100, 100)]:
        directory = os.path.join(tmp, f"ret{partitions}")
        build_segments(directory, partitions, segments)
        with seglog.open(directory, background=False) as logs:
            for retention_bytes in (-1, 1 << 40):
                logs.alter_topic_config("r", {"retention.bytes": retention_bytes})
                times = []
                for _ in range(5):
                    start = time.perf_counter()
                    assert logs.enforce_retention() == []
                    times.append((time.perf_counter() - start) * 1000)
                label = f"{partitions} x {segments} segments, retention.bytes {'set' if retention_bytes > 0 else '-1'}"
                rows.append((label, times[0]))
                print(f"   {label:52s} first {times[0]:6.1f} ms, then {statistics.median(times[1:]):6.2f} ms")
        shutil.rmtree(directory)
    return rows


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="seglog-bench-cleaner-")
    try:
        only_lz4 = sys.argv[1:] == ["lz4"]
        rows, share = throughput(tmp, [log for log in LOGS if log[2] == Compression.LZ4] if only_lz4 else LOGS)
        ret = []
        if not only_lz4:
            memory(tmp)
            ret = retention(tmp)
        print("targets:")
        for label, raw, clean in rows:
            verdict = "met" if clean >= 0.4 * raw else "NOT met"
            print(f"   compaction >= 40 % of raw I/O, {label:20s} {clean / raw:5.0%}  {verdict}")
        verdict = "met" if share >= 0.9 else "NOT met"
        print(f"   lz4 compaction >= 90 % of its codec ceiling      {share:5.0%}  {verdict}")
        if ret:
            worst = max(ms for _, ms in ret)
            print(f"   retention pass < 100 ms: worst first pass {worst:.1f} ms  {'met' if worst < 100 else 'NOT met'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-child"]:
        memory_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
