"""Segment bytes to Arrow: the C column decoder alone, then under Spark.

1. Decoding, one thread: 1,000-record batches of 100-byte values, uncompressed
   and lz4, and 5-record batches (a producer with linger.ms=0), to pyarrow
   RecordBatches, from batch objects (``to_arrow_batches``, the Spark source's
   path), against ``RecordBatch.records()`` and kafka-python's decoder (rows as Python objects, every field touched).
2. Spark, ``local[2]``: full reads of 4 partitions (``--records`` each, 1 M by
   default) through two tiny Python data sources yielding the same rows:
   (a) the ceiling, prebuilt Arrow batches (memory-mapped Arrow IPC files, no
   decoding) and (b) decoding memory-mapped segment files with
   ``to_arrow_batches``. Each read materializes every column, twice over: written to Spark's
   ``noop`` sink, and summed (``sum(length(value))``, ``sum(offset)``, ...).
   The ratio (b)/(a) is the figure of issue #5 (target >= 70 %). The sources
   take turns in every repeat, and each read is also measured in CPU seconds of
   the whole process tree (JVM and Python workers): on a shared machine the
   rows per CPU-second are the steadier figure.

The Spark conf that matters is printed with the results: Arrow batches a
Python data source yields reach the JVM as they are, so their size is
``max_rows`` here (``spark.sql.execution.arrow.maxRecordsPerBatch`` only sizes
the batches Spark builds from tuples); Python workers are reused
(``spark.python.worker.reuse``), so the decoder's import cost is paid once.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator

import pyarrow as pa
from kafka.record.memory_records import MemoryRecords

from seglog.records import BatchIterator, Compression, build_batch
from seglog.spark.arrow import MAX_ROWS, spark_schema_ddl, to_arrow_batches

RECORDS = 1000  # per Kafka batch
PARTITIONS = 4
REPEATS = 5
TS = 1_700_000_000_000
VALUES = [bytes([i % 251]) * 100 for i in range(RECORDS)]
BATCH_ROWS = (MAX_ROWS, 10_000)  # rows per Arrow batch handed to Spark


def build_log(codec: Compression, batches: int, base: int = 0, per_batch: int = RECORDS) -> bytes:
    out = bytearray()
    for b in range(batches):
        first = base + b * per_batch
        rows = [(b"key-%d" % (first + i), VALUES[i], TS + first + i, ()) for i in range(per_batch)]
        out += build_batch(rows, base_offset=first, compression=codec)
    return bytes(out)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    return statistics.median(timeit.repeat(fn, number=1, repeat=repeats))


def tree_cpu_seconds() -> float:
    """CPU seconds used so far by this process and all its descendants (the JVM, Spark's
    Python workers), reaped ones included; Linux /proc. Robust to other load on the machine,
    where wall-clock rates are not."""
    tick = os.sysconf("SC_CLK_TCK")
    stats, children = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(entry), int(fields[1])
            stats[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0)
        todo += children.get(pid, [])
    return total / tick


# --- 1. the decoder alone -----------------------------------------------------------


def seglog_arrow(log: bytes, include_headers: bool = False) -> int:
    return sum(rb.num_rows for rb in to_arrow_batches(BatchIterator(log), "bench", 0, include_headers=include_headers))


def seglog_records(log: bytes) -> None:
    for batch in BatchIterator(log):
        for r in batch.records():
            (r.offset, r.timestamp, r.key, r.value, r.headers)


def kafka_python(log: bytes) -> None:
    records = MemoryRecords(log)
    while (batch := records.next_batch()) is not None:
        for r in batch:
            (r.offset, r.timestamp, r.key, r.value, r.headers)


def decode_alone() -> None:
    print(f"1. decoding batches of 100-byte values, one thread, median of {REPEATS}\n")
    print(f"{'batches':14} {'decoder':44} {'rows/s':>14} {'vs records()':>13}")
    rows = 100 * RECORDS
    for codec, per_batch in ((Compression.NONE, RECORDS), (Compression.LZ4, RECORDS), (Compression.NONE, 5)):
        log = build_log(codec, rows // per_batch, per_batch=per_batch)
        rates = {
            "seglog -> Arrow (to_arrow_batches)": rows / median_seconds(lambda: seglog_arrow(log), REPEATS),
            "seglog -> Arrow, headers": rows / median_seconds(lambda: seglog_arrow(log, True), REPEATS),
            "seglog RecordBatch.records()": rows / median_seconds(lambda: seglog_records(log), REPEATS),
            "kafka-python 3.x": rows / median_seconds(lambda: kafka_python(log), 3),
        }
        base = rates["seglog RecordBatch.records()"]
        label = f"{codec.name.lower()}, {per_batch:,}"
        for i, (name, rate) in enumerate(rates.items()):
            print(f"{label if i == 0 else '':14} {name:44} {rate:14,.0f} {rate / base:12.1f}x")
    print()


# --- 2. under Spark -----------------------------------------------------------------


def register_sources(spark, work: str) -> None:
    """Two sources over the files of ``work``: prebuilt Arrow (the ceiling) and segment bytes."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def __init__(self, options):
            self.kind = options.get("kind", "segment")
            self.codec = options.get("codec", "none")
            self.max_rows = int(options.get("max_rows", MAX_ROWS))

        def partitions(self):
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition) -> Iterator[pa.RecordBatch]:
            p = partition.value
            if self.kind == "arrow":
                reader = pa.ipc.open_file(pa.memory_map(os.path.join(work, f"{p}.{self.max_rows}.arrow")))
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)
                return
            with open(os.path.join(work, f"{p}.{self.codec}.log"), "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            yield from to_arrow_batches(BatchIterator(mapped), "bench", p, max_rows=self.max_rows)

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "bench_arrow"

        def schema(self):
            return spark_schema_ddl(False)

        def reader(self, schema):
            return Reader(self.options)

    spark.dataSource.register(Source)


def write_files(work: str, records: int) -> None:
    """Per partition: the segment, uncompressed and lz4, and the same rows as Arrow IPC files
    (the ceiling's input) in each Arrow batch size measured."""
    for p in range(PARTITIONS):
        for codec in (Compression.NONE, Compression.LZ4):
            with open(os.path.join(work, f"{p}.{codec.name.lower()}.log"), "wb") as f:
                for start in range(0, records, 100 * RECORDS):
                    f.write(build_log(codec, min(100, (records - start) // RECORDS), base=start))
        with open(os.path.join(work, f"{p}.none.log"), "rb") as f:
            log = f.read()
        for max_rows in BATCH_ROWS:
            batches = list(to_arrow_batches(BatchIterator(log), "bench", p, max_rows=max_rows))
            with (
                pa.OSFile(os.path.join(work, f"{p}.{max_rows}.arrow"), "wb") as f,
                pa.ipc.new_file(f, batches[0].schema) as w,
            ):
                for b in batches:
                    w.write_batch(b)


def under_spark(records: int, repeats: int) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    total = PARTITIONS * records
    work = tempfile.mkdtemp(prefix="seglog-bench-arrow-")
    try:
        started = time.perf_counter()
        write_files(work, records)
        built = time.perf_counter() - started
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register_sources(spark, work)
        conf = spark.sparkContext.getConf()
        print(
            f"2. Spark {spark.version}, local[2], {PARTITIONS} partitions x {records:,} records of 100-byte values "
            f"(files built in {built:.0f} s); median of {repeats}"
        )
        print(
            f"   spark.python.worker.reuse={conf.get('spark.python.worker.reuse', 'true')}, "
            f"spark.sql.execution.arrow.maxRecordsPerBatch="
            f"{spark.conf.get('spark.sql.execution.arrow.maxRecordsPerBatch')} (unused: sources yield Arrow), "
            f"Arrow batch = {MAX_ROWS:,} rows\n"
        )

        def df(**options):
            reader = spark.read.format("bench_arrow")
            for k, v in options.items():
                reader = reader.option(k, str(v))
            return reader.load()

        sums = (
            "sum(length(key))",
            "sum(length(value))",
            "sum(length(topic))",
            "sum(partition)",
            "sum(offset)",
            "max(timestamp)",
            "sum(timestampType)",
        )
        sources = {}
        for max_rows in BATCH_ROWS:
            sources[f"(a) ceiling: prebuilt Arrow, {max_rows:,}"] = {"kind": "arrow", "max_rows": max_rows}
            sources[f"(b) seglog, uncompressed, {max_rows:,}"] = {"codec": "none", "max_rows": max_rows}
            sources[f"(b) seglog, lz4, {max_rows:,}"] = {"codec": "lz4", "max_rows": max_rows}
        sinks: dict[str, Callable] = {
            "noop sink": lambda d: d.write.format("noop").mode("overwrite").save(),
            "sums of every column": lambda d: d.selectExpr(*sums).collect(),
        }
        # the sources take turns in every repeat, so that other load on the machine falls on all alike
        times: dict[tuple[str, str], list[float]] = {(name, sink): [] for name in sources for sink in sinks}
        cpu: dict[tuple[str, str], list[float]] = {(name, sink): [] for name in sources for sink in sinks}
        for sink, run in sinks.items():
            for options in sources.values():
                run(df(**options))  # warm up: JIT, workers, page cache
            for _ in range(repeats):
                for name, options in sources.items():
                    started, cpu_started = time.perf_counter(), tree_cpu_seconds()
                    run(df(**options))
                    times[name, sink].append(time.perf_counter() - started)
                    cpu[name, sink].append(tree_cpu_seconds() - cpu_started)
        rates = {key: total / statistics.median(t) for key, t in times.items()}
        cpu_rates = {key: total / statistics.median(t) for key, t in cpu.items()}
        print(f"{'source, rows per Arrow batch':40} " + " ".join(f"{s:>34}" for s in sinks))
        print(f"{'':40} " + " ".join(f"{'rows/s':>16} {'rows/CPU-s':>17}" for s in sinks))
        for name in sources:
            print(f"{name:40} " + " ".join(f"{rates[name, s]:16,.0f} {cpu_rates[name, s]:17,.0f}" for s in sinks))
        print()
        print("(b)/(a), target >= 70 %: by rows/s, and by rows per CPU-second")
        for max_rows in BATCH_ROWS:
            ceiling = f"(a) ceiling: prebuilt Arrow, {max_rows:,}"
            for name in sources:
                if name.startswith("(b)") and name.endswith(f", {max_rows:,}"):
                    ratios = "  ".join(
                        f"{s}: {rates[name, s] / rates[ceiling, s]:4.0%} "
                        f"{cpu_rates[name, s] / cpu_rates[ceiling, s]:4.0%}"
                        for s in sinks
                    )
                    print(f"  {name[4:]:32} {ratios}")
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per partition (multiple of 1,000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true", help="only the decoder alone")
    args = parser.parse_args()
    decode_alone()
    if not args.no_spark:
        under_spark(args.records, args.repeats)


if __name__ == "__main__":
    main()
