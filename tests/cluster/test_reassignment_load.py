"""Reassignment under load (issue 15's Must-hold): a partition on brokers {1,2,3} (RF=3,
min.insync.replicas=2) moves to {2,3,4} while a confluent-kafka producer writes with acks=all
(recorded by tests/cluster/history.py) and a consumer reads up to the high watermark.

The move is asked for three ways: Kafka's JSON in /admin/reassign_partitions (what Kafka 2.x's
``kafka-reassign-partitions --zookeeper`` wrote), ``seglog reassign-partitions --execute`` with
that JSON in a file, and kafka-python's ``alter_partition_reassignments`` (AlterPartitionReassignments,
KIP-455). Afterwards nothing acknowledged is lost, each replica holds each offset once and the three
logs are byte-identical, the consumer read every offset in order, broker 1 deleted its replica and
led no longer, ``--verify`` reports completion, and no reassignment is listed any more: neither by
ListPartitionReassignments nor in /admin/reassign_partitions.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition

import seglog
from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import delivered, wait_until
from .history import History
from .test_cluster_tools import reassignment_file
from .test_cluster_tools import seglog as run_seglog
from .test_replication import FETCHING, create_topic, segment_bytes, state, wait_until_found, zk_of

OLD, NEW = [1, 2, 3], [2, 3, 4]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Four brokers; small segments, so the moved data spans several of them."""
    with ZkClient(zookeeper.connect_string) as zk:
        zk.ensure_path("/reassign-load")
    overrides = [
        "zookeeper.session.timeout.ms=30000",
        "replica.lag.time.max.ms=5000",
        "controlled.shutdown.enable=false",
        "log.segment.bytes=16384",
        "log.index.size.max.bytes=65536",
    ]
    local = LocalCluster(
        tmp_path_factory.mktemp("reassign-load"),
        4,
        zookeeper=zookeeper.connect_string + "/reassign-load",
        port=None,
        overrides=FETCHING + overrides,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


class Burst(History):
    """History's producer writing in bursts: a produce request is nearly always in flight, so some
    reach the old leader between its followers' last fetch and its StopReplica."""

    def _write(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "acks": "all", "linger.ms": 2})
        n = 0
        while not self._stop.is_set():
            for _ in range(20):
                producer.produce(self.topic, b"record-%d" % n, partition=0, on_delivery=self._delivered)
                n += 1
            producer.poll(0.005)
        producer.flush(60)


