"""What the controller tells brokers, and the batch that gathers it (Kafka's ``ControllerChannelManager``
and ``ControllerBrokerRequestBatch``).

The controller never talks to a socket itself: every state change adds
partition states to a batch, per broker, and the batch is sent once the change
is done, through a ``ControllerChannel``. Three requests, the messages
``seglog.protocol`` encodes (``LeaderAndIsrRequestData`` ...) in the shape of
LeaderAndIsr v5+, UpdateMetadata v7+ and StopReplica v3+ (partitions grouped by
topic, topics named by id too), each carrying the controller's id and epoch
(brokers refuse a lower epoch: STALE_CONTROLLER_EPOCH) and the receiving
broker's epoch (the czxid of its registration: a request meant for an earlier
incarnation of the broker is refused, KIP-380)::

    LeaderAndIsr     to the replicas of partitions whose leader or ISR changed: become leader or follower
    UpdateMetadata   to every live broker: the live brokers, and leader, ISR and offline replicas per partition
    StopReplica      to a replica going offline (delete=False) or being deleted (delete=True)

In one send, LeaderAndIsr goes first, then UpdateMetadata, then StopReplica, as
Kafka sends them. Requests go only to live brokers (those the channel knows):
Kafka's channel drops a request for a broker it has no connection to.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol, TypeVar

from ..common import ZERO_UUID, TopicPartition
from ..errors import BrokerNotAvailableError
from ..protocol.message_data import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
)
from .controller_context import ControllerContext
from .znodes import (
    LEADER_DURING_DELETE,
    SECURITY_PROTOCOLS,
    BrokerRegistration,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    topic_uuid,
)

# ``LeaderAndIsr.EpochDuringDelete`` and ``LeaderAndIsr.NoEpoch``: StopReplica's leader epoch sentinels
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1

LeaderAndIsrPartitionState = LeaderAndIsrRequestData.LeaderAndIsrPartitionState
UpdateMetadataPartitionState = UpdateMetadataRequestData.UpdateMetadataPartitionState
StopReplicaPartitionState = StopReplicaRequestData.StopReplicaPartitionState
ControllerRequest = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


def endpoint_of(broker: BrokerRegistration, listener: str = "PLAINTEXT") -> tuple[str, int]:
    """The broker's address on ``listener`` (its first endpoint when it has no such listener)."""
    if not broker.endpoints:
        raise BrokerNotAvailableError(f"broker {broker.broker_id} registered no endpoint")
    found = next((e for e in broker.endpoints if e.listener == listener), broker.endpoints[0])
    return found.host or "127.0.0.1", found.port


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
        on_response: Callable[[int, StopReplicaResponseData], None] | None = None,
    ) -> None: ...


