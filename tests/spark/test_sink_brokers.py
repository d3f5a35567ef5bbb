"""format("seglog") writing through the brokers (kafka.bootstrap.servers), batch and streaming, with
the session's SparkSession into a real embedded broker, read back with confluent-kafka and with the
raw Fetch (to see the batches: producer ids, codecs). Then a 3-broker cluster whose partition
leader is killed while a write runs: every row is in the topic at least once (once, when no task
had to run again)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.errors import PySparkException
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

from seglog.client import ClusterClient
from seglog.common import TopicPartition
from seglog.partitioner import partition_for_key
from seglog.records import BatchIterator, Compression
from seglog.tools.cluster import LocalCluster

from ..client.test_producer import cluster, wait_until, zookeeper  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"num.partitions": 2, "log.retention.ms": -1}


def _create(bootstrap: str, topic: str, partitions: int, replicas: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replicas, config=config)]).values():
        future.result(60)


def _consume(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None, bytes | None, list[Any]]]:
    """(partition, offset, key, value, headers) of every record of ``topic``, with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        count = len(consumer.list_topics(topic, 10).topics[topic].partitions)
        ends = [consumer.get_watermark_offsets(KafkaPartition(topic, p), 10)[1] for p in range(count)]
        consumer.assign([KafkaPartition(topic, p, 0) for p in range(count)])
        got: list[tuple[int, int, bytes | None, bytes | None, list[Any]]] = []
        while len(got) < sum(ends):
            msg = consumer.poll(10)
            assert msg is not None, f"{len(got)} of {sum(ends)} records read"
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or []))
        return sorted(got)
    finally:
        consumer.close()


def _batches(bootstrap: str, tp: TopicPartition) -> list[Any]:
    """The batches of a partition as the leader sends them (the first fetch's: enough to look at)."""
    with ClusterClient(bootstrap, timeout=30) as client:
        return list(BatchIterator(client.fetch(tp, 0).records))


def _write(df: Any, bootstrap: str, **options: str) -> None:
    writer = df.write.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.mode("append").save()


def test_a_batch_write_produces_each_row_once_where_kafkas_partitioner_puts_it(spark: Any, seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "written", 3)
    df = spark.range(0, 3000, numPartitions=3).selectExpr(
        "cast(concat('k', id % 101) as binary) key", "cast(concat('v', id) as binary) value"
    )
    _write(df, bootstrap, topic="written")
    back = _consume(bootstrap, "written")
    assert sorted(v for _, _, _, v, _ in back) == sorted(b"v%d" % i for i in range(3000))
    assert all(p == partition_for_key(k, 3) for p, _, k, _, _ in back)
    batches = [b for p in range(3) for b in _batches(bootstrap, TopicPartition("written", p))]
    assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches)  # idempotent, acks=all


def test_topic_partition_and_headers_columns(spark: Any, seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "col-a", 2)
    _create(bootstrap, "col-b", 1)
    df = spark.sql(
        """select * from values
             ('col-a', 1, cast('x' as binary), array(named_struct('key', 'h', 'value', cast('1' as binary)))),
             ('col-b', 0, cast('y' as binary), array()),
             ('col-a', cast(null as int), cast('z' as binary), array())
           as t(topic, partition, value, headers)"""
    )
    _write(df, bootstrap)
    a, b = _consume(bootstrap, "col-a"), _consume(bootstrap, "col-b")
    assert [(p, v, h) for p, _, _, v, h in a if v == b"x"] == [(1, b"x", [("h", b"1")])]
    assert sorted(v for *_, v, _ in a) == [b"x", b"z"]
    assert [(p, v) for p, _, _, v, _ in b] == [(0, b"y")]


def test_kafka_producer_options_are_passed_to_the_producer(spark: Any, seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "zstd", 1)
    _create(bootstrap, "acks-one", 1)
    df = spark.range(0, 500, numPartitions=1).selectExpr("cast(cast(id as string) as binary) value")
    _write(df, bootstrap, topic="zstd", **{"kafka.compression.type": "zstd", "kafka.batch.size": "1000"})
    zstd = _batches(bootstrap, TopicPartition("zstd", 0))
    assert len(zstd) > 2 and all(b.compression == Compression.ZSTD for b in zstd)
    # acks=1 turns idempotence off (left unset), as Kafka's producer does
    _write(df, bootstrap, topic="acks-one", **{"kafka.acks": "1"})
    assert all(b.producer_id == -1 for b in _batches(bootstrap, TopicPartition("acks-one", 0)))
    with pytest.raises(PySparkException, match=r"option kafka\.enable\.idempotence=true needs acks=all"):
        _write(df, bootstrap, topic="acks-one", **{"kafka.acks": "1", "kafka.enable.idempotence": "true"})
    with pytest.raises(PySparkException, match=r"Kafka option 'value\.serializer' is not supported"):
        _write(df, bootstrap, topic="acks-one", **{"kafka.value.serializer": "x"})


