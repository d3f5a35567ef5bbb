"""Metadata as a cluster's broker answers it from the controller's UpdateMetadata."""

from __future__ import annotations

import asyncio
import uuid

from seglog.broker.apis import KafkaApis
from seglog.broker.metadata_cache import BrokerInfo, PartitionState
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.protocol.message_data import MetadataRequestData

LEADER_NOT_AVAILABLE = 5


def test_a_leader_not_among_the_live_brokers_is_not_available(tmp_path) -> None:
    """Between a broker's death and the controller's election, UpdateMetadata names the dead
    broker as leader but not among the live ones: as Kafka's MetadataCache, Metadata answers
    LEADER_NOT_AVAILABLE and no leader, not a node id the client has no address for."""
    config = broker_config({"log.dirs": str(tmp_path), "broker.id": 1, "zookeeper.connect": "127.0.0.1:1"})
    replicas = ReplicaManager(config, BrokerInfo(1, "127.0.0.1", 9092))
    apis = KafkaApis(config, replicas, ("127.0.0.1", 9092))
    live = [BrokerInfo(1, "127.0.0.1", 9092), BrokerInfo(3, "127.0.0.3", 9092)]
    states = [PartitionState(0, 2, 7, (2, 1, 3), (2, 1, 3)), PartitionState(1, 3, 4, (3, 2, 1), (3, 1))]
    replicas.metadata.update_metadata(live, 1, [("t", uuid.uuid4(), s) for s in states], set())

    body = MetadataRequestData(topics=[MetadataRequestData.MetadataRequestTopic(name="t")])
    answer = asyncio.run(apis.metadata_request(12, body))

    assert sorted(b.node_id for b in answer.brokers) == [1, 3]
    partitions = answer.topics[0].partitions
    assert [(p.error_code, p.leader_id, p.leader_epoch) for p in partitions] == [
        (LEADER_NOT_AVAILABLE, -1, 7),
        (0, 3, 4),
    ]
    assert partitions[0].replica_nodes == [2, 1, 3]


def test_every_topics_entries_are_built_once_and_never_changed_by_an_answer(tmp_path) -> None:
    """A Metadata of every topic reuses the entries built for the topics as they are (an open
    console asks it every few seconds): a dead leader is hidden in that answer alone, a broker
    coming back shows its leaders again, and a changed partition state is answered at once."""
    config = broker_config({"log.dirs": str(tmp_path), "broker.id": 1, "zookeeper.connect": "127.0.0.1:1"})
    replicas = ReplicaManager(config, BrokerInfo(1, "127.0.0.1", 9092))
    apis = KafkaApis(config, replicas, ("127.0.0.1", 9092))
    one, two = BrokerInfo(1, "127.0.0.1", 9092), BrokerInfo(2, "127.0.0.2", 9092)
    topic_id = uuid.uuid4()
    states = [PartitionState(0, 2, 7, (2, 1), (2, 1)), PartitionState(1, 1, 4, (1, 2), (1, 2))]
    replicas.metadata.update_metadata([one], 1, [("t", topic_id, s) for s in states], set())
    every = MetadataRequestData(topics=None)

    def leaders() -> list[tuple[int, int]]:
        answer = asyncio.run(apis.metadata_request(12, every))
        return [(p.error_code, p.leader_id) for t in answer.topics for p in t.partitions]

    assert leaders() == [(LEADER_NOT_AVAILABLE, -1), (0, 1)]  # broker 2 is not live
    replicas.metadata.update_brokers([one, two], 1)
    assert leaders() == [(0, 2), (0, 1)]  # the shared entries kept broker 2's leadership
    first = asyncio.run(apis.metadata_request(12, every)).topics[0]
    assert asyncio.run(apis.metadata_request(12, every)).topics[0] is first  # built once
    moved = PartitionState(0, 1, 8, (2, 1), (1,))
    replicas.metadata.update_metadata([one, two], 1, [("t", topic_id, moved)], set())
    answer = asyncio.run(apis.metadata_request(12, every))
    assert [(p.leader_id, p.leader_epoch, p.isr_nodes) for p in answer.topics[0].partitions] == [
        (1, 8, [1]),
        (1, 4, [1, 2]),
    ]
