"""What the active controller knows of the cluster (Kafka's ``ControllerContext``).

Loaded from ZooKeeper when a broker becomes the controller and kept up to date
by the controller's own writes and its watches; only the controller's event
thread touches it. ZooKeeper stays the truth: a new controller rebuilds all of
this from the znodes and goes on from there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..common import TopicPartition
from .state_machine import PartitionState, ReplicaState
from .znodes import BrokerRegistration, LeaderIsrAndControllerEpoch, ReplicaAssignment


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)  # czxid of each registration
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaState] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)

    # --- brokers -------------------------------------------------------------------

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers not shutting down: those that may lead or join an ISR."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def is_replica_online(self, broker_id: int, include_shutting_down: bool = False) -> bool:
        live = self.live_or_shutting_down_broker_ids if include_shutting_down else self.live_broker_ids
        return broker_id in live

    def add_live_broker(self, broker: BrokerRegistration, epoch: int) -> None:
        self.live_brokers[broker.broker_id] = broker
        self.broker_epochs[broker.broker_id] = epoch

    def remove_live_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.broker_epochs.pop(broker_id, None)
        self.shutting_down_broker_ids.discard(broker_id)

    # --- topics and partitions ----------------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for topic in sorted(self.assignments) for tp in self.partitions_of(topic)]

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignment(tp).replicas

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[tuple[TopicPartition, int]]:
        brokers = set(broker_ids)
        return [(tp, r) for tp in self.all_partitions() for r in self.replicas(tp) if r in brokers]

    def replicas_of_partitions(self, partitions: Iterable[TopicPartition]) -> list[tuple[TopicPartition, int]]:
        return [(tp, r) for tp in partitions for r in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.leadership.items() if s.leader_and_isr.leader == broker_id)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in self.replicas(tp):
                self.replica_states.pop((tp, r), None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    # --- deletion -------------------------------------------------------------------

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, tp: TopicPartition, replica: int) -> ReplicaState:
        return self.replica_states.get((tp, replica), ReplicaState.NON_EXISTENT)
