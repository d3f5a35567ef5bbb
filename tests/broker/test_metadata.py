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
