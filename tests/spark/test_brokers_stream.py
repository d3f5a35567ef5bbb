"""Streaming queries through the brokers (kafka.bootstrap.servers), run by the session's
SparkSession against an embedded broker: read limits that wait (minOffsetsPerTrigger,
maxTriggerDelay), records removed between micro-batches (failOnDataLoss), and producers that
write while the query runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.errors import PySparkException, StreamingQueryException

from seglog.client import EARLIEST_TIMESTAMP, ClusterClient
from seglog.common import TopicPartition

from .brokers import create, produce, rows_of, stream


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    # records are stamped in 2023: no time retention; retention by size runs often (a test asks for it)
    return {
        "num.partitions": 1,
        "log.segment.bytes": 8192,
        "log.retention.ms": -1,
        "log.retention.check.interval.ms": 200,
    }


def _wait(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _count(spark: Any, table: str) -> int:
    return int(spark.sql(f"select count(*) c from {table}").first().c)


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(spark: Any, seglog_broker: Any, tmp_path: Any) -> None:
    """As Spark's Kafka source: the first trigger does not wait; later ones read once at least
    minOffsetsPerTrigger offsets are new, or maxTriggerDelay after the last batch."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "trickle", 1)
    produced = produce(bootstrap, "trickle", 1, 20)
    options = {"minOffsetsPerTrigger": "30", "maxTriggerDelay": "4s"}
    query = stream(spark, bootstrap, "trickle", tmp_path, options).trigger(processingTime="200 milliseconds")
    query = query.queryName("trickle").start()
    try:
        _wait(lambda: _count(spark, "trickle") >= 20, "the first batch")
        produced += produce(bootstrap, "trickle", 1, 5)  # 5 new: below the minimum, they wait for the delay
        acked = time.monotonic()
        time.sleep(1.5)
        assert _count(spark, "trickle") == 20  # a slower machine only waits longer: this cannot fail by load
        _wait(lambda: _count(spark, "trickle") >= 25, "the delay")
        assert time.monotonic() - acked >= 2.5
        produced += produce(bootstrap, "trickle", 1, 40)  # at least the minimum: read without the delay
        _wait(lambda: _count(spark, "trickle") >= 65, "the minimum")
        assert rows_of(spark.sql("select * from trickle")) == sorted(produced)
    finally:
        query.stop()


def _delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([KafkaPartition(topic, 0, before)]).values():
        future.result(30)


def _retain_active_segment(bootstrap: str, topic: str, _: int) -> None:
    """Retention by size deletes every segment but the active one, unread."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("retention.bytes", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    with ClusterClient(bootstrap, 30) as client:
        tp = TopicPartition(topic, 0)
        _wait(lambda: client.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset > 0, "retention")


@pytest.mark.parametrize("remove", [_delete_records, _retain_active_segment], ids=["DeleteRecords", "retention"])
@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_records_removed_between_micro_batches(
    spark: Any, seglog_broker: Any, tmp_path: Any, fail: bool, remove: Callable[[str, str, int], None]
) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    topic = f"removed_{remove.__name__.strip('_')}_{fail}"
    create(bootstrap, topic, 1)
    produce(bootstrap, topic, 1, 1000, **{"batch.size": 2048})  # many segments of 8 KiB
    options = {"maxOffsetsPerTrigger": "10", "failOnDataLoss": str(fail).lower()}
    query = stream(spark, bootstrap, topic, tmp_path, options).trigger(processingTime="300 milliseconds")
    query = query.queryName(topic).start()
    try:
        _wait(lambda: bool(query.recentProgress), "the first batch")
        before = query.lastProgress["batchId"]
        remove(bootstrap, topic, 1000)  # at 10 offsets a trigger, the query is far from the end
        with ClusterClient(bootstrap, 30) as client:
            first = client.list_offsets({TopicPartition(topic, 0): EARLIEST_TIMESTAMP})[TopicPartition(topic, 0)].offset
        after = produce(bootstrap, topic, 1, 1)  # offset 1000
        if fail:
            removed = rf"offsets \d+\.\.{first - 1} of {topic}-0 were removed before they were read"
            with pytest.raises((StreamingQueryException, PySparkException), match=removed):
                query.awaitTermination(60)
            return
        table = f"select offset from {topic}"
        _wait(lambda: spark.sql(f"{table} where offset = 1000").count() == 1, "the record after the removal")
        assert query.isActive and query.exception() is None
        offsets = sorted(r.offset for r in spark.sql(table).collect())
        read = sum(1 for o in offsets if o < first)
        assert 0 < read < first  # the removal cut records the query had not read
        # what was read before the removal and what was left after it, each once
        assert offsets == list(range(read)) + list(range(first, after[-1][1] + 1))
        # the gap was skipped, not walked through 10 offsets a trigger (90 triggers and more)
        left = after[-1][1] + 1 - first
        assert query.lastProgress["batchId"] - before <= left // 10 + 5, query.lastProgress["batchId"] - before
    finally:
        query.stop()


def test_a_stream_reads_while_producers_write_every_record_once(spark: Any, seglog_broker: Any, tmp_path: Any) -> None:
    """Two producers write to three partitions while a processingTime query reads into a parquet
    sink, and the query is stopped and restarted from its checkpoint part way: the sink holds
    every record the producers were told was written, once."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "busy", 3)
    acked: list[list[tuple[int, int, bytes]]] = [[], []]
    enough = threading.Event()

    def write(n: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            acked[n].append((msg.partition(), msg.offset(), msg.value()))

        rounds = 0
        while not enough.is_set() or rounds < 10:
            for i in range(50):
                value = b"producer-%d-%d-%d" % (n, rounds, i)
                producer.produce("busy", value, key=value, on_delivery=delivered)
            producer.poll(0)
            rounds += 1
            time.sleep(0.1)
        assert producer.flush(30) == 0

    def _wait_for_rows(query: Any) -> None:
        try:
            _wait(lambda: any(p["numInputRows"] for p in query.recentProgress), "a batch with rows")
        finally:
            query.stop()

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> Any:
        reader = spark.readStream.format("seglog").option("kafka.bootstrap.servers", bootstrap)
        df = reader.option("subscribe", "busy").option("startingOffsets", "earliest").load()
        writer = df.selectExpr("partition", "offset", "value").writeStream.format("parquet")
        writer = writer.option("path", str(out)).option("checkpointLocation", str(checkpoint))
        return writer.trigger(processingTime="300 milliseconds").start()

    producers = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    for t in producers:
        t.start()
    try:
        for _ in range(2):  # the second query goes on from the first one's checkpoint
            _wait_for_rows(start())  # then stopped: the producers go on writing
        query = start()
        enough.set()
        for t in producers:
            t.join()
        query.processAllAvailable()
        query.stop()
    finally:
        enough.set()
        for t in producers:
            t.join()
    got = sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect())
    assert len(acked[0]) >= 500 and len(acked[1]) >= 500
    assert got == sorted(acked[0] + acked[1])
