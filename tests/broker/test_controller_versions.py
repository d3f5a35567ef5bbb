"""The controller's requests at every version Kafka 3.9's ZooKeeper-mode broker takes: LeaderAndIsr
v0-7, UpdateMetadata v0-8 and StopReplica v0-4, each laid out as its version lays partitions out
(in each partition's state, grouped by topic, with topic ids), through the wire codec to a real
replica manager."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.controller_apis import ControllerApis
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.protocol import ApiKey, decode_request, encode_request
from seglog.protocol.message import Message
from seglog.protocol.message_data import LeaderAndIsrRequestData, StopReplicaRequestData, UpdateMetadataRequestData

TOPIC_ID = uuid.UUID(int=7)


def typed(key: ApiKey, version: int, body: Message) -> Any:
    """``body`` as the broker receives it at ``version``: encoded, then decoded."""
    frame = b"".join(bytes(p) for p in encode_request(key, version, 1, "controller", body))
    return decode_request(frame[4:]).body


def leader_and_isr(version: int, epoch: int) -> LeaderAndIsrRequestData:
    state = LeaderAndIsrRequestData.LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=1,
        leader=0,
        leader_epoch=epoch,
        isr=[0],
        partition_epoch=epoch,
        replicas=[0],
        is_new=True,
    )
    body = LeaderAndIsrRequestData(controller_id=1, controller_epoch=1, broker_epoch=-1, live_leaders=[])
    if version < 2:
        state.topic_name = "t"
        body.ungrouped_partition_states = [state]
    else:
        topic = LeaderAndIsrRequestData.LeaderAndIsrTopicState(
            topic_name="t", topic_id=TOPIC_ID, partition_states=[state]
        )
        body.topic_states = [topic]
    return body


def update_metadata(version: int, epoch: int) -> UpdateMetadataRequestData:
    state = UpdateMetadataRequestData.UpdateMetadataPartitionState(
        partition_index=0,
        controller_epoch=1,
        leader=0,
        leader_epoch=epoch,
        isr=[0],
        zk_version=epoch,
        replicas=[0],
        offline_replicas=[],
    )
    endpoint = UpdateMetadataRequestData.UpdateMetadataEndpoint(
        port=9092 + version, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
    )
    broker = UpdateMetadataRequestData.UpdateMetadataBroker(
        id=0, v0_host="127.0.0.1", v0_port=9092 + version, endpoints=[endpoint], rack=None
    )
    body = UpdateMetadataRequestData(controller_id=1, controller_epoch=1, broker_epoch=-1, live_brokers=[broker])
    if version < 5:
        state.topic_name = "t"
        body.ungrouped_partition_states = [state]
    else:
        topic = UpdateMetadataRequestData.UpdateMetadataTopicState(
            topic_name="t", topic_id=TOPIC_ID, partition_states=[state]
        )
        body.topic_states = [topic]
    return body


def stop_replica(version: int) -> StopReplicaRequestData:
    body = StopReplicaRequestData(controller_id=1, controller_epoch=1, broker_epoch=-1, delete_partitions=False)
    if version == 0:
        body.ungrouped_partitions = [StopReplicaRequestData.StopReplicaPartitionV0(topic_name="t", partition_index=0)]
    elif version < 3:
        body.topics = [StopReplicaRequestData.StopReplicaTopicV1(name="t", partition_indexes=[0])]
    else:
        state = StopReplicaRequestData.StopReplicaPartitionState(
            partition_index=0, leader_epoch=-1, delete_partition=False
        )
        body.topic_states = [StopReplicaRequestData.StopReplicaTopicState(topic_name="t", partition_states=[state])]
    return body


@pytest.mark.parametrize("version", range(8))
def test_leader_and_isr_update_metadata_and_stop_replica_at_each_version(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        replicas = ReplicaManager(broker_config({"log.dirs": str(tmp_path)}), BrokerInfo(0, "127.0.0.1", 9092))
        apis = ControllerApis(replicas, lambda: 5, lambda: None)
        try:
            answer = await apis.leader_and_isr(
                version, typed(ApiKey.LEADER_AND_ISR, version, leader_and_isr(version, 1))
            )
            errors = answer.partition_errors if version < 5 else answer.topics[0].partition_errors
            assert answer.error_code == 0 and [(e.partition_index, e.error_code) for e in errors] == [(0, 0)]
            if version >= 5:
                assert answer.topics[0].topic_id == TOPIC_ID
            assert replicas.partition("t", 0).leader_epoch == 1

            um_version = min(version + 1, 8)  # 1..8 here; v0 below
            for v in sorted({0, um_version}):
                answer = await apis.update_metadata(v, typed(ApiKey.UPDATE_METADATA, v, update_metadata(v, 1)))
                assert answer.error_code == 0
                (broker,) = replicas.metadata.brokers()
                assert (broker.host, broker.port) == ("127.0.0.1", 9092 + v)
                topic = replicas.metadata.topic("t")
                assert topic is not None and topic.partitions[0].leader == 0

            sr_version = min(version, 4)
            answer = await apis.stop_replica(
                sr_version, typed(ApiKey.STOP_REPLICA, sr_version, stop_replica(sr_version))
            )
            assert answer.error_code == 0
            assert [(e.topic_name, e.partition_index, e.error_code) for e in answer.partition_errors] == [("t", 0, 0)]
        finally:
            replicas.shutdown()

    asyncio.run(main())
