"""Replication in a real cluster: three ``seglog broker`` processes, a real ZooKeeper and the
controller inside a broker. Followers fetch and append the leader's bytes, acks=all waits for
the ISR, a paused follower leaves the ISR through the controller (AlterPartition, written to
the partition's state znode) and rejoins, min.insync.replicas refuses, and after leader kills
no acknowledged record is lost and the old leader's divergent suffix is truncated.

Two clusters: one whose ZooKeeper sessions outlast a paused follower (its ISR changes come from
its leader, not from its session expiring), one whose short sessions let a killed leader be
replaced quickly.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.protocol import ApiKey
from seglog.records import Record
from seglog.records.batch import build_batch
from seglog.tools.broker_client import BrokerClient
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import wait_until
from .history import History

NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 19, 20
FETCHING = [
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=100",
    "replica.high.watermark.checkpoint.interval.ms=100",
    "min.insync.replicas=2",
    "controlled.shutdown.retry.backoff.ms=200",
]


def chrooted_cluster(zookeeper: ZooKeeperServer, directory: Path, name: str, overrides: list[str]) -> LocalCluster:
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path(f"/{name}")
    admin.stop()
    admin.close()
    connect = f"{zookeeper.connect_string}/{name}"
    return LocalCluster(directory, 3, zookeeper=connect, port=None, overrides=FETCHING + overrides)


@pytest.fixture(scope="module")
def patient(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Sessions of 30 s: a follower paused for seconds stays registered; lagging 1.5 s, it leaves the ISR."""
    overrides = ["zookeeper.session.timeout.ms=30000", "replica.lag.time.max.ms=1500"]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("patient"), "patient", overrides)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def hasty(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Sessions of 3 s: a killed leader is replaced within seconds."""
    overrides = ["zookeeper.session.timeout.ms=3000", "replica.lag.time.max.ms=5000"]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("hasty"), "hasty", overrides)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def zk_of(cluster: LocalCluster) -> ZkClient:
    return ZkClient(cluster.zookeeper_connect, session_timeout_ms=10_000)


def create_topic(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])], operation_timeout=30)[topic].result(60)


def state(zk: ZkClient, topic: str) -> znodes.LeaderAndIsr:
    found = zk.get_partition_state(znodes.TopicPartition(topic, 0))
    assert found is not None
    return found.leader_and_isr


def produce(
    broker: BrokerProcess,
    topic: str,
    values: list[bytes],
    acks: int = -1,
    timeout_ms: int = 30_000,
    source_host: str | None = None,
) -> dict[str, Any]:
    """One Produce request of one batch to partition 0 (from ``source_host``, if given): its answer
    (error_code, base_offset)."""
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": build_batch([Record(key=None, value=v) for v in values])}],
            }
        ],
    }
    with BrokerClient(broker.address, timeout=timeout_ms / 1000 + 30, source_host=source_host) as client:
        answer = client.request(ApiKey.PRODUCE, body)
    return answer["responses"][0]["partition_responses"][0]


def segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    """Partition 0's records on one broker: its .log files in offset order."""
    d = broker.log_dir / f"{topic}-0"
    return b"".join((d / name).read_bytes() for name in sorted(os.listdir(d)) if name.endswith(".log"))


def identical(cluster: LocalCluster, topic: str) -> bytes | None:
    logs = [segment_bytes(b, topic) for b in cluster.brokers.values()]
    return logs[0] if all(log == logs[0] for log in logs) else None


def test_acks_all_waits_for_the_isr_which_shrinks_and_grows(patient: LocalCluster) -> None:
    """acks=all records are byte-identical on all replicas; a SIGSTOPped follower leaves the ISR
    (the leader's AlterPartition, written by the controller to ZooKeeper) and acks=all goes on
    without it; with one ISR member min.insync.replicas=2 refuses; after SIGCONT both rejoin."""
    with zk_of(patient) as zk:
        leader = zk.get_controller_id()  # the leader's AlterPartition must reach a running controller
        assert leader is not None
        first, second = (b for b in (1, 2, 3) if b != leader)
        create_topic(patient, "events", [leader, first, second])
        wait_until(lambda: state(zk, "events").isr == (leader, first, second), what="a full ISR")
        wait_until(lambda: produce(patient.brokers[leader], "events", [b"first"])["error_code"] == 0, what="a leader")
        for n in range(20):
            answer = produce(patient.brokers[leader], "events", [b"a%d" % n, b"b%d" % n])
            assert (answer["error_code"], answer["base_offset"]) == (0, 1 + 2 * n)
        replicated = wait_until_found(lambda: identical(patient, "events"), "identical logs")
        assert replicated.count(b"b19") == 1

        # one follower stops: acks=all waits until the leader drops it from the ISR, then answers
        patient.brokers[second].signal(signal.SIGSTOP)
        answer = produce(patient.brokers[leader], "events", [b"while one sleeps"])
        assert (answer["error_code"], answer["base_offset"]) == (0, 41)
        assert state(zk, "events").isr == (leader, first)  # written before the produce was answered

        # the other stops too: the waiting produce is appended but the ISR shrinks below 2
        patient.brokers[first].signal(signal.SIGSTOP)
        answer = produce(patient.brokers[leader], "events", [b"appended, not acknowledged"])
        assert answer["error_code"] == NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert state(zk, "events").isr == (leader,)
        assert produce(patient.brokers[leader], "events", [b"refused"])["error_code"] == NOT_ENOUGH_REPLICAS
        assert produce(patient.brokers[leader], "events", [b"acks=1 goes"], acks=1)["error_code"] == 0

        # both come back: they catch up, rejoin the ISR, and acks=all is answered again
        patient.brokers[first].signal(signal.SIGCONT)
        patient.brokers[second].signal(signal.SIGCONT)
        wait_until(lambda: sorted(state(zk, "events").isr) == [1, 2, 3], what="the ISR grown back")
        assert produce(patient.brokers[leader], "events", [b"all back"])["error_code"] == 0
        final = wait_until_found(lambda: identical(patient, "events"), "identical logs")
        assert b"refused" not in final and b"all back" in final


def wait_until_found(find: Any, what: str) -> Any:
    found: list[Any] = []
    wait_until(lambda: found.append(find()) or found[-1], what=what)
    return found[-1]


def test_a_new_leader_keeps_every_acknowledged_record(hasty: LocalCluster) -> None:
    """A confluent-kafka producer (acks=all) writes without pause and records every acknowledged
    value; the leader is SIGKILLed three times (the controller elects a new one from the ISR)
    and restarted. Every acknowledged record is in the last leader's log at its offset and a
    consumer reads them all; every replica ends byte-identical."""
    with zk_of(hasty) as zk:
        create_topic(hasty, "kills", [1, 2, 3])
        wait_until(lambda: state(zk, "kills").isr == (1, 2, 3), what="a full ISR")
        with History(hasty.bootstrap_servers, "kills") as history:
            for _ in range(3):
                history.wait_for(50)
                old = state(zk, "kills")
                hasty.brokers[old.leader].kill()
                wait_until(lambda o=old: state(zk, "kills").leader not in (-1, o.leader), 60, "a new leader")
                assert state(zk, "kills").leader in old.isr
                hasty.start_broker(old.leader)
                wait_until(lambda: len(state(zk, "kills").isr) == 3, 60, "the killed broker back in the ISR")
            history.wait_for(50)
        leader = hasty.brokers[state(zk, "kills").leader]
        wait_until_found(lambda: identical(hasty, "kills"), "identical logs")
        assert len(history.acknowledged) >= 200
        history.check(leader)


def test_an_old_leader_truncates_its_divergent_suffix(hasty: LocalCluster) -> None:
    """The leader takes acks=1 records its paused followers never get, and is SIGKILLed; the
    controller elects a follower, which takes acks=all writes; the old leader comes back as a
    follower, truncates what diverged (OffsetForLeaderEpoch) and ends byte-identical."""
    with zk_of(hasty) as zk:
        create_topic(hasty, "history", [1, 2, 3])
        wait_until(lambda: state(zk, "history").isr == (1, 2, 3), what="a full ISR")
        old = state(zk, "history").leader
        for n in range(10):
            assert produce(hasty.brokers[old], "history", [b"first-%d" % n])["error_code"] == 0
        wait_until_found(lambda: identical(hasty, "history"), "identical logs")

        followers = [b for b in (1, 2, 3) if b != old]
        for b in followers:
            hasty.brokers[b].signal(signal.SIGSTOP)
        # (this one may reach them: it answers the fetches they left waiting at the leader)
        assert produce(hasty.brokers[old], "history", [b"maybe replicated"], acks=1)["error_code"] == 0
        for n in range(5):
            assert produce(hasty.brokers[old], "history", [b"lost-%d" % n], acks=1)["error_code"] == 0
        hasty.brokers[old].kill()
        for b in followers:
            hasty.brokers[b].signal(signal.SIGCONT)

        wait_until(lambda: state(zk, "history").leader in followers, 60, "a new leader")
        new = hasty.brokers[state(zk, "history").leader]
        wait_until(lambda: produce(new, "history", [b"second"])["error_code"] == 0, what="the new leader to write")
        for n in range(10):
            assert produce(new, "history", [b"second-%d" % n])["error_code"] == 0
        hasty.start_broker(old)
        final = wait_until_found(lambda: identical(hasty, "history"), "the old leader truncated")
        assert b"lost-" not in final and b"second-9" in final
