"""kafka-python against an embedded broker: producer and consumer (its admin: test_admin.py)."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

BASE_TS = 1_700_000_000_000


def test_producer_and_consumer(seglog_broker) -> None:
    producer = KafkaProducer(  # idempotence (InitProducerId) is issue 14
        bootstrap_servers=seglog_broker.bootstrap_servers,
        linger_ms=5,
        compression_type="gzip",
        enable_idempotence=False,
    )
    futures = [producer.send("kp", key=b"k", value=b"v%d" % i, partition=0) for i in range(200)]
    producer.flush(30)
    assert sorted(f.get(10).offset for f in futures) == list(range(200))
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=seglog_broker.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    tp = TopicPartition("kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 200:
            break
    assert got == [b"v%d" % i for i in range(200)]
    assert consumer.end_offsets([tp]) == {tp: 200}
    consumer.close()


@pytest.mark.parametrize("api_version", [(0, 10), (0, 8, 2)])
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_old_protocol_versions(seglog_broker, api_version: tuple[int, ...], codec: str | None) -> None:
    """kafka-python told the broker is Kafka 0.10.0 (Produce v2 and Fetch v2, magic 1 messages,
    ListOffsets v0) or 0.8.2 (Produce v0 and Fetch v0, magic 0: no timestamps), as Kafka 3.x
    still serves them: every record and offset comes back, from the start and from an offset."""
    topic = f"kp-old-{'-'.join(map(str, api_version))}-{codec}"
    common = {"bootstrap_servers": seglog_broker.bootstrap_servers, "api_version": api_version}
    producer = KafkaProducer(**common, linger_ms=20, compression_type=codec)
    sent, futures = [], []
    for i in range(60):
        key = None if i % 7 == 3 else b"k%d" % i
        value = None if i % 11 == 5 and key is not None else b"value %d " % i + b"x" * (i % 50)
        sent.append((key, value, BASE_TS + i))
        futures.append(producer.send(topic, key=key, value=value, partition=0, timestamp_ms=BASE_TS + i))
        if i in (25, 40):
            producer.flush(30)  # three produce requests: several message sets in the log
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(60))
    producer.close()

    consumer = KafkaConsumer(**common, enable_auto_commit=False, consumer_timeout_ms=10_000, fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.beginning_offsets([tp]) == {tp: 0} and consumer.end_offsets([tp]) == {tp: 60}
    stamped = api_version >= (0, 10)
    want = [(i, k, v, ts if stamped else None) for i, (k, v, ts) in enumerate(sent)]
    for start in (0, 37):
        assert read(consumer, tp, start, 60) == want[start:]
    consumer.close()
    # a client of today reads the v2 batches the log holds: a magic 0 message's record has no
    # timestamp (-1, NO_TIMESTAMP)
    today = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, consumer_timeout_ms=10_000)
    today.assign([tp])
    assert read(today, tp, 0, 60) == [(i, k, v, ts if stamped else -1) for i, k, v, ts in want]
    today.close()


def read(consumer: KafkaConsumer, tp: TopicPartition, start: int, end: int) -> list[tuple]:
    """(offset, key, value, timestamp) of the records from ``start`` to ``end``."""
    consumer.seek(tp, start)
    got = []
    for msg in consumer:
        got.append((msg.offset, msg.key, msg.value, msg.timestamp))
        if len(got) == end - start:
            break
    return got
