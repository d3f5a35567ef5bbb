"""What the tests of the source through the brokers share: topics made and filled by a real client
(confluent-kafka), and reads of them by the session's SparkSession."""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import MS

END = b"end of the test's read"  # a record values_read appends to each partition before it reads


# a broker for transactional writes: small internal topics (quick to create), nothing retired
TRANSACTIONAL_BROKER_CONFIG = {
    "num.partitions": 2,
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "log.retention.ms": -1,
}


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, partitions: int, count: int, **config: Any) -> list[tuple]:
    """``count`` records into each partition, several to a batch; what the broker acknowledged,
    as (partition, offset, key, value, timestamp ms, headers)."""
    acked: list[tuple] = []

    def delivered(headers: list[tuple[str, bytes | None]], err: Any, msg: Any) -> None:
        # (a delivery report carries no headers: the ones sent are bound to it)
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], headers))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    for i in range(count):
        for p in range(partitions):
            key = None if i % 17 == 5 else b"key-%d-%d" % (p, i)
            value = None if i % 23 == 7 else b"value-%d-%d" % (p, i) * (1 + i % 5)
            headers = [("n", b"%d" % i), ("empty", None)] if i % 3 else None
            report = functools.partial(delivered, headers or [])
            producer.produce(topic, value, key, partition=p, timestamp=MS + 10 * i, headers=headers, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    return sorted(acked)


def read(spark: Any, bootstrap: str, **options: Any) -> Any:
    reader = spark.read.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def rows_of(df: Any) -> list[tuple]:
    out = []
    for r in df.collect():
        headers = [(h.key, h.value) for h in r.headers] if "headers" in df.columns and r.headers is not None else []
        ms = (r.timestamp - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
        out.append((r.partition, r.offset, r.key, r.value, ms, headers))
    return sorted(out)


def stream(spark: Any, bootstrap: str, topic: str, tmp_path: Any, options: dict[str, str] | None = None) -> Any:
    """A stream of ``topic`` from its start, with headers, into a memory sink (not started)."""
    reader = spark.readStream.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true")
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    writer = reader.load().writeStream.format("memory")
    return writer.option("checkpointLocation", str(tmp_path / "checkpoint"))


def wait(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def ends(bootstrap: str, topic: str, isolation: str) -> list[int]:
    """Each partition's end: the high watermark, or under read_committed the last stable offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        count = len(consumer.list_topics(topic, 10).topics[topic].partitions)
        return [consumer.get_watermark_offsets(KafkaPartition(topic, p), 10, cached=False)[1] for p in range(count)]
    finally:
        consumer.close()


def values_read(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[bytes]:
    """The values a reader of ``isolation`` sees in ``topic``, once no transaction is open there (LSO = HW):
    read up to an end mark the test appends to each partition (a consumer's position does not pass
    aborted records and markers at a partition's end)."""
    wait(lambda: ends(bootstrap, topic, "read_committed") == ends(bootstrap, topic, "read_uncommitted"), "LSO = HW")
    count = len(ends(bootstrap, topic, "read_uncommitted"))
    marks = Producer({"bootstrap.servers": bootstrap})
    for p in range(count):
        marks.produce(topic, END, partition=p)
    assert marks.flush(30) == 0
    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation}
    consumer = Consumer({**config, "enable.auto.commit": False})
    try:
        consumer.assign([KafkaPartition(topic, p, 0) for p in range(count)])
        got: list[bytes] = []
        ended: set[int] = set()

        def at_the_end() -> bool:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                if msg.value() == END:
                    ended.add(msg.partition())
                elif msg.partition() not in ended:
                    got.append(msg.value())
            return len(ended) == count

        wait(at_the_end, "the topic read to its end")
        return got
    finally:
        consumer.close()
