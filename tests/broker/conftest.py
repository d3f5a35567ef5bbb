"""Fixtures of the broker tests: client configs for confluent-kafka and kafka-python."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# librdkafka's default, said here: idempotent producers have their own tests (test_idempotence.py)
PRODUCER = {"enable.idempotence": False, "linger.ms": 5, "message.timeout.ms": 30_000}
CONSUMER = {"group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 100}


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"num.partitions": 1}


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def consume_assigned(bootstrap: str, topic: str, partition: int, start: int, count: int) -> list[Any]:
    """``count`` messages of one partition from ``start``, with assign (no group)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER})
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
        return got
    finally:
        consumer.close()


@pytest.fixture
def admin(seglog_broker: Any) -> Iterator[Any]:
    """A kafka-python admin client of the module's broker."""
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()
