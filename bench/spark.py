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
- streaming latency (``--latency`` runs only this): end-to-end, a record produced into a seglog
  broker (its produce time in its value) → its result readable by a consumer of the output topic,
  for a query reading through ``kafka.bootstrap.servers`` and writing through the broker sink at
  ``trigger(processingTime="1 second")``: at-least-once (read_uncommitted consumer) and
  ``exactlyOnce`` (read_committed consumer). Baselines in the same run: the trigger interval, and a
  plain confluent-kafka Consumer → Producer loop in Python doing the same copy.

The other Spark rows of the README come from ``bench/spark_fetch.py`` (reads through a broker)
and ``bench/spark_produce.py`` (writes through a broker).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

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
    parser.add_argument("--latency", action="store_true", help="measure the streaming latency only")
    parser.add_argument("--seconds", type=float, default=40, help="each latency measurement's length")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import seglog.spark

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
    try:
        if not args.latency:
            files(spark, args)
        latency(spark, args.seconds)
    finally:
        spark.stop()


def files(spark: Any, args: argparse.Namespace) -> None:
    """The reads and writes of log dirs (``path``) against their ceilings."""
    import seglog

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
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- streaming latency ---------------------------------------------------------------------------

RATE = 50  # records a second into the query's input topic
WARM_UP = 20.0  # seconds of each copier's run before records are timed: the first micro-batches, workers started
SETTLE = 20.0  # seconds after the timed records for the last of them to come out (p99 on a loaded machine: seconds)


def latency(spark: Any, seconds: float) -> None:
    """End-to-end latency of the streaming query, the broker sink's two modes, and the loop's."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from spark_fetch import start_broker

    work = tempfile.mkdtemp(prefix="seglog-bench-spark-latency-")
    broker, bootstrap = start_broker(os.path.join(work, "broker"))
    try:
        topics = ["lat-in", "lat-loop", "lat-alo", "lat-eos"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
            future.result(60)
        stamper = Stamper(bootstrap)
        stamper.start()
        try:
            results = {
                "loop": timed(bootstrap, "lat-loop", "read_uncommitted", seconds, stamper, lambda: Loop(bootstrap)),
                "alo": timed(
                    bootstrap, "lat-alo", "read_uncommitted", seconds, stamper, lambda: Query(spark, bootstrap, work)
                ),
                "eos": timed(
                    bootstrap,
                    "lat-eos",
                    "read_committed",
                    seconds,
                    stamper,
                    lambda: Query(spark, bootstrap, work, exactly_once=True),
                ),
            }
        finally:
            stamper.stop.set()
            stamper.join()
    finally:
        broker.kill()
        broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\nstreaming end-to-end latency: produced -> readable, {RATE} records/s, "
        f"{seconds:.0f} s timed each (ms, p50 / p99)"
    )
    labels = {
        "loop": "confluent-kafka Consumer->Producer loop",
        "alo": "Spark, trigger 1 s, at-least-once",
        "eos": "Spark, trigger 1 s, exactlyOnce (read_committed)",
    }
    for name, (p50, p99, note) in results.items():
        print(f"  {labels[name]:50} {p50:7,.0f} / {p99:7,.0f}   {note}")
    print(f"  {'trigger interval (a record waits half of it on average)':50} {1000:7,} ")


class Stamper(threading.Thread):
    """Produces RATE records a second into lat-in, each value the time it was produced (ns)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self.stop = threading.Event()
        self.stamps: list[int] = []

    def run(self) -> None:
        n = 0
        while not self.stop.wait(1 / RATE):
            stamp = time.time_ns()
            self.producer.produce("lat-in", b"%d" % stamp, b"k%d" % (n % 16))
            self.stamps.append(stamp)
            self.producer.poll(0)
            n += 1
        self.producer.flush(30)


class Loop(threading.Thread):
    """The baseline copier: what a Python user writes without Spark, lat-in to lat-loop."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, Producer

        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-loop", "auto.offset.reset": "latest"}
            | {"fetch.wait.max.ms": 50, "enable.auto.commit": False}
        )
        self.consumer.subscribe(["lat-in"])
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self.halt = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.halt.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.producer.produce("lat-loop", msg.value(), msg.key())
            self.producer.poll(0)
        self.producer.flush(30)
        self.consumer.close()

    def finish(self) -> str:
        self.halt.set()
        self.join()
        return ""


class Query:
    """The streaming query: lat-in through kafka.bootstrap.servers to lat-alo or lat-eos by the broker sink."""

    def __init__(self, spark: Any, bootstrap: str, work: str, exactly_once: bool = False) -> None:
        name = "eos" if exactly_once else "alo"
        rows = spark.readStream.format("seglog").option("kafka.bootstrap.servers", bootstrap)
        rows = rows.option("subscribe", "lat-in").option("startingOffsets", "latest").load().select("key", "value")
        writer = rows.writeStream.format("seglog").option("kafka.bootstrap.servers", bootstrap)
        writer = writer.option("topic", f"lat-{name}").option("exactlyOnce", str(exactly_once).lower())
        writer = writer.option("checkpointLocation", os.path.join(work, f"checkpoint-{name}"))
        self.query = writer.trigger(processingTime="1 second").start()

    def finish(self) -> str:
        durations = [p["durationMs"]["triggerExecution"] for p in self.query.recentProgress if p["numInputRows"]]
        self.query.stop()
        return f"(micro-batches with rows: median {statistics.median(durations):,.0f} ms, {len(durations)} of them)"


def timed(bootstrap: str, topic: str, isolation: str, seconds: float, stamper: Stamper, copier: Callable[[], Any]):
    """p50 and p99 (ms) of the records produced while ``copier`` ran warm for ``seconds``: from their
    production to a consumer of ``topic`` reading them. Any not read by then are reported."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False}
        | {"isolation.level": isolation, "fetch.wait.max.ms": 50}
    )
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1] for p in range(2)]
    consumer.assign([TopicPartition(topic, p, end) for p, end in enumerate(ends)])
    readable: dict[int, int] = {}
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                readable.setdefault(int(msg.value()), time.time_ns())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    running = copier()
    start = time.time_ns() + int(WARM_UP * 1e9)
    end = start + int(seconds * 1e9)
    time.sleep(WARM_UP + seconds + SETTLE)
    note = running.finish()
    done.set()
    reader.join()
    consumer.close()
    stamps = [s for s in stamper.stamps if start <= s < end]
    missing = [s for s in stamps if s not in readable]
    ms = [(readable[s] - s) / 1e6 for s in stamps if s in readable]
    cuts = statistics.quantiles(ms, n=100)
    if missing:
        note += f" ({len(missing)} of {len(stamps)} records not readable {SETTLE:.0f} s later: left out)"
    return cuts[49], cuts[98], note


if __name__ == "__main__":
    main()
