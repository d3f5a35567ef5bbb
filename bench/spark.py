"""Spark through format("seglog"), against ceilings measured in the same run, local[2].

Data: 4 partitions x 1 M records of 100-byte values (``--records`` changes the
count per partition). Reads are forced to materialize every column by writing
to Spark's ``noop`` sink.

- read: seglog vs a ceiling source yielding the same rows as prebuilt Arrow
  batches (Arrow IPC files, memory-mapped: no decoding), and vs Spark's own
  JSON Lines reader on the same records;
- write: seglog vs an Arrow writer that only counts the rows (issue 5's target), and,
  for information, vs an Arrow writer that writes each task's batches to an Arrow
  IPC file: the counting writer never touches the bytes, so it measures only what
  Spark costs to hand the rows to Python, while any writer that keeps them must copy
  every byte at least once into files. Each write goes to a dir emptied beforehand,
  outside the timing (removing the last run's 480 MB is not part of a write); the
  writers take turns within each round, so a busy moment of the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import pyarrow as pa

PARTITIONS = 4
TS = 1_700_000_000_000


def build_log(path: str, records: int) -> None:
    import seglog
    from seglog.records import build_batch

    with seglog.open(path, background=False) as logs:
        logs.create_topic("bench", PARTITIONS)
        for p in range(PARTITIONS):
            log = logs.partition("bench", p)
            for start in range(0, records, 1000):
                rows = [
                    (b"key-%d" % (start + i), b"%0100d" % (start + i), TS + start + i, ())
                    for i in range(min(1000, records - start))
                ]
                log.append_batches(build_batch(rows))


def export_ceiling_and_json(path: str, out: str) -> None:
    """The same rows as Arrow IPC files (the ceiling's input) and JSON Lines."""
    import json

    from seglog.spark.arrow import to_arrow_batches
    from seglog.storage import open as open_logs

    with open_logs(path, read_only=True) as logs:
        for p in range(PARTITIONS):
            batches = list(to_arrow_batches(logs.partition("bench", p).batches(), "bench", p))
            with (
                pa.OSFile(os.path.join(out, f"part-{p}.arrow"), "wb") as f,
                pa.ipc.new_file(f, batches[0].schema) as writer,
            ):
                for b in batches:
                    writer.write_batch(b)
            with open(os.path.join(out, f"part-{p}.json"), "w") as f:
                for r in logs.partition("bench", p).records():
                    f.write(
                        json.dumps(
                            {
                                "key": r.key.decode(),
                                "value": r.value.decode(),
                                "topic": "bench",
                                "partition": p,
                                "offset": r.offset,
                                "timestamp": r.timestamp,
                                "timestampType": 0,
                            }
                        )
                        + "\n"
                    )


def define_sources(spark, ipc_dir: str) -> None:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    from seglog.spark.arrow import spark_schema_ddl

    class CeilingReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition) -> Iterator[pa.RecordBatch]:
            source = pa.memory_map(os.path.join(ipc_dir, f"part-{partition.value}.arrow"))
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    class CountingWriter(DataSourceArrowWriter):
        def write(self, iterator):
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

        def commit(self, messages):
            pass

    class IpcFileWriter(DataSourceArrowWriter):
        def __init__(self, path):
            self.path = path

        def write(self, iterator):
            import uuid

            with pa.OSFile(os.path.join(self.path, uuid.uuid4().hex), "wb") as f:
                writer = None
                for batch in iterator:
                    if writer is None:
                        writer = pa.ipc.new_stream(f, batch.schema)
                    writer.write_batch(batch)
                if writer is not None:
                    writer.close()
            return WriterCommitMessage()

        def commit(self, messages):
            pass

    class Ceiling(DataSource):
        @classmethod
        def name(cls):
            return "ceiling"

        def schema(self):
            return spark_schema_ddl(False)

        def reader(self, schema):
            return CeilingReader()

        def writer(self, schema, overwrite):
            if "path" in self.options:
                return IpcFileWriter(self.options["path"])
            return CountingWriter()

    spark.dataSource.register(Ceiling)


