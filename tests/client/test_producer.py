"""The idempotent producer against a real embedded broker: records go where Kafka's partitioner puts
them, stamped with the producer's id, epoch and contiguous sequences; a batch sent again with its
sequence is written once; an out-of-order sequence bumps the epoch; config errors and bad input are
refused with Kafka's words. Records are read back with a real client (confluent-kafka) or the raw
Fetch. Then a 3-broker cluster (replication factor 3, min.insync.replicas 2) whose partition leader
is killed while the producer writes: every record is acknowledged, and read back once, at
contiguous offsets."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import ClusterClient
from seglog.client.producer import Producer, ProducerConfig
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.errors import (
    InvalidConfigurationError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from seglog.partitioner import partition_for_key
from seglog.records import BatchIterator, Compression, build_batch, build_batches_from_columns
from seglog.tools.cluster import LocalCluster

from ..cluster.conftest import chrooted_local_cluster, wait_until, zookeeper  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"num.partitions": 1, "log.retention.ms": -1}


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def _batches(bootstrap: str, tp: TopicPartition) -> list[Any]:
    """Every batch of a partition, with its records, read with the raw Fetch."""
    out: list[Any] = []
    with ClusterClient(bootstrap, timeout=30) as client:
        offset = 0
        while True:
            fetched = client.fetch(tp, offset)
            got = [b for b in BatchIterator(fetched.records) if b.next_offset > offset]
            out += [(b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset, b.records()) for b in got]
            if not got or got[-1].next_offset >= fetched.high_watermark:
                return out
            offset = got[-1].next_offset


def _consume(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes | None, bytes]]:
    """(partition, offset, key, value) of every record, with confluent-kafka's Consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        ends = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), 10)[1] for p in range(partitions)}
        got: list[tuple[int, int, bytes | None, bytes]] = []
        while len(got) < sum(ends.values()):
            msg = consumer.poll(10)
            assert msg is not None, "no more records"
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


def test_keyed_records_go_where_kafkas_partitioner_puts_them_keyless_ones_stick(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "keyed", 4)
    with Producer(bootstrap, {"linger.ms": 1000, "batch.size": 2000}) as producer:
        for i in range(200):
            producer.send("keyed", b"value-%d" % i, b"key-%d" % (i % 17), headers=[("h", b"%d" % i)])
        for i in range(100):
            producer.send("keyed", b"keyless-%d" % i)
        delivered = producer.flush()
        pid = producer.producer_id_and_epoch
    assert pid is not None and pid.producer_id >= 0
    assert sum(d.record_count for d in delivered) == 300
    records = _consume(bootstrap, "keyed", 4)
    assert len(records) == 300
    keyed = [(p, k) for p, _, k, v in records if v.startswith(b"value-")]
    assert all(p == partition_for_key(k, 4) for p, k in keyed)
    assert sorted(v for *_, v in records) == sorted(
        [b"value-%d" % i for i in range(200)] + [b"keyless-%d" % i for i in range(100)]
    )
    # a partition's records keep their order, and keyless batches of ~2000 bytes each stick to one partition
    for p in range(4):
        mine = [int(v.split(b"-")[1]) for q, _, _, v in records if q == p and v.startswith(b"value-")]
        assert mine == sorted(mine)
    batches = [b for p in range(4) for b in _batches(bootstrap, TopicPartition("keyed", p))]
    keyless = [b for b in batches if b[4][0].value.startswith(b"keyless-")]
    assert all(all(r.value.startswith(b"keyless-") for r in b[4]) for b in keyless)


