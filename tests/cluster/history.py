"""A history checker for the cluster tests: a producer (acks=all) records every acknowledged
record; afterwards each must be in the leader's log at its offset, and a consumer reading to the
end must see every offset in order, once (a retried record may be written twice: the
producer is not idempotent)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

import seglog
from seglog.tools.cluster import BrokerProcess

from .conftest import delivered, wait_until
from .security import kafka_python_settings


class History:
    """A confluent-kafka producer writing ``record-N`` to partition 0 without pause, in a thread;
    ``properties``: the client properties of a secure cluster (librdkafka's names)."""

    def __init__(self, bootstrap_servers: str, topic: str, properties: dict[str, str] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.properties = properties or {}
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
                **self.properties,
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
        read = consume(self.bootstrap_servers, self.topic, end, self.properties)
        assert [o for o, _ in read] == list(range(len(read)))
        assert dict(read) == {o: held[o] for o in range(len(read))}


def records(broker: BrokerProcess, topic: str) -> dict[int, bytes | None]:
    with seglog.open(broker.log_dir, read_only=True) as logs:
        return {r.offset: r.value for r in logs.partition(topic, 0).records(0, end_offset=None)}


def consume(
    bootstrap_servers: str, topic: str, end: int, properties: dict[str, str] | None = None
) -> list[tuple[int, bytes | None]]:
    """Partition 0 from offset 0 until offset ``end`` is passed: (offset, value) in the order read."""
    config = {"bootstrap.servers": bootstrap_servers, "group.id": topic, "enable.auto.commit": False}
    consumer = Consumer({**config, **(properties or {})})
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes | None]] = []
    try:

        def read() -> bool:
            got.extend(delivered(m)[1:] for m in consumer.consume(1000, 0.2) if m.error() is None)
            return bool(got) and got[-1][0] >= end - 1

        wait_until(read, 60, "the records to come back")
    finally:
        consumer.close()
    return got


# --- several partitions, several clients ---------------------------------------------------------


class Recorder:
    """What several producers and consumers did to one topic's partitions, from their threads:
    every acknowledged write (partition, offset) -> value, with the time its record was produced and
    acknowledged; every read, per reader and partition, in the order read; what went wrong."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acknowledged: dict[tuple[int, int], bytes] = {}
        self.acks: list[tuple[int, float, float]] = []  # (partition, produced, acknowledged)
        self.reads: dict[str, dict[int, list[tuple[int, bytes | None]]]] = {}
        self.anomalies: list[str] = []  # two values acknowledged at one offset, a consumer's reset

    def acknowledge(self, partition: int, offset: int, value: bytes, produced: float) -> None:
        with self._lock:
            held = self.acknowledged.setdefault((partition, offset), value)
            if held != value:
                self.anomalies.append(f"partition {partition} offset {offset} acknowledged {held!r} and {value!r}")
            self.acks.append((partition, produced, time.monotonic()))

    def read(self, reader: str, partition: int, offset: int, value: bytes | None) -> None:
        with self._lock:
            self.reads.setdefault(reader, {}).setdefault(partition, []).append((offset, value))

    def anomaly(self, what: str) -> None:
        with self._lock:
            self.anomalies.append(what)

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        """When the first record produced to ``partition`` after ``moment`` was acknowledged."""
        with self._lock:
            return min((acked for p, sent, acked in self.acks if p == partition and sent > moment), default=None)

    def read_ends(self, readers: Sequence[str]) -> dict[str, dict[int, int]]:
        """Each reader's next offset to read, per partition it has read from."""
        with self._lock:
            return {r: {p: read[-1][0] + 1 for p, read in self.reads.get(r, {}).items()} for r in readers}

    def read_up_to(self, readers: Sequence[str], ends: dict[int, int]) -> bool:
        """Whether each of ``readers`` has read each partition up to its ``ends`` offset (exclusive)."""
        with self._lock:
            return all(
                (self.reads.get(r, {}).get(p) or [(-1, b"")])[-1][0] >= end - 1
                for r in readers
                for p, end in ends.items()
            )