class Reader:
    """A confluent-kafka consumer reading partition 0 from offset 0 in a thread, as far as the high
    watermark lets it: every (offset, value) in the order read."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.read: list[tuple[int, bytes | None]] = []
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader", "enable.auto.commit": False}
        )
        self._consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read.extend(delivered(m)[1:] for m in self._consumer.consume(500, 0.1) if m.error() is None)


def bootstrap(cluster: LocalCluster) -> str:
    """Brokers 1 to 3: clients start there while broker 4 is paused."""
    return ",".join(cluster.brokers[b].address for b in OLD)


def offsets_and_values(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes | None]]:
    with seglog.open(broker.log_dir, read_only=True) as logs:
        return [(r.offset, r.value) for r in logs.partition(topic, 0).records(0, end_offset=None)]


def identical(cluster: LocalCluster, topic: str, brokers: list[int]) -> bytes | None:
    logs = [segment_bytes(cluster.brokers[b], topic) for b in brokers]
    return logs[0] if all(log == logs[0] for log in logs) else None


@dataclass
class Move:
    """What a way of asking for the move needs."""

    cluster: LocalCluster
    topic: str
    tmp_path: Path
    capsys: pytest.CaptureFixture[str]
    admin: KafkaAdminClient  # made (and its metadata read) before broker 4 was paused


def reassign_through_zookeeper(move: Move) -> None:
    with zk_of(move.cluster) as zk:
        zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({TopicPartition(move.topic, 0): NEW}))


def reassign_through_the_tool(move: Move) -> None:
    path = reassignment_file(move.tmp_path, move.topic, NEW)
    argv = ["reassign-partitions", "--bootstrap-server", bootstrap(move.cluster), "--execute"]
    code, out, _ = run_seglog(move.capsys, *argv, "--reassignment-json-file", path)
    assert code == 0 and out.endswith(f"Successfully started partition reassignment for {move.topic}-0\n")


def reassign_through_kafka_python(move: Move) -> None:
    results = move.admin.alter_partition_reassignments({KafkaPythonTopicPartition(move.topic, 0): NEW})
    assert results == {KafkaPythonTopicPartition(move.topic, 0): None}


def check_in_progress(cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str], verify: list[str]) -> None:
    """Listed, with broker 4 adding and broker 1 removing, and ``--verify`` says so (kafka-python may
    pick the paused broker 4 to ask: seglog's own client asks the controller)."""
    listing = run_seglog(capsys, "reassign-partitions", "--bootstrap-server", bootstrap(cluster), "--list")
    moving = f"{topic}-0: replicas: 2,3,4,1. adding: 4. removing: 1."
    assert listing[:2] == (0, f"Current partition reassignments:\n{moving}\n")
    status = f"Reassignment of partition {topic}-0 is still in progress."
    assert run_seglog(capsys, *verify)[:2] == (0, f"Status of partition reassignment:\n{status}\n")


@pytest.mark.parametrize(
    "reassign",
    [reassign_through_zookeeper, reassign_through_the_tool, reassign_through_kafka_python],
    ids=["zookeeper", "tool", "kafka-python"],
)
def test_reassignment_under_load_moves_the_data_and_deletes_the_old_replica(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path, reassign: Callable[[Move], None]
) -> None:
    topic = f"moving-{reassign.__name__.rpartition('_')[2]}"
    verify = ["reassign-partitions", "--bootstrap-server", bootstrap(cluster), "--verify"]
    verify += ["--reassignment-json-file", reassignment_file(tmp_path, topic, NEW)]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    with contextlib.closing(admin), zk_of(cluster) as zk:
        assert zk.get_controller_id() != 4, "broker 4 is paused below: it must not be the controller"
        create_topic(cluster, topic, OLD)
        wait_until(lambda: state(zk, topic).isr == tuple(OLD), what="a full ISR")
        assert state(zk, topic).leader == 1
        assert admin.list_partition_reassignments() == {}
        with Reader(bootstrap(cluster), topic) as reader:
            with Burst(bootstrap(cluster), topic) as history:
                history.wait_for(1000)
                # the new replica paused, the move stays in its first phase while writes go on
                cluster.brokers[4].signal(signal.SIGSTOP)
                try:
                    reassign(Move(cluster, topic, tmp_path, capsys, admin))
                    check_in_progress(cluster, topic, capsys, verify)
                    history.wait_for(1000)
                finally:
                    cluster.brokers[4].signal(signal.SIGCONT)
                # (completed: no longer listed, and the metadata has the target replicas)
                wait_until(
                    lambda: "is completed." in run_seglog(capsys, *verify)[1], 60, "the reassignment to complete"
                )
                history.wait_for(1000)  # writes go on through the new leader
            # the consumer reads on to the end
            wait_until(lambda: reader.read and reader.read[-1][0] >= max(history.acknowledged), 60, "the reader")
        code, out, _ = run_seglog(capsys, *verify)
        assert (code, out) == (
            0,
            f"Status of partition reassignment:\nReassignment of partition {topic}-0 is completed.\n",
        )
        final = state(zk, topic)
        assert final.leader in NEW and set(final.isr) <= set(NEW)
        assigned = zk.get_topic(topic)
        assert assigned is not None and assigned.partitions[0] == znodes.ReplicaAssignment(tuple(NEW))
        assert zk.get(znodes.REASSIGN_PARTITIONS) is None
        assert admin.list_partition_reassignments() == {}
    listing = run_seglog(capsys, "reassign-partitions", "--bootstrap-server", bootstrap(cluster), "--list")
    assert listing[:2] == (0, "No partition reassignments found.\n")
    wait_until(lambda: not (cluster.brokers[1].log_dir / f"{topic}-0").exists(), what="the old replica deleted")

    # every replica: the same bytes, each offset once, every acknowledged record at its offset
    wait_until_found(lambda: identical(cluster, topic, NEW), "byte-identical replicas")
    for b in NEW:
        held = offsets_and_values(cluster.brokers[b], topic)
        assert [o for o, _ in held] == list(range(len(held)))
    history.check(cluster.brokers[final.leader])
    # the consumer that read through the move read each offset once, in order, as the log has it
    log = dict(offsets_and_values(cluster.brokers[final.leader], topic))
    assert [o for o, _ in reader.read] == list(range(len(reader.read)))
    assert all(log[o] == v for o, v in reader.read)
