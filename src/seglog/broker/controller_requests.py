"""The controller's requests decoded for the replica manager: LeaderAndIsr, StopReplica,
UpdateMetadata (the versions Kafka 3.x's ZooKeeper controller sends).

The smallest handlers that let a controller drive replication over the wire: each request
goes to ``ReplicaManager.become_leader_or_follower`` / ``stop_replicas``, or into the
metadata cache (live brokers, the controller, partition states). The cluster's own
handlers (controller epoch and broker epoch fencing, the controller inside the broker)
take their place; the calls into the replica manager stay these.
"""

from __future__ import annotations

from typing import Any

from ..protocol import ApiKey
from .metadata_cache import ZERO_UUID, BrokerInfo, PartitionState, TopicMetadata
from .replica_manager import ReplicaManager

VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.LEADER_AND_ISR: (5, 7),
    ApiKey.UPDATE_METADATA: (7, 8),
    ApiKey.STOP_REPLICA: (3, 4),
}


class ControllerRequests:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    async def leader_and_isr(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        states = [{**s, "topic_name": t["topic_name"]} for t in body["topic_states"] for s in t["partition_states"]]
        topic_ids = {t["topic_name"]: t["topic_id"] for t in body["topic_states"]}
        errors = self.replicas.become_leader_or_follower(
            body["controller_id"], body["controller_epoch"], states, topic_ids
        )
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append({"topic_name": topic, "partition_index": index, "error_code": code})
        return {
            "error_code": 0,
            "topics": [{"topic_id": topic_ids.get(t, ZERO_UUID), "partition_errors": e} for t, e in by_topic.items()],
        }

    async def stop_replica(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        partitions = [
            (t["topic_name"], s["partition_index"], s["delete_partition"], s["leader_epoch"])
            for t in body["topic_states"]
            for s in t["partition_states"]
        ]
        errors = self.replicas.stop_replicas(body["controller_id"], body["controller_epoch"], partitions)
        return {
            "error_code": 0,
            "partition_errors": [
                {"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()
            ],
        }

    async def update_metadata(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        metadata = self.replicas.metadata
        brokers = [
            BrokerInfo(b["id"], b["endpoints"][0]["host"], b["endpoints"][0]["port"], b.get("rack"))
            for b in body["live_brokers"]
            if b["endpoints"]
        ]
        metadata.update_brokers(brokers, body["controller_id"])
        for topic in body["topic_states"]:
            states = sorted(topic["partition_states"], key=lambda s: s["partition_index"])
            partitions = tuple(
                PartitionState(
                    s["partition_index"], s["leader"], s["leader_epoch"], tuple(s["replicas"]), tuple(s["isr"])
                )
                for s in states
            )
            metadata.update_topic(TopicMetadata(topic["topic_name"], topic.get("topic_id") or ZERO_UUID, partitions))
        return {"error_code": 0}
