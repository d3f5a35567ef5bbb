"""The controller's requests, answered by a broker of a cluster (the ZooKeeper-mode half of Kafka's
``KafkaApis``): LeaderAndIsr, UpdateMetadata, StopReplica, and ControlledShutdown on the controller.

Every request carries the controller's epoch; a broker remembers the highest it has seen and refuses
older ones with STALE_CONTROLLER_EPOCH, so a controller that was replaced (and has not heard yet)
cannot change anything. A broker epoch older than the broker's current registration (the request
was meant for an earlier incarnation of this broker, KIP-380) is STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable

from ..cluster import znodes
from ..cluster.controller import KafkaController
from ..common import ZERO_UUID, TopicPartition
from ..errors import (
    ControllerMovedError,
    ErrorCode,
    NotControllerError,
    SeglogError,
    StaleBrokerEpochError,
    UnknownTopicIdError,
)
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterPartitionRequestData,
    AlterPartitionResponseData,
    ControlledShutdownRequestData,
    ControlledShutdownResponseData,
    LeaderAndIsrRequestData,
    LeaderAndIsrResponseData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
    UpdateMetadataResponseData,
)
from ..security import AclOperation
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .metadata_cache import BrokerInfo, PartitionState
from .replica_manager import ReplicaManager
from .routes import Route, Routes

log = logging.getLogger(__name__)

ControllerRequestData = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


class ControllerApis:
    def __init__(
        self,
        replicas: ReplicaManager,
        broker_epoch: Callable[[], int],
        controller: Callable[[], KafkaController | None],
        listener: str = "PLAINTEXT",
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        self.replicas = replicas
        self.authorizer = authorizer
        self._broker_epoch = broker_epoch
        self._controller = controller
        self._listener = listener
        self._lock = threading.Lock()
        self.controller_epoch = 0  # the highest seen (KafkaController.InitialControllerEpoch)
        # set by the first UpdateMetadata naming this broker live: from then on Metadata names the
        # controller and the brokers (before it: no controller, and a client waits for its next refresh)
        self.joined = asyncio.Event()

    def routes(self) -> Routes:
        return {
            # every version Kafka 3.9's ZooKeeper-mode broker takes: the older ones name each
            # partition's topic in it, or group partitions without topic ids
            ApiKey.LEADER_AND_ISR: Route(self.leader_and_isr, (0, 7)),
            ApiKey.UPDATE_METADATA: Route(self.update_metadata, (0, 8)),
            ApiKey.STOP_REPLICA: Route(self.stop_replica, (0, 4)),
            ApiKey.CONTROLLED_SHUTDOWN: Route(self.controlled_shutdown, (0, 3)),
            ApiKey.ALTER_PARTITION: Route(self.alter_partition, (0, 3)),
        }

    def _check(self, what: str, body: ControllerRequestData) -> ErrorCode:
        """NONE, or why a controller request is refused; a newer controller epoch is remembered."""
        if not self._from_a_broker():
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        epoch = body.controller_epoch
        with self._lock:
            if epoch < self.controller_epoch:
                log.warning(
                    "%s from controller %d with epoch %d refused: the controller epoch is %d",
                    what,
                    body.controller_id,
                    epoch,
                    self.controller_epoch,
                )
                return ControllerMovedError.error_code
            self.controller_epoch = epoch
        broker_epoch = body.broker_epoch
        if broker_epoch != -1 and broker_epoch < self._broker_epoch():
            log.warning("%s for broker epoch %d refused: this broker's is %d", what, broker_epoch, self._broker_epoch())
            return StaleBrokerEpochError.error_code
        return ErrorCode.NONE

    def _from_a_broker(self) -> bool:
        """Brokers' and controllers' requests need ClusterAction on the cluster."""
        return self.authorizer.authorize_cluster(AclOperation.CLUSTER_ACTION)

    # --- LeaderAndIsr --------------------------------------------------------------------------

    async def leader_and_isr(self, version: int, body: LeaderAndIsrRequestData) -> LeaderAndIsrResponseData:
        # the replica manager takes each partition's state with its topic's name in it: v0-1 send
        # it so; from v2 the topic state holds the name, and Kafka's ``partitionStates()`` sets it
        if version < 2:
            states = list(body.ungrouped_partition_states)
        else:
            states = []
            for topic in body.topic_states:
                for state in topic.partition_states:
                    state.topic_name = topic.topic_name
                    states.append(state)
        topic_ids = {t.topic_name: t.topic_id for t in body.topic_states}
        error = self._check("LeaderAndIsr", body)
        if error:
            errors: dict[TopicPartition, int] = {TopicPartition(s.topic_name, s.partition_index): error for s in states}
        else:
            errors = await asyncio.get_running_loop().run_in_executor(
                None,
                self.replicas.become_leader_or_follower,
                body.controller_id,
                body.controller_epoch,
                states,
                topic_ids,
            )
        by_topic: dict[str, list[LeaderAndIsrResponseData.LeaderAndIsrPartitionError]] = {}
        for (topic_name, index), code in errors.items():
            by_topic.setdefault(topic_name, []).append(
                LeaderAndIsrResponseData.LeaderAndIsrPartitionError(
                    topic_name=topic_name, partition_index=index, error_code=code
                )
            )
        return LeaderAndIsrResponseData(
            error_code=error,
            partition_errors=[e for entries in by_topic.values() for e in entries],
            topics=[
                LeaderAndIsrResponseData.LeaderAndIsrTopicError(
                    topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=entries
                )
                for t, entries in by_topic.items()
            ],
        )

    # --- UpdateMetadata --------------------------------------------------------------------------

    async def update_metadata(self, version: int, body: UpdateMetadataRequestData) -> UpdateMetadataResponseData:
        error = self._check("UpdateMetadata", body)
        if error:
            return UpdateMetadataResponseData(error_code=error)
        brokers = [self._broker_info(b) for b in body.live_brokers]
        partitions = []
        deleted: set[TopicPartition] = set()
        for name, topic_id, s in _update_metadata_states(version, body):
            if s.leader == znodes.LEADER_DURING_DELETE:  # the topic is being deleted
                deleted.add(TopicPartition(name, s.partition_index))
                continue
            state = PartitionState(
                s.partition_index,
                s.leader,
                s.leader_epoch,
                tuple(s.replicas),
                tuple(s.isr),
                tuple(s.offline_replicas),
            )
            partitions.append((name, topic_id, state))
        self.replicas.metadata.update_metadata(brokers, body.controller_id, partitions, deleted)
        if any(b.broker_id == self.replicas.broker.broker_id for b in brokers):
            self.joined.set()
        if deleted:
            self.replicas.partitions_deleted(sorted(deleted))
        return UpdateMetadataResponseData(error_code=ErrorCode.NONE)

    def _broker_info(self, broker: UpdateMetadataRequestData.UpdateMetadataBroker) -> BrokerInfo:
        if not broker.endpoints and broker.v0_host:  # v0: one plaintext address
            return BrokerInfo(broker.id, broker.v0_host, broker.v0_port, broker.rack)
        endpoints = broker.endpoints
        chosen = next((e for e in endpoints if e.listener == self._listener), endpoints[0] if endpoints else None)
        if chosen is None:
            return BrokerInfo(broker.id, "", -1, broker.rack)
        # every listener's address, for the clients of each (Metadata answers per listener)
        addresses = tuple((e.listener, e.host, e.port) for e in endpoints)
        return BrokerInfo(broker.id, chosen.host, chosen.port, broker.rack, endpoints=addresses)

    # --- StopReplica -----------------------------------------------------------------------------

    async def stop_replica(self, version: int, body: StopReplicaRequestData) -> StopReplicaResponseData:
        partitions = _stop_replica_partitions(version, body)
        error = self._check("StopReplica", body)
        if error:
            errors: dict[TopicPartition, int] = {TopicPartition(t, p): error for t, p, _, _ in partitions}
        else:
            errors = await asyncio.get_running_loop().run_in_executor(
                None, self.replicas.stop_replicas, body.controller_id, body.controller_epoch, partitions
            )
        return StopReplicaResponseData(
            error_code=error,
            partition_errors=[
                StopReplicaResponseData.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=code)
                for (t, p), code in errors.items()
            ],
        )

    # --- ControlledShutdown (on the controller) ---------------------------------------------------------

    async def controlled_shutdown(
        self, version: int, body: ControlledShutdownRequestData
    ) -> ControlledShutdownResponseData:
        if not self._from_a_broker():
            return ControlledShutdownResponseData(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        controller = self._controller()
        try:
            if controller is None or not controller.is_active:
                raise NotControllerError("this broker is not the controller")
            remaining = await asyncio.get_running_loop().run_in_executor(
                None, controller.controlled_shutdown, body.broker_id, body.broker_epoch
            )
        except SeglogError as e:
            return ControlledShutdownResponseData(error_code=e.error_code)
        return ControlledShutdownResponseData(
            error_code=ErrorCode.NONE,
            remaining_partitions=[
                ControlledShutdownResponseData.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
                for tp in sorted(remaining)
            ],
        )

    # --- AlterPartition (on the controller, KIP-497) -------------------------------------------------

    async def alter_partition(self, version: int, body: AlterPartitionRequestData) -> AlterPartitionResponseData:
        """A leader's ISR changes, checked and written by the controller (``KafkaController.alter_partition``)."""
        if not self._from_a_broker():
            return AlterPartitionResponseData(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        changes: dict[TopicPartition, znodes.LeaderAndIsr] = {}
        topic_ids: dict[str, uuid.UUID] = {}  # from v2 topics are named by id, and answered so
        unknown: list[tuple[uuid.UUID, int]] = []
        for topic in body.topics:
            name: str | None = topic.topic_name
            if version >= 2:
                found = self.replicas.metadata.topic_by_id(topic.topic_id)
                name = found.name if found else None
            for p in topic.partitions:
                if name is None:
                    unknown.append((topic.topic_id, p.partition_index))
                    continue
                topic_ids[name] = topic.topic_id
                isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else p.new_isr
                changes[TopicPartition(name, p.partition_index)] = znodes.LeaderAndIsr(
                    body.broker_id, p.leader_epoch, tuple(isr), p.leader_recovery_state, p.partition_epoch
                )
        controller = self._controller()
        try:
            if controller is None or not controller.is_active:
                raise NotControllerError("this broker is not the controller")
            results = await asyncio.get_running_loop().run_in_executor(
                None, controller.alter_partition, body.broker_id, body.broker_epoch, changes
            )
        except SeglogError as e:
            return AlterPartitionResponseData(error_code=e.error_code)
        by_topic: dict[tuple[str, uuid.UUID], list[AlterPartitionResponseData.PartitionData]] = {}
        for tp, result in results.items():
            entry = AlterPartitionResponseData.PartitionData(
                partition_index=tp.partition, leader_id=-1, leader_epoch=-1, partition_epoch=-1
            )
            if isinstance(result, SeglogError):
                entry.error_code = result.error_code
            else:
                entry.leader_id = result.leader
                entry.leader_epoch = result.leader_epoch
                entry.isr = list(result.isr)
                entry.leader_recovery_state = result.leader_recovery_state
                entry.partition_epoch = result.partition_epoch
            by_topic.setdefault((tp.topic, topic_ids[tp.topic]), []).append(entry)
        for topic_id, index in unknown:
            by_topic.setdefault(("", topic_id), []).append(
                AlterPartitionResponseData.PartitionData(
                    partition_index=index,
                    error_code=UnknownTopicIdError.error_code,
                    leader_id=-1,
                    leader_epoch=-1,
                    partition_epoch=-1,
                )
            )
        return AlterPartitionResponseData(
            error_code=ErrorCode.NONE,
            topics=[
                AlterPartitionResponseData.TopicData(topic_name=name, topic_id=topic_id, partitions=parts)
                for (name, topic_id), parts in by_topic.items()
            ],
        )


def _update_metadata_states(
    version: int, body: UpdateMetadataRequestData
) -> list[tuple[str, uuid.UUID, UpdateMetadataRequestData.UpdateMetadataPartitionState]]:
    """(topic, topic id, state) of each partition: named in each state before v5, no ids before v7."""
    if version < 5:
        return [(s.topic_name, ZERO_UUID, s) for s in body.ungrouped_partition_states]
    return [(t.topic_name, t.topic_id, s) for t in body.topic_states for s in t.partition_states]


def _stop_replica_partitions(version: int, body: StopReplicaRequestData) -> list[tuple[str, int, bool, int]]:
    """(topic, partition, delete, leader epoch) of each partition: before v3 one delete flag for
    all and no epoch (-1: whatever the replica's)."""
    if version == 0:
        return [(p.topic_name, p.partition_index, body.delete_partitions, -1) for p in body.ungrouped_partitions]
    if version < 3:
        return [(t.name, i, body.delete_partitions, -1) for t in body.topics for i in t.partition_indexes]
    return [
        (topic.topic_name, s.partition_index, s.delete_partition, s.leader_epoch)
        for topic in body.topic_states
        for s in topic.partition_states
    ]
