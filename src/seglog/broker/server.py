"""The broker: storage, the replica manager, request handlers and the socket server, wired.

``KafkaServer`` runs inside an asyncio event loop: ``startup`` opens the log dirs (in
a thread: recovery may take a while), binds the listener and starts serving;
``shutdown`` stops accepting, closes connections, answers waiting fetches, and closes
the logs cleanly (checkpoints, clean-shutdown marker, lock released).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..common import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from ..config import BrokerConfig
from ..coordinator.producer_id_manager import BLOCK_SIZE
from ..errors import CoordinatorNotAvailableError
from ..protocol import ApiKey, Request
from .admin import AdminManager
from .apis import KafkaApis, advertised_host
from .cluster_admin_apis import ClusterAdminApis
from .cluster_member import ClusterMember
from .controller_apis import ControllerApis
from .endpoint import parse_endpoints
from .group_apis import GroupApis
from .group_metadata_manager import GroupMetadataManager
from .metadata_cache import BrokerInfo
from .metrics import BrokerMetrics, serve_prometheus
from .network import Connection, SocketServer
from .replica_manager import ReplicaManager
from .request_context import RequestContext, client_host, set_current_request
from .routes import Route, Routes, routing_table, served_versions
from .txn_apis import TxnApis

log = logging.getLogger("seglog.broker")
T = TypeVar("T")

# The APIs a connection's reader may answer in the loop's turn that received them, when
# nothing is ahead (network.py): their handlers await only futures (an I/O thread, a
# purgatory), never a task of their own, so their first step may run outside any task.
# A fetch of the log's tail, a small produce, Metadata: answered without a task switch.
_AT_ONCE = frozenset(
    int(k) for k in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS)
)

# each API's name, the key of its request metrics: an enum member's ``name`` is a Python
# property (1,800 instructions under callgrind, every request), a dict lookup is not
_API_NAMES = {key: key.name for key in ApiKey}


def _in_thread(fn: Callable[[str], T]) -> Callable[[str], Awaitable[T]]:
    """``fn`` (ZooKeeper's: it blocks) run in a thread, awaited on the loop."""
    return lambda name: asyncio.get_running_loop().run_in_executor(None, fn, name)


def _answers_at_once(request: Request) -> bool:
    return request.header.api_key in _AT_ONCE


class KafkaServer:
    def __init__(
        self, config: BrokerConfig, *, metrics_port: int | None = None, metrics_host: str = "127.0.0.1"
    ) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self.listener = parse_endpoints(config["listeners"])[0]
        advertised = config["advertised.listeners"]
        self.advertised = parse_endpoints(advertised)[0] if advertised else None
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self._metrics_server: Any = None
        self.replicas: ReplicaManager | None = None
        self.txn: TxnApis | None = None
        self.socket_server: SocketServer | None = None
        self.groups: GroupMetadataManager | None = None
        self.routes: Routes = {}  # the routing table: every API served, its handler and versions
        # its ranges, by API key, which the connections serve (updated in place: open connections see them grow)
        self.served: dict[int, tuple[int, int]] = {}
        self._modules: list[Routes] = []  # the handler modules' routes it is made of
        self.cluster: ClusterMember | None = None
        self.controller_apis: ControllerApis | None = None  # in a cluster
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        assert self.socket_server is not None
        return self.socket_server.port

    async def startup(self) -> None:
        started = time.monotonic()
        # bind first: the port is known before the logs load, and a taken port fails fast
        self.socket_server = SocketServer(
            self.listener.host,
            self.listener.port,
            self._handle,
            self.served,
            self.config["socket.request.max.bytes"],
            self.metrics,
            _answers_at_once,
        )
        loop = asyncio.get_running_loop()
        try:
            host, port = self._advertised_address()
            broker = BrokerInfo(self.config["broker.id"], host, port)
            replicas = self.replicas = await loop.run_in_executor(
                None, functools.partial(ReplicaManager, self.config, broker, broker_epoch=self._broker_epoch)
            )
        except BaseException:
            await self.socket_server.stop()
            raise
        await replicas.startup()
        try:
            # in a cluster, topics and producer ids go through ZooKeeper, joined once the listener serves
            member = ClusterMember(self.config, broker, replicas) if self.config["zookeeper.connect"] else None
            admin = AdminManager(self.config, replicas, member)
            claim = self._claim_producer_id_block if member is not None else None
            # the group coordinator first: the transaction coordinator tells it of the markers it writes
            groups = GroupMetadataManager(self.config, replicas, admin.create_internal_topic)
            txn = self.txn = TxnApis(
                self.config,
                replicas,
                (host, port),
                admin.create_internal_topic,
                claim_producer_id_block=claim,
                on_markers_written=groups.complete_transaction,
            )
            await txn.startup()
        except BaseException:
            await self.socket_server.stop()
            await loop.run_in_executor(None, replicas.shutdown)
            raise
        self.groups = groups
        self.group_apis = GroupApis(groups, replicas.metadata, txn.transaction_partition)
        apis = KafkaApis(
            self.config,
            replicas,
            (host, port),
            auto_create_topic=None if member is None else _in_thread(member.auto_create_topic),
            internal_topic_creators={
                GROUP_METADATA_TOPIC: self.groups.ensure_offsets_topic,
                TRANSACTION_STATE_TOPIC: txn.ensure_state_topic,
            },
        )
        self._modules = [self._routes(), apis.routes(), admin.routes(), txn.routes(), self.group_apis.routes()]
        self._route()
        # the coordinators follow their partitions' leadership; deleted topics' offsets go
        replicas.leadership_listeners += [self.groups.on_leadership_change, txn.on_leadership_change]
        replicas.deletion_listeners.append(self.groups.on_partitions_deleted)
        self.groups.startup()  # loads __consumer_offsets in the background: its groups wait meanwhile
        if self.metrics_port is not None:
            self._metrics_server, self.metrics_port = serve_prometheus(
                self.metrics, self.metrics_host, self.metrics_port
            )
        self.socket_server.start()
        if member is not None:
            await self._join_cluster(member)
        self.started.set()
        log.info(
            "broker %d started in %.0f ms: serving %s (advertised %s:%d), log dirs %s%s",
            broker.broker_id,
            (time.monotonic() - started) * 1000,
            f"{self.listener.host or '0.0.0.0'}:{self.port}",
            host,
            port,
            ",".join(self.config.log_dirs),
            f", metrics on :{self.metrics_port}/metrics" if self._metrics_server else "",
        )

    async def _join_cluster(self, cluster: ClusterMember) -> None:
        """Cluster mode: the controller's requests served, then registration and the controller started
        (the listener serves first: the controller sends to a broker as soon as it is registered)."""
        assert self.replicas is not None
        self.cluster = cluster
        controller_apis = ControllerApis(self.replicas, lambda: cluster.broker_epoch, lambda: cluster.controller)
        self.controller_apis = controller_apis
        cluster_admin = ClusterAdminApis(lambda: cluster.controller, self.replicas.metadata)
        self._modules += [controller_apis.routes(), cluster_admin.routes()]
        self._route()
        try:
            await asyncio.get_running_loop().run_in_executor(None, cluster.startup)
        except BaseException:
            await self.shutdown()
            raise

    def _broker_epoch(self) -> int:
        """This broker's registration in ZooKeeper (KIP-380), which AlterPartition carries; -1 before."""
        return self.cluster.broker_epoch if self.cluster is not None else -1

    def _claim_producer_id_block(self) -> tuple[int, int]:
        """A block of producer ids claimed in ZooKeeper, whose blocks the brokers share."""
        if self.cluster is None:  # retriable: the client asks again once the broker has joined
            raise CoordinatorNotAvailableError("producer ids come from ZooKeeper, which this broker has not joined yet")
        return self.cluster.zk.claim_producer_id_block(self.config["broker.id"], BLOCK_SIZE)[1:]

    def _advertised_address(self) -> tuple[str, int]:
        assert self.socket_server is not None
        if self.advertised is not None:
            port = self.advertised.port or self.socket_server.port
            return advertised_host(self.advertised.host), port
        return advertised_host(self.listener.host), self.socket_server.port

    async def shutdown(self) -> None:
        log.info("broker stopping")
        if self.cluster is not None:  # leaders moved off first (controlled shutdown), while still serving
            cluster, self.cluster = self.cluster, None
            await asyncio.get_running_loop().run_in_executor(None, cluster.shutdown)
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.txn is not None:
            self.txn.shutdown()
        if self.groups is not None:
            await self.groups.shutdown()
        if self.replicas is not None:
            await self.replicas.stop_replication()
            await asyncio.get_running_loop().run_in_executor(None, self.replicas.shutdown)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        log.info("broker stopped: logs closed cleanly")

    # --- one request -----------------------------------------------------------------------------

    def _routes(self) -> Routes:
        """The server's own API: ApiVersions, which each connection answers from the routing table."""
        return {ApiKey.API_VERSIONS: Route(None, (0, 4))}

    def _route(self) -> None:
        """The routing table made of the handler modules' routes, and the ranges connections serve."""
        self.routes = routing_table(*self._modules)
        self.served.clear()
        self.served.update(served_versions(self.routes))

    async def _handle(self, request: Request, conn: Connection) -> Any:
        """The response body to a request the connection decoded (it refused any API or version
        not served; ApiVersions comes at any version), or None for none."""
        started = time.perf_counter()
        header = request.header
        key = header.api_key
        context = conn.request_context  # the last request's: a client's id stays what it was, nearly always
        if context is None or context.client_id != (header.client_id or ""):
            context = conn.request_context = RequestContext(header.client_id or "", client_host(conn.peer))
        set_current_request(context)
        handler = self.routes[key].handler
        failed = True
        try:
            if handler is None:  # ApiVersions: the served ranges, or UNSUPPORTED_VERSION at v0 (KIP-511)
                body = conn.protocol.api_versions_body(request)
            else:
                body = await handler(header.api_version, request.body)
            failed = False
        finally:
            self.metrics.request(_API_NAMES[key], time.perf_counter() - started, failed)
        return body
