"""confluent-kafka (librdkafka) against an embedded broker: produce with every codec and
acks, consume with assign and seek, offsets by time, watermarks."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .conftest import CONSUMER, PRODUCER, consume_assigned


def _produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> list[tuple[int, int]]:
    """Produce ``values`` to partition 0; return the (partition, offset) of each delivery."""
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER, **config})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=b"k%d" % i, partition=0, timestamp=1_700_000_000_000 + i, on_delivery=report)
    assert producer.flush(60) == 0
    assert errors == []
    return delivered


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_every_codec_and_acks_then_consume(seglog_broker, codec: str, acks: str) -> None:
    topic = f"codec-{codec}-{acks}"
    values = [b"value-%d-" % i + b"x" * (i % 50) for i in range(300)]
    delivered = _produce(seglog_broker.bootstrap_servers, topic, values, **{"compression.type": codec, "acks": acks})
    assert len(delivered) == len(values)
    if acks != "0":  # acks=0 gets no offsets back
        assert sorted(o for _, o in delivered) == list(range(len(values)))
    got = consume_assigned(seglog_broker.bootstrap_servers, topic, 0, 0, len(values))
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(len(values)))
    assert [m.key() for m in got] == [b"k%d" % i for i in range(len(values))]
    assert [m.timestamp()[1] for m in got] == [1_700_000_000_000 + i for i in range(len(values))]


def test_seek_offsets_for_times_and_watermarks(seglog_broker) -> None:
    topic = "seek"
    values = [b"v%d" % i for i in range(100)]
    _produce(seglog_broker.bootstrap_servers, topic, values, **{"batch.num.messages": 10})
    consumer = Consumer({"bootstrap.servers": seglog_broker.bootstrap_servers, **CONSUMER})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 100)
        found = consumer.offsets_for_times([TopicPartition(topic, 0, 1_700_000_000_042)], timeout=10)
        assert found[0].offset == 42
        past = consumer.offsets_for_times([TopicPartition(topic, 0, 1_800_000_000_000)], timeout=10)
        assert past[0].offset == -1  # no record that late: Kafka answers -1, the client reports OFFSET_END
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = None
        while first is None:
            first = consumer.poll(1)
        consumer.seek(TopicPartition(topic, 0, 73))
        msg = None
        while msg is None or msg.offset() < 73:  # records fetched before the seek may still arrive
            msg = consumer.poll(1)
        assert (msg.offset(), msg.value()) == (73, b"v73")
    finally:
        consumer.close()


def test_a_consumer_waits_for_records_produced_later(seglog_broker) -> None:
    """Long polling: a consumer at the log end gets the record when it is produced (the purgatory)."""
    topic = "later"
    _produce(seglog_broker.bootstrap_servers, topic, [b"first"])
    # the fetch waits up to 30 s; only an append that wakes it brings the record within the 15 s polled
    consumer = Consumer({"bootstrap.servers": seglog_broker.bootstrap_servers, **CONSUMER, "fetch.wait.max.ms": 30_000})
    try:
        consumer.assign([TopicPartition(topic, 0, 1)])
        assert consumer.poll(0.5) is None
        _produce(seglog_broker.bootstrap_servers, topic, [b"second"])
        msg = None
        for _ in range(15):
            msg = consumer.poll(1)
            if msg is not None:
                break
        assert msg is not None and msg.value() == b"second" and msg.offset() == 1
    finally:
        consumer.close()


def test_unknown_topic_without_auto_create(seglog_broker_factory) -> None:
    broker = seglog_broker_factory(config={"auto.create.topics.enable": "false"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER, "message.timeout.ms": 1500})
    errors: list[object] = []
    producer.produce("missing", b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert len(errors) == 1 and errors[0] is not None


def test_a_batch_larger_than_the_fetch_limits_comes_whole(seglog_broker) -> None:
    """KIP-74: the first batch of a fetch is returned whole even past max.bytes and the
    partition's max bytes, so a consumer with small limits still moves on."""
    big = [b"B" * 200_000, b"small"]
    _produce(seglog_broker.bootstrap_servers, "kip74", big, **{"compression.type": "none", "linger.ms": 0})
    consumer = Consumer(
        {
            "bootstrap.servers": seglog_broker.bootstrap_servers,
            **CONSUMER,
            "message.max.bytes": 1000,  # (librdkafka wants fetch.max.bytes >= this; 1000 is its least)
            "fetch.max.bytes": 1000,
            "max.partition.fetch.bytes": 1000,
        }
    )
    try:
        consumer.assign([TopicPartition("kip74", 0, 0)])
        got = []
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            if len(got) == 2:
                break
        assert got == big
    finally:
        consumer.close()
