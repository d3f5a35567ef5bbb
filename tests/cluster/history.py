"""A history checker for the cluster tests: a producer (acks=all) records every acknowledged
record; afterwards each must be in the leader's log at its offset, and a consumer reading to the
end must see every offset in order, once (a retried record may be written twice: the
producer is not idempotent)."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

import seglog
from seglog.tools.cluster import BrokerProcess

from .conftest import wait_until


class History:
    """A confluent-kafka producer writing ``record-N`` to partition 0 without pause, in a thread."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.acknowledged: dict[int, bytes] = {}
        self.overwritten: list[tuple[int, bytes, bytes]] = []  # two records acknowledged at one offset
        self._stop = threading.Event()
        self._writer = threading.Thread(target=self._write, daemon=True)

    def __enter__(self) -> History:
        self._writer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._writer.join(90)

    def wait_for(self, more: int, timeout: float = 60.0) -> None:
        """Until ``more`` records beyond those acknowledged so far are acknowledged."""
        wanted = len(self.acknowledged) + more
        wait_until(lambda: len(self.acknowledged) >= wanted, timeout, "acknowledged writes")

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            earlier = self.acknowledged.get(message.offset())
            if earlier is not None and earlier != message.value():  # one of the two was lost
                self.overwritten.append((message.offset(), earlier, message.value()))
            self.acknowledged[message.offset()] = message.value()

    def _write(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "acks": "all",
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                # a request to a cut-off broker is abandoned (and retried elsewhere) soon
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
            }
        )
        n = 0
        while not self._stop.is_set():
            producer.produce(self.topic, b"record-%d" % n, partition=0, on_delivery=self._delivered)
            producer.poll(0.01)
            n += 1
        producer.flush(60)

    def check(self, leader: BrokerProcess) -> None:
        """Every acknowledged record is in the leader's log at its offset, and a consumer reads
        the log in offset order with each record once."""
        held = records(leader, self.topic)
        assert not self.overwritten, f"records acknowledged at one offset (offset, first, second): {self.overwritten}"
        assert {o: held.get(o) for o in self.acknowledged} == self.acknowledged
        end = max(self.acknowledged) + 1
        read = consume(self.bootstrap_servers, self.topic, end)
        assert [o for o, _ in read] == list(range(len(read)))
        assert dict(read) == {o: held[o] for o in range(len(read))}


def records(broker: BrokerProcess, topic: str) -> dict[int, bytes]:
    with seglog.open(broker.log_dir, read_only=True) as logs:
        return {r.offset: r.value for r in logs.partition(topic, 0).records(0, end_offset=None)}


def consume(bootstrap_servers: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    """Partition 0 from offset 0 until offset ``end`` is passed: (offset, value) in the order read."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:

        def read() -> bool:
            got.extend((m.offset(), m.value()) for m in consumer.consume(1000, 0.2) if m.error() is None)
            return bool(got) and got[-1][0] >= end - 1

        wait_until(read, 60, "the records to come back")
    finally:
        consumer.close()
    return got
