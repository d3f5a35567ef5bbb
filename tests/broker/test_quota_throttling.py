"""Client quotas enforced on real clients: a confluent-kafka producer (or consumer) over its
byte-rate quota moves at its quota, within 10 %, while another client of the same broker keeps
its own rate; the throttle times reach the clients (confluent-kafka's throttle_cb,
kafka-python's responses).

The broker measures rates over 2 samples of 1 s (``quota.window.num=2``). Kafka's rate is a sum
over the window's samples: a client that always has more to send is let through in a burst
whenever a sample leaves the window, and starves until the next (under the default 11 samples
a pumping producer moves at 0.22 to 1.12 times its quota over 10 s spans: the arithmetic of
security/quotas.py, simulated with 64 KiB requests). Over a span of many windows the bursts
average out: 20 s here, where a burst (at most what the quota lets through in one sample) is
5 % of the total, and the throttled clients' requests are 16 KiB, a twelfth of a sample's share.

A consumer over its fetch quota reads somewhat below it, for two reasons, both Kafka's:
its throttled fetch is answered without records (Kafka's ``getThrottledResponse``), so each
throttle costs it a fetch's round trip besides, and a sample leaving the window shrinks the
window the rate is measured over, which lengthens the throttle that follows (the same
arithmetic simulated with 2-20 ms round trips: 0.955-0.963 of the quota sent); and a fetch
answers up to its ``fetch.max.bytes`` of the log, the last batch cut short (Kafka's
``LogSegment.read``), which the quota counts as sent and the client drops and fetches again:
with 16 KiB fetches of 15.5 KB batches, 6 % of what is sent. Counted in the broker, the
consumer here was sent 0.92 of its quota; its records' values came to 0.87 (load 10). The
test holds the values read between 80 % and 110 %, and the producer, whose throttled requests
are appended, within 10 %.

Rates, as the issue asks, not timings of seglog.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.protocol.metadata import MetadataRequest

from seglog.broker.embedded import EmbeddedBroker
from seglog.client import BlockingConnection
from seglog.protocol import ApiKey
from seglog.protocol.message_data import MetadataRequestData, ProduceRequestData
from seglog.records.batch import build_batch

from .conftest import CONSUMER, PRODUCER
from .test_client_quotas import alter, entity, remove_op, send, set_op

QUOTA = 200 * 1024  # bytes/s
WARM_UP_S = 5.0  # past the first burst, and the throttles that follow it
SLOW_IN_FLIGHT = 16 * 1024  # the throttled clients' requests
FAST_IN_FLIGHT = 1024 * 1024


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"num.partitions": 1, "quota.window.num": 2}


MEASURED_S = 20.0
VALUE = b"x" * 1024


class Meter:
    """Bytes a client moved, by time: its rate over a window."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.throttles: list[int] = []

    def add(self, size: int) -> None:
        self.events.append((time.monotonic(), size))

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.events if start <= t < end) / (end - start)


def produce_until(
    bootstrap: str, client_id: str, in_flight: int, topic: str, meter: Meter, stop: threading.Event
) -> None:
    """Produce as fast as the broker lets, at most ``in_flight`` bytes unacknowledged (and no
    message waits in the client's queue while its producer is throttled)."""

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            meter.add(len(msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            **PRODUCER,
            "message.timeout.ms": 120_000,
            "throttle_cb": lambda event: meter.throttles.append(event.throttle_time),
        }
    )
    while not stop.is_set():
        if len(producer) * len(VALUE) >= in_flight:
            producer.poll(0.01)
            continue
        producer.produce(topic, VALUE, on_delivery=delivered)
        producer.poll(0)
    producer.flush(120)


def run_for(seconds: float, *targets: Any) -> float:
    """The targets run in threads for ``seconds``; the time they started."""
    stop = threading.Event()
    threads = [threading.Thread(target=t, args=(*args, stop), daemon=True) for t, *args in targets]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(180)
    return started


def race(admin: KafkaAdminClient, bootstrap: str, key: str, worker: Any, topic: str) -> tuple[Meter, Meter, float]:
    """``worker``s as "slow" (``key`` quota set on its client id) and "fast" (none) side by
    side; their meters and the start of the measured span."""
    slow, fast = Meter(), Meter()
    assert alter(admin, entity(client="slow"), set_op(key, QUOTA))[0] == 0
    try:
        started = run_for(
            WARM_UP_S + MEASURED_S,
            (worker, bootstrap, "slow", SLOW_IN_FLIGHT, topic, slow),
            (worker, bootstrap, "fast", FAST_IN_FLIGHT, topic, fast),
        )
    finally:
        assert alter(admin, entity(client="slow"), remove_op(key))[0] == 0
    return slow, fast, started + WARM_UP_S


def test_a_producer_over_its_quota_moves_at_it_while_another_keeps_its_rate(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient
) -> None:
    slow, fast, start = race(admin, seglog_broker.bootstrap_servers, "producer_byte_rate", produce_until, "produced")
    window = (start, start + MEASURED_S)
    assert slow.rate(*window) == pytest.approx(QUOTA, rel=0.10)
    assert fast.rate(*window) > 3 * QUOTA
    assert max(slow.throttles) > 0  # throttle_time_ms, as librdkafka read it
    assert not any(fast.throttles)


