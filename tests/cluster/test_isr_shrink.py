"""A paused follower leaves the ISR of every partition it follows, on every leader, in time.

Kafka's leader checks every partition it leads each ``replica.lag.time.max.ms / 2`` and proposes an
ISR without the followers whose fetches have not reached its log end for longer than the lag
(AlterPartition); once the controller has written it, the high watermark moves and the acks=all
produces waiting for the paused follower are answered. Checked after two brokers leading
partitions (the controller's first) were SIGKILLed and restarted, so that leadership has moved:
the follower paused, restarted last, leads nothing and follows every partition, led by the
controller's broker and the other.

Three brokers, min.insync.replicas=2; a topic of six partitions of RF=3 to which an idempotent
confluent-kafka producer writes acks=all (one connection to each leader, whose requests it serves
one at a time: a write to one partition waits behind a produce waiting for the paused follower on
another), and a topic of three partitions nothing is written to. ZooKeeper sessions outlast the
pause (the leaders, not the paused follower's session, must drop it); a killed broker's session
is ended at once by deleting its ephemeral znodes, as ZooKeeper does when the session expires.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.tools.cluster import LocalCluster

from .conftest import wait_until
from .history import Client, Recorder
from .security import assert_only_over_listeners, client_properties
from .test_replication import chrooted_cluster, zk_of

TOPIC = "shrink"  # the producer writes to each partition
PARTITIONS = 6
IDLE = "idle"  # nothing is written: the paused follower leaves these ISRs all the same
IDLE_PARTITIONS = 3
PARTITIONS_OF_BOTH = [(TOPIC, p) for p in range(PARTITIONS)] + [(IDLE, p) for p in range(IDLE_PARTITIONS)]
LAG_MS = 3000
# a follower not caught up for the lag is dropped at the next check, at most half a lag later;
# the slack is for a loaded machine (the controller's write, a late check), never a speed measure
SHRINK_DEADLINE_S = (LAG_MS + LAG_MS / 2) / 1000 + 5
OVERRIDES = [
    "zookeeper.session.timeout.ms=60000",  # the paused follower stays registered
    f"replica.lag.time.max.ms={LAG_MS}",
    "auto.leader.rebalance.enable=false",  # leaders move by the kills only
]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, security: str
) -> Iterator[LocalCluster]:
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("shrink"), "shrink", OVERRIDES, security)
    local.start()
    try:
        yield local
    finally:
        local.stop()


class IdempotentWriter(Client):
    """confluent-kafka, idempotent, acks=all: ``<name>-N`` to partition N % partitions, every 5 ms.
    Its requests wait as long as the broker holds them (no request timeout shorter than a pause)."""

    def loop(self) -> None:
        config = {"bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "acks": "all"}
        config |= {"linger.ms": 5, "retry.backoff.ms": 50, "log_level": 0}
        producer = Producer({**config, **self.properties})
        n = 0
        while not self.stopping.is_set():
            value = b"%s-%d" % (self.name.encode(), n)
            partition = n % self.partitions
            producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered(partition, value))
            producer.poll(0.005)
            n += 1
        producer.flush(60)

    def _delivered(self, partition: int, value: bytes) -> Any:
        produced = time.monotonic()

        def done(error: Any, message: Any) -> None:
            if error is None:
                self.recorder.acknowledge(partition, message.offset(), value, produced)

        return done


def leader_and_isr(zk: ZkClient, topic: str, partition: int) -> znodes.LeaderAndIsr:
    found = zk.get_partition_state(TopicPartition(topic, partition))
    assert found is not None
    return found.leader_and_isr


def every_isr_full(zk: ZkClient) -> bool:
    return all(len(leader_and_isr(zk, t, p).isr) == 3 for t, p in PARTITIONS_OF_BOTH)


def end_session(cluster: LocalCluster, zk: ZkClient, broker_id: int) -> None:
    """What ZooKeeper does when a killed broker's session expires, without waiting for it: its
    ephemeral znodes go (the controller's znode if it held it, and its registration)."""
    admin = KazooClient(hosts=cluster.zookeeper_connect)
    admin.start()
    try:
        if zk.get_controller_id() == broker_id:
            admin.delete(znodes.CONTROLLER)
        admin.delete(znodes.broker_path(broker_id))
    finally:
        admin.stop()
        admin.close()


def kill_and_restart(cluster: LocalCluster, zk: ZkClient, victim: int) -> None:
    cluster.brokers[victim].kill()
    end_session(cluster, zk, victim)
    wait_until(lambda: zk.get_broker(victim) is None, 30, f"broker {victim}'s registration to go")
    cluster.start_broker(victim)
    wait_until(lambda: every_isr_full(zk), 60, f"broker {victim} back in every ISR")


def test_a_paused_follower_leaves_every_isr_in_time(cluster: LocalCluster, security: str) -> None:
    properties = client_properties(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0, **properties})
    for topic, count in ((TOPIC, PARTITIONS), (IDLE, IDLE_PARTITIONS)):
        assignment = [[1 + (p + r) % 3 for r in range(3)] for p in range(count)]
        admin.create_topics([NewTopic(topic, count, replica_assignment=assignment)])[topic].result(60)
    recorder = Recorder()
    writer = IdempotentWriter("idempotent", cluster.bootstrap_servers, TOPIC, PARTITIONS, recorder, properties)
    with zk_of(cluster) as zk:
        wait_until(lambda: every_isr_full(zk), 60, "every ISR full")
        writer.start()
        try:
            wait_until(lambda: len(recorder.acknowledged) >= 100, 60, "the producer writing")
            # the controller's broker first: its partitions move to the others, a new controller comes
            first = zk.get_controller_id()
            assert first is not None
            kill_and_restart(cluster, zk, first)
            # then the other broker that leads: its partitions move to the controller's broker
            # and to the broker restarted first
            controller = zk.get_controller_id()
            assert controller is not None
            second = next(b for b in (1, 2, 3) if b not in (first, controller))
            kill_and_restart(cluster, zk, second)
            assert zk.get_controller_id() == controller
            wait_until(lambda: len(recorder.acknowledged) >= 200, 60, "the producer writing after the kills")

            # the broker restarted last leads nothing (no rebalance): it follows every partition
            leaders = {tp: leader_and_isr(zk, *tp).leader for tp in PARTITIONS_OF_BOTH}
            print(f"\ncontroller {controller}, leaders {leaders}; pausing broker {second}")
            assert second not in leaders.values()
            assert controller in leaders.values()  # the controller's broker leads some
            paused = time.monotonic()
            cluster.brokers[second].signal(signal.SIGSTOP)
            try:
                left: dict[tuple[str, int], float] = {}

                def left_every_isr() -> bool:
                    for tp in PARTITIONS_OF_BOTH:
                        if tp not in left and second not in leader_and_isr(zk, *tp).isr:
                            left[tp] = time.monotonic() - paused
                    return len(left) == len(PARTITIONS_OF_BOTH)

                try:
                    wait_until(left_every_isr, SHRINK_DEADLINE_S, f"broker {second} to leave every ISR")
                finally:
                    print(f"left the ISR after (s): { {tp: round(t, 2) for tp, t in sorted(left.items())} }")

                # each written partition's waiting produces are answered without the paused follower
                def acknowledged_while_paused() -> bool:
                    acked = {p for p, produced, _ in list(recorder.acks) if produced > paused}
                    return acked == set(range(PARTITIONS))

                wait_until(acknowledged_while_paused, 30, "acks=all writes acknowledged while the follower is paused")
                # (at least the pause of the issue: twice the lag)
                time.sleep(max(0.0, paused + 2 * LAG_MS / 1000 - time.monotonic()))
                # the followers that fetch stay, written to or not
                isrs = {tp: sorted(leader_and_isr(zk, *tp).isr) for tp in PARTITIONS_OF_BOTH}
                others = sorted({1, 2, 3} - {second})
                assert isrs == {tp: others for tp in PARTITIONS_OF_BOTH}
            finally:
                cluster.brokers[second].signal(signal.SIGCONT)
            wait_until(lambda: every_isr_full(zk), 60, f"broker {second} back in every ISR")
            assert_only_over_listeners(cluster, security.upper())
        finally:
            writer.stop()
    assert not recorder.anomalies, recorder.anomalies[:10]
