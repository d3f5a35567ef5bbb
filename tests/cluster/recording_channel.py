"""A ControllerChannel that records what would go over the network (a test double for the network only).

Like Kafka's channel it holds the brokers added to it and drops requests to
others. StopReplica with delete gets a response of no errors, as a broker that
deleted the replica answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import overload

from seglog.cluster.controller_channel import (
    ControllerRequest,
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    UpdateMetadataPartitionState,
)
from seglog.cluster.znodes import BrokerRegistration
from seglog.errors import ErrorCode
from seglog.protocol.message_data import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
)


class RecordingChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.brokers: dict[int, BrokerRegistration] = {}
        self.sent: list[tuple[int, ControllerRequest]] = []

    def add_broker(self, broker: BrokerRegistration) -> None:
        with self._lock:
            self.brokers[broker.broker_id] = broker

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            self.brokers.pop(broker_id, None)

    def send(
        self,
        broker_id: int,
        request: ControllerRequest,
        on_response: Callable[[int, StopReplicaResponseData], None] | None = None,
    ) -> None:
        with self._lock:
            if broker_id not in self.brokers:
                return
            self.sent.append((broker_id, request))
        if on_response is not None and isinstance(request, StopReplicaRequestData):
            errors = [
                StopReplicaResponseData.StopReplicaPartitionError(
                    topic_name=t.topic_name, partition_index=s.partition_index, error_code=ErrorCode.NONE
                )
                for t in request.topic_states
                for s in t.partition_states
            ]
            on_response(broker_id, StopReplicaResponseData(error_code=ErrorCode.NONE, partition_errors=errors))

    def take(self) -> list[tuple[int, ControllerRequest]]:
        """What was sent since the last take."""
        with self._lock:
            sent, self.sent = self.sent, []
            return sent


def leader_and_isr(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, LeaderAndIsrRequestData]]:
    return [(b, r) for b, r in sent if isinstance(r, LeaderAndIsrRequestData)]


def update_metadata(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, UpdateMetadataRequestData]]:
    return [(b, r) for b, r in sent if isinstance(r, UpdateMetadataRequestData)]


def stop_replica(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, StopReplicaRequestData]]:
    return [(b, r) for b, r in sent if isinstance(r, StopReplicaRequestData)]


@overload
def partition_states(request: LeaderAndIsrRequestData) -> list[LeaderAndIsrPartitionState]: ...
@overload
def partition_states(request: UpdateMetadataRequestData) -> list[UpdateMetadataPartitionState]: ...
@overload
def partition_states(request: StopReplicaRequestData) -> list[StopReplicaPartitionState]: ...
def partition_states(
    request: ControllerRequest,
) -> list[LeaderAndIsrPartitionState] | list[UpdateMetadataPartitionState] | list[StopReplicaPartitionState]:
    """The request's partition states, topic after topic (Kafka's ``partitionStates()``)."""
    return [s for t in request.topic_states for s in t.partition_states]  # type: ignore[return-value]
