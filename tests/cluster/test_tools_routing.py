"""The ``--bootstrap-server`` commands in a cluster of three ``seglog broker`` processes: each
partition's request goes to its leader, a group's and a transactional id's to its coordinator, a
broker's configs to that broker, whichever broker is the bootstrap one (Kafka's clients route so).

One cluster for the module, its tests in order (the records the first produces are the later ones
offsets); the topic and the coordinator topics have a partition led by each broker
(replication factor 1, three partitions). The last test kills broker 3 and starts it again.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from seglog.cli import main
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.coordinator.partitioning import partition_for
from seglog.tools.cluster import LocalCluster

from .conftest import chrooted_local_cluster, wait_until
from .test_brokers import partitions
from .test_cluster_tools import seglog

TOPIC = "routed"
BROKERS = (1, 2, 3)
RECORDS = 5  # per partition


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    overrides = [
        "zookeeper.session.timeout.ms=6000",
        "controlled.shutdown.enable=false",
        "segment.index.bytes=65536",
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.num.partitions=3",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
    ]
    with chrooted_local_cluster(zookeeper, tmp_path_factory.mktemp("routing"), "routing-test", 3, overrides) as local:
        yield local


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    """``routed``, a partition led by each broker, RECORDS records in each (produced by the command)."""
    bootstrap = cluster.brokers[1].address
    assert main(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC, "--partitions", "3"]) == 0
    wait_until(lambda: all(len(partitions(b.address, TOPIC)) == 3 for b in cluster.brokers.values()), what="topic")
    assert_led_by_every_broker(cluster, TOPIC)
    return TOPIC


def assert_led_by_every_broker(cluster: LocalCluster, topic: str) -> None:
    assert sorted(leader for leader, _, _ in partitions(cluster.brokers[1].address, topic).values()) == list(BROKERS)


def server(cluster: LocalCluster, broker: int = 1) -> list[str]:
    return ["--bootstrap-server", cluster.brokers[broker].address]


def test_produce_consume_and_get_offsets_reach_every_leader(
    cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for p in range(3):
        lines = "".join(f"p{p}-{i}\n" for i in range(RECORDS))
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
        code, _, err = seglog(capsys, "produce", *server(cluster), "--topic", topic, "--partition", str(p))
        assert code == 0, err
    code, out, err = seglog(capsys, "get-offsets", *server(cluster), "--topic", topic)
    assert (code, out) == (0, "".join(f"{topic}:{p}:{RECORDS}\n" for p in range(3))), err
    code, out, err = seglog(capsys, "consume", *server(cluster), "--topic", topic, "--from-beginning")
    assert code == 0, err
    assert sorted(out.split()) == sorted(f"p{p}-{i}" for p in range(3) for i in range(RECORDS))
    assert f"Processed a total of {3 * RECORDS} messages" in err


def test_delete_records_on_every_leader(
    cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p, "offset": 1} for p in range(3)]}))
    code, out, err = seglog(capsys, "delete-records", *server(cluster, 2), "--offset-json-file", str(offsets))
    assert code == 0, out + err
    assert out.splitlines()[1:] == [f"partition: {topic}-{p}\tlow_watermark: 1" for p in range(3)]
    code, out, _ = seglog(capsys, "get-offsets", *server(cluster, 3), "--topic", topic, "--time", "earliest")
    assert (code, out) == (0, "".join(f"{topic}:{p}:1\n" for p in range(3)))


@pytest.mark.parametrize("broker", BROKERS)
def test_configs_of_a_broker_come_from_that_broker(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], broker: int
) -> None:
    argv = ["configs", *server(cluster), "--entity-type", "brokers", "--entity-name", str(broker)]
    code, out, err = seglog(capsys, *argv, "--describe", "--all")
    assert code == 0, err
    assert out.startswith(f"All configs for broker {broker} are:\n")
    assert f"  broker.id={broker} " in out


def _one_key_per_partition(prefix: str) -> list[str]:
    """Keys whose coordinator partitions (of three) are 0, 1 and 2: one on each broker."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < 3:
        found.setdefault(partition_for(f"{prefix}-{i}", 3), f"{prefix}-{i}")
        i += 1
    return [found[p] for p in range(3)]


def test_consumer_groups_on_every_coordinator(
    cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = _one_key_per_partition("routed-group")
    for group in groups:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
        try:
            offsets = [KafkaTopicPartition(topic, p, 2) for p in range(3)]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()
    assert_led_by_every_broker(cluster, "__consumer_offsets")
    code, out, err = seglog(capsys, "consumer-groups", *server(cluster), "--list")
    assert code == 0, err
    assert sorted(set(groups) & set(out.split())) == sorted(groups)
    for group in groups:
        code, out, err = seglog(capsys, "consumer-groups", *server(cluster), "--describe", "--group", group)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines() if line.startswith(group)]
        assert [r[1:6] for r in rows] == [[topic, str(p), "2", str(RECORDS), str(RECORDS - 2)] for p in range(3)]
        argv = ["--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute"]
        code, out, err = seglog(capsys, "consumer-groups", *server(cluster), *argv)
        assert code == 0, err
        assert [line.split()[2:] for line in out.splitlines() if line.startswith(group)] == [
            [str(p), str(RECORDS)] for p in range(3)
        ]


def test_transactions_on_every_coordinator(
    cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _one_key_per_partition("routed-txn")
    for txn_id in ids:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"in a transaction", partition=0)
        producer.commit_transaction(30)
    assert_led_by_every_broker(cluster, "__transaction_state")
    code, out, err = seglog(capsys, "transactions", *server(cluster), "--list")
    assert code == 0, err
    listed = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert set(listed) == set(ids) and set(listed.values()) == {str(b) for b in BROKERS}
    for txn_id in ids:
        code, out, err = seglog(capsys, "transactions", *server(cluster), "--describe", "--transactional-id", txn_id)
        assert code == 0, err
        row = out.splitlines()[1].split()
        assert (row[0], row[1], row[4]) == (listed[txn_id], txn_id, "CompleteCommit")


def test_a_partition_without_a_leader_is_a_one_line_error_after_the_timeout(
    cluster: LocalCluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = seglog(capsys, "get-offsets", *server(cluster), "--topic", topic, "--partitions", "a")
    assert code == 2 and err.count("\n") == 1, err
    code, _, err = seglog(capsys, "get-offsets", *server(cluster), "--topic", topic, "--partitions", "7")
    assert code == 1 and err.count("\n") == 1 and f"{topic}-7" in err and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, before, _ = seglog(capsys, "get-offsets", *server(cluster), "--topic", topic)
    assert code == 0
    led_by_3 = next(p for p, (leader, _, _) in partitions(cluster.brokers[1].address, topic).items() if leader == 3)
    cluster.brokers[3].kill()
    wait_until(lambda: partitions(cluster.brokers[1].address, topic)[led_by_3][0] == -1, what="no leader")
    argv = ["get-offsets", *server(cluster), "--topic", topic, "--timeout-ms", "1000"]
    code, _, err = seglog(capsys, *argv)
    assert code == 1 and err.count("\n") == 1, err
    assert f"{topic}-{led_by_3}" in err and "LEADER_NOT_AVAILABLE" in err
    # within the timeout, a leader that comes back is found and asked (Metadata asked again)
    restart = threading.Thread(target=cluster.start_broker, args=(3,))
    restart.start()
    try:
        code, out, err = seglog(capsys, "get-offsets", *server(cluster), "--topic", topic, "--timeout-ms", "60000")
    finally:
        restart.join()
    assert (code, out) == (0, before), err
