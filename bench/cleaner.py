"""Compaction and retention speed, with the baseline measured in the same run.

1. Compaction throughput, MB/s of input (the segments the cleaner reads), for
   several record sizes, against a raw sequential read plus write (and fsync)
   of the same segment files. Target: >= 40 % of the raw rate. For the lz4
   log, also its ceiling: the work no cleaning of it can skip, done alone with
   the very functions and settings the cleaner uses (liblz4's, python-lz4's
   copy, called through ctypes into buffers allocated once: Kafka's 64 KiB
   independent blocks, no checksums, lz4-java's fast compressor, which is
   LZ4_compress_default): each input frame decompressed twice (the map pass
   and the rewrite each read it), each rebuilt batch's records compressed
   once, plus two raw reads of the input segments and a write of the output
   (page cache, no fsync); printed beside the cleaning, alternated with it.
   Two reads as two decompressions: Kafka's cleaner reads each dirty segment
   twice, into its read buffer to build the offset map (buildOffsetMapForSegment)
   and again to filter it (cleanInto), and so does seglog's. Both in the
   cleaning thread's CPU time (the cleaning's fsyncs run in a thread of their
   own), so that other processes' load moves both alike. The cleaning runs in a
   log manager with its scheduler, as a broker's (its cleaner threads off), so
   that the replaced segments' files are removed file.delete.delay.ms later by
   the scheduler's thread, as Kafka's replaceSegments has them, not inline.
   Target: the cleaning >= 90 % of the ceiling.
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

import ctypes
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

import lz4.block
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
    # a broker's manager: its scheduler removes the replaced files later (the close drops
    # them, as a broker's shutdown leaves them to the next start); no cleaner threads
    config = {"log.cleaner.enable": False, **(config or {})}
    with seglog.open(work, config, clock=lambda: NOW) as logs:
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


def _liblz4() -> ctypes.CDLL:
    """liblz4's functions as the cleaner finds them: exported by python-lz4's block module."""
    lib = ctypes.CDLL(lz4.block._block.__file__, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    lib.LZ4_decompress_safe.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.LZ4_compress_fast_extState.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3
    return lib


def _blocks(frame: bytes) -> list[tuple[int, int]]:
    """(position, size) of each block of a frame of Kafka's shape, all compressed."""
    out, pos = [], 7  # the header: magic, FLG, BD, HC
    while word := struct.unpack_from("<I", frame, pos)[0]:
        out.append((pos + 4, word & 0x7FFFFFFF))
        pos += 4 + (word & 0x7FFFFFFF)
    return out


def ceiling_seconds(source: str, cleaned: str) -> tuple[float, float, float]:
    """What a cleaning cannot skip, done alone: CPU seconds to decompress each input frame
    twice and compress the records of each batch the cleaning rebuilt once, as the
    cleaner does (block by block, Kafka's settings), and to read the input segments twice
    (the map pass and the rewrite each read them, in Kafka's cleaner as in seglog's) and
    write the output ones once (1 MiB at a time, no fsync)."""
    lib = _liblz4()
    inputs = log_batches(source)
    frames = [bytes(b.buffer[HEADER_SIZE:]) for b in inputs]
    kept = {bytes(b.buffer) for b in inputs}
    sections = [
        lz4.frame.decompress(b.buffer[HEADER_SIZE:]) for b in log_batches(cleaned) if bytes(b.buffer) not in kept
    ]
    block = 64 << 10
    dst = ctypes.create_string_buffer(block)
    state = ctypes.create_string_buffer(lib.LZ4_sizeofState())
    address = ctypes.addressof
    held_buffers = []  # the ctypes copies the addresses below point into
    jobs = []
    for frame in frames:
        held = ctypes.create_string_buffer(frame, len(frame))
        held_buffers.append(held)
        jobs += [(address(held) + pos, size) for pos, size in _blocks(frame)]
    outs = []
    for section in sections:
        held = ctypes.create_string_buffer(section, len(section))
        held_buffers.append(held)
        outs += [(address(held) + at, min(block, len(section) - at)) for at in range(0, len(section), block)]
    decompress, compress_ = lib.LZ4_decompress_safe, lib.LZ4_compress_fast_extState
    out = address(dst)
    start = time.thread_time()
    for _ in range(2):
        for src, size in jobs:
            decompress(src, out, size, block)
    middle = time.thread_time()
    for src, size in outs:
        compress_(address(state), src, out, size, size - 1, 1)
    codec_end = time.thread_time()
    io = read_write_seconds(source, cleaned)
    return middle - start, codec_end - middle, io