def test_batches_carry_the_producer_id_and_contiguous_sequences(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "sequenced", 1)
    tp = TopicPartition("sequenced", 0)
    with Producer(bootstrap, {"batch.size": 500, "compression.type": "lz4"}) as producer:
        for i in range(100):
            producer.send("sequenced", b"v%03d" % i, partition=0)
        columns = build_batches_from_columns(
            3, None, (None, memoryview(bytes([0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0])).cast("B"), b"abbccc", 0)
        )
        producer.send_batches(tp, columns)
        delivered = producer.flush()
        pid = producer.producer_id_and_epoch
    assert pid is not None
    batches = _batches(bootstrap, tp)
    assert len(batches) > 2
    expected_sequence, expected_offset = 0, 0
    for producer_id, epoch, sequence, base_offset, records in batches:
        assert (producer_id, epoch) == pid
        assert (sequence, base_offset) == (expected_sequence, expected_offset)
        expected_sequence += len(records)
        expected_offset += len(records)
    assert [r.value for b in batches for r in b[4]] == [b"v%03d" % i for i in range(100)] + [b"a", b"bb", b"ccc"]
    assert [d.base_offset for d in delivered] == [b[3] for b in batches]


def test_a_batch_sent_again_with_its_sequence_is_written_once(seglog_broker: Any) -> None:
    """What a retry after a lost answer sends: the same batch, same producer id, epoch and
    sequence. A second producer given the first one's id and epoch (the transactional seam) sends
    the same records again from sequence 0: the leader acknowledges them at their first offsets."""
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "resent", 1)
    tp = TopicPartition("resent", 0)
    records = [(b"k%d" % i, b"v%d" % i) for i in range(10)]
    with Producer(bootstrap) as first:
        first.send_batches(tp, [build_batch(records[:5]), build_batch(records[5:])])
        acked = first.flush()
        pid = first.producer_id_and_epoch
    with Producer(bootstrap, producer_id_and_epoch=pid) as again:
        again.send_batches(tp, [build_batch(records[:5]), build_batch(records[5:])])
        acked_again = again.flush()
    assert [d.base_offset for d in acked] == [0, 5]
    assert [d.base_offset for d in acked_again] in ([0, 5], [-1, -1])  # the offset, or DUPLICATE_SEQUENCE_NUMBER
    assert [(r.key, r.value) for b in _batches(bootstrap, tp) for r in b[4]] == records


def test_an_out_of_order_sequence_bumps_the_epoch_and_the_batch_is_written_once(seglog_broker: Any) -> None:
    """Another producer wrote under this producer's id behind its back (3 records): this one's
    first batch (5 records from sequence 0) is out of order. The producer takes a new id or epoch
    and sends the batch again from sequence 0: written once."""
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "bumped", 1)
    tp = TopicPartition("bumped", 0)
    with Producer(bootstrap) as producer:
        before = producer.producer_id_and_epoch
        with Producer(bootstrap, producer_id_and_epoch=before) as intruder:
            intruder.send_batches(tp, [build_batch([(None, b"intruder-%d" % i) for i in range(3)])])
            intruder.flush()
        producer.send_batches(tp, [build_batch([(None, b"mine-%d" % i) for i in range(5)])])
        (delivered,) = producer.flush()
        after = producer.producer_id_and_epoch
    assert after != before and delivered.base_offset == 3
    batches = _batches(bootstrap, tp)
    assert [r.value for b in batches for r in b[4]] == [b"intruder-%d" % i for i in range(3)] + [
        b"mine-%d" % i for i in range(5)
    ]
    assert (batches[-1][0], batches[-1][1], batches[-1][2]) == (after.producer_id, after.epoch, 0)


def test_a_producer_given_its_id_does_not_bump_it_and_fails_the_batch_naming_its_partition(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "fenced", 1)
    tp = TopicPartition("fenced", 0)
    with Producer(bootstrap) as owner:
        owner.send_batches(tp, [build_batch([(None, b"a")] * 3)])
        owner.flush()
        pid = owner.producer_id_and_epoch
    with Producer(bootstrap, producer_id_and_epoch=pid) as given:
        given.send_batches(tp, [build_batch([(None, b"b")] * 5)])
        with pytest.raises(OutOfOrderSequenceError, match="fenced-0"):
            given.flush()
        assert given.producer_id_and_epoch == pid


