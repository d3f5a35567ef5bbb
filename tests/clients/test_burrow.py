"""Burrow 1.2.1 (LinkedIn's consumer-lag monitor, Debian's package, on an old Sarama) against a
3-broker seglog cluster: it learns the topics and each partition's latest offset by Metadata and
ListOffsets v0 (Sarama's Kafka 0.8.2 default), reads the groups' commits from
``__consumer_offsets`` by Fetch (down-converted to its message format), and reports every
partition's committed offset and lag over its HTTP API, exactly."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import connect
from seglog.cluster.zookeeper_server import zookeeper_unavailable
from seglog.protocol import ApiKey
from seglog.tools.cluster import LocalCluster

from ..broker.test_routes import KAFKA_3_9
from .conftest import missing

TOPIC, GROUP = "burrow-orders", "burrow-billing"
PRODUCED = {0: 10, 1: 20, 2: 5}  # records per partition
COMMITTED = {0: 7, 1: 20, 2: 2}  # the group's committed offsets: lags 3, 0, 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if shutil.which("Burrow") is None:
        missing("Burrow", "apt-get install burrow")
    reason = zookeeper_unavailable()
    if reason is not None:
        pytest.skip(reason)
    local = LocalCluster(tmp_path_factory.mktemp("burrow-cluster"), 3, port=None).start()
    try:
        yield local
    finally:
        local.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def burrow_config(directory: Path, local: LocalCluster, port: int) -> str:
    servers = json.dumps(local.bootstrap_servers.split(","))
    # no kafka-version: Burrow's default, Kafka 0.8.2 (ListOffsets v0, Fetch v0, Metadata v0)
    return f"""
[general]
pidfile="{directory}/burrow.pid"
stdout-logfile="{directory}/burrow.out"

[logging]
filename="{directory}/burrow.log"
level="info"

[zookeeper]
servers=["{local.zookeeper_connect}"]
timeout=6
root-path="/burrow"

[client-profile.seglog]
client-id="burrow-test"

[cluster.seglog]
class-name="kafka"
servers={servers}
client-profile="seglog"
topic-refresh=2
offset-refresh=1

[consumer.seglog]
class-name="kafka"
cluster="seglog"
servers={servers}
client-profile="seglog"
start-latest=false

[httpserver.default]
address="127.0.0.1:{port}"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
"""


def get(port: int, path: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v3/kafka/seglog{path}", timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return None  # not up yet, or (404) nothing known of it yet


def lags(port: int) -> dict[int, tuple[int, int]] | None:
    """Burrow's (committed offset, lag) of each partition of GROUP on TOPIC, once it knows them all."""
    found = get(port, f"/consumer/{GROUP}/lag")
    if found is None or found.get("error"):
        return None
    parts = [p for p in found["status"]["partitions"] or () if p["topic"] == TOPIC]
    if len(parts) != len(PRODUCED):
        return None
    return {p["partition"]: (p["end"]["offset"], p["current_lag"]) for p in parts}


def test_burrow_reports_a_groups_offsets_and_lag(cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=30)[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, b"order %d" % i, key=b"k%d" % i, partition=partition)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = [TopicPartition(TOPIC, p, offset) for p, offset in COMMITTED.items()]
        consumer.commit(offsets=committed, asynchronous=False)
    finally:
        consumer.close()

    port = free_port()
    (tmp_path / "burrow.toml").write_text(burrow_config(tmp_path, cluster, port))
    burrow = subprocess.Popen(
        ["Burrow", "-config-dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=tmp_path
    )
    try:
        want = {p: (COMMITTED[p], PRODUCED[p] - COMMITTED[p]) for p in PRODUCED}
        deadline, seen = time.monotonic() + 90, None
        while time.monotonic() < deadline and burrow.poll() is None:
            seen = lags(port)
            if seen == want:
                break
            time.sleep(0.5)
        log = (tmp_path / "burrow.log").read_text() if (tmp_path / "burrow.log").exists() else ""
        assert seen == want, f"Burrow reported {seen}; its log ends:\n{log[-4000:]}"
        topic = get(port, f"/topic/{TOPIC}")
        assert topic is not None and topic["offsets"] == [PRODUCED[p] for p in sorted(PRODUCED)]
        assert TOPIC in (get(port, "/topic") or {}).get("topics", [])
        assert GROUP in (get(port, "/consumer") or {}).get("consumers", [])
    finally:
        burrow.terminate()
        burrow.wait(30)


def test_a_cluster_broker_advertises_kafka_3_9s_ranges(cluster: LocalCluster) -> None:
    for broker in cluster.brokers.values():
        with connect(broker.address) as client:
            assert {ApiKey(k): v for k, v in client.versions.items()} == KAFKA_3_9
