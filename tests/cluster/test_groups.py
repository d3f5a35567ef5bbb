"""Consumer groups on a broker of a ZooKeeper cluster: ``__consumer_offsets`` is made through
ZooKeeper and the controller (``offsets.topic.replication.factor`` replicas), its partitions
become this broker's by LeaderAndIsr after start-up and are loaded then, and a restarted
broker's groups and offsets come back that way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

import seglog.broker

from .conftest import wait_until

GROUP = "cluster-readers"


def consumer(bootstrap: str) -> Any:
    settings = {"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest"}
    return Consumer({**settings, "enable.auto.commit": False, "session.timeout.ms": 6000})


def test_an_embedded_cluster_broker_has_the_controllers_metadata_when_start_returns(
    chroot: str, tmp_path: Path
) -> None:
    """start() returned before the controller's first UpdateMetadata: a client's first Metadata
    then named no controller, and librdkafka held a CreateTopics until its next metadata refresh,
    past the test's 30 s (the flaky restart test below, under load)."""
    config = {"zookeeper.connect": chroot, "broker.id": 1}
    with seglog.broker.start(str(tmp_path / "data"), config=config) as broker:
        assert broker.server.replicas is not None
        metadata = broker.server.replicas.metadata
        assert (metadata.controller_id, [b.broker_id for b in metadata.brokers()]) == (1, [1])
        answer = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert (answer.controller_id, sorted(answer.brokers)) == (1, [1])


def test_a_group_commits_and_its_offsets_survive_a_restart(chroot: str, tmp_path: Path) -> None:
    config = {
        "zookeeper.connect": chroot,
        "broker.id": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 5,
        "group.initial.rebalance.delay.ms": 0,
    }
    with seglog.broker.start(str(tmp_path / "data"), config=config) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("read", 2, 1)])["read"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
        for i in range(10):
            producer.produce("read", b"r%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        reader = consumer(bootstrap)
        reader.subscribe(["read"])
        got: list[Any] = []

        def read() -> bool:
            got.extend(m for m in [reader.poll(0.1)] if m and not m.error())
            return len(got) == 10

        wait_until(read)
        reader.commit(asynchronous=False)
        reader.close()
    zk = KazooClient(hosts=chroot)
    zk.start()
    try:
        data, _ = zk.get("/brokers/topics/__consumer_offsets")
        assignment = json.loads(data)["partitions"]
        assert assignment == {str(p): [1] for p in range(5)}  # made through ZooKeeper, as configured
    finally:
        zk.stop()
        zk.close()

    with seglog.broker.start(str(tmp_path / "data"), config=config) as broker:
        reader = consumer(broker.bootstrap_servers)
        found = reader.committed([TopicPartition("read", 0), TopicPartition("read", 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in found] == [(0, 5), (1, 5)]
        reader.close()
