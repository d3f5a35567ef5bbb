"""The end-to-end demo: web access logs through a live seglog pipeline on Spark.

1. A running broker (embedded ``seglog.broker``, or with ``--cluster`` three broker processes
   and a ZooKeeper, replication factor 3, min.insync.replicas 2) serves topic ``access_log``
   (6 partitions) and the compacted topic ``pageviews``.
2. A producer writes 20 minutes of generated nginx access logs (fixed seed) into
   ``access_log`` (keyed by client address, record timestamp = request time) while
3. a Structured Streaming query reads the topic through ``kafka.bootstrap.servers``, parses
   the lines, keeps per-minute page views, bytes and error counts per path and writes each
   micro-batch's updated rows, keyed by minute and path, into ``pageviews`` with the
   exactly-once sink. With ``--cluster`` a broker is killed part way: the producer and the
   query ride it out.
4. A consumer reads ``pageviews`` back with ``isolation.level=read_committed``; the latest value
   per key is the table (whatever the micro-batches were, as compaction would keep it), written
   to Parquet.
5. A batch job reads one time window of ``access_log`` through the brokers with
   ``startingTimestamp``/``endingTimestamp`` and checks it against the table.

Everything lives in ``--dir`` (default ``demo-data``), which is recreated on every run, so a
run gives the same results as the last.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import seglog.broker
from seglog.client import ClusterClient, check
from seglog.demo.access_log import START, generate
from seglog.protocol import ApiKey
from seglog.protocol.message_data import CreateTopicsRequestData, CreateTopicsResponseData

ACCESS_LOG, PAGEVIEWS, PARTITIONS = "access_log", "pageviews", 6
LINE = r'^(\S+) \S+ \S+ \[[^\]]+\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) "[^"]*" "([^"]*)"'
SCHEMA = "minute string, path string, views long, bytes long, errors_5xx long, errors_4xx long"
# small internal topics: the demo's one consumer group and its query's few transactional ids
INTERNAL = {"offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "4"}
# the cluster's: every partition on all three brokers, a write acknowledged by two
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "zookeeper.session.timeout.ms": "6000",
}
# how long a client goes on asking while a cluster elects new leaders and coordinators
REQUEST_TIMEOUT_MS = 60_000
# librdkafka's log lines (a connection refused by the killed broker, one closed at the end) go here,
# not to stderr: the demo's output stays its own, and errors still come as delivery reports
RDKAFKA_LOG = logging.getLogger("seglog.demo.rdkafka")
RDKAFKA_LOG.addHandler(logging.NullHandler())
RDKAFKA_LOG.propagate = False


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Brokers:
    """The running brokers: their bootstrap servers, and for a cluster, a way to kill one."""

    bootstrap_servers: str
    replication_factor: int
    kill_one: Any = None  # () -> str, what it killed; None for the single broker
    killed: list[str] = field(default_factory=list)
    # set once the query has committed a micro-batch of records: the kill waits for it, so that it falls
    # while the query runs as well as while the producer writes
    query_running: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def running_brokers(logs: str, cluster: bool) -> Iterator[Brokers]:
    """One embedded broker over ``logs``, or with ``cluster`` a ZooKeeper and three broker
    processes under it (``seglog cluster up``'s ``LocalCluster``)."""
    if not cluster:
        with seglog.broker.start(logs, config={**INTERNAL, "log.retention.ms": "-1"}) as broker:
            yield Brokers(broker.bootstrap_servers, 1)
        return
    from seglog.tools.cluster import LocalCluster

    overrides = [f"{k}={v}" for k, v in {**INTERNAL, **REPLICATED, "log.retention.ms": "-1"}.items()]
    with LocalCluster(logs, 3, port=None, overrides=overrides) as local:
        brokers = Brokers(local.bootstrap_servers, 3)

        def kill_one() -> str:
            victim = local.brokers[2]  # any would do: every partition has a replica on the others
            victim.kill()
            return f"broker {victim.broker_id} ({victim.address})"

        brokers.kill_one = kill_one
        yield brokers


def find_coordinators(bootstrap: str) -> None:
    """Kafka's internal topics made and led before the demo starts, as a cluster that has run a
    while has them: the exactly-once sink's transaction and group coordinators answer at once."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "demo-warm-up", "logger": RDKAFKA_LOG})
    producer.init_transactions(REQUEST_TIMEOUT_MS / 1000)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-warm-up", "logger": RDKAFKA_LOG})
    try:
        consumer.committed([KafkaPartition(ACCESS_LOG, 0)], timeout=REQUEST_TIMEOUT_MS / 1000)
    finally:
        consumer.close()


def create_topics(bootstrap: str, replication_factor: int) -> None:
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
                replication_factor=replication_factor,
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


def produce(brokers: Brokers, minutes: int, rate: float, produced: list[int]) -> None:
    """Produce the generated requests to ``access_log`` with confluent-kafka, the path real
    producers take: records keyed by client address (Kafka's murmur2 partitioner, as the Java
    client's) with the request time as their timestamp, idempotent with acks=all. Half way, a
    cluster loses a broker. ``produced`` gets the count once every record is acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": brokers.bootstrap_servers,
            "enable.idempotence": True,  # acks=all, no duplicates on a retry
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
            "logger": RDKAFKA_LOG,
        }
    )
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    requests = list(generate(minutes, rate))
    for count, request in enumerate(requests, 1):
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
        producer.poll(0)
        if count % 100_000 == 0:
            say(f"  {count:,} requests produced")
        if count == len(requests) // 2 and brokers.kill_one is not None:
            brokers.query_running.wait(600)
            brokers.killed.append(brokers.kill_one())  # with records in flight
            say(f"  killed {brokers.killed[-1]} (SIGKILL) half way through the producing")
    unsent = producer.flush(120)
    if unsent or failures:
        raise SystemExit(f"the brokers did not take every record: {failures[:3]}")
    produced.append(len(requests))


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


