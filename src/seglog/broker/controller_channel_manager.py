"""The controller's requests on the wire (Kafka's ``ControllerChannelManager``).

``cluster/controller.py`` hands its LeaderAndIsr, UpdateMetadata and StopReplica
requests as values to a ``ControllerChannel``; this is the one brokers use. Each
live broker has a queue and a sender thread with one connection: its requests go
out one at a time, in order, each waiting for its answer. A request that fails
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
import socket
import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any

from ..cluster.controller_channel import (
    ControllerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from ..cluster.znodes import BrokerRegistration, TopicPartition
from ..errors import BrokerNotAvailableError, InvalidResponseError, error_name
from ..protocol import ApiKey, decode_response, encode_request
from .metadata_cache import ZERO_UUID, topic_uuid

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# Kafka's controller.socket.timeout.ms and the sender's back-off before a reconnect
SOCKET_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1

_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30

ResponseHandler = Callable[[int, StopReplicaResponse], None]


class BlockingConnection:
    """One blocking connection to a broker, a request at a time: the controller's sender threads and
    a stopping broker's ControlledShutdown use it."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float = SOCKET_TIMEOUT_S) -> None:
        self.address = f"{host}:{port}"
        self._client_id = client_id
        self._correlation = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise BrokerNotAvailableError(f"cannot connect to {self.address}: {e.strerror or e}") from None

    def call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self._correlation += 1
        parts = encode_request(api_key, version, self._correlation, self._client_id, body)
        try:
            self._sock.sendall(b"".join(bytes(p) for p in parts))
            size = _SIZE.unpack(self._read(4))[0]
            if not 4 <= size <= _MAX_RESPONSE:
                raise InvalidResponseError(f"response size {size} from {self.address} is out of range")
            frame = self._read(size)
        except OSError as e:
            raise BrokerNotAvailableError(f"lost the connection to {self.address}: {e.strerror or e}") from None
        if _SIZE.unpack_from(frame)[0] != self._correlation:
            raise InvalidResponseError(f"{self.address} answered another request than {api_key.name}")
        return decode_response(api_key, version, frame)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise BrokerNotAvailableError(f"{self.address} closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._sock.close()


def endpoint_of(broker: BrokerRegistration, listener: str = "PLAINTEXT") -> tuple[str, int]:
    """The broker's address on ``listener`` (its first endpoint when it has no such listener)."""
    if not broker.endpoints:
        raise BrokerNotAvailableError(f"broker {broker.broker_id} registered no endpoint")
    found = next((e for e in broker.endpoints if e.listener == listener), broker.endpoints[0])
    return found.host or "127.0.0.1", found.port


# --- the requests as wire bodies -----------------------------------------------------------------


def encode_controller_request(request: ControllerRequest) -> tuple[ApiKey, int, dict[str, Any]]:
    head = {
        "controller_id": request.controller_id,
        "is_k_raft_controller": False,
        "controller_epoch": request.controller_epoch,
        "broker_epoch": request.broker_epoch,
    }
    if isinstance(request, LeaderAndIsrRequest):
        return ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, {**head, **_leader_and_isr(request)}
    if isinstance(request, UpdateMetadataRequest):
        return ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, {**head, **_update_metadata(request)}
    return ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, {**head, **_stop_replica(request)}


def _leader_and_isr(request: LeaderAndIsrRequest) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for s in request.partition_states:
        topics.setdefault(s.topic, []).append(
            {
                "topic_name": s.topic,
                "partition_index": s.partition,
                "controller_epoch": s.controller_epoch,
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "isr": list(s.isr),
                "partition_epoch": s.partition_epoch,
                "replicas": list(s.replicas),
                "adding_replicas": list(s.adding_replicas),
                "removing_replicas": list(s.removing_replicas),
                "is_new": s.is_new,
                "leader_recovery_state": s.leader_recovery_state,
            }
        )
    return {
        "type": 0,
        "topic_states": [
            {"topic_name": t, "topic_id": _topic_id(request.topic_ids.get(t)), "partition_states": states}
            for t, states in topics.items()
        ],
        "live_leaders": [
            {"broker_id": b.broker_id, "host_name": endpoint_of(b)[0], "port": endpoint_of(b)[1]}
            for b in request.live_leaders
        ],
    }


def _update_metadata(request: UpdateMetadataRequest) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for s in request.partition_states:
        topics.setdefault(s.topic, []).append(
            {
                "topic_name": s.topic,
                "partition_index": s.partition,
                "controller_epoch": s.controller_epoch,
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "isr": list(s.isr),
                "zk_version": s.partition_epoch,
                "replicas": list(s.replicas),
                "offline_replicas": list(s.offline_replicas),
            }
        )
    return {
        "topic_states": [
            {"topic_name": t, "topic_id": _topic_id(request.topic_ids.get(t)), "partition_states": states}
            for t, states in topics.items()
        ],
        "live_brokers": [
            {
                "id": b.broker_id,
                "endpoints": [
                    {
                        "port": e.port,
                        "host": e.host,
                        "listener": e.listener,
                        "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, 0),
                    }
                    for e in b.endpoints
                ],
                "rack": b.rack,
            }
            for b in request.live_brokers
        ],
    }


def _stop_replica(request: StopReplicaRequest) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for s in request.partition_states:
        topics.setdefault(s.topic, []).append(
            {"partition_index": s.partition, "leader_epoch": s.leader_epoch, "delete_partition": s.delete_partition}
        )
    return {"topic_states": [{"topic_name": t, "partition_states": states} for t, states in topics.items()]}


def _topic_id(text: str | None) -> uuid.UUID:
    return topic_uuid(text) if text else ZERO_UUID


def decode_stop_replica_response(body: dict[str, Any]) -> StopReplicaResponse:
    errors = {TopicPartition(e["topic_name"], e["partition_index"]): e["error_code"] for e in body["partition_errors"]}
    return StopReplicaResponse(body["error_code"], errors)


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
            api_key, version, body = encode_controller_request(request)
            response = self._send_until_answered(api_key, version, body)
            if response is None:
                break
            self._handle(request, api_key, response, on_response)
        if self._conn is not None:
            self._conn.close()

    def _send_until_answered(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
        while not self.stopped.is_set():
            try:
                if self._conn is None:
                    host, port = endpoint_of(self.broker)
                    self._conn = BlockingConnection(host, port, "seglog-controller")
                return self._conn.call(api_key, version, body)
            except (BrokerNotAvailableError, InvalidResponseError) as e:
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
        response: dict[str, Any],
        on_response: ResponseHandler | None,
    ) -> None:
        if response["error_code"]:
            log.warning("broker %d refused %s: %s", self._id, api_key.name, error_name(response["error_code"]))
        if isinstance(request, StopReplicaRequest) and on_response is not None:
            try:
                on_response(self._id, decode_stop_replica_response(response))
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
