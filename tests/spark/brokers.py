"""What the tests of the source through the brokers share: topics made and filled by a real client
(confluent-kafka), and reads of them by the session's SparkSession."""

from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import MS


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
