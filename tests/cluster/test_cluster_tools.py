"""The cluster's administration commands against four ``seglog broker`` processes and a real ZooKeeper:
``seglog leader-election`` and ``seglog reassign-partitions`` (ElectLeaders, AlterPartitionReassignments
and ListPartitionReassignments on the controller), and confluent-kafka's ``elect_leaders``.

One cluster for the module. Moving data to a new replica needs followers that fetch (replication);
without them a reassignment adding a broker stays in progress, which the list and cancel test uses.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from seglog.cli import main
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.tools.cluster import LocalCluster

from .conftest import text, wait_until
from .test_brokers import metadata, partitions


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path("/tools-test")
    admin.stop()
    admin.close()
    overrides = ["zookeeper.session.timeout.ms=6000", "controlled.shutdown.enable=false"]
    local = LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        4,
        zookeeper=zookeeper.connect_string + "/tools-test",
        port=None,
        overrides=overrides,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def seglog(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own mistakes
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def create(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])], operation_timeout=30)[topic].result(60)
    wait_until(lambda: all(partitions(b.address, topic) for b in cluster.brokers.values()), what=f"{topic} known")


def reassignment_file(tmp_path: Path, topic: str, replicas: list[int]) -> str:
    path = tmp_path / f"{topic}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["leader-election", "--election-type", "preferred"], "One and only one of the following options"),
        (
            ["leader-election", "--election-type", "preferred", "--topic", "t"],
            "Missing required option(s): --partition",
        ),
        (
            ["leader-election", "--election-type", "preferred", "--all-topic-partitions", "--partition", "0"],
            "only allowed if --topic",
        ),
        (["leader-election", "--election-type", "dirty", "--all-topic-partitions"], "invalid choice"),
        (["reassign-partitions", "--list", "--verify"], "exactly one action"),
        (["reassign-partitions", "--execute"], "reassignment-json-file"),
        (["reassign-partitions", "--generate", "--broker-list", "1"], "topics-to-move-json-file"),
        (["reassign-partitions", "--list", "--broker-list", "1"], "can't be used with action"),
    ],
)
def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = seglog(capsys, *argv, "--bootstrap-server", "127.0.0.1:1")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_preferred_election_after_a_reassignment_reorders_the_replicas(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create(cluster, "ordered", [1, 2, 3])
    bootstrap = cluster.brokers[1].address
    path = reassignment_file(tmp_path, "ordered", [2, 3, 1])
    code, out, _ = seglog(
        capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", path
    )
    assert code == 0
    assert '{"version":1,"partitions":[{"topic":"ordered","partition":0,"replicas":[1,2,3]' in out
    assert "Successfully started partition reassignment for ordered-0" in out
    # the same brokers: done at once (completed once the controller's metadata has the new order, which
    # --verify reads, as Kafka's tool does), and the leader stays where it was (no longer the preferred one)
    verify = ["reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", path]
    completed = "Status of partition reassignment:\nReassignment of partition ordered-0 is completed.\n"
    wait_until(lambda: seglog(capsys, *verify)[:2] == (0, completed), what="the reassignment completed")
    wait_until(lambda: partitions(bootstrap, "ordered")[0][:2] == (1, (2, 3, 1)), what="the new replica order")

    election = ["leader-election", "--bootstrap-server", bootstrap, "--topic", "ordered", "--partition", "0"]
    code, out, _ = seglog(capsys, *election, "--election-type", "unclean")
    assert (code, out) == (0, "Valid replica already elected for partitions ordered-0\n")
    code, out, _ = seglog(capsys, *election, "--election-type", "preferred")
    assert (code, out) == (0, "Successfully completed leader election (PREFERRED) for partitions ordered-0\n")
    wait_until(lambda: partitions(bootstrap, "ordered")[0][0] == 2, what="the preferred leader")
    code, out, _ = seglog(capsys, *election, "--election-type", "preferred")
    assert (code, out) == (0, "Valid replica already elected for partitions ordered-0\n")

    listed = tmp_path / "election.json"
    listed.write_text(json.dumps({"partitions": [{"topic": "ordered", "partition": 0}]}))
    for chosen in (["--path-to-json-file", str(listed)], ["--all-topic-partitions"]):
        code, out, _ = seglog(
            capsys, "leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred", *chosen
        )
        assert (code, out) == (0, "Valid replica already elected for partitions ordered-0\n")

    code, out, err = seglog(
        capsys,
        "leader-election",
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "nowhere",
        "--partition",
        "0",
    )
    assert code == 1
    assert out.startswith("Error completing leader election (PREFERRED) for partition: nowhere-0: ")
    assert err == "error: 1 replica(s) could not be elected\n"


def test_generate_proposes_kafka_s_assignment_over_the_brokers_given(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "ordered"}]}))
    argv = ["reassign-partitions", "--bootstrap-server", cluster.brokers[1].address, "--generate"]
    code, out, _ = seglog(capsys, *argv, "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4")
    assert code == 0
    head, current, blank, title, proposed = out.splitlines()
    assert (head, blank, title) == (
        "Current partition replica assignment",
        "",
        "Proposed partition reassignment configuration",
    )
    assert json.loads(current)["partitions"][0]["replicas"] == [2, 3, 1]
    (moved,) = json.loads(proposed)["partitions"]
    assert moved["topic"] == "ordered" and sorted(moved["replicas"]) == [2, 3, 4]
    assert moved["log_dirs"] == ["any"] * 3
    code, _, err = seglog(capsys, *argv, "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,9")
    assert (code, err) == (1, "error: Unknown broker id 9\n")


def test_confluent_kafka_elect_leaders(cluster: LocalCluster) -> None:
    create(cluster, "elected", [3, 1, 2])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    result = admin.elect_leaders(ElectionType.PREFERRED, [KafkaTopicPartition("elected", 0)]).result(30)
    assert [(tp.topic, tp.partition) for tp in result] == [("elected", 0)]
    (error,) = result.values()
    assert error is not None and error.name() == "ELECTION_NOT_NEEDED"


def test_a_reassignment_in_progress_is_listed_and_cancelled(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bootstrap = cluster.brokers[1].address
    controller = metadata(bootstrap).controller_id
    paused = max(b for b in cluster.brokers if b != controller)  # a new replica that cannot catch up
    others = [b for b in sorted(cluster.brokers) if b != paused]
    create(cluster, "stuck", others)
    path = reassignment_file(tmp_path, "stuck", [*others[1:], paused])
    cluster.brokers[paused].signal(signal.SIGSTOP)
    try:
        code, _, _ = seglog(
            capsys,
            "reassign-partitions",
            "--bootstrap-server",
            bootstrap,
            "--execute",
            "--reassignment-json-file",
            path,
        )
        assert code == 0
        code, out, _ = seglog(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
        replicas = ",".join(map(str, [*others[1:], paused, others[0]]))
        assert out == (
            f"Current partition reassignments:\nstuck-0: replicas: {replicas}. adding: {paused}. "
            f"removing: {others[0]}.\n"
        )
        code, out, _ = seglog(
            capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", path
        )
        # Kafka's tool exits 0 whatever the state: its output tells
        assert (code, out) == (
            0,
            "Status of partition reassignment:\nReassignment of partition stuck-0 is still in progress.\n",
        )
        code, out, _ = seglog(
            capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--cancel", "--reassignment-json-file", path
        )
        assert (code, out) == (0, "Successfully cancelled partition reassignment for: stuck-0\n")
        code, out, _ = seglog(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
        assert out == "No partition reassignments found.\n"
        # back on the original brokers, in the order Kafka's cancel leaves (the origin replicas of the full list)
        wait_until(lambda: partitions(bootstrap, "stuck")[0][1] == (*others[1:], others[0]), what="the original ones")
        code, out, _ = seglog(
            capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", path
        )
        now, target = ",".join(map(str, (*others[1:], others[0]))), ",".join(map(str, [*others[1:], paused]))
        assert (code, out) == (
            0,
            "Status of partition reassignment:\nThere is no active reassignment of partition stuck-0, "
            f"but replica set is {now} rather than {target}.\n",
        )
    finally:
        cluster.brokers[paused].signal(signal.SIGCONT)


def test_reassignment_moves_the_data_and_deletes_the_old_replica(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create(cluster, "moved", [1, 2, 3])
    bootstrap = cluster.brokers[2].address
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("moved", f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    path = reassignment_file(tmp_path, "moved", [2, 3, 4])
    verify = ["reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", path]
    assert (
        seglog(
            capsys,
            "reassign-partitions",
            "--bootstrap-server",
            bootstrap,
            "--execute",
            "--reassignment-json-file",
            path,
        )[0]
        == 0
    )
    wait_until(lambda: "is completed." in seglog(capsys, *verify)[1], 60, "the reassignment to complete")
    wait_until(lambda: not (cluster.brokers[1].log_dir / "moved-0").exists(), what="the old replica deleted")
    assert (cluster.brokers[4].log_dir / "moved-0").is_dir()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "moved"})
    consumer.assign([KafkaTopicPartition("moved", 0, 0)])
    got: list[str] = []
    try:

        def read() -> bool:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append(text(m))
            return len(got) >= 100

        wait_until(read, 30, "the records from the new replicas")
    finally:
        consumer.close()
    assert got == [f"r{i}" for i in range(100)]


def test_describe_lists_under_replicated_and_unavailable_partitions(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    create(cluster, "alone", [4])
    create(cluster, "spread", [4, 1, 2])
    cluster.brokers[4].kill()
    bootstrap = cluster.brokers[1].address
    # the leader may drop its dead follower (AlterPartition) before the controller handles the death
    wait_until(lambda: 4 not in partitions(bootstrap, "spread")[0][2], what="broker 4 out of the ISR")
    wait_until(lambda: partitions(bootstrap, "alone")[0][0] == -1, what="alone-0 without a leader")
    describe = ["topics", "--bootstrap-server", bootstrap, "--describe"]
    code, out, _ = seglog(capsys, *describe, "--topic", "spread", "--under-replicated-partitions")
    assert (code, out) == (0, "\tTopic: spread\tPartition: 0\tLeader: 1\tReplicas: 4,1,2\tIsr: 1,2\n")
    code, out, _ = seglog(capsys, *describe, "--unavailable-partitions")
    assert code == 0
    assert out.splitlines() == ["\tTopic: alone\tPartition: 0\tLeader: none\tReplicas: 4\tIsr: 4"]
    # its only replica is dead: not even an unclean election finds a leader
    election = ["leader-election", "--bootstrap-server", bootstrap, "--topic", "alone", "--partition", "0"]
    code, out, err = seglog(capsys, *election, "--election-type", "unclean")
    assert code == 1 and err == "error: 1 replica(s) could not be elected\n"
    assert out.startswith("Error completing leader election (UNCLEAN) for partition: alone-0: ")


def test_cluster_down_stops_what_cluster_up_started(
    zookeeper: ZooKeeperServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert seglog(capsys, "cluster", "down", "--dir", str(tmp_path))[:2] == (1, "")
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path("/down-test")
    admin.stop()
    admin.close()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog.cli",
            "cluster",
            "up",
            "--brokers",
            "1",
            "--dir",
            str(tmp_path),
            "--port",
            "0",
            "--zookeeper",
            zookeeper.connect_string + "/down-test",
            "--override",
            "controlled.shutdown.enable=false",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert up.stdout is not None
        while "bootstrap servers" not in (line := up.stdout.readline()):
            assert line, "cluster up ended before serving"
        code, out, _ = seglog(capsys, "cluster", "down", "--dir", str(tmp_path))
        assert (code, out) == (0, "stopped\n")
        assert up.wait(10) == 0
        assert not (tmp_path / "cluster.pid").exists()
    finally:
        up.kill()
        up.wait()