def pageviews_query(spark: Any, bootstrap: str, checkpoint: str) -> Any:
    """The streaming query: access_log → per-minute, per-path counts → pageviews, exactly once.
    Output mode update: each micro-batch writes the rows it changed, keyed by minute and path, so
    the latest value per key is the final count whatever the micro-batches were."""
    from pyspark.sql import functions as F

    lines = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.request.timeout.ms", REQUEST_TIMEOUT_MS)
        .option("subscribe", ACCESS_LOG)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 100_000)
        .load()
    )
    text = F.col("value").cast("string")
    requests = lines.select(
        F.col("timestamp"),
        F.regexp_extract(F.regexp_extract(text, LINE, 3), r"^([^?]*)", 1).alias("path"),
        F.regexp_extract(text, LINE, 4).cast("int").alias("status"),
        F.regexp_extract(text, LINE, 5).cast("long").alias("bytes"),
    )
    counts = requests.groupBy(
        F.date_format(F.window("timestamp", "1 minute").start, "yyyy-MM-dd'T'HH:mm").alias("minute"), "path"
    ).agg(
        F.count("*").alias("views"),
        F.sum("bytes").alias("bytes"),
        F.sum(F.when(F.col("status") >= 500, 1).otherwise(0)).alias("errors_5xx"),
        F.sum(F.when(F.col("status").between(400, 499), 1).otherwise(0)).alias("errors_4xx"),
    )
    out = counts.select(
        F.concat(F.col("minute"), F.lit("|"), F.col("path")).cast("binary").alias("key"),
        F.to_json(F.struct("minute", "path", "views", "bytes", "errors_5xx", "errors_4xx"))
        .cast("binary")
        .alias("value"),
    )
    return (
        out.writeStream.format("seglog")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.request.timeout.ms", REQUEST_TIMEOUT_MS)
        .option("topic", PAGEVIEWS)
        .option("kafka.delivery.timeout.ms", 2 * REQUEST_TIMEOUT_MS)  # above request.timeout.ms, as Kafka's
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def stream_while_producing(spark: Any, brokers: Brokers, checkpoint: str, minutes: int, rate: float) -> None:
    """The producer in a thread, the query reading as it writes; then the query drained and stopped."""
    produced: list[int] = []
    failed: list[BaseException] = []

    def producing() -> None:
        try:
            produce(brokers, minutes, rate, produced)
        except BaseException as e:  # handed to the main thread
            failed.append(e)

    query = pageviews_query(spark, brokers.bootstrap_servers, checkpoint)
    producer = threading.Thread(target=producing, name="demo-producer")
    producer.start()
    shown = -1
    try:
        while producer.is_alive():
            producer.join(1.0)
            shown = report(query, shown)
            if any(p["numInputRows"] for p in query.recentProgress):
                brokers.query_running.set()
            if query.exception() is not None:
                raise SystemExit(f"the streaming query failed: {query.exception()}")
        if failed:
            raise failed[0]
        query.processAllAvailable()  # every produced record read and its batch committed
        report(query, shown)
    finally:
        brokers.query_running.set()  # a producer waiting for the query to run waits no more
        query.stop()
        producer.join()
    read = sum(p["numInputRows"] for p in query.recentProgress)
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    say(f"  {produced[0]:,} requests produced; the query read {read:,} records in {batches} micro-batches")


def report(query: Any, shown: int) -> int:
    """Says what micro-batches have finished since batch ``shown``; returns the last one said."""
    for progress in query.recentProgress:
        if progress["batchId"] > shown and progress["numInputRows"]:
            seconds = progress["durationMs"].get("triggerExecution", 0) / 1000
            say(
                f"  micro-batch {progress['batchId']}: {progress['numInputRows']:,} records read, "
                f"updated rows → {PAGEVIEWS} ({seconds:.1f} s)"
            )
        shown = max(shown, progress["batchId"])
    return shown


def read_committed(bootstrap: str) -> tuple[int, dict[bytes, bytes]]:
    """``pageviews`` read with isolation.level=read_committed to its end: how many upserts, and the
    latest value per key (what compaction keeps)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "demo-read-back",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": RDKAFKA_LOG,
        }
    )
    latest: dict[bytes, bytes] = {}
    upserts = 0
    try:
        count = len(consumer.list_topics(PAGEVIEWS, 30).topics[PAGEVIEWS].partitions)
        consumer.assign([TopicPartition(PAGEVIEWS, p, 0) for p in range(count)])
        ended: set[int] = set()
        deadline = time.monotonic() + 120
        while len(ended) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"{PAGEVIEWS} was not read to its end in 120 s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error, key, value = msg.error(), msg.key(), msg.value()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(cast(int, msg.partition()))
                continue
            if error is not None or key is None or value is None:  # the query writes neither tombstones nor null keys
                raise SystemExit(f"reading {PAGEVIEWS} at offset {msg.offset()}: {error or 'a null key or value'}")
            upserts += 1
            latest[key] = value
    finally:
        consumer.close()
    return upserts, latest


def results(spark: Any, bootstrap: str, parquet: str) -> Any:
    """The latest value per key of ``pageviews`` as a table, written to Parquet."""
    upserts, latest = read_committed(bootstrap)
    rows = [json.loads(v) for v in latest.values()]
    wrong = [k for k, r in zip(latest, rows, strict=True) if k.decode() != f"{r['minute']}|{r['path']}"]
    if wrong:
        raise SystemExit(f"{PAGEVIEWS} holds values under the wrong key: {wrong[:3]}")
    table = spark.createDataFrame(
        [tuple(r[c] for c in ("minute", "path", "views", "bytes", "errors_5xx", "errors_4xx")) for r in rows], SCHEMA
    )
    table.orderBy("minute", "path").write.mode("overwrite").parquet(parquet)
    say(f"  read_committed: {upserts:,} upserts, {len(latest):,} distinct (minute, path) keys; Parquet: {parquet}")
    return spark.read.parquet(parquet)


def check_window(spark: Any, bootstrap: str, table: Any) -> None:
    """Batch job through the brokers: one window of access_log by timestamp, against the table."""
    from pyspark.sql import functions as F

    start_ms = int(START.timestamp() * 1000) + 7 * 60_000
    end_ms = start_ms + 3 * 60_000
    window = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.request.timeout.ms", REQUEST_TIMEOUT_MS)
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


def run(spark: Any, workdir: str, minutes: int, rate: float, cluster: bool = False) -> str:
    """Steps 2 to 6 in a fresh ``workdir`` with a running Spark; returns the result digest."""
    fresh_workdir(workdir)
    logs, checkpoint, parquet = (os.path.join(workdir, d) for d in ("logs", "checkpoint", "pageviews.parquet"))
    where = "a 3-broker cluster (RF 3, min.insync.replicas 2)" if cluster else "an embedded broker"
    say(f"2/6 starting {where} in {logs}")
    with running_brokers(logs, cluster) as brokers:
        create_topics(brokers.bootstrap_servers, brokers.replication_factor)
        find_coordinators(brokers.bootstrap_servers)
        say(f"3/6 producing {minutes} minutes of access logs while the streaming query reads them")
        say(f"    access_log → per-minute page views → {PAGEVIEWS} (compacted, exactly-once sink)")
        stream_while_producing(spark, brokers, checkpoint, minutes, rate)
        say(f"4/6 reading {PAGEVIEWS} back with read_committed")
        table = results(spark, brokers.bootstrap_servers, parquet)
        say("5/6 batch read of one time window by timestamp, through the brokers")
        check_window(spark, brokers.bootstrap_servers, table)
        say("6/6 results")
        return show(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seglog.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="demo-data", help="working directory, recreated (default demo-data)")
    parser.add_argument("--minutes", type=int, default=20, help="minutes of traffic (default 20)")
    parser.add_argument("--rate", type=float, default=250.0, help="requests per second on average (default 250)")
    parser.add_argument(
        "--cluster", action="store_true", help="on a 3-broker cluster with ZooKeeper, one broker killed part way"
    )
    args = parser.parse_args(argv)
    started = time.time()
    say("1/6 starting Spark (local[2])")
    spark = spark_session()
    try:
        digest = run(spark, args.dir, args.minutes, args.rate, args.cluster)
    finally:
        spark.stop()
    say(f"done in {time.time() - started:.0f} s; result digest {digest} (the same on every run)")
    return 0
