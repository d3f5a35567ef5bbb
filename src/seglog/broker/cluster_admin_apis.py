"""A cluster's administration requests, served as Kafka 3.x's ZooKeeper-mode ``KafkaApis`` serves them:
ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments go to this broker's own
controller, which answers NOT_CONTROLLER unless it is the active one (clients send them to the
controller Metadata names, as Kafka's AdminClient does)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from ..cluster.controller import KafkaController
from ..common import TopicPartition
from ..errors import ErrorCode, InvalidRequestError, NotControllerError, SeglogError
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
)
from ..security import CLUSTER_NAME, AclOperation, ResourceType
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .metadata_cache import MetadataCache
from .routes import Route, Routes

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type


class ClusterAdminApis:
    # Kafka 3.6's versions; ApiVersions lists them in cluster mode only
    def __init__(
        self,
        controller: Callable[[], KafkaController | None],
        metadata: MetadataCache,
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        self._controller = controller
        self.metadata = metadata
        self.authorizer = authorizer

    def routes(self) -> Routes:
        return {
            ApiKey.ELECT_LEADERS: Route(self.elect_leaders, (0, 2)),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: Route(self.alter_partition_reassignments, (0, 0)),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: Route(self.list_partition_reassignments, (0, 0)),
        }

    async def _on_controller(
        self, call: Callable[[KafkaController], Any], operation: AclOperation = AclOperation.ALTER
    ) -> Any:
        """The call run by this broker's active controller, for a request that may do the operation
        on the cluster (Alter to elect or move, Describe to list)."""
        self.authorizer.check(operation, ResourceType.CLUSTER, CLUSTER_NAME)
        controller = self._controller()
        if controller is None or not controller.is_active:
            raise NotControllerError("this broker is not the controller")
        return await asyncio.get_running_loop().run_in_executor(None, call, controller)

    # --- ElectLeaders ---------------------------------------------------------------------------

    async def elect_leaders(self, version: int, body: ElectLeadersRequestData) -> ElectLeadersResponseData:
        election_type = body.election_type  # v0 is preferred only: the default
        if body.topic_partitions is None:  # every partition the broker knows
            partitions = {TopicPartition(t.name, p.partition) for t in self.metadata.topics() for p in t.partitions}
        else:
            partitions = {TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}
        results: dict[TopicPartition, int | SeglogError]
        if election_type not in (PREFERRED, UNCLEAN):
            error: SeglogError = InvalidRequestError(f"unknown election type {election_type}")
            results = dict.fromkeys(partitions, error)
        else:
            try:
                results = await self._on_controller(lambda c: c.elect_leaders(partitions, election_type == UNCLEAN))
            except SeglogError as e:
                results = dict.fromkeys(partitions, e)
        by_topic: dict[str, list[ElectLeadersResponseData.PartitionResult]] = {}
        for tp, result in sorted(results.items()):
            entry = ElectLeadersResponseData.PartitionResult(partition_id=tp.partition, error_message=None)
            if isinstance(result, SeglogError):
                entry.error_code, entry.error_message = result.error_code, result.message
            by_topic.setdefault(tp.topic, []).append(entry)
        return ElectLeadersResponseData(
            replica_election_results=[
                ElectLeadersResponseData.ReplicaElectionResult(topic=t, partition_result=r) for t, r in by_topic.items()
            ],
        )

    # --- AlterPartitionReassignments / ListPartitionReassignments (KIP-455) -----------------------

    async def alter_partition_reassignments(
        self, version: int, body: AlterPartitionReassignmentsRequestData
    ) -> AlterPartitionReassignmentsResponseData:
        targets = {TopicPartition(t.name, p.partition_index): p.replicas for t in body.topics for p in t.partitions}
        try:
            results = await self._on_controller(lambda c: c.alter_partition_reassignments(targets))
        except SeglogError as e:
            return AlterPartitionReassignmentsResponseData(error_code=e.error_code, error_message=e.message)
        by_topic: dict[str, list[AlterPartitionReassignmentsResponseData.ReassignablePartitionResponse]] = {}
        for tp, error in sorted(results.items()):
            by_topic.setdefault(tp.topic, []).append(
                AlterPartitionReassignmentsResponseData.ReassignablePartitionResponse(
                    partition_index=tp.partition,
                    error_code=ErrorCode.NONE if error is None else error.error_code,
                    error_message=None if error is None else error.message,
                )
            )
        return AlterPartitionReassignmentsResponseData(
            error_message=None,
            responses=[
                AlterPartitionReassignmentsResponseData.ReassignableTopicResponse(name=t, partitions=parts)
                for t, parts in by_topic.items()
            ],
        )

    async def list_partition_reassignments(
        self, version: int, body: ListPartitionReassignmentsRequestData
    ) -> ListPartitionReassignmentsResponseData:
        wanted: Iterable[TopicPartition] | None = None
        if body.topics is not None:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        try:
            describe = AclOperation.DESCRIBE
            ongoing = await self._on_controller(lambda c: c.list_partition_reassignments(wanted), describe)
        except SeglogError as e:
            return ListPartitionReassignmentsResponseData(error_code=e.error_code, error_message=e.message)
        by_topic: dict[str, list[ListPartitionReassignmentsResponseData.OngoingPartitionReassignment]] = {}
        for tp, assignment in sorted(ongoing.items()):
            by_topic.setdefault(tp.topic, []).append(
                ListPartitionReassignmentsResponseData.OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=list(assignment.replicas),
                    adding_replicas=list(assignment.adding_replicas),
                    removing_replicas=list(assignment.removing_replicas),
                )
            )
        return ListPartitionReassignmentsResponseData(
            error_message=None,
            topics=[
                ListPartitionReassignmentsResponseData.OngoingTopicReassignment(name=t, partitions=parts)
                for t, parts in by_topic.items()
            ],
        )
