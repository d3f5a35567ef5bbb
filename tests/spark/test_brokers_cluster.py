"""The source through the brokers of a 3-broker cluster (replication factor 3, min.insync.replicas
2): a partition's leader killed between planning and reading, and the tasks still read every
record produced, once, from the leader elected after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import seglog
from seglog.client import ClusterClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.errors import BrokerNotAvailableError
from seglog.spark.source import SeglogBatchReader, read_task
from seglog.tools.cluster import LocalCluster

from ..cluster.conftest import chrooted_local_cluster, wait_until, zookeeper  # noqa: F401 (a fixture)

TOPIC = "replicated"
PER_PARTITION = 300


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:  # noqa: F811
    overrides = [
        "zookeeper.session.timeout.ms=6000",
        "controlled.shutdown.enable=false",
        "log.retention.ms=-1",
        "offsets.topic.replication.factor=1",
    ]
    directory = tmp_path_factory.mktemp("spark-cluster")
    with chrooted_local_cluster(zookeeper, directory, "spark-cluster", 3, overrides) as local:
        yield local


def _leaders(bootstrap: str, name: str = TOPIC) -> dict[int, int]:
    with ClusterClient(bootstrap, timeout=10) as client:
        (topic,) = [t for t in client.metadata([name]).topics if t.name == name]
        return {p.partition_index: p.leader_id for p in topic.partitions}


def _leader_of(bootstrap: str, name: str) -> int:
    return _leaders(bootstrap, name).get(0, -1)  # none yet: a topic just created may have no partitions listed


def test_a_leader_killed_after_planning_is_found_again_by_the_tasks(cluster: LocalCluster) -> None:
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])
    created[TOPIC].result(60)
    wait_until(lambda: all(leader >= 0 for leader in _leaders(bootstrap).values()), 60, "leaders")
    acked: list[tuple[Any, ...]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(PER_PARTITION):
        for p in range(3):
            producer.produce(TOPIC, b"value-%d-%d" % (p, i), partition=p, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0

    victim = _leaders(bootstrap)[0]
    # the victim first: the tasks' bootstrap finds it dead and goes on to the next
    servers = [cluster.brokers[victim].address] + [b.address for i, b in cluster.brokers.items() if i != victim]
    options = {"kafka.bootstrap.servers": ",".join(servers), "subscribe": TOPIC, "minPartitions": "6"}
    tasks = SeglogBatchReader(options).partitions()
    assert len(tasks) == 6
    cluster.brokers[victim].kill()
    rows = [(r["partition"], r["offset"], r["value"]) for task in tasks for b in read_task(task) for r in b.to_pylist()]
    assert sorted(rows) == sorted(acked)
    assert len(rows) == 3 * PER_PARTITION
    assert _leaders(bootstrap)[0] != victim


def test_a_leader_killed_while_a_task_fetches(cluster: LocalCluster) -> None:
    """Small fetches of many small batches, the leader killed a moment after the task starts:
    wherever the kill falls, the task ends with every record once (the test's own broker kill
    is not timed against the read: a read that ends first proves less, never fails)."""
    for broker_id, broker in cluster.brokers.items():  # the last test's victim back
        if not broker.running:
            cluster.start_broker(broker_id)
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fetched-during-kill", 1, 3, config={"min.insync.replicas": "2"})])[
        "fetched-during-kill"
    ].result(60)
    wait_until(lambda: _leader_of(bootstrap, "fetched-during-kill") >= 0, 60, "a leader")
    acked: list[tuple[Any, ...]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 300})
    for i in range(20_000):
        producer.produce(
            "fetched-during-kill",
            b"value-%d" % i,
            partition=0,
            on_delivery=lambda err, msg: acked.append((msg.partition(), msg.offset(), msg.value())),
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "fetched-during-kill",
        "kafka.max.partition.fetch.bytes": "256",  # a batch a fetch
    }
    (task,) = SeglogBatchReader(options).partitions()
    victim = _leader_of(bootstrap, "fetched-during-kill")
    kill = threading.Timer(0.2, cluster.brokers[victim].kill)
    kill.start()
    try:
        rows = [(r["partition"], r["offset"], r["value"]) for b in read_task(task) for r in b.to_pylist()]
    finally:
        kill.join()
    assert rows == sorted(acked)


# --- path beside kafka.bootstrap.servers: a task reads a replica's files, never past the HW ------


def _all_running(cluster: LocalCluster) -> str:
    """Every broker up (an earlier test killed some); the bootstrap servers."""
    for broker_id, broker in cluster.brokers.items():
        deadline = time.monotonic() + 60
        while not broker.running:
            try:
                cluster.start_broker(broker_id)
            except BrokerNotAvailableError:  # its last session is not expired in ZooKeeper yet
                assert time.monotonic() < deadline
                time.sleep(1)
    return ",".join(b.address for b in cluster.brokers.values())


def _produce_acked(bootstrap: str, topic: str, count: int, first: int = 0) -> list[tuple[Any, ...]]:
    acked: list[tuple[Any, ...]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(topic, b"value-%d" % i, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return sorted(acked)


def _replicated_topic(bootstrap: str, topic: str, assignment: list[int] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if assignment is None:
        new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    else:
        new = NewTopic(topic, 1, replica_assignment=[assignment], config={"min.insync.replicas": "1"})
    admin.create_topics([new])[topic].result(60)
    wait_until(lambda: _leader_of(bootstrap, topic) >= 0, 60, "a leader")


def _files_end(log_dir: Any, topic: str) -> int:
    with seglog.open(str(log_dir), read_only=True) as logs:
        return logs.partition(topic, 0).log_end_offset if topic in logs.topics() else -1


def _task_rows(task: Any) -> list[tuple[Any, ...]]:
    return sorted((r["partition"], r["offset"], r["value"]) for b in read_task(task) for r in b.to_pylist())


def test_a_task_beside_a_follower_reads_its_files_up_to_the_high_watermark_planned(cluster: LocalCluster) -> None:
    """Planned at the leader's high watermark, then more records written, which the follower's
    files hold too: the task reads the follower's files, with every broker down, and stops at the
    planned high watermark."""
    bootstrap = _all_running(cluster)
    _replicated_topic(bootstrap, "beside-follower")
    first = _produce_acked(bootstrap, "beside-follower", 500)
    follower = next(i for i in cluster.brokers if i != _leader_of(bootstrap, "beside-follower"))
    log_dir = cluster.brokers[follower].log_dir
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "beside-follower", "path": str(log_dir)}
    (task,) = SeglogBatchReader(options).partitions()
    assert (task.start, task.end, task.high_watermark) == (0, 500, 500)
    _produce_acked(bootstrap, "beside-follower", 300, first=500)
    wait_until(lambda: _files_end(log_dir, "beside-follower") >= 800, 60, "the follower's copy")
    for broker in cluster.brokers.values():  # what the task reads comes from the files alone
        broker.kill()
    assert _task_rows(task) == first


def test_a_task_fetches_what_the_files_beside_it_lack(cluster: LocalCluster) -> None:
    """A follower that is down while records are written holds less than the high watermark, and a
    broker that holds no replica of a partition has no files of it: both tasks fetch from the
    leader, every record once."""
    bootstrap = _all_running(cluster)
    _replicated_topic(bootstrap, "behind-follower")
    acked = _produce_acked(bootstrap, "behind-follower", 300)
    follower = next(i for i in cluster.brokers if i != _leader_of(bootstrap, "behind-follower"))
    elsewhere = next(i for i in cluster.brokers if i != follower)
    _replicated_topic(bootstrap, "elsewhere", [elsewhere])
    other = _produce_acked(bootstrap, "elsewhere", 100)
    cluster.brokers[follower].kill()
    acked += _produce_acked(bootstrap, "behind-follower", 300, first=300)  # once the ISR shrank
    log_dir = cluster.brokers[follower].log_dir
    assert _files_end(log_dir, "behind-follower") < 600
    assert _files_end(log_dir, "elsewhere") == -1
    servers = ",".join(b.address for b in cluster.brokers.values() if b.running)
    options = {"kafka.bootstrap.servers": servers, "subscribe": "behind-follower,elsewhere", "path": str(log_dir)}
    tasks = SeglogBatchReader(options).partitions()
    rows = {t.topic: _task_rows(t) for t in tasks}
    assert rows == {"behind-follower": acked, "elsewhere": other}


def _isr(bootstrap: str, name: str) -> list[int]:
    with ClusterClient(bootstrap, timeout=10) as client:
        (topic,) = [t for t in client.metadata([name]).topics if t.name == name]
        return list(topic.partitions[0].isr_nodes) if topic.partitions else []


def test_the_files_of_a_replica_out_of_the_isr_are_not_read(cluster: LocalCluster) -> None:
    """A follower dropped from the ISR may hold records an earlier leader wrote and the current one
    does not have: even though its files hold the whole range, the task fetches (and with every
    broker down, fails)."""
    bootstrap = _all_running(cluster)
    _replicated_topic(bootstrap, "out-of-sync")
    _produce_acked(bootstrap, "out-of-sync", 200)
    follower = next(i for i in cluster.brokers if i != _leader_of(bootstrap, "out-of-sync"))
    log_dir = cluster.brokers[follower].log_dir
    wait_until(lambda: _files_end(log_dir, "out-of-sync") >= 200, 60, "the follower's copy")
    cluster.brokers[follower].kill()
    live = ",".join(b.address for b in cluster.brokers.values() if b.running)
    wait_until(lambda: follower not in _isr(live, "out-of-sync"), 60, "the ISR without the follower")
    options = {"kafka.bootstrap.servers": live, "subscribe": "out-of-sync", "path": str(log_dir)}
    (task,) = SeglogBatchReader({**options, "kafka.request.timeout.ms": "3000"}).partitions()
    assert (task.end, task.high_watermark) == (200, 200) and follower not in task.in_sync_replicas
    for broker in cluster.brokers.values():
        if broker.running:
            broker.kill()
    with pytest.raises(BrokerNotAvailableError, match=r"option kafka\.bootstrap\.servers"):
        list(read_task(task))
