"""Leaders SIGKILLed at random times under load, checked with a recorded history.

Three brokers, a topic of PARTITIONS partitions with RF=3 and min.insync.replicas=2; two producers
with acks=all (confluent-kafka and kafka-python) write to every partition and two consumers
(confluent-kafka and kafka-python) read every partition from offset 0 while the leader of a
partition drawn at random is SIGKILLed, KILLS times at random moments, and the controller's broker
CONTROLLER_KILLS times among them. Each killed broker is started again once its ZooKeeper session
has ended (its registration is gone), so two brokers always run. The random choices come from a
seed printed at the start; ``SEGLOG_KILLS_SEED=N`` replays a run's choices (not its timing).

After the last kill every broker runs, the clients stop and the replicas catch up; then: no
acknowledged record is lost, each offset holds one record on every replica, each consumer read
every partition's offsets in order with the records the log holds, and the replicas' logs are
byte-identical (the high watermark is the log end once nothing is written). Each kill's
unavailability (the kill to the first acknowledged write produced to its partition after it) is
printed with their median and max, not asserted: the machine is shared.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import wait_until
from .history import (
    ConfluentReader,
    ConfluentWriter,
    KafkaPythonReader,
    KafkaPythonWriter,
    Recorder,
    check_partition,
    partition_records,
)
from .security import assert_only_over_listeners, client_properties
from .test_replication import chrooted_cluster, zk_of

TOPIC = "kills"
PARTITIONS = 6
# the ">= 20 kills per run, plus the controller's broker": 20 leaders and 2 controllers
KILLS = 22  # leaders of a random partition,
CONTROLLER_KILLS = 2  # of which the controller's broker (leading the partition) twice
SEED_VARIABLE = "SEGLOG_KILLS_SEED"
READERS = ("confluent-reader", "kafka-python-reader")
OVERRIDES = [
    "zookeeper.session.timeout.ms=1500",  # a killed broker is seen gone after this
    "replica.lag.time.max.ms=5000",
    "log.index.size.max.bytes=65536",  # 18 replicas' indexes take real blocks
    "auto.leader.rebalance.enable=false",  # leaders move by the kills only
    "offsets.topic.num.partitions=3",  # the consumers' group coordinator, cheap to restart
]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, security: str
) -> Iterator[LocalCluster]:
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("kills"), "kills", OVERRIDES, security)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def quiet_kafka_python() -> Iterator[None]:
    """kafka-python logs every refused connection to a killed broker at ERROR."""
    logger = logging.getLogger("kafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def seed() -> int:
    chosen = os.environ.get(SEED_VARIABLE)
    return int(chosen) if chosen else random.SystemRandom().randrange(1 << 32)


def leader_and_isr(zk: ZkClient, partition: int) -> znodes.LeaderAndIsr:
    found = zk.get_partition_state(TopicPartition(TOPIC, partition))
    assert found is not None
    return found.leader_and_isr


def every_isr_full(zk: ZkClient) -> bool:
    return all(len(leader_and_isr(zk, p).isr) == 3 for p in range(PARTITIONS))


def partition_bytes(broker: BrokerProcess, partition: int) -> bytes:
    d = broker.log_dir / f"{TOPIC}-{partition}"
    return b"".join((d / name).read_bytes() for name in sorted(os.listdir(d)) if name.endswith(".log"))


def byte_identical(cluster: LocalCluster) -> bool:
    logs = [[partition_bytes(b, p) for b in cluster.brokers.values()] for p in range(PARTITIONS)]
    return all(log == replicas[0] for replicas in logs for log in replicas)


def kill_and_restart(cluster: LocalCluster, zk: ZkClient, victim: int) -> float:
    """SIGKILL ``victim`` and, once its session has ended, start it again (not waiting for it to
    catch up: the next kill may come first). Returns the moment of the kill."""
    killed = time.monotonic()
    cluster.brokers[victim].kill()
    # a broker cannot register while its old registration lives (as Kafka's cannot)
    wait_until(lambda: zk.get_broker(victim) is None, 30, f"broker {victim}'s session to end")
    cluster.brokers[victim].start(cluster.zookeeper_connect)
    return killed


def choose_victim(zk: ZkClient, rng: random.Random, controller: bool) -> tuple[int, int]:
    """(broker, partition): the leader of a partition drawn among those whose ISR is full (their
    writability after the kill is measured), or the controller's broker and a partition it leads."""
    while True:
        states = {p: leader_and_isr(zk, p) for p in range(PARTITIONS)}
        if controller:
            victim = zk.get_controller_id()
            led = [p for p, s in states.items() if s.leader == victim and len(s.isr) == 3]
            if victim is not None and led:
                return victim, rng.choice(led)
        else:
            full = [p for p, s in states.items() if len(s.isr) == 3 and s.leader >= 0]
            if full:
                partition = rng.choice(full)
                return states[partition].leader, partition
        time.sleep(0.05)


