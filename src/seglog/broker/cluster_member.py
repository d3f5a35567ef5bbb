"""A broker's part in a ZooKeeper cluster (``zookeeper.connect`` set): what Kafka's ``KafkaServer``
does with its ``KafkaZkClient``.

At start-up, after the listener serves: the persistent paths made, ``/cluster/id`` read or
created, the ephemeral ``/brokers/ids/<id>`` registered (again after every session expiry:
``ZkClient`` does it), and the broker's ``KafkaController`` started: it stands in every
election, and the elected one sends its requests through a ``ControllerChannelManager``.
Admin requests write what Kafka's ``AdminZkClient`` writes (``/brokers/topics/<t>`` with an
assignment, ``/admin/delete_topics/<t>``, ``/config/topics/<t>`` and a ``/config/changes``
notification) and the controller acts on it. Config changes (of topics, users and clients)
reach every broker through ``/config/changes``, which each broker watches. At shutdown
(``controlled.shutdown.enable``) the broker asks the controller to move its leaders off
first, as Kafka's does.

All calls here block: the broker runs them in a thread.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..client import BlockingConnection
from ..cluster import admin_zk_client, znodes
from ..cluster.controller import KafkaController
from ..cluster.controller_channel import endpoint_of
from ..cluster.zk_client import ZkClient, generate_cluster_id
from ..config import BrokerConfig, LogConfig, validate_topic_config
from ..errors import (
    BrokerNotAvailableError,
    ErrorCode,
    SeglogError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    ZooKeeperError,
    error_for,
)
from ..protocol import ApiKey
from ..protocol.message_data import ControlledShutdownRequestData
from .controller_channel_manager import SOCKET_TIMEOUT_S, ControllerChannelManager
from .endpoint import broker_listeners
from .inter_broker import inter_broker_security
from .metadata_cache import BrokerInfo
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3


class ClusterMember:
    def __init__(self, config: BrokerConfig, broker: BrokerInfo, replicas: ReplicaManager) -> None:
        self.config = config
        self.broker = broker
        self.replicas = replicas
        self.listeners = broker_listeners(config)
        self.zk = ZkClient(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
        )
        self.security = inter_broker_security(config)  # how this broker reaches the others
        self.channel = ControllerChannelManager(self.listeners.inter_broker, self.security)
        self.controller: KafkaController | None = None
        self._config_change_seen = ""
        # what each kind of entity's config change notification does (``users/alice`` -> "users"),
        # on the ZooKeeper client's event thread; the server adds the users' and clients' quotas
        self.config_handlers: dict[str, list[Callable[[str], None]]] = {"topics": [self._apply_topic_config]}

    @property
    def broker_epoch(self) -> int:
        return self.zk.broker_epoch

    def connect(self) -> None:
        """ZooKeeper joined and every user's config read (its SCRAM credentials), before the
        listeners serve: a client authenticating meanwhile would be refused for a credential not
        read yet (Kafka enables request processing only once its config manager has read them)."""
        self.zk.start()
        try:
            self.zk.ensure_persistent_paths()
            proposed = self.replicas.metadata.cluster_id or generate_cluster_id()
            cluster_id = self.zk.create_or_get_cluster_id(proposed)
            if cluster_id != proposed:
                log.info("cluster id %s (from ZooKeeper; meta.properties says %s)", cluster_id, proposed)
            self.replicas.metadata.cluster_id = cluster_id
            self.replicas.topic_config_source = self.zk.get_topic_config
            changes = self.zk.watch_children(znodes.CONFIG_CHANGES, self._on_config_changes)
            self._config_change_seen = max(changes, default="")
            self.zk.on_new_session(self._on_config_changes)  # watches end with the session
            # every user's config read once (its SCRAM credentials); the notifications tell of later changes
            for user in self.zk.get_children(f"{znodes.CONFIG}/users"):
                for handler in self.config_handlers.get("users", ()):
                    handler(f"users/{user}")
        except BaseException:
            self.shutdown(controlled=False)
            raise

    def register(self) -> None:
        """This broker registered and the controller started, once the listeners serve: the
        controller sends to a broker as soon as it is registered."""
        try:
            registration = znodes.BrokerRegistration(
                self.broker.broker_id,
                self._endpoints(),
                int(time.time() * 1000),
                rack=self.config["broker.rack"],
            )
            epoch = self.zk.register_broker(registration)
            log.info("broker %d registered in ZooKeeper, broker epoch %d", self.broker.broker_id, epoch)
            self.controller = KafkaController(self.zk, self.broker.broker_id, self.channel, self.config).start()
        except BaseException:
            self.shutdown(controlled=False)
            raise

    def _endpoints(self) -> tuple[znodes.EndPoint, ...]:
        """Each listener's advertised address and protocol, as Kafka registers them."""
        return tuple(
            znodes.EndPoint(name, host, port, self.listeners.named(name).protocol)
            for name, host, port in self.broker.endpoints
        )

    def shutdown(self, controlled: bool = True) -> None:
        if controlled and self.config["controlled.shutdown.enable"] and not self.zk.closed:
            self._controlled_shutdown()
        if self.controller is not None:
            self.controller.stop()
        self.channel.close()
        self.zk.close()

    # --- controlled shutdown ---------------------------------------------------------------------

    def _controlled_shutdown(self) -> None:
        """Kafka's ``controlledShutdown``: ask the controller until this broker leads nothing, at most
        controlled.shutdown.max.retries times, controlled.shutdown.retry.backoff.ms between two
        attempts (none after the last: the last broker of a cluster, which has nowhere to move its
        leaders, waits (max.retries - 1) x backoff, 10 s by default, as Kafka's does)."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        for attempt in range(retries):
            try:
                remaining = self._ask_controller_to_shut_down()
                if not remaining:
                    log.info("controlled shutdown of broker %d done", self.broker.broker_id)
                    return
                log.info("controlled shutdown: broker %d still leads %s", self.broker.broker_id, remaining)
            except SeglogError as e:
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, e)
            left = retries - attempt - 1
            if left:
                time.sleep(backoff)
                log.info("Retrying controlled shutdown (%d retries remaining)", left)
        log.warning("controlled shutdown of broker %d did not finish; stopping anyway", self.broker.broker_id)

    def _ask_controller_to_shut_down(self) -> list[tuple[str, int]]:
        controller_id = self.zk.get_controller_id()
        registration = None if controller_id is None else self.zk.get_broker(controller_id)
        if registration is None:
            raise BrokerNotAvailableError("no controller is registered")
        host, port = endpoint_of(registration, self.listeners.inter_broker)
        client_id = f"broker-{self.broker.broker_id}"
        with BlockingConnection(host, port, client_id, timeout=SOCKET_TIMEOUT_S, security=self.security) as conn:
            body = ControlledShutdownRequestData(broker_id=self.broker.broker_id, broker_epoch=self.broker_epoch)
            answer = conn.request(ApiKey.CONTROLLED_SHUTDOWN, body, CONTROLLED_SHUTDOWN_VERSION)
        if answer.error_code != ErrorCode.NONE:
            what = f"the controller (broker {controller_id}) refused ControlledShutdown"
            raise error_for(answer.error_code, what=what)
        return [(p.topic_name, p.partition_index) for p in answer.remaining_partitions]

    # --- admin, through ZooKeeper ----------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, Any],
        assignment: Mapping[int, list[int]] | None = None,
    ) -> None:
        if assignment:
            admin_zk_client.create_topic_with_assignment(self.zk, name, assignment, config)
        else:
            admin_zk_client.create_topic(self.zk, name, partitions, replication_factor, config)

    def auto_create_topic(self, name: str) -> None:
        """Metadata's auto.create.topics.enable: num.partitions and default.replication.factor; a topic
        another broker made meanwhile is fine."""
        with contextlib.suppress(TopicExistsError):
            self.create_topic(name, self.config["num.partitions"], self.config["default.replication.factor"], {})

    def add_partitions(self, name: str, count: int) -> None:
        admin_zk_client.add_partitions(self.zk, name, count)

    def delete_topic(self, name: str) -> None:
        admin_zk_client.delete_topic(self.zk, name)

    def topic_config(self, name: str) -> LogConfig:
        return LogConfig(self.config, self.topic_overrides(name))

    def topic_overrides(self, name: str) -> dict[str, Any]:
        """A topic's own settings (validated), without resolving the others (see topic_config)."""
        if self.zk.get(znodes.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        return validate_topic_config(self.zk.get_topic_config(name))

    def alter_topic_config(self, name: str, overrides: Mapping[str, Any]) -> None:
        """Kafka's ``changeTopicConfig``: the new overrides, then a notification every broker acts on."""
        self.zk.set_or_create(znodes.topic_config_path(name), znodes.encode_config(validate_topic_config(overrides)))
        self.zk.create_sequential(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}", znodes.encode_config_change(f"topics/{name}")
        )

    def _on_config_changes(self) -> None:
        # the client's event thread: read the new notifications, apply topic changes to the logs held here
        try:
            changes = self.zk.watch_children(znodes.CONFIG_CHANGES, self._on_config_changes)
        except ZooKeeperError as e:  # the session is lost: the next one reads them again
            log.warning("config changes not read: %s", e)
            return
        for change in sorted(c for c in changes if c > self._config_change_seen):
            self._config_change_seen = change
            found = self.zk.get(f"{znodes.CONFIG_CHANGES}/{change}")
            if found is None:
                continue
            try:
                entity_path = znodes.decode_config_change(found[0])
                for handler in self.config_handlers.get(entity_path.partition("/")[0], ()):
                    handler(entity_path)
            except SeglogError:
                log.exception("config change %s not applied", change)

    def _apply_topic_config(self, entity_path: str) -> None:
        topic = entity_path.partition("/")[2]
        self.replicas.apply_topic_config(topic, validate_topic_config(self.zk.get_topic_config(topic)))
