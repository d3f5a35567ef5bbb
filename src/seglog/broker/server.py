"""The broker: storage, the replica manager, request handlers and the socket server, wired.

``KafkaServer`` runs inside an asyncio event loop: ``startup`` opens the log dirs (in
a thread: recovery may take a while), binds its listeners (a socket server each, TLS on
the SSL ones) and starts serving;
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
from ..security import ANONYMOUS
from ..security.quotas import ClientQuotas
from .acl_apis import AclApis
from .acl_authorizer import BrokerAuthorizer
from .admin import AdminManager
from .apis import KafkaApis, advertised_host
from .client_quota_apis import ClientQuotaApis
from .cluster_admin_apis import ClusterAdminApis
from .cluster_member import ClusterMember
from .connection_quotas import ConnectionQuotas
from .controller_apis import ControllerApis
from .dynamic_config import DynamicBrokerConfig, DynamicConfigs, LogDirDynamicConfigStore, ZkDynamicConfigStore
from .endpoint import Listener, broker_listeners
from .group_apis import GroupApis
from .group_metadata_manager import GroupMetadataManager
from .metadata_cache import BrokerInfo
from .metrics import BrokerMetrics, serve_prometheus
from .network import Connection, SocketServer
from .quota_store import LogDirQuotaStore, ZkQuotaStore
from .replica_manager import ReplicaManager
from .request_context import RequestContext, client_host, set_current_request
from .routes import Route, Routes, routing_table, served_versions
from .sasl import (
    SASL_PROTOCOLS,
    LogDirCredentials,
    SaslApis,
    SaslAuthenticator,
    ScramCredentials,
    ZkCredentials,
    listener_sasl,
)
from .throttling import Throttler, timed
from .tls import transport_factory
from .txn_apis import TxnApis

log = logging.getLogger("seglog.broker")
T = TypeVar("T")

# The APIs a connection's reader may answer in the loop's turn that received them, when
# nothing is ahead (network.py): their handlers await only futures (an I/O thread, a
# purgatory), never a task of their own, so their first step may run outside any task.
# A fetch of the log's tail, a small produce, Metadata: answered without a task switch;
# so is a consumer's offset commit whose record the log takes at once (a synchronous
# commit: 14 % more commits/s, 8 % less broker CPU each, bench/groups.py's setting).
_AT_ONCE = frozenset(
    int(k)
    for k in (
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.API_VERSIONS,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.HEARTBEAT,
        ApiKey.FIND_COORDINATOR,
    )
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
        self.listeners = broker_listeners(config)
        # SCRAM credentials: a broker without ZooKeeper keeps them in its log dir
        standalone = not config["zookeeper.connect"]
        self.scram: LogDirCredentials | None = LogDirCredentials(config.log_dirs[0]) if standalone else None
        self.credentials = self.scram.credentials if self.scram is not None else ScramCredentials()
        self.listener = self.listeners.listeners[0].bound  # the first: where tools point their clients
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self._metrics_server: Any = None
        self.replicas: ReplicaManager | None = None
        self.txn: TxnApis | None = None
        self.socket_servers: list[SocketServer] = []  # one a listener, in the order of ``listeners``
        self.groups: GroupMetadataManager | None = None
        self.routes: Routes = {}  # the routing table: every API served, its handler and versions
        # its ranges, by API key, which the connections serve (updated in place: open connections see them grow)
        self.served: dict[int, tuple[int, int]] = {}
        self._modules: list[Routes] = []  # the handler modules' routes it is made of
        self.cluster: ClusterMember | None = None
        self.controller_apis: ControllerApis | None = None  # in a cluster
        self.authorizer = BrokerAuthorizer(config)  # every handler's checks go through this one
        self.started = asyncio.Event()
        self.quotas = ClientQuotas(config["quota.window.num"], config["quota.window.size.seconds"])
        self.throttler = Throttler(self.quotas)
        # the dynamic broker configs over server.properties: what the connection quotas read
        self.dynamic_config = DynamicBrokerConfig(config, config["broker.id"])
        self.dynamic: DynamicConfigs | None = None  # kept up to date once the broker serves
        self.connection_quotas = ConnectionQuotas(  # every listener's
            self.dynamic_config,
            self.quotas.ip_rates,
            tuple(x.name for x in self.listeners.listeners),
            self.listeners.inter_broker,
        )

    @property
    def socket_server(self) -> SocketServer | None:
        """The first listener's socket server."""
        return self.socket_servers[0] if self.socket_servers else None

    @property
    def port(self) -> int:
        return self.port_of(self.listeners.listeners[0].name)

    def port_of(self, listener: str) -> int:
        """The port the listener named so is bound to (the one chosen, when asked for port 0)."""
        return next(s.port for s in self.socket_servers if s.listener == listener.upper())

    async def startup(self) -> None:
        started = time.monotonic()
        # bind first: the ports are known before the logs load, and a taken port or a bad
        # keystore fails fast
        try:
            for listener in self.listeners.listeners:
                self.socket_servers.append(self._socket_server(listener))
        except BaseException:
            await self._stop_listening()
            raise
        loop = asyncio.get_running_loop()
        try:
            broker = self._broker_info()
            replicas = self.replicas = await loop.run_in_executor(
                None, functools.partial(ReplicaManager, self.config, broker, broker_epoch=self._broker_epoch)
            )
        except BaseException:
            await self._stop_listening()
            raise
        try:  # from here on a failure (a taken metrics port, ZooKeeper unreachable) undoes it all
            await self._start_serving(replicas, broker)
        except BaseException:
            await self.shutdown()
            raise
        self.started.set()
        log.info(
            "broker %d started in %.0f ms: serving %s (advertised %s), log dirs %s%s",
            broker.broker_id,
            (time.monotonic() - started) * 1000,
            ", ".join(f"{s.listener}://{x.bound.host or '0.0.0.0'}:{s.port}" for s, x in self._served_listeners()),
            ", ".join(f"{name}://{host}:{port}" for name, host, port in broker.endpoints),
            ",".join(self.config.log_dirs),
            f", metrics on :{self.metrics_port}/metrics" if self._metrics_server else "",
        )

    async def _start_serving(self, replicas: ReplicaManager, broker: BrokerInfo) -> None:
        """The coordinators, the handlers and the routing table over the replica manager, then
        the listener served and, in a cluster, ZooKeeper joined."""
        host, port = broker.host, broker.port
        loop = asyncio.get_running_loop()
        await replicas.startup()
        await self.authorizer.startup()  # the ACLs loaded before a request is served
        # in a cluster, topics and producer ids go through ZooKeeper, joined once the listener serves
        member = ClusterMember(self.config, broker, replicas) if self.config["zookeeper.connect"] else None
        store = LogDirDynamicConfigStore(self.config.log_dirs[0]) if member is None else ZkDynamicConfigStore(member.zk)
        dynamic = self.dynamic = DynamicConfigs(self.dynamic_config, store)
        dynamic.reconfigurables.append(self.connection_quotas.reconfigure)
        if member is None:  # a cluster's are read once ZooKeeper is joined
            await dynamic.load()
        admin = AdminManager(self.config, replicas, member, self.authorizer, self.quotas, dynamic)
        claim = self._claim_producer_id_block if member is not None else None
        # the group coordinator first: the transaction coordinator tells it of the markers it writes
        groups = self.groups = GroupMetadataManager(self.config, replicas, admin.create_internal_topic)
        txn = self.txn = TxnApis(
            self.config,
            replicas,
            (host, port),
            admin.create_internal_topic,
            claim_producer_id_block=claim,
            on_markers_written=groups.complete_transaction,
            authorizer=self.authorizer,
        )
        await txn.startup()
        self.group_apis = GroupApis(groups, replicas.metadata, txn.transaction_partition, self.authorizer)
        apis = KafkaApis(
            self.config,
            replicas,
            (host, port),
            auto_create_topic=None if member is None else _in_thread(member.auto_create_topic),
            internal_topic_creators={
                GROUP_METADATA_TOPIC: self.groups.ensure_offsets_topic,
                TRANSACTION_STATE_TOPIC: txn.ensure_state_topic,
            },
            authorizer=self.authorizer,
        )
        if self.scram is not None:
            await loop.run_in_executor(None, self.scram.load)
        sasl_apis = SaslApis(self.credentials, lambda change: loop.run_in_executor(None, change), self.authorizer)
        acl_apis = AclApis(self.authorizer)
        self._modules = [
            self._routes(),
            apis.routes(),
            admin.routes(),
            txn.routes(),
            self.group_apis.routes(),
            sasl_apis.routes(),
            acl_apis.routes(),
        ]
        if member is None:  # a broker on its own keeps its quotas in its log dir; a cluster's are ZooKeeper's
            quota_apis = ClientQuotaApis(self.quotas, LogDirQuotaStore(self.config.log_dirs[0]))
            await quota_apis.load()
            self._modules.append(quota_apis.routes())
        self._route()
        # the coordinators follow their partitions' leadership; deleted topics' offsets go
        replicas.leadership_listeners += [self.groups.on_leadership_change, txn.on_leadership_change]
        replicas.deletion_listeners.append(self.groups.on_partitions_deleted)
        self.groups.startup()  # loads __consumer_offsets in the background: its groups wait meanwhile
        if self.metrics_port is not None:
            self._metrics_server, self.metrics_port = serve_prometheus(
                self.metrics, self.metrics_host, self.metrics_port
            )
        if member is not None:
            cluster_quotas = await self._connect_to_cluster(member)
        for server in self.socket_servers:
            server.start()
        if member is not None:
            await self._join_cluster(member, cluster_quotas)

    async def _connect_to_cluster(self, cluster: ClusterMember) -> ClientQuotaApis:
        """Cluster mode, before the listeners serve: ZooKeeper joined and the users' SCRAM
        credentials read (a broker restarted under load refused clients' and brokers' logins
        with "Invalid user credentials" while it had not read them), then followed, as the
        quotas are, through their znodes' change notifications."""
        credentials = ZkCredentials(cluster.zk, self.credentials)
        cluster.config_handlers.setdefault("users", []).append(credentials.config_changed)
        # quotas follow their znodes' change notifications from the first one on, then are read
        quota_apis = ClientQuotaApis(self.quotas, ZkQuotaStore(cluster.zk))
        for kind in ("users", "clients", "ips"):
            cluster.config_handlers.setdefault(kind, []).append(quota_apis.config_changed)
        assert self.dynamic is not None
        cluster.config_handlers.setdefault("brokers", []).append(self.dynamic.config_changed)
        await asyncio.get_running_loop().run_in_executor(None, cluster.connect)
        return quota_apis

    async def _join_cluster(self, cluster: ClusterMember, quota_apis: ClientQuotaApis) -> None:
        """Cluster mode: the controller's requests served, then registration and the controller started
        (the listener serves first: the controller sends to a broker as soon as it is registered)."""
        assert self.replicas is not None
        self.cluster = cluster
        controller_apis = ControllerApis(
            self.replicas,
            lambda: cluster.broker_epoch,
            lambda: cluster.controller,
            self.listeners.inter_broker,
            self.authorizer,
        )
        self.controller_apis = controller_apis
        cluster_admin = ClusterAdminApis(lambda: cluster.controller, self.replicas.metadata, self.authorizer)
        self._modules += [controller_apis.routes(), cluster_admin.routes()]
        self._route()
        await asyncio.get_running_loop().run_in_executor(None, cluster.register)
        await quota_apis.load()
        assert self.dynamic is not None
        await self.dynamic.load()
        self._modules.append(quota_apis.routes())
        self._route()

    def _broker_epoch(self) -> int:
        """This broker's registration in ZooKeeper (KIP-380), which AlterPartition carries; -1 before."""
        return self.cluster.broker_epoch if self.cluster is not None else -1

    def _claim_producer_id_block(self) -> tuple[int, int]:
        """A block of producer ids claimed in ZooKeeper, whose blocks the brokers share."""
        if self.cluster is None:  # retriable: the client asks again once the broker has joined
            raise CoordinatorNotAvailableError("producer ids come from ZooKeeper, which this broker has not joined yet")
        return self.cluster.zk.claim_producer_id_block(self.config["broker.id"], BLOCK_SIZE)[1:]

    def _socket_server(self, listener: Listener) -> SocketServer:
        tls = listener.protocol in ("SSL", "SASL_SSL")
        transport = transport_factory(self.config, listener.name) if tls else None
        authenticator = None
        if listener.protocol in SASL_PROTOCOLS:
            sasl = listener_sasl(self.config, listener.name, self.credentials)
            authenticator = functools.partial(SaslAuthenticator, sasl)
        return SocketServer(
            listener.bound.host,
            listener.bound.port,
            self._handle,
            self.served,
            self.config["socket.request.max.bytes"],
            self.metrics,
            _answers_at_once,
            listener=listener.name,
            transport=transport,
            authenticator=authenticator,
            max_idle_ms=self.config["connections.max.idle.ms"],
            connection_quotas=self.connection_quotas,
        )

    def _served_listeners(self) -> list[tuple[SocketServer, Listener]]:
        return list(zip(self.socket_servers, self.listeners.listeners, strict=True))

    def _broker_info(self) -> BrokerInfo:
        """This broker as metadata gives it: the inter-broker listener's address, and each
        listener's advertised one (its bound port when it advertises port 0)."""
        endpoints = tuple(
            (x.name, advertised_host(x.advertised.host), x.advertised.port or s.port)
            for s, x in self._served_listeners()
        )
        _, host, port = next(e for e in endpoints if e[0] == self.listeners.inter_broker)
        return BrokerInfo(self.config["broker.id"], host, port, endpoints=endpoints)

    async def _stop_listening(self) -> None:
        for server in self.socket_servers:
            await server.stop()

    async def shutdown(self) -> None:
        log.info("broker stopping")
        if self.cluster is not None:  # leaders moved off first (controlled shutdown), while still serving
            cluster, self.cluster = self.cluster, None
            await asyncio.get_running_loop().run_in_executor(None, cluster.shutdown)
        await self._stop_listening()
        self.authorizer.shutdown()
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
        authenticator = conn.authenticator
        if authenticator is not None and authenticator.takes(request):  # SASL's, or refused before it
            return await authenticator.handle(request, conn)
        context = conn.request_context  # the last request's: a client's id stays what it was, nearly always
        if context is None or context.client_id != (header.client_id or ""):
            context = conn.request_context = RequestContext(
                header.client_id or "", client_host(conn.peer), conn.server.listener, conn.principal or ANONYMOUS
            )
            # set in the connection's context, where its every handler runs: it stays set until
            # the next new one (setting a context variable copies the context's map)
            set_current_request(context)
        handler = self.routes[key].handler
        failed = True
        handler_ns = 0  # its time on the loop, when a request quota counts it
        quotas = self.quotas.configs  # none set anywhere (nearly always): nothing is counted
        try:
            if handler is None:  # ApiVersions: the served ranges, or UNSUPPORTED_VERSION at v0 (KIP-511)
                body = conn.protocol.api_versions_body(request)
            elif quotas and self.throttler.before(request, context):  # True: its handler's time counts
                body, handler_ns = await timed(handler(header.api_version, request.body))
            else:
                body = await handler(header.api_version, request.body)
            failed = False
        finally:
            self.metrics.request(_API_NAMES[key], time.perf_counter() - started, failed)
        if quotas:
            throttle_ms = self.throttler.throttle(request, body, handler_ns, context)
            if throttle_ms:
                await self._hold_back(request, body, conn, throttle_ms)
        return body

    async def _hold_back(self, request: Request, body: Any, conn: Connection, throttle_ms: int) -> None:
        """A throttled client held back (KIP-219): muted after its answer (or none, to an
        acks=0 produce), or an older one answered only once the throttle time has passed."""
        if body is None or self.throttler.client_throttles(request):
            conn.mute(throttle_ms / 1000)
        else:
            await asyncio.sleep(throttle_ms / 1000)
