"""The Spark sink through the brokers against a confluent-kafka Producer loop, in one run.

RECORDS rows (keys ``key-N``, 100-byte values) written into a 4-partition topic of a seglog broker
in a process of its own, acks=all and idempotent every way:

1. a confluent-kafka Producer loop over the same rows (Python lists made before the clock starts,
   ``produce`` a row, ``poll(0)`` every 1000): the pure-Python alternative a user would write,
   the baseline;
2. the sink's task without Spark around it (``BrokerWriter.write`` over Arrow batches of 10 000
   rows, what Spark hands a task): Arrow encoded to record batches in C, sent by seglog's
   idempotent producer, one task;
3. ``df.write.format("seglog").option("kafka.bootstrap.servers", ...)`` of a cached DataFrame of
   the same rows, local[2] (two tasks), Spark's own costs included;
4. the same DataFrame written by the loop of 1 in each Spark task (``foreachPartition``): what a
   PySpark user writes without a Kafka sink, the baseline of 3 (Spark's costs on both sides);
5. a streaming query (availableNow, a fresh checkpoint each time) over the same rows in parquet,
   two tasks a micro-batch, written at-least-once (the baseline) and with ``exactlyOnce``
   (transactions: the tasks' InitProducerId and AddPartitionsToTxn, the driver's decision and
   EndTxn of each task's transaction).

Medians of ROUNDS rounds, the writers taking turns within each round. Run:
``.venv/bin/python bench/spark_produce.py [RECORDS]``. Figures on a shared machine are not final:
run it again before quoting a ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from spark_fetch import start_broker

RECORDS = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
ROUNDS = 3
PARTITIONS = 4
ARROW_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default


def rows() -> tuple[list[bytes], list[bytes]]:
    return [b"key-%d" % i for i in range(RECORDS)], [b"%0100d" % i for i in range(RECORDS)]


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(60)


def producer_loop(bootstrap: str, keys: list[bytes], values: list[bytes], topic: str = "loop") -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failed: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            failed.append(err)

    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=report)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed


def partition_loop(bootstrap: str) -> Callable[[Iterator[Any]], None]:
    """``foreachPartition``'s function: the rows of a Spark partition through ``producer_loop``."""

    def write(partition: Iterator[Any]) -> None:
        keys, values = [], []
        for row in partition:
            keys.append(bytes(row.key))
            values.append(bytes(row.value))
        producer_loop(bootstrap, keys, values, "spark-loop")

    return write


def sink_task(bootstrap: str, batches: list[pa.RecordBatch]) -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from seglog.spark.broker_sink import BrokerWriter

    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    writer = BrokerWriter({"kafka.bootstrap.servers": bootstrap, "topic": "task"}, schema)
    done = writer.write(iter(batches))
    assert done.records == RECORDS, done


def stream_write(spark: Any, source: str, bootstrap: str, exactly_once: bool) -> None:
    import tempfile

    rows = spark.readStream.schema("key binary, value binary").parquet(source).repartition(2)
    writer = rows.writeStream.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    writer = writer.option("topic", "eos" if exactly_once else "alo").option("exactlyOnce", str(exactly_once))
    checkpoint = tempfile.mkdtemp(prefix="bench-spark-produce-checkpoint-")
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def median_seconds(runs: dict[str, Callable[[], None]]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    import tempfile

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import seglog.spark

    keys, values = rows()
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    batches = table.to_batches(max_chunksize=ARROW_ROWS)
    import pyarrow.parquet as pq

    source = tempfile.mkdtemp(prefix="bench-spark-produce-in-")
    pq.write_table(table, os.path.join(source, "rows.parquet"))
    broker, bootstrap = start_broker(tempfile.mkdtemp(prefix="bench-spark-produce-"))
    spark = None
    try:
        create_topics(bootstrap, ["loop", "task", "spark", "spark-loop", "alo", "eos"])
        settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"}
        spark = SparkSession.builder.master("local[2]").config(map=settings).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        seglog.spark.register(spark)
        df = spark.createDataFrame(table).repartition(2).cache()
        df.count()

        def spark_write() -> None:
            df.write.format("seglog").option("kafka.bootstrap.servers", bootstrap).option("topic", "spark").mode(
                "append"
            ).save()

        spark_write()  # warm: Python workers, the broker's first segments
        stream_write(spark, source, bootstrap, exactly_once=True)  # warm: the transaction coordinator
        took = median_seconds(
            {
                "loop": lambda: producer_loop(bootstrap, keys, values),
                "task": lambda: sink_task(bootstrap, batches),
                "spark": spark_write,
                "spark loop": lambda: df.foreachPartition(partition_loop(bootstrap)),
                "stream": lambda: stream_write(spark, source, bootstrap, exactly_once=False),
                "stream eos": lambda: stream_write(spark, source, bootstrap, exactly_once=True),
            }
        )
    finally:
        if spark is not None:
            spark.stop()
        broker.kill()
        broker.wait()
    rate = {name: RECORDS / s / 1e6 for name, s in took.items()}
    print(f"{RECORDS} rows of 100 B values into {PARTITIONS} partitions, acks=all, idempotent (M rows/s)")
    print(f"confluent-kafka Producer loop, baseline  {rate['loop']:6.2f}")
    for name, label in (("task", "sink task, no Spark (one task)"), ("spark", "Spark write, local[2]")):
        print(f"{label:40} {rate[name]:6.2f}   {rate[name] / rate['loop']:.2f} x the loop")
    print(f"{'the loop in Spark tasks':40} {rate['spark loop']:6.2f}")
    print(f"Spark write / the loop in Spark tasks    {rate['spark'] / rate['spark loop']:6.2f} x   target >= 1x")
    print(f"{'streaming write, at-least-once':40} {rate['stream']:6.2f}")
    print(f"{'streaming write, exactlyOnce':40} {rate['stream eos']:6.2f}", end="   ")
    print(f"{rate['stream eos'] / rate['stream']:.2f} x at-least-once   target >= 0.80x")


if __name__ == "__main__":
    main()
