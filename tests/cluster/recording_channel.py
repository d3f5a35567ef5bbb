"""A ControllerChannel that records what would go over the network (a test double for the network only).

Like Kafka's channel it holds the brokers added to it and drops requests to
others. StopReplica with delete gets a response of no errors, as a broker that
deleted the replica answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from seglog.cluster.controller_channel import (
    ControllerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from seglog.cluster.znodes import BrokerRegistration, TopicPartition


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
        on_response: Callable[[int, StopReplicaResponse], None] | None = None,
    ) -> None:
        with self._lock:
            if broker_id not in self.brokers:
                return
            self.sent.append((broker_id, request))
        if on_response is not None and isinstance(request, StopReplicaRequest):
            errors = {TopicPartition(s.topic, s.partition): 0 for s in request.partition_states}
            on_response(broker_id, StopReplicaResponse(0, errors))

    def take(self) -> list[tuple[int, ControllerRequest]]:
        """What was sent since the last take."""
        with self._lock:
            sent, self.sent = self.sent, []
            return sent


def leader_and_isr(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, LeaderAndIsrRequest]]:
    return [(b, r) for b, r in sent if isinstance(r, LeaderAndIsrRequest)]


def update_metadata(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, UpdateMetadataRequest]]:
    return [(b, r) for b, r in sent if isinstance(r, UpdateMetadataRequest)]


def stop_replica(sent: list[tuple[int, ControllerRequest]]) -> list[tuple[int, StopReplicaRequest]]:
    return [(b, r) for b, r in sent if isinstance(r, StopReplicaRequest)]