class ControllerBrokerRequestBatch:
    """Gathers one state change's requests per broker, then sends them together.

    It holds the requests' own partition states, as Kafka's does; those of LeaderAndIsr and
    UpdateMetadata carry their topic's name (their v0-1 and v0-4 field), which the request,
    grouped by topic from v2 (v5), leaves to the topic state."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: ControllerChannel,
        on_stop_replica_response: Callable[[int, StopReplicaResponseData], None] | None = None,
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
                topic_name=tp.topic,
                partition_index=tp.partition,
                controller_epoch=state.controller_epoch,
                leader=lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=list(lai.isr),
                partition_epoch=lai.partition_epoch,  # the state znode's zkVersion
                replicas=list(assignment.replicas),
                adding_replicas=list(assignment.adding_replicas),
                removing_replicas=list(assignment.removing_replicas),
                # the replica is being created: a broker makes its log even if the dir is missing
                is_new=is_new or already_new,
                leader_recovery_state=lai.leader_recovery_state,
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
            requests[tp] = StopReplicaPartitionState(
                partition_index=tp.partition, leader_epoch=epoch, delete_partition=delete or already_delete
            )

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
                topic_name=tp.topic,
                partition_index=tp.partition,
                controller_epoch=state.controller_epoch,
                leader=leader,
                leader_epoch=lai.leader_epoch,
                isr=list(lai.isr),
                zk_version=lai.partition_epoch,
                replicas=list(replicas),
                offline_replicas=[r for r in replicas if not self.context.is_replica_online(r)],
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
            request = LeaderAndIsrRequestData(
                controller_id=self.controller_id,
                controller_epoch=ctx.epoch,
                broker_epoch=ctx.broker_epochs.get(broker_id, -1),
                topic_states=[
                    LeaderAndIsrRequestData.LeaderAndIsrTopicState(
                        topic_name=topic, topic_id=self._topic_id(topic), partition_states=partitions
                    )
                    for topic, partitions in _by_topic(states).items()
                ],
                live_leaders=[
                    LeaderAndIsrRequestData.LeaderAndIsrLiveLeader(broker_id=b, host_name=host, port=port)
                    for b in leaders
                    for host, port in [endpoint_of(ctx.live_brokers[b])]
                ],
            )
            self.channel.send(broker_id, request)

    def _send_update_metadata(self) -> None:
        ctx = self.context
        # one list of topic states and brokers, shared by every broker's request (none changes it)
        topic_states = [
            UpdateMetadataRequestData.UpdateMetadataTopicState(
                topic_name=topic, topic_id=self._topic_id(topic), partition_states=partitions
            )
            for topic, partitions in _by_topic(self._update_metadata).items()
        ]
        live = [
            UpdateMetadataRequestData.UpdateMetadataBroker(
                id=b.broker_id, endpoints=[_endpoint(e) for e in b.endpoints], rack=b.rack
            )
            for b in (ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
        ]
        for broker_id in sorted(self._update_metadata_brokers):
            request = UpdateMetadataRequestData(
                controller_id=self.controller_id,
                controller_epoch=ctx.epoch,
                broker_epoch=ctx.broker_epochs.get(broker_id, -1),
                topic_states=topic_states,
                live_brokers=live,
            )
            self.channel.send(broker_id, request)

    def _send_stop_replica(self) -> None:
        ctx = self.context
        for broker_id, states in sorted(self._stop_replica.items()):
            request = StopReplicaRequestData(
                controller_id=self.controller_id,
                controller_epoch=ctx.epoch,
                broker_epoch=ctx.broker_epochs.get(broker_id, -1),
                topic_states=[
                    StopReplicaRequestData.StopReplicaTopicState(topic_name=topic, partition_states=partitions)
                    for topic, partitions in _by_topic(states).items()
                ],
            )
            deleting = any(s.delete_partition for s in states.values())
            self.channel.send(broker_id, request, self._on_stop_replica_response if deleting else None)

    def _topic_id(self, topic: str) -> uuid.UUID:
        text = self.context.topic_ids.get(topic)
        return topic_uuid(text) if text else ZERO_UUID

    def _live(self, broker_ids: Iterable[int]) -> list[int]:
        live = self.context.live_or_shutting_down_broker_ids
        return [b for b in broker_ids if b in live]


_State = TypeVar("_State", LeaderAndIsrPartitionState, UpdateMetadataPartitionState, StopReplicaPartitionState)


def _by_topic(states: Mapping[TopicPartition, _State]) -> dict[str, list[_State]]:
    """The partition states by topic, in partition order: from LeaderAndIsr v2, UpdateMetadata v5
    and StopReplica v3 the requests group them so."""
    topics: dict[str, list[_State]] = {}
    for tp in sorted(states):
        topics.setdefault(tp.topic, []).append(states[tp])
    return topics


def _endpoint(endpoint: EndPoint) -> UpdateMetadataRequestData.UpdateMetadataEndpoint:
    # Kafka's SecurityProtocol ids are the protocols' places in its enum; an unknown one is PLAINTEXT's
    protocol = endpoint.security_protocol
    return UpdateMetadataRequestData.UpdateMetadataEndpoint(
        port=endpoint.port,
        host=endpoint.host,
        listener=endpoint.listener,
        security_protocol=SECURITY_PROTOCOLS.index(protocol) if protocol in SECURITY_PROTOCOLS else 0,
    )
