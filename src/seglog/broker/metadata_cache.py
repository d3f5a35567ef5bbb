"""What the broker tells clients about the cluster: brokers, topics, partitions and leaders.

Kafka's ``MetadataCache``: a snapshot that request handlers read without locks and that
one writer replaces whole. On a single broker the ``ReplicaManager`` feeds it as topics
come and go; in a cluster the controller's UpdateMetadata requests will. Topic ids are
Kafka's UUIDs (``partition.metadata`` and the topic znode hold them as URL-safe base64,
which ``znodes.topic_uuid`` reads).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..common import INTERNAL_TOPICS, ZERO_UUID, TopicPartition

T = TypeVar("T")


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # its address on each listener, (name, host, port); empty when only host:port is known
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener: str) -> tuple[str, int] | None:
        """Its address for a client of ``listener`` (Kafka answers each request with the endpoints
        of the listener it came in on); None when the broker has no such listener."""
        if not self.endpoints:
            return self.host, self.port
        return next(((host, port) for name, host, port in self.endpoints if name == listener), None)


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionState, ...]

    @property
    def internal(self) -> bool:
        """Kafka's ``Topic.isInternal``: a fact of the name, whoever built the metadata (a broker
        alone, or the controller's UpdateMetadata in a cluster)."""
        return self.name in INTERNAL_TOPICS


@dataclass
class _Snapshot:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    by_id: dict[uuid.UUID, TopicMetadata] = field(default_factory=dict)
    controller_id: int = -1
    # values computed of ``topics`` alone (``derived``), kept as long as the topics are
    derived: dict[str, Any] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self._snapshot = _Snapshot()

    # --- reads (any thread, no lock: a snapshot is never changed once published) ---

    @property
    def controller_id(self) -> int:
        return self._snapshot.controller_id

    def brokers(self) -> list[BrokerInfo]:
        return list(self._snapshot.brokers.values())

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._snapshot.brokers.get(broker_id)

    def topics(self) -> list[TopicMetadata]:
        return list(self._snapshot.topics.values())

    def topic(self, name: str) -> TopicMetadata | None:
        return self._snapshot.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._snapshot.by_id.get(topic_id)

    def partition_count(self, name: str) -> int:
        found = self._snapshot.topics.get(name)
        return len(found.partitions) if found else 0

    def has_partition(self, tp: TopicPartition) -> bool:
        found = self._snapshot.topics.get(tp.topic)  # (partition_count's, inline: asked on every commit)
        return found is not None and 0 <= tp.partition < len(found.partitions)

    def derived(self, key: str, compute: Callable[[list[TopicMetadata]], T]) -> T:
        """``compute`` of the topics, computed once while they stay the same (a snapshot's never
        change): what each request of every topic would build again, as Metadata's topic entries
        (50 ms of the broker's CPU for 5,000 partitions, each time an open console refreshes). The
        value is shared by every caller: none may change it. Two threads may both compute it."""
        snapshot = self._snapshot
        if key not in snapshot.derived:
            snapshot.derived[key] = compute(list(snapshot.topics.values()))
        value: T = snapshot.derived[key]
        return value

    # --- writes (one writer: the replica manager, later the cluster's UpdateMetadata) ---

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        old = self._snapshot
        self._snapshot = _Snapshot({b.broker_id: b for b in brokers}, old.topics, old.by_id, controller_id, old.derived)

    def update_topic(self, topic: TopicMetadata) -> None:
        old = self._snapshot
        topics = dict(old.topics)
        by_id = {k: v for k, v in old.by_id.items() if v.name != topic.name}
        topics[topic.name] = topic
        by_id[topic.topic_id] = topic
        self._snapshot = _Snapshot(old.brokers, topics, by_id, old.controller_id)

    def update_metadata(
        self,
        brokers: list[BrokerInfo],
        controller_id: int,
        partitions: list[tuple[str, uuid.UUID, PartitionState]],
        deleted: set[TopicPartition],
    ) -> None:
        """The controller's UpdateMetadata: the live brokers replace ours; each partition state given
        replaces its own, the ``deleted`` partitions (leader -2: their topic is being deleted) go."""
        old = self._snapshot
        merged: dict[str, dict[int, PartitionState]] = {
            t.name: {p.partition: p for p in t.partitions} for t in old.topics.values()
        }
        ids = {t.name: t.topic_id for t in old.topics.values()}
        for name, topic_id, state in partitions:
            merged.setdefault(name, {})[state.partition] = state
            if topic_id != ZERO_UUID or name not in ids:
                ids[name] = topic_id
        for name, index in deleted:
            merged.get(name, {}).pop(index, None)
        topics = {
            name: TopicMetadata(name, ids[name], tuple(states[p] for p in sorted(states)))
            for name, states in merged.items()
            if states
        }
        by_id = {t.topic_id: t for t in topics.values()}
        self._snapshot = _Snapshot({b.broker_id: b for b in brokers}, topics, by_id, controller_id)

    def remove_topic(self, name: str) -> None:
        old = self._snapshot
        topics = {k: v for k, v in old.topics.items() if k != name}
        by_id = {k: v for k, v in old.by_id.items() if v.name != name}
        self._snapshot = _Snapshot(old.brokers, topics, by_id, old.controller_id)
