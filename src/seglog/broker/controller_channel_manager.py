"""The controller's requests on the wire (Kafka's ``ControllerChannelManager``).

``cluster/controller.py`` hands its LeaderAndIsr, UpdateMetadata and StopReplica
requests as values to a ``ControllerChannel``; this is the one brokers use. Each
request goes out as its message (``LeaderAndIsrRequestData`` ...). Each live broker
has a queue and a sender thread with one ``seglog.client.BlockingConnection``: its
requests go out one at a time, in order, each waiting for its answer. A request that fails
(the broker is restarting, the connection broke) is sent again on a new
connection until it is answered or the broker is removed, as Kafka's
``RequestSendThread`` does; a removed broker's queue is dropped.

Versions are fixed, as Kafka fixes them by ``inter.broker.protocol.version``:
every seglog broker serves them (LeaderAndIsr v6 names topics by id,
UpdateMetadata v7 carries topic ids, StopReplica v3 carries leader epochs).
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..client import BlockingConnection
from ..cluster.controller_channel import (
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from ..cluster.znodes import SECURITY_PROTOCOLS, BrokerRegistration, EndPoint, TopicPartition
from ..common import ZERO_UUID
from ..errors import BrokerNotAvailableError, SeglogError, error_name
from ..protocol import ApiKey
from ..protocol.message_data import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
)
from .metadata_cache import topic_uuid

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
# Kafka's controller.socket.timeout.ms and the sender's back-off before a reconnect
SOCKET_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1

ResponseHandler = Callable[[int, StopReplicaResponse], None]
ControllerRequestData = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


def endpoint_of(broker: BrokerRegistration, listener: str = "PLAINTEXT") -> tuple[str, int]:
    """The broker's address on ``listener`` (its first endpoint when it has no such listener)."""
    if not broker.endpoints:
        raise BrokerNotAvailableError(f"broker {broker.broker_id} registered no endpoint")
    found = next((e for e in broker.endpoints if e.listener == listener), broker.endpoints[0])
    return found.host or "127.0.0.1", found.port


# --- the requests as wire bodies -----------------------------------------------------------------


def controller_request_data(request: ControllerRequest) -> tuple[ApiKey, int, ControllerRequestData]:
    """The controller's request as the message it goes out as, with its API key and version."""
    if isinstance(request, LeaderAndIsrRequest):
        return ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, _leader_and_isr(request)
    if isinstance(request, UpdateMetadataRequest):
        return ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, _update_metadata(request)
    return ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, _stop_replica(request)


_State = TypeVar("_State", LeaderAndIsrPartitionState, UpdateMetadataPartitionState, StopReplicaPartitionState)
_Message = TypeVar("_Message")


def _by_topic(states: Iterable[_State], message: Callable[[_State], _Message]) -> dict[str, list[_Message]]:
    """The partition states as their messages, by topic: from v5 (StopReplica v3) the requests group them so."""
    topics: dict[str, list[_Message]] = {}
    for s in states:
        topics.setdefault(s.topic, []).append(message(s))
    return topics


def _leadership(s: LeaderAndIsrPartitionState | UpdateMetadataPartitionState) -> dict[str, Any]:
    """The fields LeaderAndIsr's and UpdateMetadata's partition states share, by the same names."""
    return {
        "partition_index": s.partition,
        "controller_epoch": s.controller_epoch,
        "leader": s.leader,
        "leader_epoch": s.leader_epoch,
        "isr": list(s.isr),
        "replicas": list(s.replicas),
    }


def _leader_and_isr(request: LeaderAndIsrRequest) -> LeaderAndIsrRequestData:
    topics = _by_topic(
        request.partition_states,
        lambda s: LeaderAndIsrRequestData.LeaderAndIsrPartitionState(
            **_leadership(s),
            partition_epoch=s.partition_epoch,
            adding_replicas=list(s.adding_replicas),
            removing_replicas=list(s.removing_replicas),
            is_new=s.is_new,
            leader_recovery_state=s.leader_recovery_state,
        ),
    )
    return LeaderAndIsrRequestData(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[
            LeaderAndIsrRequestData.LeaderAndIsrTopicState(
                topic_name=t, topic_id=_topic_id(request.topic_ids.get(t)), partition_states=states
            )
            for t, states in topics.items()
        ],
        live_leaders=[
            LeaderAndIsrRequestData.LeaderAndIsrLiveLeader(broker_id=b.broker_id, host_name=host, port=port)
            for b in request.live_leaders
            for host, port in [endpoint_of(b)]
        ],
    )


