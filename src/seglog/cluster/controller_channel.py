"""What the controller tells brokers, and the batch that gathers it (Kafka's ``ControllerChannelManager``
and ``ControllerBrokerRequestBatch``).

The controller never talks to a socket itself: every state change adds
partition states to a batch, per broker, and the batch is sent once the change
is done, through a ``ControllerChannel``. Three requests, their fields those of
Kafka's messages (LeaderAndIsr v5+, UpdateMetadata v7+, StopReplica v3+), each
carrying the controller's id and epoch (brokers refuse a lower epoch:
STALE_CONTROLLER_EPOCH) and the receiving broker's epoch (the czxid of its
registration: a request meant for an earlier incarnation of the broker is
refused, KIP-380)::

    LeaderAndIsr     to the replicas of partitions whose leader or ISR changed: become leader or follower
    UpdateMetadata   to every live broker: the live brokers, and leader, ISR and offline replicas per partition
    StopReplica      to a replica going offline (delete=False) or being deleted (delete=True)

In one send, LeaderAndIsr goes first, then UpdateMetadata, then StopReplica, as
Kafka sends them. Requests go only to live brokers (those the channel knows):
Kafka's channel drops a request for a broker it has no connection to.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..common import TopicPartition
from .controller_context import ControllerContext
from .znodes import (
    LEADER_DURING_DELETE,
    BrokerRegistration,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)

# ``LeaderAndIsr.EpochDuringDelete`` and ``LeaderAndIsr.NoEpoch``: StopReplica's leader epoch sentinels
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the state znode's zkVersion
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False  # the replica is being created: a broker makes its log even if the dir is missing
    leader_recovery_state: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int  # -2 (LEADER_DURING_DELETE) while the topic is being deleted
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    leader_epoch: int  # -2 while the topic is being deleted, -1 when unknown
    delete_partition: bool


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: Mapping[str, str]
    live_leaders: tuple[BrokerRegistration, ...]  # the brokers leading these partitions, for their endpoints


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerRegistration, ...]
    topic_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(frozen=True)
class StopReplicaResponse:
    """A broker's answer to StopReplica: a top-level error code and one per partition (0 is none)."""

    error_code: int
    partition_errors: Mapping[TopicPartition, int]


class ControllerChannel(Protocol):
    """How requests reach brokers; the broker implements it over ``seglog.protocol``.

    ``add_broker`` when a broker registers (or comes back with a new epoch), ``remove_broker`` when it
    goes: requests to a broker not added are dropped. ``send`` queues the request and returns at once;
    requests to one broker are sent in order, and ``on_response`` (if given) is called with the broker
    id and its response from any thread once it comes back.
    """

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send(
        self,
        broker_id: int,
        request: ControllerRequest,
        on_response: Callable[[int, StopReplicaResponse], None] | None = None,
    ) -> None: ...


class ControllerBrokerRequestBatch:
    """Gathers one state change's requests per broker, then sends them together."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: ControllerChannel,
        on_stop_replica_response: Callable[[int, StopReplicaResponse], None] | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self._on_stop_replica_response = on_stop_replica_response
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}

    def new_batch(self) -> None:
        if self._leader_and_isr or self._update_metadata_brokers or self._stop_replica:
            raise AssertionError("a new controller request batch was started while the last one was not sent")

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata.clear()
        self._stop_replica.clear()

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        lai = state.leader_and_isr
        for broker_id in self._live(broker_ids):
            requests = self._leader_and_isr.setdefault(broker_id, {})
            already_new = requests[tp].is_new if tp in requests else False
            requests[tp] = LeaderAndIsrPartitionState(
                tp.topic,
                tp.partition,
                state.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.partition_epoch,
                assignment.replicas,
                assignment.adding_replicas,
                assignment.removing_replicas,
                is_new or already_new,
                lai.leader_recovery_state,
            )
        self.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            epoch = EPOCH_DURING_DELETE
        else:
            state = self.context.leadership.get(tp)
            epoch = NO_EPOCH if state is None else state.leader_and_isr.leader_epoch
        for broker_id in self._live(broker_ids):
            requests = self._stop_replica.setdefault(broker_id, {})
            already_delete = requests[tp].delete_partition if tp in requests else False
            requests[tp] = StopReplicaPartitionState(tp.topic, tp.partition, epoch, delete or already_delete)

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Collection[TopicPartition] = ()
    ) -> None:
        """Tell ``broker_ids`` the live brokers and the state of ``partitions`` (those with a leader known)."""
        self._update_metadata_brokers.update(self._live(broker_ids))
        for tp in partitions:
            state = self.context.leadership.get(tp)
            if state is None:
                continue
            lai = state.leader_and_isr
            replicas = self.context.replicas(tp)
            leader = LEADER_DURING_DELETE if self.context.is_topic_queued_for_deletion(tp.topic) else lai.leader
            self._update_metadata[tp] = UpdateMetadataPartitionState(
                tp.topic,
                tp.partition,
                state.controller_epoch,
                leader,
                lai.leader_epoch,
                lai.isr,
                lai.partition_epoch,
                replicas,
                tuple(r for r in replicas if not self.context.is_replica_online(r)),
            )

    def send_requests_to_brokers(self) -> None:
        try:
            self._send_leader_and_isr()
            self._send_update_metadata()
            self._send_stop_replica()
        finally:
            self.clear()

    def _send_leader_and_isr(self) -> None:
        ctx = self.context
        for broker_id, states in sorted(self._leader_and_isr.items()):
            leaders = sorted({s.leader for s in states.values() if s.leader in ctx.live_brokers})
            request = LeaderAndIsrRequest(
                self.controller_id,
                ctx.epoch,
                ctx.broker_epochs.get(broker_id, -1),
                tuple(states[tp] for tp in sorted(states)),
                {t: ctx.topic_ids[t] for t in sorted({tp.topic for tp in states}) if t in ctx.topic_ids},
                tuple(ctx.live_brokers[b] for b in leaders),
            )
            self.channel.send(broker_id, request)

    def _send_update_metadata(self) -> None:
        ctx = self.context
        partitions = tuple(self._update_metadata[tp] for tp in sorted(self._update_metadata))
        live = tuple(ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
        topic_ids = {t: ctx.topic_ids[t] for t in sorted({p.topic for p in partitions}) if t in ctx.topic_ids}
        for broker_id in sorted(self._update_metadata_brokers):
            request = UpdateMetadataRequest(
                self.controller_id, ctx.epoch, ctx.broker_epochs.get(broker_id, -1), partitions, live, topic_ids
            )
            self.channel.send(broker_id, request)

    def _send_stop_replica(self) -> None:
        ctx = self.context
        for broker_id, states in sorted(self._stop_replica.items()):
            request = StopReplicaRequest(
                self.controller_id,
                ctx.epoch,
                ctx.broker_epochs.get(broker_id, -1),
                tuple(states[tp] for tp in sorted(states)),
            )
            deleting = any(s.delete_partition for s in states.values())
            self.channel.send(broker_id, request, self._on_stop_replica_response if deleting else None)

    def _live(self, broker_ids: Iterable[int]) -> list[int]:
        live = self.context.live_or_shutting_down_broker_ids
        return [b for b in broker_ids if b in live]
