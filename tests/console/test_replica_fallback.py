"""A partition's layout read through the next replica's HTTP port when a replica's broker is down:
three ``seglog broker --http-port`` processes on a real ZooKeeper (LocalCluster starts its brokers
without an HTTP port, hence processes of the test's own), and a console of the cluster that knows
the HTTP ports of two of them (``--broker-http``). The partition's replicas are brokers 1, 2 and 3,
in that order; the console knows 1's and 3's ports. Broker 1 stopped, broker 2 leads, and the
console tries the replicas it knows in the order the replicas are listed (the leader first): 1's
port, which does not answer, then 3's, which gives its own layout of the partition."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import connect, metadata, topics_by_name
from seglog.cluster.zookeeper_server import ZooKeeperServer

from ..broker.conftest import wait_for
from .conftest import open_page
from .test_api import get

TOPIC = "spread"
RECORDS = 30


@dataclass
class HttpBroker:
    broker_id: int
    process: subprocess.Popen[str]
    bootstrap: str
    console_url: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # a controlled shutdown: its leaderships move first
            self.process.wait(120)
        assert self.process.stdout is not None
        self.process.stdout.close()


def _start_broker(broker_id: int, log_dir: Path, zookeeper: str) -> HttpBroker:
    command = [sys.executable, "-m", "seglog", "broker", "--http-port", "0", "--http-host", f"127.0.0.{broker_id}"]
    for setting in (
        f"broker.id={broker_id}",
        f"log.dirs={log_dir}",
        f"listeners=PLAINTEXT://127.0.0.{broker_id}:0",
        f"zookeeper.connect={zookeeper}",
        "offsets.topic.replication.factor=1",
    ):
        command += ["--override", setting]
    output = open(log_dir.with_suffix(".log"), "w")  # noqa: SIM115 (the process's, closed with it)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=output, text=True)
    output.close()
    assert process.stdout is not None
    serving = process.stdout.readline()
    assert serving.startswith("serving on "), (serving, log_dir.with_suffix(".log").read_text()[-2000:])
    console = process.stdout.readline()
    assert console.startswith("also serving the console"), console
    return HttpBroker(broker_id, process, serving.split()[-1], console.split()[-1])


def _leader(bootstrap: str) -> int:
    with connect(bootstrap, timeout=30) as client:
        (partition,) = topics_by_name(metadata(client, [TOPIC]))[TOPIC].partitions
        return int(partition.leader_id)


def _live(bootstrap: str) -> list[int]:
    with connect(bootstrap, timeout=30) as client:
        return sorted(b.node_id for b in metadata(client, []).brokers)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, HttpBroker]]:
    root = tmp_path_factory.mktemp("fallback")
    with ZooKeeperServer(root / "zookeeper") as zookeeper:
        started: dict[int, HttpBroker] = {}
        try:
            for i in (1, 2, 3):
                started[i] = _start_broker(i, root / f"broker-{i}", zookeeper.connect_string)
            wait_for(lambda: _live(started[2].bootstrap) == [1, 2, 3], 60, "the three brokers to know each other")
            admin = AdminClient({"bootstrap.servers": started[2].bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(60)
            producer = Producer({"bootstrap.servers": started[2].bootstrap, "acks": "all", "linger.ms": 0})
            for i in range(RECORDS):
                producer.produce(TOPIC, value=b"r%d" % i, partition=0)
            assert producer.flush(60) == 0  # acks=all: every replica holds them
            yield started
        finally:
            for broker in sorted(started.values(), key=lambda b: b.broker_id != 1):
                broker.stop()


def test_a_layout_is_read_from_the_next_replica_when_one_is_down(brokers, page):
    from playwright.sync_api import expect

    from seglog.console import start

    one, two, three = brokers[1], brokers[2], brokers[3]
    bootstrap = ",".join(b.bootstrap for b in (two, three, one))
    path = f"api/topics/{TOPIC}/partitions/0/layout"
    with start(bootstrap, broker_http=[one.console_url, three.console_url]) as console:
        assert _leader(two.bootstrap) == 1
        status, led = get(console, path)
        assert (status, led["broker"], led["logEndOffset"]) == (200, 1, RECORDS)  # the leader's, while it is up
        one.stop()
        wait_for(lambda: _leader(two.bootstrap) == 2, 60, "broker 2 to lead once broker 1 stopped")
        status, found = get(console, path)
        assert status == 200, found
        # broker 1's port refused, broker 2's unknown to this console: broker 3's own layout of its replica
        assert (found["broker"], found["logEndOffset"]) == (3, RECORDS)
        on_disk = sorted(int(f.stem) for f in (Path(found["dir"])).iterdir() if f.suffix == ".log")
        assert [s["baseOffset"] for s in found["segments"]] == on_disk
        assert Path(found["dir"]).parent.name == "broker-3"
        # and the page draws it, saying whose it is
        open_page(page, console, f"#/topics/{TOPIC}/partitions/0/layout", "layoutPage")
        expect(page.locator("#layout-broker")).to_have_text("3")
        expect(page.locator("#segment-bar .segment")).to_have_count(len(found["segments"]))
        expect(page.locator("#layout-log-end")).to_have_text(str(RECORDS))
        # with the one replica it knows down, the console says it could not read it
        with start(bootstrap, broker_http=[one.console_url]) as alone:
            status, refused = get(alone, path)
            assert status == 501, refused