def _update_metadata(request: UpdateMetadataRequest) -> UpdateMetadataRequestData:
    topics = _by_topic(
        request.partition_states,
        lambda s: UpdateMetadataRequestData.UpdateMetadataPartitionState(
            **_leadership(s),
            zk_version=s.partition_epoch,
            offline_replicas=list(s.offline_replicas),
        ),
    )
    return UpdateMetadataRequestData(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[
            UpdateMetadataRequestData.UpdateMetadataTopicState(
                topic_name=t, topic_id=_topic_id(request.topic_ids.get(t)), partition_states=states
            )
            for t, states in topics.items()
        ],
        live_brokers=[
            UpdateMetadataRequestData.UpdateMetadataBroker(
                id=b.broker_id, endpoints=[_endpoint(e) for e in b.endpoints], rack=b.rack
            )
            for b in request.live_brokers
        ],
    )


def _endpoint(endpoint: EndPoint) -> UpdateMetadataRequestData.UpdateMetadataEndpoint:
    # Kafka's SecurityProtocol ids are the protocols' places in its enum; an unknown one is PLAINTEXT's
    protocol = endpoint.security_protocol
    return UpdateMetadataRequestData.UpdateMetadataEndpoint(
        port=endpoint.port,
        host=endpoint.host,
        listener=endpoint.listener,
        security_protocol=SECURITY_PROTOCOLS.index(protocol) if protocol in SECURITY_PROTOCOLS else 0,
    )


def _stop_replica(request: StopReplicaRequest) -> StopReplicaRequestData:
    topics = _by_topic(
        request.partition_states,
        lambda s: StopReplicaRequestData.StopReplicaPartitionState(
            partition_index=s.partition, leader_epoch=s.leader_epoch, delete_partition=s.delete_partition
        ),
    )
    return StopReplicaRequestData(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[
            StopReplicaRequestData.StopReplicaTopicState(topic_name=t, partition_states=states)
            for t, states in topics.items()
        ],
    )


def _topic_id(text: str | None) -> uuid.UUID:
    return topic_uuid(text) if text else ZERO_UUID


def stop_replica_response(body: StopReplicaResponseData) -> StopReplicaResponse:
    errors = {TopicPartition(e.topic_name, e.partition_index): e.error_code for e in body.partition_errors}
    return StopReplicaResponse(body.error_code, errors)


# --- the channel ------------------------------------------------------------------------------------


class _Sender:
    """One broker's queue and the thread that empties it, in order, over one connection."""

    def __init__(self, broker: BrokerRegistration) -> None:
        self.broker = broker
        self.queue: queue.Queue[tuple[ControllerRequest, ResponseHandler | None] | None] = queue.Queue()
        self.stopped = threading.Event()
        self._conn: BlockingConnection | None = None
        self.thread = threading.Thread(target=self._run, name=f"controller-to-broker-{broker.broker_id}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.queue.put(None)

    def _run(self) -> None:
        while (item := self.queue.get()) is not None and not self.stopped.is_set():
            request, on_response = item
            api_key, version, body = controller_request_data(request)
            response = self._send_until_answered(api_key, version, body)
            if response is None:
                break
            self._handle(request, api_key, response, on_response)
        if self._conn is not None:
            self._conn.close()

    def _send_until_answered(self, api_key: ApiKey, version: int, body: ControllerRequestData) -> Any:
        while not self.stopped.is_set():
            try:
                if self._conn is None:
                    host, port = endpoint_of(self.broker)
                    self._conn = BlockingConnection(host, port, "seglog-controller", timeout=SOCKET_TIMEOUT_S)
                return self._conn.request(api_key, body, version)
            # as Kafka's RequestSendThread: whatever failed (unreachable, a broken answer, ApiVersions
            # refused), a new connection and the same request
            except SeglogError as e:
                log.info("controller request %s to broker %d failed (%s); retrying", api_key.name, self._id, e)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                self.stopped.wait(RETRY_BACKOFF_S)
        return None

    def _handle(
        self,
        request: ControllerRequest,
        api_key: ApiKey,
        response: Any,
        on_response: ResponseHandler | None,
    ) -> None:
        if response.error_code:
            log.warning("broker %d refused %s: %s", self._id, api_key.name, error_name(response.error_code))
        if isinstance(request, StopReplicaRequest) and on_response is not None:
            try:
                on_response(self._id, stop_replica_response(response))
            except Exception:
                log.exception("StopReplica response handler failed")

    @property
    def _id(self) -> int:
        return self.broker.broker_id


class ControllerChannelManager:
    """The ``ControllerChannel`` of a broker's controller: requests to each live broker over TCP."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._senders: dict[int, _Sender] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        with self._lock:
            old = self._senders.get(broker.broker_id)
            if old is not None and old.broker == broker:
                return
            if old is not None:
                old.stop()
            self._senders[broker.broker_id] = _Sender(broker)

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, broker_id: int, request: ControllerRequest, on_response: ResponseHandler | None = None) -> None:
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is not None:  # a broker not (or no longer) live: dropped, as Kafka drops it
            sender.queue.put((request, on_response))

    def close(self) -> None:
        with self._lock:
            senders, self._senders = list(self._senders.values()), {}
        for sender in senders:
            sender.stop()