def test_leaders_killed_at_random_lose_no_acknowledged_record(
    cluster: LocalCluster, quiet_kafka_python: None, security: str
) -> None:
    chosen = seed()
    print(f"\n{SEED_VARIABLE}={chosen}")
    rng = random.Random(chosen)
    controller_kills = set(rng.sample(range(KILLS), CONTROLLER_KILLS))
    properties = client_properties(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0, **properties})
    assignment = [[1 + (p + r) % 3 for r in range(3)] for p in range(PARTITIONS)]
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, replica_assignment=assignment)])[TOPIC].result(60)
    recorder = Recorder()
    bootstrap = cluster.bootstrap_servers
    clients = [
        ConfluentWriter("confluent", bootstrap, TOPIC, PARTITIONS, recorder, properties),
        KafkaPythonWriter("kafka-python", bootstrap, TOPIC, PARTITIONS, recorder, properties),
        ConfluentReader(READERS[0], bootstrap, TOPIC, PARTITIONS, recorder, properties),
        KafkaPythonReader(READERS[1], bootstrap, TOPIC, PARTITIONS, recorder, properties),
    ]
    kills: list[tuple[str, int, int, float]] = []  # (what, broker, partition measured, moment)
    started = time.monotonic()
    with zk_of(cluster) as zk:
        wait_until(lambda: every_isr_full(zk), 60, "every ISR full")
        assert_only_over_listeners(cluster, security.upper())
        for client in clients:
            client.start()
        try:
            wait_until(lambda: len(recorder.acknowledged) >= 100, 60, "the producers writing")
            for n in range(KILLS):
                time.sleep(rng.uniform(0.0, 0.5))
                victim, partition = choose_victim(zk, rng, n in controller_kills)
                what = "controller" if n in controller_kills else "leader"
                kills.append((what, victim, partition, kill_and_restart(cluster, zk, victim)))
            cluster.wait_until_formed()
            wait_until(lambda: every_isr_full(zk), 60, "every broker back in every ISR")
            assert_only_over_listeners(cluster, security.upper())
            after = len(recorder.acknowledged) + 100
            wait_until(lambda: len(recorder.acknowledged) >= after, 60, "writes after the last kill")
        finally:
            for client in clients[:2]:
                client.stop()
        wait_until(lambda: byte_identical(cluster), 60, "byte-identical replicas")
        # nothing is written any more and every ISR is full: the high watermark is the log end
        ends = {p: len(partition_records(cluster.brokers[1], TOPIC, p)) for p in range(PARTITIONS)}
        try:
            wait_until(lambda: recorder.read_up_to(READERS, ends), 60, "the consumers to read to the high watermark")
        except AssertionError as e:
            raise AssertionError(f"{e}: ends {ends}, read to {recorder.read_ends(READERS)}") from None
        finally:
            for client in clients[2:]:
                client.stop()
    print(f"{KILLS} kills in {time.monotonic() - started:.1f} s")

    report(recorder, kills)
    assert not recorder.anomalies, recorder.anomalies[:10]
    brokers = list(cluster.brokers.values())
    for p in range(PARTITIONS):
        check_partition(recorder, READERS, brokers, TOPIC, p)


def report(recorder: Recorder, kills: list[tuple[str, int, int, float]]) -> None:
    """Each kill's unavailability: the kill to the first acknowledged write produced after it to
    the partition whose leader it killed."""
    times = []
    for n, (what, broker, partition, moment) in enumerate(kills, 1):
        first = recorder.first_ack_after(partition, moment)
        if first is not None:
            times.append(first - moment)
        shown = "never" if first is None else f"{first - moment:.2f} s"
        print(f"kill {n:2}: {what} broker {broker}, partition {partition} writable again after {shown}")
    if times:
        median, worst = statistics.median(times), max(times)
        print(f"unavailability over {len(times)} kills: median {median:.2f} s, max {worst:.2f} s")
    print(f"{len(recorder.acknowledged)} records acknowledged")
