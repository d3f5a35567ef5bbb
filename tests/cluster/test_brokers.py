"""Three ``seglog broker`` processes and a real ZooKeeper form a cluster: the controller inside a
broker, its requests over the wire, clients (confluent-kafka) served by the leaders.

One cluster for the module, its tests in order: a topic created and served; the controller's
broker killed and brought back; a broker paused past its session; ZooKeeper restarted; a topic
deleted. Followers fetch from their leaders: a returned broker rejoins the ISRs by itself
(tests/cluster/test_replication.py checks the data).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kazoo.client import KazooClient

import seglog.broker
from seglog.broker.controller_channel_manager import ControllerChannelManager
from seglog.client import connect
from seglog.cluster import znodes
from seglog.cluster.assignment import BrokerMetadata, assign_replicas_to_brokers
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer, free_port
from seglog.common import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from seglog.errors import ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    FetchRequestData,
    FetchResponseData,
    MetadataRequestData,
    MetadataResponseData,
    StopReplicaRequestData,
    StopReplicaResponseData,
    UpdateMetadataRequestData,
)
from seglog.tools.cluster import LocalCluster

from .conftest import delivered, text, wait_until

TOPIC = "orders"
NOT_LEADER_OR_FOLLOWER = 6
STALE_CONTROLLER_EPOCH = 11
STALE_BROKER_EPOCH = 77
SESSION_TIMEOUT_MS = 4000
OVERRIDES = [
    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "auto.leader.rebalance.enable=true",
    "leader.imbalance.check.interval.seconds=1",
    "controlled.shutdown.retry.backoff.ms=200",
    "log.flush.interval.messages=1",
]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path("/brokers-test")
    admin.stop()
    admin.close()
    connect = zookeeper.connect_string + "/brokers-test"
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), 3, zookeeper=connect, port=None, overrides=OVERRIDES)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[ZkClient]:
    with ZkClient(cluster.zookeeper_connect, session_timeout_ms=SESSION_TIMEOUT_MS) as client:
        yield client


def metadata(address: str, topics: list[str] | None = None) -> MetadataResponseData:
    with connect(address, timeout=10) as client:
        body = MetadataRequestData(
            topics=None if topics is None else [MetadataRequestData.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        answer: MetadataResponseData = client.request(ApiKey.METADATA, body, version=12)
        return answer


def partitions(address: str, topic: str = TOPIC) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """partition -> (leader, replicas, isr) as one broker tells clients."""
    found = [t for t in metadata(address).topics if t.name == topic]
    if not found:
        return {}
    return {p.partition_index: (p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in found[0].partitions}


def fetch_error(address: str, topic: str, partition: int) -> int:
    body = FetchRequestData(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchRequestData.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequestData.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    with connect(address, timeout=10) as client:
        answer: FetchResponseData = client.request(ApiKey.FETCH, body, version=12)
        return answer.responses[0].partitions[0].error_code


def live(cluster: LocalCluster) -> list[str]:
    return [b.address for b in cluster.brokers.values() if b.running]


def agree(cluster: LocalCluster, topic: str = TOPIC) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """What every live broker says of ``topic``, once they all say the same."""
    seen: list[dict] = []

    def same() -> bool:
        seen[:] = [partitions(a, topic) for a in live(cluster)]
        return bool(seen[0]) and all(s == seen[0] for s in seen)

    wait_until(same, what=f"the brokers to agree on {topic}")
    return seen[0]


def produce_and_consume(cluster: LocalCluster, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": ",".join(live(cluster)), "acks": "all"})
    failed: list[Any] = []
    for i in range(count):
        producer.produce(
            TOPIC, f"{tag}-{i}".encode(), partition=i % 6, on_delivery=lambda e, m: failed.extend([e] if e else [])
        )
    assert producer.flush(30) == 0
    assert failed == []
    consumer = Consumer({"bootstrap.servers": ",".join(live(cluster)), "group.id": tag, "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(TOPIC, p, 0) for p in range(6)])
    got: dict[int, list[str]] = {}
    try:

        def read() -> bool:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None and text(m).startswith(tag):
                got.setdefault(delivered(m)[0], []).append(text(m))
            return sum(map(len, got.values())) >= count

        wait_until(read, 30, "the records to come back")
    finally:
        consumer.close()
    for p, values in got.items():
        assert values == [f"{tag}-{i}" for i in range(count) if i % 6 == p]


def test_a_topic_is_assigned_by_the_controller_and_served_by_its_leaders(cluster: LocalCluster, zk: ZkClient) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 6, 3)], operation_timeout=30)[TOPIC].result(60)

    assignment = {p: a.replicas for p, a in zk.get_topic(TOPIC).partitions.items()}  # type: ignore[union-attr]
    brokers = [BrokerMetadata(b) for b in (1, 2, 3)]
    kafkas = [
        assign_replicas_to_brokers(brokers, 6, 3, start_index=s, replica_shift=k) for s in range(3) for k in range(3)
    ]
    assert assignment in kafkas
    state = agree(cluster)
    assert state == {p: (r[0], r, r) for p, r in assignment.items()}  # preferred leaders, everyone in sync
    controller = zk.get_controller_id()
    for address in live(cluster):
        answer = metadata(address)
        assert answer.controller_id == controller
        assert answer.cluster_id == zk.get_cluster_id()
        assert sorted(b.node_id for b in answer.brokers) == [1, 2, 3]

    produce_and_consume(cluster, 60, "first")
    leader, replicas, _ = state[0]
    follower = cluster.brokers[replicas[1]]
    assert fetch_error(follower.address, TOPIC, 0) == NOT_LEADER_OR_FOLLOWER
    assert fetch_error(cluster.brokers[leader].address, TOPIC, 0) == 0


def test_a_request_of_an_older_controller_or_broker_epoch_is_refused(cluster: LocalCluster, zk: ZkClient) -> None:
    epoch = zk.get_controller_epoch()[0]  # type: ignore[index]
    broker = cluster.brokers[2]
    czxid = zk.get(znodes.broker_path(2))[1].czxid  # type: ignore[index]
    with connect(broker.address, timeout=10) as client:
        older = UpdateMetadataRequestData(controller_id=1, controller_epoch=epoch - 1, broker_epoch=czxid)
        assert client.request(ApiKey.UPDATE_METADATA, older, version=7).error_code == STALE_CONTROLLER_EPOCH
        stale = UpdateMetadataRequestData(controller_id=1, controller_epoch=epoch, broker_epoch=czxid - 1)
        assert client.request(ApiKey.UPDATE_METADATA, stale, version=7).error_code == STALE_BROKER_EPOCH
    assert sorted(b.node_id for b in metadata(broker.address).brokers) == [1, 2, 3]  # nothing changed


def test_the_controller_fails_over_and_its_broker_comes_back_as_a_follower(cluster: LocalCluster, zk: ZkClient) -> None:
    before = agree(cluster)
    dead = zk.get_controller_id()
    assert dead is not None
    epoch = zk.get_controller_epoch()[0]  # type: ignore[index]
    cluster.brokers[dead].kill()

    wait_until(lambda: zk.get_controller_id() not in (None, dead), what="another controller")
    assert zk.get_controller_epoch()[0] > epoch  # type: ignore[index]
    # the dead broker leaves the ISRs (and leaderships: leader -1) in one round of requests, the new
    # leaders are elected in the next
    wait_until(
        lambda: all(dead not in isr and leader in isr for leader, _, isr in agree(cluster).values()),
        what="new leaders and ISRs without the dead broker",
    )
    after = agree(cluster)
    for p, (leader, replicas, isr) in after.items():
        assert replicas == before[p][1]
        assert leader != dead and leader in before[p][2]
        assert isr == tuple(r for r in before[p][2] if r != dead)
    produce_and_consume(cluster, 30, "failover")

    cluster.start_broker(dead)
    wait_until(lambda: zk.get(znodes.broker_path(dead)) is not None, what="the registration back")
    wait_until(lambda: partitions(cluster.brokers[dead].address) == after, what="the returned broker's metadata")
    led_before = [p for p, (leader, _, _) in before.items() if leader == dead]
    assert led_before
    for p in led_before:  # it holds a replica and does not lead it: a follower
        assert fetch_error(cluster.brokers[dead].address, TOPIC, p) == NOT_LEADER_OR_FOLLOWER

    # the leaders' fetchers see it catch up and ask the controller to put it back in the ISR
    # (AlterPartition); then the auto rebalance (every second here) gives leadership back to the
    # preferred replicas
    wait_until(
        lambda: all(dead in isr for _, _, isr in agree(cluster).values()), what="the returned broker back in the ISRs"
    )
    wait_until(
        lambda: all(leader == replicas[0] for leader, replicas, _ in agree(cluster).values()),
        what="leadership back on the preferred replicas",
    )
    produce_and_consume(cluster, 30, "preferred")


def test_a_paused_broker_loses_its_registration_and_gets_it_back(cluster: LocalCluster, zk: ZkClient) -> None:
    controller = zk.get_controller_id()
    paused = next(b for b in (1, 2, 3) if b != controller)
    other = next(b for b in (1, 2, 3) if b not in (controller, paused))
    czxid = zk.get(znodes.broker_path(paused))[1].czxid  # type: ignore[index]
    cluster.brokers[paused].signal(signal.SIGSTOP)
    try:
        wait_until(lambda: zk.get(znodes.broker_path(paused)) is None, what="the session to expire")

        def told() -> bool:
            return paused not in [b.node_id for b in metadata(cluster.brokers[other].address).brokers]

        wait_until(told, what="the others to be told")
    finally:
        cluster.brokers[paused].signal(signal.SIGCONT)
    wait_until(lambda: zk.get(znodes.broker_path(paused)) is not None, what="the registration back")
    assert zk.get(znodes.broker_path(paused))[1].czxid > czxid  # type: ignore[index]
    wait_until(
        lambda: paused in [b.node_id for b in metadata(cluster.brokers[other].address).brokers],
        what="the others to see it back",
    )


def test_brokers_reconnect_after_zookeeper_restarts(
    cluster: LocalCluster, zk: ZkClient, zookeeper: ZooKeeperServer
) -> None:
    zookeeper.restart()
    # the brokers' sessions may have expired meanwhile: then they register again and are told so
    wait_until(lambda: zk.get_broker_ids() == [1, 2, 3] and zk.get_controller_id() is not None, 60, "the brokers")
    # what the brokers served before the restart still names all three, and a session may still expire (a
    # broker slow to reconnect): the topic can be made once the broker that creates it knows three again
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def created() -> bool:
        try:
            admin.create_topics([NewTopic("after-restart", 3, 3)], operation_timeout=30)["after-restart"].result(60)
        except KafkaException as e:
            if e.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR:
                return False
            raise
        return True

    wait_until(created, 60, "three live brokers to create a topic on")
    state = agree(cluster, "after-restart")
    assert sorted(state) == [0, 1, 2]
    assert all(leader in replicas and len(replicas) == 3 for leader, replicas, _ in state.values()), state
    cluster.wait_until_formed()


def test_topic_configs_and_partitions_change_through_zookeeper(cluster: LocalCluster, zk: ZkClient) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].address})
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", "after-restart", incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert zk.get_topic_config("after-restart") == {"retention.ms": "3600000"}

    def applied(broker: int) -> bool:  # every replica's log took the override (its topic-configs.json)
        text = (cluster.brokers[broker].log_dir / "topic-configs.json").read_text()
        return json.loads(text)["topics"]["after-restart"]["config"].get("retention.ms") == 3600000

    for b in (1, 2, 3):
        wait_until(functools.partial(applied, b), what=f"broker {b} to apply the config")
    other = AdminClient({"bootstrap.servers": cluster.brokers[3].address})
    (entries,) = [f.result(30) for f in other.describe_configs([ConfigResource("topic", "after-restart")]).values()]
    assert entries["retention.ms"].value == "3600000"

    admin.create_partitions([NewPartitions("after-restart", 4)])["after-restart"].result(30)
    assert sorted(agree(cluster, "after-restart")) == [0, 1, 2, 3]


def test_metadata_creates_a_topic_through_the_controller(cluster: LocalCluster, zk: ZkClient) -> None:
    def created() -> bool:
        with connect(cluster.brokers[2].address, timeout=10) as client:
            body = MetadataRequestData(
                topics=[MetadataRequestData.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True
            )
            topic = client.request(ApiKey.METADATA, body, version=12).topics[0]
        return bool(topic.error_code == ErrorCode.NONE and len(topic.partitions) == 1)  # num.partitions

    wait_until(created, what="the topic made on demand")
    assert zk.get_topic("auto") is not None


def test_every_broker_marks_the_internal_topics_internal(cluster: LocalCluster, zk: ZkClient) -> None:
    """Kafka's Topic.isInternal is a fact of the name: each broker of a cluster answers it for the
    coordinators' topics, whose metadata it learned from the controller's UpdateMetadata (before,
    only a broker alone said so, and clients listed __consumer_offsets as a user topic)."""
    names = [GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, "auto"]
    request = MetadataRequestData(
        topics=[MetadataRequestData.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=True
    )

    def internal(address: str) -> dict[str | None, bool] | None:
        with connect(address, timeout=10) as client:
            topics = client.request(ApiKey.METADATA, request, version=12).topics
        if any(t.error_code != ErrorCode.NONE or not t.partitions for t in topics):
            return None  # still being created
        return {t.name: t.is_internal for t in topics}

    for address in [b.address for b in cluster.brokers.values()]:
        wait_until(functools.partial(internal, address), what=f"the topics' metadata from {address}")
        assert internal(address) == {GROUP_METADATA_TOPIC: True, TRANSACTION_STATE_TOPIC: True, "auto": False}


def test_a_stopping_broker_moves_its_leaders_off_first(cluster: LocalCluster, zk: ZkClient) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("shutdown", 3, 3)], operation_timeout=30)["shutdown"].result(60)
    state = agree(cluster, "shutdown")
    stopping = 3
    led = next(p for p, (leader, _, isr) in state.items() if leader == stopping and len(isr) == 3)
    # ZooKeeper tells one session its changes in order: the new leader must come before the goodbye
    events: list[str] = []
    observer = KazooClient(hosts=cluster.zookeeper_connect)
    observer.start()
    try:

        @observer.DataWatch(znodes.partition_state_path("shutdown", led))
        def moved(data: bytes | None, _stat: Any) -> None:
            if data and json.loads(data)["leader"] != stopping and "moved" not in events:
                events.append("moved")

        @observer.ChildrenWatch(znodes.BROKER_IDS)
        def gone(children: list[str]) -> None:
            if str(stopping) not in children and "unregistered" not in events:
                events.append("unregistered")

        cluster.brokers[stopping].stop()  # SIGTERM: controlled shutdown, then the close
        wait_until(lambda: len(events) == 2, what="the leader moved and the broker gone")
    finally:
        observer.stop()
        observer.close()
    assert events == ["moved", "unregistered"]
    cluster.start_broker(stopping)
    wait_until(lambda: zk.get_broker_ids() == [1, 2, 3], what="the broker back")


def test_a_deleted_topic_goes_from_every_broker(cluster: LocalCluster, zk: ZkClient) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(60)
    wait_until(lambda: all(partitions(a) == {} for a in live(cluster)), what="the topic gone from metadata")
    wait_until(lambda: zk.get(znodes.topic_path(TOPIC)) is None, what="the topic znode gone")

    def no_logs() -> bool:
        dirs = [n for b in cluster.brokers.values() for n in os.listdir(b.log_dir)]
        return not [n for n in dirs if n.startswith(f"{TOPIC}-") and not n.endswith("-delete")]

    wait_until(no_logs, what="the partition dirs deleted")


def test_cluster_up_starts_and_stops_a_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    connect = zookeeper.connect_string
    kazoo = KazooClient(hosts=connect)
    kazoo.start()
    kazoo.ensure_path("/cluster-up")
    kazoo.stop()
    kazoo.close()
    args = [sys.executable, "-m", "seglog.cli", "cluster", "up", "--brokers", "2", "--dir", str(tmp_path)]
    args += ["--zookeeper", f"{connect}/cluster-up", "--port", "0"]
    # stopping together, no broker can take the others' leaders: each retries its controlled shutdown
    args += ["--override", "controlled.shutdown.retry.backoff.ms=100"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"zookeeper.connect={connect}/cluster-up"
        line = proc.stdout.readline()
        assert line.startswith("bootstrap servers: 127.0.0.1:"), line
        bootstrap = line.split()[-1]
        assert bootstrap.split(",")[1].startswith("127.0.0.2:")
        topics = [sys.executable, "-m", "seglog.cli", "topics", "--bootstrap-server", bootstrap]
        create = [*topics, "--create", "--topic", "t", "--partitions", "2", "--replication-factor", "2"]
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        described = subprocess.run([*topics, "--describe", "--topic", "t"], capture_output=True, text=True, timeout=60)
        lines = [line for line in described.stdout.splitlines() if "Partition: " in line]
        assert len(lines) == 2
        for line in lines:
            fields = dict(f.split(": ") for f in line.strip().split("\t"))
            replicas = fields["Replicas"].split(",")
            assert sorted(replicas) == ["1", "2"] and fields["Leader"] == replicas[0]
            assert fields["Isr"] == fields["Replicas"]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0
        assert out.strip().endswith("stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_channel_resends_until_a_broker_answers(chroot: str, tmp_path: Path) -> None:
    """A request queued while its broker is down goes out once the broker serves, in order."""
    port = free_port()
    broker = znodes.BrokerRegistration(1, (znodes.EndPoint("PLAINTEXT", "127.0.0.1", port),), 0)
    answers: list[tuple[int, StopReplicaResponseData]] = []
    channel = ControllerChannelManager()
    channel.add_broker(broker)
    try:
        for index in (0, 1):
            request = StopReplicaRequestData(
                controller_id=7,
                controller_epoch=0,
                topic_states=[
                    StopReplicaRequestData.StopReplicaTopicState(
                        topic_name="gone",
                        partition_states=[
                            StopReplicaRequestData.StopReplicaPartitionState(
                                partition_index=index, leader_epoch=-1, delete_partition=True
                            )
                        ],
                    )
                ],
            )
            channel.send(1, request, lambda b, r: answers.append((b, r)))
        with seglog.broker.start(str(tmp_path), port, {"zookeeper.connect": chroot, "broker.id": 1}):
            wait_until(lambda: len(answers) == 2, what="both answers")
    finally:
        channel.close()
    assert [(b, [(e.topic_name, e.partition_index) for e in r.partition_errors]) for b, r in answers] == [
        (1, [("gone", 0)]),
        (1, [("gone", 1)]),
    ]


def test_cluster_up_starts_its_zookeeper_on_the_port_given(tmp_path: Path) -> None:
    """A user who must stay in a port range gives ZooKeeper's port too (issue 25 item 6)."""
    zookeeper_port = free_port()
    cli = [sys.executable, "-m", "seglog.cli", "cluster"]
    up = [*cli, "up", "--brokers", "1", "--dir", str(tmp_path), "--port", "0"]
    for wrong, said in (
        (["--zookeeper-port", "70000"], "--zookeeper-port must be a port number"),
        (["--zookeeper-port", str(zookeeper_port), "--zookeeper", "127.0.0.1:2181"], "not with --zookeeper"),
    ):
        refused = subprocess.run([*up, *wrong], capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and said in refused.stderr, refused.stderr
    proc = subprocess.Popen([*up, "--zookeeper-port", str(zookeeper_port)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"zookeeper.connect=127.0.0.1:{zookeeper_port}"
        assert proc.stdout.readline().startswith("bootstrap servers: 127.0.0.1:")
        subprocess.run([*cli, "down", "--dir", str(tmp_path)], check=True, capture_output=True, timeout=120)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
