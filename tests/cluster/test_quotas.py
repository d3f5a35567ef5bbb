"""Client quotas in a cluster of three ``seglog broker`` processes over a real ZooKeeper: a
quota altered through one broker is in ZooKeeper as Kafka 3.x keeps it and is enforced by every
broker within a second (their /config/changes watches); a restarted broker reads it back.
Controller mutations are counted by the broker that receives them, and the dynamic broker
configs (the connection limits) are kept and followed as the quotas are.

A broker enforces a produce quota on the bytes a Produce request carries, whatever becomes of
them: the probe here produces to a topic that does not exist, and the answer's throttle_time_ms
says whether the broker held the client to its quota.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from seglog.cli import main
from seglog.client import BlockingConnection
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.errors import BrokerNotAvailableError, ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.enums import ConfigResourceType, ConfigSource
from seglog.protocol.message_data import CreateTopicsRequestData, CreateTopicsResponseData, ProduceResponseData
from seglog.tools.cluster import BrokerProcess, LocalCluster
from seglog.tools.remote import describe_configs

from ..broker.test_quota_throttling import produce_request
from .conftest import chrooted_local_cluster

CHROOT = "quotas-test"
PROPAGATION_S = 1.0  # the bound: enforced by every broker within a second


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    overrides = ["zookeeper.session.timeout.ms=6000", "controlled.shutdown.enable=false"]
    with chrooted_local_cluster(zookeeper, tmp_path_factory.mktemp("quotas"), CHROOT, 3, overrides) as local:
        yield local


@pytest.fixture
def zk(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=f"{zookeeper.connect_string}/{CHROOT}")
    client.start()
    try:
        yield client
    finally:
        client.stop()
        client.close()


def throttle_ms(broker: BrokerProcess, client_id: str) -> int:
    """The throttle time of a 4 KiB produce from ``client_id`` (a connection of its own: a
    throttled one is muted)."""
    with BlockingConnection(broker.host, broker.port, client_id, timeout=10) as conn:
        answer: ProduceResponseData = conn.request(ApiKey.PRODUCE, produce_request(4096))
    return answer.throttle_time_ms


def seglog_configs(broker: BrokerProcess, *argv: str) -> None:
    assert main(["configs", "--bootstrap-server", broker.address, *argv]) == 0


def enforced_within(cluster: LocalCluster, client_id: str, throttled: bool, since: float) -> list[float]:
    """For each broker, how long after ``since`` its answers to ``client_id`` were first
    throttled (or no longer): polled until PROPAGATION_S is out (and a little past it, to tell
    late from never)."""
    took = []
    for broker in cluster.brokers.values():
        while (throttle_ms(broker, client_id) > 0) != throttled:
            assert time.monotonic() - since < 10 * PROPAGATION_S, f"broker {broker.broker_id} never followed"
            time.sleep(0.01)
        took.append(time.monotonic() - since)
    return took


def test_a_quota_altered_through_one_broker_is_enforced_by_all(cluster: LocalCluster, zk: KazooClient) -> None:
    brokers = list(cluster.brokers.values())
    assert all(throttle_ms(b, "capped") == 0 for b in brokers)
    seglog_configs(brokers[0], "--alter", "--entity-type", "clients", "--entity-name", "capped", "--add-config",
                   "producer_byte_rate=100")  # fmt: skip
    altered = time.monotonic()
    assert max(enforced_within(cluster, "capped", True, altered)) < PROPAGATION_S
    # as Kafka keeps it, and the notification every broker read
    data, _ = zk.get("/config/clients/capped")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "100"}}
    changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "clients/capped"} in changes
    # another client id is not held back
    assert all(throttle_ms(b, "free") == 0 for b in brokers)

    seglog_configs(brokers[1], "--alter", "--entity-type", "clients", "--entity-name", "capped", "--delete-config",
                   "producer_byte_rate")  # fmt: skip
    removed = time.monotonic()
    assert max(enforced_within(cluster, "capped", False, removed)) < PROPAGATION_S


def test_a_users_other_keys_are_kept(cluster: LocalCluster, zk: KazooClient) -> None:
    """A user's znode holds its SCRAM credentials beside its quotas: a quota change keeps them."""
    credential = "salt=c2FsdA==,stored_key=c3Q=,server_key=c2s=,iterations=4096"
    zk.create("/config/users/alice", json.dumps({"version": 1, "config": {"SCRAM-SHA-256": credential}}).encode())
    broker = cluster.brokers[2]
    seglog_configs(broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-default", "--add-config", "consumer_byte_rate=2048")  # fmt: skip
    seglog_configs(broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
                   "producer_byte_rate=1024")  # fmt: skip
    config = json.loads(zk.get("/config/users/alice")[0])["config"]
    assert config == {"SCRAM-SHA-256": credential, "producer_byte_rate": "1024"}
    nested = json.loads(zk.get("/config/users/alice/clients/<default>")[0])
    assert nested == {"version": 1, "config": {"consumer_byte_rate": "2048"}}
    seglog_configs(broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
                   "producer_byte_rate")  # fmt: skip
    assert json.loads(zk.get("/config/users/alice")[0])["config"] == {"SCRAM-SHA-256": credential}


def test_a_restarted_broker_reads_the_quotas_back(cluster: LocalCluster) -> None:
    seglog_configs(cluster.brokers[1], "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                   "producer_byte_rate=100")  # fmt: skip
    try:
        restarted = cluster.brokers[3]
        restarted.stop()
        cluster.start_broker(3)
        assert throttle_ms(restarted, "anyone") > 0
    finally:
        seglog_configs(cluster.brokers[1], "--alter", "--entity-type", "clients", "--entity-default",
                       "--delete-config", "producer_byte_rate")  # fmt: skip


def served_from(broker: BrokerProcess, source: str) -> bool:
    """Whether a new connection from ``source`` is answered (ApiVersions); a throttled one is
    closed unanswered once its throttle time (a second at most) is up."""
    try:
        BlockingConnection(broker.host, broker.port, "ip-probe", timeout=30, source_host=source).close()
    except BrokerNotAvailableError:
        return False
    return True


def test_an_ip_quota_altered_through_one_broker_is_enforced_by_all(cluster: LocalCluster, zk: KazooClient) -> None:
    brokers = list(cluster.brokers.values())
    ip = ("--entity-type", "ips", "--entity-name", "127.0.0.2")
    seglog_configs(brokers[0], "--alter", *ip, "--add-config", "connection_creation_rate=1")
    try:
        assert json.loads(zk.get("/config/ips/127.0.0.2")[0]) == {
            "version": 1,
            "config": {"connection_creation_rate": "1"},
        }
        # 1 a second over the rate's 10 s: each broker stops serving 127.0.0.2 within a dozen
        # connections once the notification reached it; 127.0.0.1 (the brokers' own) goes on
        deadline = time.monotonic() + 30
        for broker in brokers:
            while served_from(broker, "127.0.0.2"):
                assert time.monotonic() < deadline, f"broker {broker.broker_id} never enforced it"
            assert served_from(broker, "127.0.0.1")
    finally:
        seglog_configs(brokers[1], "--alter", *ip, "--delete-config", "connection_creation_rate")
    deadline = time.monotonic() + 30
    for broker in brokers:
        while not served_from(broker, "127.0.0.2"):
            assert time.monotonic() < deadline, f"broker {broker.broker_id} never lifted it"
            time.sleep(0.05)


def create_topics(broker: BrokerProcess, client_id: str, **partitions: int) -> CreateTopicsResponseData:
    """CreateTopics v7 (KIP-599's strict version) from ``client_id``, to ``broker``."""
    Topic = CreateTopicsRequestData.CreatableTopic
    topics = [Topic(name=name, num_partitions=n, replication_factor=1) for name, n in partitions.items()]
    with BlockingConnection(broker.host, broker.port, client_id, timeout=60) as conn:
        answer: CreateTopicsResponseData = conn.request(
            ApiKey.CREATE_TOPICS, CreateTopicsRequestData(topics=topics, timeout_ms=30_000), 7
        )
    return answer


def test_controller_mutations_are_counted_by_the_broker_that_receives_them(cluster: LocalCluster) -> None:
    brokers = list(cluster.brokers.values())
    # one change of one entity: the produce quota shows when a broker has applied both
    seglog_configs(brokers[0], "--alter", "--entity-type", "clients", "--entity-name", "mutator", "--add-config",
                   "controller_mutation_rate=0.5,producer_byte_rate=100")  # fmt: skip
    enforced_within(cluster, "mutator", True, time.monotonic())
    # a burst of 5 partitions (0.5 a second over the 10 whole windows of 1 s): on each broker the
    # first two topics are let through, the third refused, whatever the others counted, as each
    # of Kafka's brokers counts the mutations it receives
    for broker in brokers:
        prefix = f"mut{broker.broker_id}"
        answer = create_topics(broker, "mutator", **{f"{prefix}a": 5, f"{prefix}b": 5, f"{prefix}c": 1})
        errors = [t.error_code for t in answer.topics]
        assert errors == [0, 0, ErrorCode.THROTTLING_QUOTA_EXCEEDED], broker.broker_id
        assert answer.throttle_time_ms > 0
        assert answer.topics[2].error_message == "The throttling quota has been exceeded."
        # another client id on the same broker is not held back
        assert [t.error_code for t in create_topics(broker, "other", **{f"{prefix}free": 1}).topics] == [0]
    seglog_configs(brokers[0], "--alter", "--entity-type", "clients", "--entity-name", "mutator", "--delete-config",
                   "controller_mutation_rate,producer_byte_rate")  # fmt: skip


def broker_config(broker: BrokerProcess, key: str) -> tuple[str | None, int] | None:
    """``key``'s value and source as ``broker`` describes its own configs (None: not there)."""
    with BlockingConnection(broker.host, broker.port, "config-probe", timeout=30) as conn:
        entries = describe_configs(conn, ConfigResourceType.BROKER, str(broker.broker_id))
    return next(((e.value, e.config_source) for e in entries if e.name == key), None)


def followed_by_all(cluster: LocalCluster, key: str, wanted: dict[int, tuple[str | None, int]]) -> None:
    deadline = time.monotonic() + 30
    for broker_id, value in wanted.items():
        while broker_config(cluster.brokers[broker_id], key) != value:
            assert time.monotonic() < deadline, f"broker {broker_id} never followed"
            time.sleep(0.05)


def test_dynamic_broker_configs_are_kept_in_zookeeper_and_followed_by_every_broker(
    cluster: LocalCluster, zk: KazooClient
) -> None:
    brokers = list(cluster.brokers.values())
    ids = [b.broker_id for b in brokers]
    default = ("--entity-type", "brokers", "--entity-default")
    seglog_configs(brokers[0], "--alter", *default, "--add-config", "max.connections=5000")
    assert json.loads(zk.get("/config/brokers/<default>")[0]) == {"version": 1, "config": {"max.connections": "5000"}}
    followed_by_all(cluster, "max.connections", {i: ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) for i in ids})
    own = ("--entity-type", "brokers", "--entity-name", str(ids[2]))
    seglog_configs(brokers[1], "--alter", *own, "--add-config", "max.connections=4000")
    assert json.loads(zk.get(f"/config/brokers/{ids[2]}")[0]) == {"version": 1, "config": {"max.connections": "4000"}}
    changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": f"brokers/{ids[2]}"} in changes
    wanted = {i: ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) for i in ids[:2]}
    followed_by_all(cluster, "max.connections", {**wanted, ids[2]: ("4000", ConfigSource.DYNAMIC_BROKER_CONFIG)})
    seglog_configs(brokers[0], "--alter", *own, "--delete-config", "max.connections")
    seglog_configs(brokers[0], "--alter", *default, "--delete-config", "max.connections")
    followed_by_all(cluster, "max.connections", {i: (str(2**31 - 1), ConfigSource.DEFAULT_CONFIG) for i in ids})