def median_seconds(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000, help="records per partition")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-reads", action="store_true", help="measure the writes only")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import seglog.spark

    total = PARTITIONS * args.records
    work = tempfile.mkdtemp(prefix="seglog-bench-spark-")
    try:
        logs, ipc = os.path.join(work, "logs"), os.path.join(work, "ipc")
        os.makedirs(ipc)
        started = time.perf_counter()
        build_log(logs, args.records)
        export_ceiling_and_json(logs, ipc)
        print(
            f"data: {PARTITIONS} x {args.records:,} records of 100-byte values "
            f"(built in {time.perf_counter() - started:.0f} s)"
        )
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")  # no progress bars among the figures
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", "4g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        seglog.spark.register(spark)
        define_sources(spark, ipc)

        def seglog_df():
            return spark.read.format("seglog").option("path", logs).option("subscribe", "bench").load()

        json_schema = (
            "key string, value string, topic string, partition int, offset long, timestamp long, timestampType int"
        )
        reads = {
            "seglog": lambda: seglog_df().write.format("noop").mode("overwrite").save(),
            "ceiling (prebuilt Arrow)": lambda: (
                spark.read.format("ceiling").load().write.format("noop").mode("overwrite").save()
            ),
            "Spark JSON Lines": lambda: (
                spark.read.schema(json_schema)
                .json(os.path.join(ipc, "*.json"))
                .write.format("noop")
                .mode("overwrite")
                .save()
            ),
        }
        if not args.no_reads:
            for fn in reads.values():
                fn()  # warm up: JIT, Python workers, page cache
            rates = {name: total / median_seconds(fn, args.repeats) for name, fn in reads.items()}
            print(f"\nread (rows/s, median of {args.repeats})")
            for name, rate in rates.items():
                print(f"  {name:28} {rate:12,.0f}")
            print(f"  seglog / ceiling   {rates['seglog'] / rates['ceiling (prebuilt Arrow)']:6.0%}   target >= 70 %")
            print(f"  seglog / JSON      {rates['seglog'] / rates['Spark JSON Lines']:6.2f}x  target >= 1x")

        source = spark.read.format("ceiling").load().select("key", "value", "partition").cache()
        source.count()

        sink, files = os.path.join(work, "sink"), os.path.join(work, "files")

        def empty_sink():
            shutil.rmtree(sink, ignore_errors=True)
            with seglog.open(sink, background=False) as logs:
                logs.create_topic("bench", PARTITIONS)

        def empty_files():
            shutil.rmtree(files, ignore_errors=True)
            os.makedirs(files)

        writes = {  # name: (setup, write)
            "seglog": (
                empty_sink,
                lambda: (
                    source.write.format("seglog").option("path", sink).option("topic", "bench").mode("append").save()
                ),
            ),
            "counting Arrow writer": (None, lambda: source.write.format("ceiling").mode("append").save()),
            "Arrow IPC file writer": (
                empty_files,
                lambda: source.write.format("ceiling").option("path", files).mode("append").save(),
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in writes}
        for repeat in range(args.repeats + 1):  # the first round warms up; rounds interleave the writers
            for name, (setup, fn) in writes.items():
                if setup is not None:
                    setup()
                start = time.perf_counter()
                fn()
                if repeat:
                    times[name].append(time.perf_counter() - start)
        w_rates = {name: total / statistics.median(t) for name, t in times.items()}
        print(f"\nwrite (rows/s, median of {args.repeats})")
        for name, rate in w_rates.items():
            print(f"  {name:28} {rate:12,.0f}")
        print(f"  seglog / counting  {w_rates['seglog'] / w_rates['counting Arrow writer']:6.0%}   target >= 70 %")
        rounds = " ".join(f"{c / s:.0%}" for s, c in zip(times["seglog"], times["counting Arrow writer"], strict=True))
        print(f"    each round: {rounds}")
        print(
            f"  seglog / IPC file  {w_rates['seglog'] / w_rates['Arrow IPC file writer']:6.0%}   "
            "(information: the counting writer reads none of the bytes; the IPC writer copies them once, to files)"
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
