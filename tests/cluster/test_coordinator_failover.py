"""The group and transaction coordinators follow the leadership of their partitions: three
``seglog broker`` processes, ``__consumer_offsets`` and ``__transaction_state`` with three
replicas, and the coordinator's broker SIGKILLed under a real client.

- A confluent-kafka group consumer commits synchronously; one commit is made while the
  coordinator's followers are paused (SIGSTOP). A coordinator that acknowledged it before its
  followers had it would lose it when killed then: the commit is acknowledged only once
  replicated (acks=all, as Kafka appends it), and the coordinator is killed after the
  acknowledgement. The new coordinator has every acknowledged commit, the consumer's group
  goes on there, and a new member resumes from the last one.
- A transactional producer whose coordinator's broker is killed between transactions goes on
  with the new coordinator: read_committed sees the committed transactions, not the aborted.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition as SeglogTopicPartition
from seglog.coordinator.partitioning import partition_for
from seglog.tools.cluster import LocalCluster

from .conftest import delivered, wait_until
from .test_replication import chrooted_cluster, create_topic, zk_of

PARTITIONS = 3  # of each coordinator topic
OVERRIDES = [
    "zookeeper.session.timeout.ms=3000",
    "replica.lag.time.max.ms=10000",
    f"offsets.topic.num.partitions={PARTITIONS}",
    "offsets.topic.replication.factor=3",
    f"transaction.state.log.num.partitions={PARTITIONS}",
    "transaction.state.log.replication.factor=3",
    "group.initial.rebalance.delay.ms=0",
    "log.index.size.max.bytes=65536",
]
GROUP, TRANSACTIONAL_ID = "failover-readers", "failover-writer"


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    local = chrooted_cluster(zookeeper, tmp_path, request.node.name.replace("_", "-")[:60], OVERRIDES)
    local.start()
    try:
        yield local
    finally:
        for broker in local.brokers.values():  # nothing to keep: a controlled shutdown would only cost time
            broker.kill()
        local.stop()


def leader(zk: ZkClient, topic: str, partition: int) -> int:
    found = zk.get_partition_state(SeglogTopicPartition(topic, partition))
    assert found is not None
    return found.leader_and_isr.leader


def new_leader(zk: ZkClient, topic: str, partition: int, old: int) -> int:
    found: list[int] = []

    def elected() -> bool:
        found.append(leader(zk, topic, partition))
        return found[-1] not in (-1, old)

    wait_until(elected, 60, "a new leader")
    return found[-1]


def assignment(zk: ZkClient, topic: str, partition: int) -> list[int]:
    found = zk.get(f"/brokers/topics/{topic}")
    assert found is not None
    return list(json.loads(found[0])["partitions"][str(partition)])


def commit(consumer: Any, offset: int, topic: str) -> None:
    """A synchronous commit, retried until acknowledged (a client's retriable errors while the
    coordinator moves)."""
    failures: list[KafkaException] = []

    def attempt() -> bool:
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            return True
        except KafkaException as e:
            failures.append(e)
            return False

    wait_until(attempt, 60, f"commit of offset {offset} (failures: {failures[-3:]})")


def committed(consumer: Any, topic: str) -> int:
    return int(consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)


def test_acknowledged_commits_survive_the_coordinator_broker(cluster: LocalCluster) -> None:
    topic = "orders"
    create_topic(cluster, topic, [1, 2, 3])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(60):
        producer.produce(topic, b"o%d" % i, partition=0)
    assert producer.flush(30) == 0
    settings: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
    }
    settings |= {"enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    reader = Consumer(settings)
    reader.subscribe([topic])
    seen: list[int] = []

    def read_up_to(end: int) -> None:
        def one() -> bool:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                seen.append(delivered(m)[1])
                commit(reader, seen[-1] + 1, topic)
            return bool(seen) and seen[-1] + 1 >= end

        wait_until(one, 120, f"offset {end}")

    read_up_to(20)
    with zk_of(cluster) as zk:
        p = partition_for(GROUP, PARTITIONS)
        coordinator = leader(zk, "__consumer_offsets", p)
        followers = [cluster.brokers[b] for b in assignment(zk, "__consumer_offsets", p) if b != coordinator]

        # the commit of offset 21 while no follower fetches: it is acknowledged only once they have it
        (m,) = [m for m in [reader.poll(10)] if m is not None and not m.error()]
        seen.append(delivered(m)[1])
        for f in followers:
            f.signal(signal.SIGSTOP)
        acknowledged: list[int] = []

        def commit_next() -> None:
            commit(reader, seen[-1] + 1, topic)
            acknowledged.append(1)

        done = threading.Thread(target=commit_next)
        done.start()
        done.join(1.0)
        if done.is_alive():  # not acknowledged while only the coordinator has it: resume the followers
            for f in followers:
                f.signal(signal.SIGCONT)
            done.join(60)
            cluster.brokers[coordinator].kill()
        else:  # acknowledged with no follower holding it: kill the coordinator before they fetch it
            cluster.brokers[coordinator].kill()
            for f in followers:
                f.signal(signal.SIGCONT)
        assert acknowledged
        new_coordinator = new_leader(zk, "__consumer_offsets", p, coordinator)

    # the new coordinator has the acknowledged commit; the group goes on there
    assert committed(reader, topic) == 21
    read_up_to(40)
    assert committed(reader, topic) == 40
    reader.close()

    # a new member resumes from the last commit, on the new coordinator
    successor = Consumer(settings)
    successor.subscribe([topic])
    first: list[int] = []

    def resumed() -> bool:
        first.extend(delivered(m)[1] for m in [successor.poll(0.2)] if m and not m.error())
        return bool(first)

    wait_until(resumed, 60)
    assert first[0] == 40
    successor.close()
    assert sorted(set(seen)) == list(range(40))
    assert new_coordinator != coordinator


def test_a_transactional_producer_goes_on_after_its_coordinator_broker_dies(cluster: LocalCluster) -> None:
    topic = "ledger"
    with zk_of(cluster) as zk:
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "transactional.id": TRANSACTIONAL_ID,
                "transaction.timeout.ms": 60_000,
            }
        )
        producer.init_transactions(60)
        p = partition_for(TRANSACTIONAL_ID, PARTITIONS)
        coordinator = leader(zk, "__transaction_state", p)
        # the data partition is led where the coordinator is, and follows it the same way (markers
        # are appended by the coordinator's broker; another leader's partitions are not written yet)
        replicas = assignment(zk, "__transaction_state", p)
        assert replicas[0] == coordinator  # the preferred leader, in a fresh cluster
        create_topic(cluster, topic, replicas)

        def transaction(name: str, commit: bool) -> None:
            """One transaction, done again when the client says it must be aborted (as an
            application does when its coordinator moved mid-transaction)."""
            for _ in range(5):
                producer.begin_transaction()
                for i in range(5):
                    producer.produce(topic, b"%s-%d" % (name.encode(), i), partition=0)
                try:
                    if commit:
                        producer.commit_transaction(60)
                    else:
                        producer.abort_transaction(60)
                    return
                except KafkaException as e:
                    if not e.args[0].txn_requires_abort():
                        raise
                    producer.abort_transaction(60)
            raise AssertionError(f"transaction {name} never completed")

        transaction("before-committed", True)
        transaction("before-aborted", False)
        cluster.brokers[coordinator].kill()
        new_coordinator = new_leader(zk, "__transaction_state", p, coordinator)
        transaction("after-committed", True)
        transaction("after-aborted", False)
        transaction("after-committed-again", True)

    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "ledger-readers",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    # from the beginning: no committed offset to look up (a new group's coordinator partition could
    # not be made now that one of three brokers is down, as with Kafka's offsets.topic.replication.factor)
    reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes | None] = []

    def read() -> bool:
        values.extend(m.value() for m in [reader.poll(0.2)] if m is not None and not m.error())
        return len(values) >= 15

    wait_until(read, 60, f"the committed records (read {values})")
    assert reader.poll(1.0) is None  # nothing more: the aborted transactions are not read
    reader.close()
    names = ("before-committed", "after-committed", "after-committed-again")
    assert values == [b"%s-%d" % (n.encode(), i) for n in names for i in range(5)]
    assert new_coordinator != coordinator
