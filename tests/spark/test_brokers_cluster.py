"""The source through the brokers of a 3-broker cluster (replication factor 3, min.insync.replicas
2): a partition's leader killed between planning and reading, and the tasks still read every
record produced, once, from the leader elected after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import ClusterClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.spark.source import SeglogBatchReader, read_task
from seglog.tools.cluster import LocalCluster

from ..cluster.conftest import chrooted_local_cluster, wait_until, zookeeper  # noqa: F401 (a fixture)

TOPIC = "replicated"
PER_PARTITION = 300


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:  # noqa: F811
    overrides = [
        "zookeeper.session.timeout.ms=6000",
        "controlled.shutdown.enable=false",
        "log.retention.ms=-1",
        "offsets.topic.replication.factor=1",
    ]
    directory = tmp_path_factory.mktemp("spark-cluster")
    with chrooted_local_cluster(zookeeper, directory, "spark-cluster", 3, overrides) as local:
        yield local


def _leaders(bootstrap: str) -> dict[int, int]:
    with ClusterClient(bootstrap, timeout=10) as client:
        (topic,) = [t for t in client.metadata([TOPIC]).topics if t.name == TOPIC]
        return {p.partition_index: p.leader_id for p in topic.partitions}


def test_a_leader_killed_after_planning_is_found_again_by_the_tasks(cluster: LocalCluster) -> None:
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])
    created[TOPIC].result(60)
    wait_until(lambda: all(leader >= 0 for leader in _leaders(bootstrap).values()), 60, "leaders")
    acked: list[tuple[Any, ...]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(PER_PARTITION):
        for p in range(3):
            producer.produce(TOPIC, b"value-%d-%d" % (p, i), partition=p, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0

    victim = _leaders(bootstrap)[0]
    # the victim first: the tasks' bootstrap finds it dead and goes on to the next
    servers = [cluster.brokers[victim].address] + [b.address for i, b in cluster.brokers.items() if i != victim]
    options = {"kafka.bootstrap.servers": ",".join(servers), "subscribe": TOPIC, "minPartitions": "6"}
    tasks = SeglogBatchReader(options).partitions()
    assert len(tasks) == 6
    cluster.brokers[victim].kill()
    rows = [(r["partition"], r["offset"], r["value"]) for task in tasks for b in read_task(task) for r in b.to_pylist()]
    assert sorted(rows) == sorted(acked)
    assert len(rows) == 3 * PER_PARTITION
    assert _leaders(bootstrap)[0] != victim