def test_a_missing_topic_is_created_as_the_broker_decides(spark: Any, seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    df = spark.range(0, 100, numPartitions=2).selectExpr("cast(cast(id as string) as binary) value")
    _write(df, bootstrap, topic="made-by-the-write")
    back = _consume(bootstrap, "made-by-the-write")
    assert sorted(int(v) for *_, v, _ in back) == list(range(100))
    assert {p for p, *_ in back} <= {0, 1}  # the broker's num.partitions


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_input_gets_one_clear_error(spark: Any, seglog_broker: Any, seglog_broker_factory: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "refusing", 1, **{"max.message.bytes": "2000"})
    small = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match=r"option kafka\.bootstrap\.servers: no broker of '127\.0\.0\.1:\d+'"):
        _write(small, f"127.0.0.1:{_closed_port()}", topic="x")
    no_creation = seglog_broker_factory(config={"auto.create.topics.enable": False})
    with pytest.raises(PySparkException, match="topic 'absent' not present in metadata after 500 ms"):
        _write(small, no_creation.bootstrap_servers, topic="absent", **{"kafka.max.block.ms": "500"})
    large = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(PySparkException, match=r"larger than 4000, the value of the kafka\.max\.request\.size option"):
        _write(large, bootstrap, topic="refusing", **{"kafka.max.request.size": "4000"})
    # batches above the topic's max.message.bytes are split until they fit, as Kafka's producer splits them
    rows = spark.range(0, 200, numPartitions=1).selectExpr("cast(repeat('v', 50) as binary) value")
    _write(rows, bootstrap, topic="refusing")
    assert len(_consume(bootstrap, "refusing")) == 200
    # a record the broker refuses: one error, naming the partition
    with pytest.raises(PySparkException, match=r"cannot produce to refusing-0: .*max\.message\.bytes"):
        _write(spark.createDataFrame([(b"x" * 3000,)], "value binary"), bootstrap, topic="refusing")
    with pytest.raises(PySparkException, match="topic 'refusing' has no partition 4"):
        _write(small.selectExpr("value", "4 as partition"), bootstrap, topic="refusing")


def test_a_streaming_query_writes_each_row_once(spark: Any, seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "streamed", 2)
    source = tmp_path / "in"
    source.mkdir()
    for n in range(3):  # a file a micro-batch
        ids = range(n * 100, n * 100 + 100)
        rows = pa.table({"key": [b"k%d" % (i % 7) for i in ids], "value": [b"v%d" % i for i in ids]})
        pq.write_table(rows, source / f"part-{n}.parquet")
    query = (
        spark.readStream.schema("key binary, value binary")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .writeStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "streamed")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert len(query.recentProgress) >= 3
    back = _consume(bootstrap, "streamed")
    assert sorted(v for *_, v, _ in back) == sorted(b"v%d" % i for i in range(300))
    assert all(p == partition_for_key(k, 2) for p, _, k, _, _ in back)


# --- a 3-broker cluster, the leader killed mid-write ------------------------------------------------


def _leader(bootstrap: str, topic: str, partition: int) -> int:
    with ClusterClient(bootstrap, timeout=10) as client:
        (found,) = [t for t in client.metadata([topic]).topics if t.name == topic]
        return next(p.leader_id for p in found.partitions if p.partition_index == partition)


def _slow_after(marker: str, at: int) -> Any:
    """A UDF for the value column: the row's value, a marker file from row ``at`` on, and a pause
    every 1000 rows after it, so that the write is still going when the test kills the leader on
    seeing the marker."""

    def value(row: int) -> bytes:
        if row >= at and row % 1000 == 0:
            Path(marker).touch()
            time.sleep(0.3)
        return b"row-%d" % row

    return udf(value, BinaryType())


def test_the_leader_killed_mid_write_every_row_is_written(
    spark: Any,
    cluster: LocalCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic = "sink-during-kill"
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    _create(bootstrap, topic, 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: _leader(bootstrap, topic, 0) >= 0, 60, "a leader")
    victim = _leader(bootstrap, topic, 0)
    marker = str(tmp_path / "half-written")
    rows = 40_000

    def kill_at_the_marker() -> None:
        wait_until(lambda: os.path.exists(marker), 120, "the write to be half way")
        cluster.brokers[victim].kill()

    killer = threading.Thread(target=kill_at_the_marker)
    killer.start()
    try:
        df = spark.range(0, rows, numPartitions=1).select(_slow_after(marker, rows // 2)("id").alias("value"))
        _write(df, bootstrap, topic=topic, **{"kafka.batch.size": "4000"})
    finally:
        killer.join()
    assert not cluster.brokers[victim].running
    assert _leader(bootstrap, topic, 0) != victim
    values = [v for *_, v, _ in _consume(bootstrap, topic)]
    assert set(values) == {b"row-%d" % i for i in range(rows)}  # every row, at least once
    assert len(values) == rows  # and once: no task ran again, and the producer's retries wrote nothing twice