def test_a_batch_too_large_for_the_topic_is_split_and_a_record_too_large_fails(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("small-messages", 1, 1, config={"max.message.bytes": "1000"})])[
        "small-messages"
    ].result(30)
    tp = TopicPartition("small-messages", 0)
    with Producer(bootstrap) as producer:
        producer.send_batches(tp, [build_batch([(b"k%d" % i, os.urandom(40)) for i in range(100)], compression="gzip")])
        producer.send_batches(tp, [build_batch([(None, b"after")])])
        delivered = producer.flush()
        assert sum(d.record_count for d in delivered) == 101 and len(delivered) > 2
        producer.send_batches(tp, [build_batch([(None, b"x" * 2000)])])
        with pytest.raises(RecordTooLargeError, match="cannot produce to small-messages-0"):
            producer.flush()
    batches = _batches(bootstrap, tp)
    assert [r.key for b in batches for r in b[4]] == [b"k%d" % i for i in range(100)] + [None]
    assert [b[2] for b in batches] == list(itertools.accumulate([0] + [len(b[4]) for b in batches[:-1]]))


def test_an_id_and_epoch_set_from_outside_restart_the_sequences(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "given-ids", 1)
    tp = TopicPartition("given-ids", 0)
    with Producer(bootstrap) as first, Producer(bootstrap) as second:
        ids = [first.producer_id_and_epoch, second.producer_id_and_epoch]
    assert ids[0] is not None and ids[1] is not None
    with Producer(bootstrap, producer_id_and_epoch=ids[0]) as producer:
        producer.send_batches(tp, [build_batch([(None, b"a")] * 3)])
        producer.flush()
        producer.set_producer_id_and_epoch(ids[1])
        producer.send_batches(tp, [build_batch([(None, b"b")] * 2)])
        producer.flush()
    assert [(b[0], b[1], b[2], b[3]) for b in _batches(bootstrap, tp)] == [(*ids[0], 0, 0), (*ids[1], 0, 3)]


def test_before_first_write_is_called_once_per_partition_until_reset(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "hooked", 2)
    seen: list[list[TopicPartition]] = []
    with Producer(bootstrap, before_first_write=lambda tps: seen.append(sorted(tps))) as producer:
        for round_ in range(2):
            for p in (0, 1, 0):
                producer.send("hooked", b"x", partition=p)
            producer.flush()
            if round_ == 0:
                producer.reset_written_partitions()
    assert [tp for tps in seen for tp in tps] == [TopicPartition("hooked", 0), TopicPartition("hooked", 1)] * 2


def test_a_missing_topic_is_created_as_the_broker_decides(seglog_broker: Any) -> None:
    with Producer(seglog_broker.bootstrap_servers) as producer:
        producer.send("made-on-demand", b"first")
        (delivered,) = producer.flush()
    assert delivered == (TopicPartition("made-on-demand", 0), 0, 1)


def test_bad_input_is_refused_naming_what(seglog_broker: Any, seglog_broker_factory: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "bad-input", 1)
    with Producer(bootstrap, {"max.request.size": 1000}) as producer:
        with pytest.raises(RecordTooLargeError, match=r"max\.request\.size"):
            producer.send("bad-input", b"x" * 2000)
        with pytest.raises(UnknownTopicOrPartitionError, match="partition 3 of topic 'bad-input'"):
            producer.send("bad-input", b"x", partition=3)
        assert producer.flush() == []
    # a broker that does not create topics: the producer waits max.block.ms, then says so
    closed = seglog_broker_factory(config={"auto.create.topics.enable": False})
    with (
        Producer(closed.bootstrap_servers, {"max.block.ms": 300}) as producer,
        pytest.raises(UnknownTopicOrPartitionError, match="not present in metadata after 300 ms"),
    ):
        producer.send("never-made", b"x")