def _segment_files(directory: str) -> list[str]:
    part = os.path.join(directory, "c-0")
    return sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(".log"))


def read_write_seconds(source: str, cleaned: str) -> float:
    """CPU seconds to read the input segments twice and write the cleaned ones' bytes once."""
    buffer = bytearray(1 << 20)
    out_path = os.path.join(os.path.dirname(cleaned), "rw.out")
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.thread_time()
    try:
        for path in _segment_files(source) * 2:
            fd = os.open(path, os.O_RDONLY)
            position = 0
            while n := os.preadv(fd, [buffer], position):
                position += n
            os.close(fd)
        view = memoryview(buffer)
        for path in _segment_files(cleaned):
            size = os.path.getsize(path)
            for at in range(0, size, len(buffer)):
                os.write(out, view[: min(len(buffer), size - at)])  # the cleaning's bytes, from a warm buffer
    finally:
        seconds = time.thread_time() - start
        os.close(out)
        os.unlink(out_path)
    return seconds


LOGS = [
    ("100 B values", 100, Compression.NONE),
    ("1 KiB values", 1024, Compression.NONE),
    ("4 KiB values", 4096, Compression.NONE),
    ("1 KiB values, lz4", 1024, Compression.LZ4),
]


def throughput(tmp: str, logs: list[tuple[str, int, Compression]]) -> tuple[list[tuple[str, float, float]], float]:
    """The rows (label, raw MB/s, clean MB/s) and the lz4 cleaning's share of its ceiling."""
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
        raws, cleans, cpus, ceilings = [], [], [], []
        for _ in range(REPEATS):
            raws.append(raw_copy_rate(source))
            rate, read, written, cpu = clean_rate(source, work)
            cleans.append(rate)
            cpus.append(cpu)
            if codec == Compression.LZ4:
                ceilings.append(ceiling_seconds(source, work))
        raw, clean = statistics.median(raws), statistics.median(cleans)
        ratio = clean / raw
        rows.append((label, raw, clean))
        print(f"   {label:24s} {read / 1e6:6.1f} {written / 1e6:6.1f} {raw:9.0f} {clean:10.1f} {ratio:6.0%}")
        if ceilings:
            decompress, compress_, io = (statistics.median(c[i] for c in ceilings) for i in range(3))
            cpu = statistics.median(cpus)
            # each cleaning beside the ceiling measured right after it: the median of those ratios
            share = statistics.median(sum(c) / t for c, t in zip(ceilings, cpus, strict=True))
            codec_notes.append(
                f"   {label}, CPU time: ceiling {(decompress + compress_ + io) * 1e3:.0f} ms = liblz4 alone as the "
                f"cleaner calls it (2 x decompress {decompress * 1e3:.0f} ms + compress {compress_ * 1e3:.0f} ms) + "
                f"2 x read in, write out {io * 1e3:.0f} ms, {read / (decompress + compress_ + io) / 1e6:.0f} MB/s of "
                f"input; the cleaning {cpu * 1e3:.0f} ms, {read / cpu / 1e6:.0f} MB/s: {share:.0%} of the ceiling"
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
        print(f"   lz4 compaction >= 90 % of its ceiling            {share:5.0%}  {verdict}")
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
