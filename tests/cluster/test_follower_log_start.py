"""Followers follow their leader's log start offset (Kafka's ReplicaFetcherThread: the fetch
response's log_start_offset, then ``maybeIncrementLogStartOffset`` on the follower's log): records
deleted on the leader (DeleteRecords here; retention alike) go on every replica, so they do not
come back when a follower becomes the leader.

Three ``seglog broker`` processes and a real ZooKeeper; retention and the log start offset
checkpoint run every half second so the followers' files show it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition

from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.storage.checkpoint import read_offsets_or_empty
from seglog.tools.cluster import LocalCluster

from .conftest import wait_until
from .test_replication import chrooted_cluster, state, zk_of

TOPIC = "trimmed"


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    overrides = [
        "zookeeper.session.timeout.ms=30000",
        "controlled.shutdown.enable=false",
        "log.retention.check.interval.ms=500",
        "log.flush.start.offset.checkpoint.interval.ms=500",
        "log.index.size.max.bytes=65536",
    ]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("log-start"), "log-start", overrides)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def log_start_offset(cluster: LocalCluster, broker: int) -> int | None:
    """The broker's log-start-offset-checkpoint entry for the partition (None: not written yet)."""
    path = cluster.brokers[broker].log_dir / "log-start-offset-checkpoint"
    if not path.exists():
        return None
    return read_offsets_or_empty(str(path)).get(TopicPartition(TOPIC, 0))


def first_segment(cluster: LocalCluster, broker: int) -> int:
    """The base offset of the broker's first segment of the partition."""
    return min(int(f.name[:20]) for f in (cluster.brokers[broker].log_dir / f"{TOPIC}-0").glob("*.log"))


def earliest(bootstrap_servers: str) -> int:
    """ListOffsets EARLIEST from the leader (asked again while the client's metadata names the old one)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": TOPIC})
    found: list[int] = []

    def ask() -> bool:
        try:
            found.append(consumer.get_watermark_offsets(KafkaTopicPartition(TOPIC, 0), timeout=10)[0])
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION:
                raise
        return bool(found)

    try:
        wait_until(ask, 30, "an answer from the leader")
    finally:
        consumer.close()
    return found[0]


def test_followers_take_the_leader_s_log_start_offset(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    config = {"segment.bytes": "1024"}  # a few records a segment: whole segments go
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]], config=config)])[TOPIC].result(60)
    with zk_of(cluster) as zk:
        wait_until(lambda: state(zk, TOPIC).isr == (1, 2, 3), what="a full ISR")
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(200):
            producer.produce(TOPIC, b"record-%d" % i, partition=0)
            if i % 5 == 4:  # batches of 5, five of them a segment
                assert producer.flush(30) == 0

        (deleted,) = admin.delete_records([KafkaTopicPartition(TOPIC, 0, 150)]).values()
        assert deleted.result(30).low_watermark == 150
        # on the followers too: their log start offsets, then their segments below it
        for b in (2, 3):
            moved = functools.partial(lambda b: log_start_offset(cluster, b) == 150, b)
            gone = functools.partial(lambda b: 0 < first_segment(cluster, b) <= 150, b)
            wait_until(moved, 30, f"broker {b}'s log start offset")
            wait_until(gone, 30, f"broker {b}'s old segments deleted")

        # broker 2 leads (the replicas reordered, then the preferred election): the records stay deleted
        reorder = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            reorder.alter_partition_reassignments({KafkaPythonTopicPartition(TOPIC, 0): [2, 3, 1]})
        finally:
            reorder.close()
        wait_until(lambda: zk.get_topic(TOPIC).partitions[0].replicas == (2, 3, 1), what="the replicas reordered")  # type: ignore[union-attr]
        admin.elect_leaders(ElectionType.PREFERRED, [KafkaTopicPartition(TOPIC, 0)]).result(30)
        wait_until(lambda: state(zk, TOPIC).leader == 2, what="broker 2 leading")
    assert earliest(cluster.bootstrap_servers) == 150