def test_config_under_kafkas_names_with_kafkas_refusals() -> None:
    config = ProducerConfig.from_kafka(
        {"acks": "all", "linger.ms": "20", "compression.type": "zstd", "client.id": "me", "bootstrap.servers": "x"}
    )
    assert (config.acks, config.linger_ms, config.compression, config.client_id) == (-1, 20, Compression.ZSTD, "me")
    assert config.enable_idempotence
    assert not ProducerConfig.from_kafka({"acks": "1"}).enable_idempotence  # unset: turned off by acks=1
    with pytest.raises(InvalidConfigurationError, match="acks=all"):
        ProducerConfig.from_kafka({"acks": "1", "enable.idempotence": "true"})
    with pytest.raises(InvalidConfigurationError, match=r"delivery\.timeout\.ms"):
        ProducerConfig.from_kafka({"delivery.timeout.ms": "1000"})
    with pytest.raises(InvalidConfigurationError, match=r"compression\.type"):
        ProducerConfig.from_kafka({"compression.type": "brotli"})
    with pytest.raises(InvalidConfigurationError, match=r"linger\.ms"):
        ProducerConfig.from_kafka({"linger.ms": "soon"})


# --- a 3-broker cluster, the leader killed ----------------------------------------------------------


# replicas that notice a dead leader within seconds; records kept whatever their time
_CLUSTER = ["zookeeper.session.timeout.ms=6000", "controlled.shutdown.enable=false", "log.retention.ms=-1"]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:  # noqa: F811
    directory = tmp_path_factory.mktemp("producer-cluster")
    with chrooted_local_cluster(zookeeper, directory, "producer-cluster", 3, _CLUSTER) as local:
        yield local


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    with ClusterClient(bootstrap, timeout=10) as client:
        (found,) = [t for t in client.metadata([topic]).topics if t.name == topic]
        return {p.partition_index: p.leader_id for p in found.partitions}


def test_the_leader_killed_while_producing_every_record_is_written_once(cluster: LocalCluster) -> None:
    """The leader of partition 0 is killed from another thread while the producer sends (after
    1500 records, and it goes on sending 3000 records more): the batch in flight to it is sent
    again to the next leader with its sequence, so each record is in the log once, in the order
    sent."""
    topic = "produced-during-kill"
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_until(lambda: all(leader >= 0 for leader in _leaders(bootstrap, topic).values()), 60, "leaders")
    victim = _leaders(bootstrap, topic)[0]
    killed = threading.Event()

    def kill() -> None:
        cluster.brokers[victim].kill()
        killed.set()

    sent = after_kill = 0
    sends: dict[int, int] = {}  # requests carrying a batch of each partition, retries included
    with Producer(bootstrap, {"linger.ms": 0, "batch.size": 600}) as producer:
        produce = producer._produce

        def counted(heads: Any, leader: Any, tps: list[TopicPartition]) -> Any:
            for tp in tps:
                sends[tp.partition] = sends.get(tp.partition, 0) + 1
            return produce(heads, leader, tps)

        producer._produce = counted  # type: ignore[method-assign]
        timer = threading.Timer(0.05, kill)  # lands while the producer sends, mostly with a request in flight
        start = time.monotonic()
        while after_kill < 3000 and time.monotonic() - start < 120:
            producer.send(topic, b"value-%06d" % sent, partition=sent % 3)
            sent += 1
            after_kill += killed.is_set()
            if sent == 1500:
                timer.start()
        delivered = producer.flush()
    timer.join()
    assert killed.is_set() and after_kill == 3000
    assert sum(d.record_count for d in delivered) == sent
    assert _leaders(bootstrap, topic)[0] != victim
    # the batch of partition 0 in flight (or next) when its leader died was sent again
    assert sends[0] > sum(1 for d in delivered if d.tp.partition == 0)
    for p in range(3):
        records = [r for b in _batches(bootstrap, TopicPartition(topic, p)) for r in b[4]]
        assert [r.offset for r in records] == list(range(len(records)))  # contiguous, from 0
        assert [r.value for r in records] == [b"value-%06d" % i for i in range(p, sent, 3)]  # each once, in order