class Client(threading.Thread):
    """A producer or consumer loop in a thread of its own, until ``stop``; ``properties``: the
    client properties of a secure cluster (librdkafka's names, kafka-python's made from them)."""

    def __init__(
        self,
        name: str,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        recorder: Recorder,
        properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap_servers = bootstrap_servers
        self.properties = properties or {}
        self.topic = topic
        self.partitions = partitions
        self.recorder = recorder
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as e:
            self.failure = e

    def loop(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()
        self.join(90)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.failure is not None:
            raise AssertionError(f"{self.name} failed") from self.failure


class ConfluentWriter(Client):
    """confluent-kafka, acks=all, not idempotent: ``<name>-N`` to partition N % partitions, every 5 ms."""

    def loop(self) -> None:
        config = {"bootstrap.servers": self.bootstrap_servers, "acks": "all", "linger.ms": 5, "log_level": 0}
        config |= {"retry.backoff.ms": 50, "request.timeout.ms": 5000, "socket.timeout.ms": 5000}
        producer = Producer({**config, **self.properties})
        n = 0
        while not self.stopping.is_set():
            value = b"%s-%d" % (self.name.encode(), n)
            done = self._delivered(n % self.partitions, value, time.monotonic())
            producer.produce(self.topic, value, partition=n % self.partitions, on_delivery=done)
            producer.poll(0.005)
            n += 1
        producer.flush(60)

    def _delivered(self, partition: int, value: bytes, produced: float) -> Any:
        def done(error: Any, message: Any) -> None:
            if error is None:
                self.recorder.acknowledge(partition, message.offset(), value, produced)

        return done


class KafkaPythonWriter(Client):
    """kafka-python, acks=all, not idempotent: ``<name>-N`` to partition N % partitions, every 10 ms."""

    def loop(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            acks="all",
            enable_idempotence=False,
            linger_ms=5,
            retries=1_000_000,
            retry_backoff_ms=50,
            request_timeout_ms=5000,
            **kafka_python_settings(self.properties),
        )
        n = 0
        try:
            while not self.stopping.wait(0.01):
                value = b"%s-%d" % (self.name.encode(), n)
                sent = producer.send(self.topic, value, partition=n % self.partitions)
                sent.add_callback(self._delivered, value, time.monotonic())
                n += 1
            producer.flush(60)
        finally:
            producer.close(10)

    def _delivered(self, value: bytes, produced: float, metadata: Any) -> None:
        self.recorder.acknowledge(metadata.partition, metadata.offset, value, produced)


class ConfluentReader(Client):
    """confluent-kafka reading every partition from offset 0; a reset of its position (it should
    never need one) is an anomaly, not a jump."""

    def loop(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.name,
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
                "log_level": 0,
                **self.properties,
            }
        )
        consumer.assign([KafkaTopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stopping.is_set():
                for m in consumer.consume(500, 0.1):
                    if m.error() is not None:
                        self.recorder.anomaly(f"{self.name}: {m.error()}")
                    else:
                        self.recorder.read(self.name, *delivered(m))
        finally:
            consumer.close()


class KafkaPythonReader(Client):
    """kafka-python reading every partition from offset 0, never resetting its position."""

    def loop(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="none",
            fetch_max_wait_ms=200,
            request_timeout_ms=5000,
            **kafka_python_settings(self.properties),
        )
        tps = [KafkaPythonTopicPartition(self.topic, p) for p in range(self.partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        try:
            while not self.stopping.is_set():
                for tp, messages in consumer.poll(100, max_records=500).items():
                    for m in messages:
                        self.recorder.read(self.name, tp.partition, m.offset, m.value)
        finally:
            consumer.close()


def partition_records(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in one replica's log, in log order."""
    with seglog.open(broker.log_dir, read_only=True) as logs:
        return [(r.offset, r.value) for r in logs.partition(topic, partition).records(0, end_offset=None)]


def check_partition(
    recorder: Recorder, readers: Sequence[str], replicas: list[BrokerProcess], topic: str, partition: int
) -> None:
    """One partition after every client stopped and its replicas are byte-identical: each offset holds
    one record, the same on every replica; every acknowledged record is there at its offset; each
    of ``readers`` read offsets 0, 1, 2 ... to the end in order, with the records the log holds."""
    held = [partition_records(b, topic, partition) for b in replicas]
    for b, records in zip(replicas, held, strict=True):
        assert [o for o, _ in records] == list(range(len(records))), f"broker {b.broker_id}: offsets not one each"
        assert records == held[0], f"broker {b.broker_id} holds other records than broker {replicas[0].broker_id}"
    log = dict(held[0])
    acknowledged = {o: v for (p, o), v in recorder.acknowledged.items() if p == partition}
    lost = {o: v for o, v in acknowledged.items() if log.get(o) != v}
    assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost, e.g. {sorted(lost.items())[:5]}"
    for reader in readers:
        read = recorder.reads.get(reader, {}).get(partition, [])
        assert [o for o, _ in read] == list(range(len(read))), f"{reader}: partition {partition} read out of order"
        assert read == held[0], f"{reader}: partition {partition} read other records than the log holds"
