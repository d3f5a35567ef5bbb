"""The end-to-end demo: web access logs through seglog and Spark.

1. Generate 20 minutes of nginx access logs (fixed seed) into topic
   ``access_log`` (6 partitions, keyed by client address, record timestamp =
   request time).
2. A Structured Streaming job reads the topic (``trigger(availableNow=True)``),
   parses the lines, and keeps per-minute page views, bytes and error counts
   per path; each micro-batch's updated rows go to the compacted topic
   ``pageviews``, keyed by minute and path.
3. The log cleaner compacts ``pageviews`` to the latest value per key, and the
   result is written to Parquet.
4. A batch job reads back one time window of ``access_log`` with
   ``startingTimestamp``/``endingTimestamp`` and checks it against the table.

Everything lives in ``--dir`` (default ``demo-data``), which is recreated on
every run, so a run gives the same results as the last.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from typing import Any

import seglog
import seglog.broker
from seglog.client import ClusterClient, check
from seglog.demo.access_log import START, generate
from seglog.protocol import ApiKey
from seglog.protocol.message_data import CreateTopicsRequestData, CreateTopicsResponseData

ACCESS_LOG, PAGEVIEWS, PARTITIONS = "access_log", "pageviews", 6
LINE = r'^(\S+) \S+ \S+ \[[^\]]+\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)"'


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def produce(path: str, minutes: int, rate: float) -> int:
    """Produce the generated requests to ``access_log`` through a broker with confluent-kafka,
    the path real producers take: an embedded ``seglog.broker`` over ``path``, topics
    created with seglog's client, records keyed by client address (Kafka's murmur2
    partitioner, as the Java client's) with the request time as their timestamp."""
    from confluent_kafka import Producer

    with seglog.broker.start(path) as broker:
        create_topics(broker.bootstrap_servers)
        # librdkafka logs each connection the broker's stop closes under a live client: the
        # producer goes before the broker does, so that the demo's output stays its own. (The
        # topics are made with seglog's own client: librdkafka's AdminClient, destroyed with
        # an event still on its background queue, logs "Purging unserved events" on a
        # loaded machine.)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "enable.idempotence": True,  # acks=all, no duplicates on a retry
                "partitioner": "murmur2_random",
                "linger.ms": 20,
                "batch.size": 1 << 20,
                "compression.type": "lz4",
            }
        )
        failures: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        count = 0
        for request in generate(minutes, rate):
            while True:
                try:
                    producer.produce(
                        ACCESS_LOG,
                        request.line.encode(),
                        key=request.client.encode(),
                        timestamp=request.timestamp_ms,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:  # the producer's queue is full: let it send
                    producer.poll(0.1)
            count += 1
            if count % 100_000 == 0:
                say(f"  {count:,} requests produced")
        unsent = producer.flush(60)
        producer.close()
        if unsent or failures:
            raise SystemExit(f"the broker did not take every record: {failures[:3]}")
        end = log_end_offsets(broker.bootstrap_servers)
    say(f"  {count:,} requests in {ACCESS_LOG} (per partition: {', '.join(f'{s:,}' for s in end)})")
    return count


def create_topics(bootstrap: str) -> None:
    """``access_log`` (kept forever) and ``pageviews`` (compacted, small segments so that the
    cleaner has something to do), through seglog's client as ``seglog topics --create`` does."""
    topics = {
        ACCESS_LOG: (PARTITIONS, {"retention.ms": "-1", "segment.bytes": str(8 << 20)}),
        PAGEVIEWS: (
            2,
            {
                "cleanup.policy": "compact",
                "retention.ms": "-1",
                "segment.bytes": str(256 * 1024),
                "min.cleanable.dirty.ratio": "0.01",
            },
        ),
    }
    request = CreateTopicsRequestData(
        topics=[
            CreateTopicsRequestData.CreatableTopic(
                name=name,
                num_partitions=count,
                replication_factor=1,
                assignments=[],
                configs=[CreateTopicsRequestData.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
            for name, (count, configs) in topics.items()
        ],
        timeout_ms=30_000,
        validate_only=False,
    )
    with ClusterClient(bootstrap, timeout=30) as client:
        created: CreateTopicsResponseData = client.request(ApiKey.CREATE_TOPICS, request)
    for topic in created.topics:
        check(topic.error_code, f"cannot create topic {topic.name}", topic.error_message)


def log_end_offsets(bootstrap: str) -> list[int]:
    """The log end offset of each partition of ``access_log``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(ACCESS_LOG, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import seglog.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    seglog.spark.register(spark)
    return spark


def stream_pageviews(spark: Any, path: str, checkpoint: str) -> None:
    """The streaming job: access_log → per-minute, per-path counts → pageviews (upserts)."""
    from pyspark.sql import functions as F

    lines = (
        spark.readStream.format("seglog")
        .option("path", path)
        .option("subscribe", ACCESS_LOG)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 100_000)
        .load()
    )
    text = F.col("value").cast("string")
    requests = lines.select(
        F.col("timestamp"),
        F.regexp_extract(text, LINE, 1).alias("client"),
        F.regexp_extract(F.regexp_extract(text, LINE, 3), r"^([^?]*)", 1).alias("path"),
        F.regexp_extract(text, LINE, 4).cast("int").alias("status"),
        F.regexp_extract(text, LINE, 5).cast("long").alias("bytes"),
    )
    counts = requests.groupBy(F.window("timestamp", "1 minute").start.alias("minute"), "path").agg(
        F.count("*").alias("views"),
        F.sum("bytes").alias("bytes"),
        F.sum(F.when(F.col("status") >= 500, 1).otherwise(0)).alias("errors_5xx"),
        F.sum(F.when(F.col("status").between(400, 499), 1).otherwise(0)).alias("errors_4xx"),
    )

    def upsert(batch: Any, batch_id: int) -> None:
        started = time.time()
        out = batch.select(
            F.concat(F.date_format("minute", "yyyy-MM-dd'T'HH:mm"), F.lit("|"), F.col("path"))
            .cast("binary")
            .alias("key"),
            F.to_json(
                F.struct(
                    F.date_format("minute", "yyyy-MM-dd'T'HH:mm").alias("minute"),
                    "path",
                    "views",
                    "bytes",
                    "errors_5xx",
                    "errors_4xx",
                )
            )
            .cast("binary")
            .alias("value"),
        )
        rows = out.count()
        out.write.format("seglog").option("path", path).option("topic", PAGEVIEWS).mode("append").save()
        say(
            f"  micro-batch {batch_id}: {rows:,} updated (minute, path) rows → {PAGEVIEWS} "
            f"({time.time() - started:.1f} s)"
        )

    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(upsert)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    read = sum(p["numInputRows"] for p in query.recentProgress)
    say(f"  the streaming job read {read:,} records in {len(query.recentProgress)} micro-batches")


def compact(path: str) -> None:
    """Compact pageviews: the latest count per (minute, path) stays."""
    with seglog.open(path, background=False) as logs:
        before = sum(logs.partition(PAGEVIEWS, p).log_end_offset for p in logs.partitions(PAGEVIEWS))
        for p in logs.partitions(PAGEVIEWS):
            logs.partition(PAGEVIEWS, p).roll()  # the active segment is never cleaned: close it
        logs.clean()
        kept = sum(1 for p in logs.partitions(PAGEVIEWS) for _ in logs.partition(PAGEVIEWS, p).records())
    say(f"  {PAGEVIEWS}: {before:,} upserts compacted to {kept:,} records")


def results(spark: Any, path: str, parquet: str) -> Any:
    """The compacted topic as a table; written to Parquet; checked for duplicate keys."""
    from pyspark.sql import functions as F

    raw = spark.read.format("seglog").option("path", path).option("subscribe", PAGEVIEWS).load()
    keys = raw.count()
    distinct = raw.select("key").distinct().count()
    schema = "minute string, path string, views long, bytes long, errors_5xx long, errors_4xx long"
    table = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*")
    table.orderBy("minute", "path").write.mode("overwrite").parquet(parquet)
    say(
        f"  {keys:,} records, {distinct:,} distinct keys ({'no duplicates' if keys == distinct else 'DUPLICATES'})"
        f"; Parquet: {parquet}"
    )
    if keys != distinct:
        raise SystemExit(f"the compacted topic {PAGEVIEWS} holds duplicate keys")
    return spark.read.parquet(parquet)


def check_window(spark: Any, path: str, table: Any) -> None:
    """Batch job: one window of access_log by timestamp, against the table."""
    from pyspark.sql import functions as F

    start_ms = int(START.timestamp() * 1000) + 7 * 60_000
    end_ms = start_ms + 3 * 60_000
    window = (
        spark.read.format("seglog")
        .option("path", path)
        .option("subscribe", ACCESS_LOG)
        .option("startingTimestamp", str(start_ms))
        .option("endingTimestamp", str(end_ms))
        .load()
    )
    text = F.col("value").cast("string")
    status = F.regexp_extract(text, LINE, 4).cast("int")
    direct = window.agg(F.count("*").alias("n"), F.sum(F.when(status >= 500, 1).otherwise(0)).alias("e")).first()
    first = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(start_ms / 1000))
    last = time.strftime("%Y-%m-%dT%H:%M", time.gmtime((end_ms - 1) / 1000))
    agg = (
        table.where((F.col("minute") >= first) & (F.col("minute") <= last))
        .agg(F.sum("views").alias("n"), F.sum("errors_5xx").alias("e"))
        .first()
    )
    same = (direct.n, direct.e) == (agg.n, agg.e)
    say(
        f"  window {first}..{last} read by timestamp: {direct.n:,} requests, {direct.e:,} 5xx; "
        f"table says {agg.n:,} and {agg.e:,}: {'consistent' if same else 'MISMATCH'}"
    )
    if not same:
        raise SystemExit("the batch read disagrees with the streaming result")


def show(table: Any) -> str:
    from pyspark.sql import functions as F

    per_minute = (
        table.groupBy("minute")
        .agg(
            F.sum("views").alias("views"),
            F.sum("errors_5xx").alias("5xx"),
            F.sum("errors_4xx").alias("4xx"),
            F.round(F.sum("errors_5xx") / F.sum("views") * 100, 2).alias("5xx %"),
        )
        .orderBy("minute")
    )
    top = (
        table.groupBy("path")
        .agg(F.sum("views").alias("views"), F.sum("errors_5xx").alias("5xx"))
        .orderBy(F.desc("views"), "path")
        .limit(10)
    )
    print("\nPage views and error rates per minute")
    per_minute.show(30, truncate=False)
    print("Top paths")
    top.show(10, truncate=False)
    digest = hashlib.sha256(json.dumps(sorted(map(tuple, table.collect())), default=str).encode()).hexdigest()
    return digest[:16]


WORKDIR_MARKER = ".seglog-demo"
_OURS = {WORKDIR_MARKER, "logs", "checkpoint", "pageviews.parquet"}


def fresh_workdir(path: str) -> None:
    """Recreate the working directory, refusing to wipe one the demo did not make."""
    if os.path.isdir(path) and not set(os.listdir(path)) <= _OURS:
        raise SystemExit(f"{path} holds files the demo did not write; give an empty or new --dir")
    if os.path.exists(path) and not os.path.isdir(path):
        raise SystemExit(f"{path} is not a directory")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    open(os.path.join(path, WORKDIR_MARKER), "w").close()


def run(spark: Any, workdir: str, minutes: int, rate: float) -> str:
    """Steps 1 and 3 to 5 in a fresh ``workdir`` with a running Spark; returns the result digest."""
    fresh_workdir(workdir)
    logs, checkpoint, parquet = (os.path.join(workdir, d) for d in ("logs", "checkpoint", "pageviews.parquet"))
    say(f"2/5 generating {minutes} minutes of access logs into {logs}")
    produce(logs, minutes, rate)
    say("3/5 streaming: access_log → per-minute page views → pageviews (compacted topic)")
    stream_pageviews(spark, logs, checkpoint)
    compact(logs)
    say("4/5 results")
    table = results(spark, logs, parquet)
    say("5/5 batch read of one time window by timestamp")
    check_window(spark, logs, table)
    return show(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seglog.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="demo-data", help="working directory, recreated (default demo-data)")
    parser.add_argument("--minutes", type=int, default=20, help="minutes of traffic (default 20)")
    parser.add_argument("--rate", type=float, default=250.0, help="requests per second on average (default 250)")
    args = parser.parse_args(argv)
    started = time.time()
    say("1/5 starting Spark (local[2])")
    spark = spark_session()
    try:
        digest = run(spark, args.dir, args.minutes, args.rate)
    finally:
        spark.stop()
    say(f"done in {time.time() - started:.0f} s; result digest {digest} (the same on every run)")
    return 0