def consume_until(
    bootstrap: str, client_id: str, in_flight: int, topic: str, meter: Meter, stop: threading.Event
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            **CONSUMER,
            "fetch.max.bytes": in_flight,
            "message.max.bytes": in_flight,
            "max.partition.fetch.bytes": in_flight,
            "throttle_cb": lambda event: meter.throttles.append(event.throttle_time),
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                meter.add(len(msg.value() or b""))
    finally:
        consumer.close()


def test_a_consumer_over_its_quota_moves_at_it_while_another_keeps_its_rate(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient
) -> None:
    # more than the slow consumer can read in the test: its quota over the run and the window
    bootstrap = seglog_broker.bootstrap_servers
    # small batches: a fetch answers at least one whole batch, and one larger than the quota
    # lets through in a window (200 KiB here) would be refused at every try, as Kafka's
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **PRODUCER,
            "queue.buffering.max.kbytes": 1 << 20,
            "batch.size": SLOW_IN_FLIGHT,
        }
    )
    total = int(QUOTA * (WARM_UP_S + MEASURED_S + 10)) // len(VALUE)
    for _ in range(total):
        producer.produce("fetched", VALUE)
        producer.poll(0)
    assert producer.flush(120) == 0
    del producer
    slow, fast, start = race(admin, bootstrap, "consumer_byte_rate", consume_until, "fetched")
    window = (start, start + MEASURED_S)
    assert 0.80 * QUOTA <= slow.rate(*window) <= 1.10 * QUOTA
    assert sum(n for _, n in slow.events) < total * len(VALUE)  # it was still reading
    # the other read the whole topic, far faster
    assert sum(n for _, n in fast.events) == total * len(VALUE)
    fast_elapsed = fast.events[-1][0] - (start - WARM_UP_S)
    assert total * len(VALUE) / fast_elapsed > 3 * QUOTA
    assert max(slow.throttles) > 0
    assert not any(fast.throttles)


def test_a_request_quota_throttles_a_kafka_python_client(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient
) -> None:
    """request_percentage: handler time as a share of one thread; any request's time is far
    over a quota this small, so its answer carries a throttle time (kafka-python reads it)."""
    assert alter(admin, entity(client="busy"), set_op("request_percentage", 1e-6))[0] == 0
    busy = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers, client_id="busy")
    try:
        throttled = send(busy, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        assert throttled.throttle_time_ms > 0
        # capped at one quota sample (1 s), as Kafka caps request-time throttles
        assert throttled.throttle_time_ms <= 1000
        # another client id is not held back
        assert send(admin, MetadataRequest(topics=[], allow_auto_topic_creation=False)).throttle_time_ms == 0
    finally:
        busy.close()
        assert alter(admin, entity(client="busy"), remove_op("request_percentage"))[0] == 0


def produce_request(size: int) -> ProduceRequestData:
    """A produce of one ``size``-byte record to partition 0 of "probed" (which need not exist:
    a produce quota counts the bytes a request carries, whatever becomes of them)."""
    data = ProduceRequestData.PartitionProduceData(index=0, records=build_batch([(None, b"x" * size)]))
    return ProduceRequestData(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[ProduceRequestData.TopicProduceData(name="probed", partition_data=[data])],
    )


def test_a_throttled_connection_is_muted_and_an_older_client_answered_late(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient
) -> None:
    """KIP-219: the answer over the quota comes at once with its throttle time, and the
    connection's next request is not answered before that time is out; to Produce v5, from
    before KIP-219, the answer itself comes only then. (Bounds from below: the broker's timer
    cannot fire early, however loaded the machine.)"""
    # 4 KiB against 2 KiB/s over the 1 s a first request is measured over: a 1 s throttle
    assert alter(admin, entity(client="muted"), set_op("producer_byte_rate", 2048))[0] == 0
    host, port = seglog_broker.bootstrap_servers.rsplit(":", 1)
    try:
        with BlockingConnection(host, int(port), "muted") as conn:
            sent = time.monotonic()  # the throttle runs from the broker's reading it, after this
            throttled = conn.request(ApiKey.PRODUCE, produce_request(4096))
            assert throttled.throttle_time_ms > 0
            conn.request(ApiKey.METADATA, MetadataRequestData(topics=[]))
            assert time.monotonic() - sent >= throttled.throttle_time_ms / 1000 - 0.01
        with BlockingConnection(host, int(port), "muted") as old:
            sent = time.monotonic()
            late = old.request(ApiKey.PRODUCE, produce_request(4096), 5)
            assert late.throttle_time_ms > 0
            assert time.monotonic() - sent >= late.throttle_time_ms / 1000 - 0.01
    finally:
        assert alter(admin, entity(client="muted"), remove_op("producer_byte_rate"))[0] == 0


@pytest.mark.parametrize("user", ["ANONYMOUS", None])
def test_a_plaintext_client_is_the_user_anonymous(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient, user: str | None
) -> None:
    """Without authentication a client is ``User:ANONYMOUS``: that user's quota, or the
    default user's, holds it (with any client id); another user's does not."""
    host, port = seglog_broker.bootstrap_servers.rsplit(":", 1)
    parts = entity(user, default_user=True)
    assert alter(admin, entity("someone-else"), set_op("producer_byte_rate", 2048))[0] == 0
    try:
        with BlockingConnection(host, int(port), "any-client") as conn:
            assert conn.request(ApiKey.PRODUCE, produce_request(4096)).throttle_time_ms == 0
        assert alter(admin, parts, set_op("producer_byte_rate", 2048))[0] == 0
        with BlockingConnection(host, int(port), "any-client") as conn:
            assert conn.request(ApiKey.PRODUCE, produce_request(4096)).throttle_time_ms > 0
    finally:
        assert alter(admin, parts, remove_op("producer_byte_rate"))[0] == 0
        assert alter(admin, entity("someone-else"), remove_op("producer_byte_rate"))[0] == 0
