"""kafka-python against an embedded broker: producer and consumer (its admin: test_admin.py)."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


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
