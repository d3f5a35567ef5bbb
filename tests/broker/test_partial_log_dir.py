"""A log dir holding only some partitions of a topic (``events-0`` and ``events-2``, no
``events-1``), as a cluster's broker keeps it or a reassignment leaves it: each partition is
served under the number its directory names, never by its position among those present."""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

import seglog
from seglog.broker.embedded import start

from .conftest import CONSUMER, PRODUCER, consume_assigned


@pytest.fixture
def partial_dir(tmp_path):
    """``events`` with partitions 0 and 2 only; partition p holds p + 1 records ``p-i``."""
    with seglog.open(str(tmp_path)) as logs:
        logs.create_topic("events", partitions=3)
        for p in range(3):
            logs.partition("events", p).append([seglog.Record(None, f"{p}-{i}".encode()) for i in range(p + 1)])
    shutil.rmtree(tmp_path / "events-1")
    return str(tmp_path)


def test_a_broker_serves_the_partitions_present_under_their_own_numbers(partial_dir) -> None:
    with start(partial_dir) as broker:
        bootstrap = broker.bootstrap_servers
        consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER})
        try:
            metadata = consumer.list_topics("events", timeout=10)
            topic = metadata.topics["events"]
            # Kafka's topics number their partitions 0 to n-1: the one not here is offline, not skipped
            assert sorted(topic.partitions) == [0, 1, 2]
            missing = topic.partitions[1]
            assert (missing.error.code(), missing.leader) == (KafkaError.LEADER_NOT_AVAILABLE, -1)
            assert topic.partitions[2].error is None and [topic.partitions[2].leader] == list(metadata.brokers)
            # ListOffsets
            assert consumer.get_watermark_offsets(TopicPartition("events", 2), timeout=10) == (0, 3)
            assert consumer.get_watermark_offsets(TopicPartition("events", 0), timeout=10) == (0, 1)
        finally:
            consumer.close()
        # Fetch
        assert [m.value() for m in consume_assigned(bootstrap, "events", 2, 0, 3)] == [b"2-0", b"2-1", b"2-2"]
        # Produce
        producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
        delivered = []
        producer.produce("events", b"new", partition=2, on_delivery=lambda err, msg: delivered.append((err, msg)))
        producer.flush(30)
        assert [(err, msg.partition(), msg.offset()) for err, msg in delivered] == [(None, 2, 3)]
