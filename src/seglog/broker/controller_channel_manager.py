"""The controller's requests on the wire (Kafka's ``ControllerChannelManager``).

``cluster/controller.py`` hands its LeaderAndIsr, UpdateMetadata and StopReplica
requests, as the messages they go out as (``LeaderAndIsrRequestData`` ...), to a
``ControllerChannel``; this is the one brokers use. Each live broker
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
from collections.abc import Callable
from typing import Any

from ..client import PLAINTEXT, BlockingConnection, ClientSecurity
from ..cluster.controller_channel import ControllerRequest, endpoint_of
from ..cluster.znodes import BrokerRegistration
from ..errors import SeglogError, error_name
from ..protocol import ApiKey
from ..protocol.message_data import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
)

log = logging.getLogger(__name__)

# Kafka's controller.socket.timeout.ms and the sender's back-off before a reconnect
SOCKET_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1

ResponseHandler = Callable[[int, StopReplicaResponseData], None]

# each request's API key and the version it goes out at: the shape the controller's batch builds
API_VERSIONS: dict[type[ControllerRequest], tuple[ApiKey, int]] = {
    LeaderAndIsrRequestData: (ApiKey.LEADER_AND_ISR, 6),
    UpdateMetadataRequestData: (ApiKey.UPDATE_METADATA, 7),
    StopReplicaRequestData: (ApiKey.STOP_REPLICA, 3),
}


# --- the channel ------------------------------------------------------------------------------------


class _Sender:
    """One broker's queue and the thread that empties it, in order, over one connection."""

    def __init__(self, broker: BrokerRegistration, listener: str, security: ClientSecurity) -> None:
        self.security = security
        self.broker = broker
        self.listener = listener  # the inter-broker listener, whose address the controller uses
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
            api_key, version = API_VERSIONS[type(request)]
            response = self._send_until_answered(api_key, version, request)
            if response is None:
                break
            self._handle(api_key, response, on_response)
        if self._conn is not None:
            self._conn.close()

    def _send_until_answered(self, api_key: ApiKey, version: int, body: ControllerRequest) -> Any:
        while not self.stopped.is_set():
            try:
                if self._conn is None:
                    host, port = endpoint_of(self.broker, self.listener)
                    self._conn = BlockingConnection(
                        host, port, "seglog-controller", timeout=SOCKET_TIMEOUT_S, security=self.security
                    )
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

    def _handle(self, api_key: ApiKey, response: Any, on_response: ResponseHandler | None) -> None:
        if response.error_code:
            log.warning("broker %d refused %s: %s", self._id, api_key.name, error_name(response.error_code))
        if isinstance(response, StopReplicaResponseData) and on_response is not None:
            try:
                on_response(self._id, response)
            except Exception:
                log.exception("StopReplica response handler failed")

    @property
    def _id(self) -> int:
        return self.broker.broker_id


class ControllerChannelManager:
    """The ``ControllerChannel`` of a broker's controller: requests to each live broker over TCP."""

    def __init__(self, listener: str = "PLAINTEXT", security: ClientSecurity = PLAINTEXT) -> None:
        self.listener = listener  # the inter-broker listener's name: brokers are reached there
        self.security = security  # and with its protocol
        self._lock = threading.Lock()
        self._senders: dict[int, _Sender] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        with self._lock:
            old = self._senders.get(broker.broker_id)
            if old is not None and old.broker == broker:
                return
            if old is not None:
                old.stop()
            self._senders[broker.broker_id] = _Sender(broker, self.listener, self.security)

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
