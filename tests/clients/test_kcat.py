"""kcat 1.7 with librdkafka 2.0.2 as Debian ships it (older than confluent-kafka's, and the one
that misreads flexible responses not laid out as Kafka's) against a `seglog broker` process:
metadata (-L), produce (-P) with every codec at acks 1 and all, consume (-C) from the beginning,
an offset, the end and a time, offsets for times (-Q). Each codec's batches are read back from the
broker's log dir: librdkafka 2.0.2 compresses only when the broker advertises Produce v0 (its
feature checks date from Kafka 0.8), and sends uncompressed batches without a word otherwise."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import seglog
from seglog.records import Compression

from ..broker.subprocess_broker import BrokerProcess
from .conftest import BASE_TS, kcat_path

# kcat's -P reads lines "key<TAB>value"; it sets headers for every message it sends
LINES = [f"key-{i}\tvalue {i} é€ {'x' * (i % 30)}" for i in range(40)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    kcat_path()  # skip before starting a broker for nothing
    with BrokerProcess(tmp_path_factory.mktemp("kcat") / "data") as process:
        yield process


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [kcat_path(), "-b", broker.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def consume(broker: BrokerProcess, topic: str, partition: int, offset: str) -> list[dict[str, Any]]:
    out = kcat(broker, "-C", "-t", topic, "-p", str(partition), "-o", offset, "-e", "-J", "-q")
    return [json.loads(line) for line in out.splitlines()]


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[Compression, int]]:
    """(codec, record count) of every batch of a partition, as the broker's log dir holds them."""
    with seglog.open(str(broker.log_dir), read_only=True, background=False) as logs:
        fetched = logs.partition(topic, partition).read(0, 1 << 30)
        batches = fetched.slice.batches() if fetched.slice is not None else ()
        return [(batch.compression, batch.record_count) for batch in batches]


def test_metadata(broker: BrokerProcess) -> None:
    create(broker, "kcat-meta", 3)
    found = json.loads(kcat(broker, "-L", "-J"))
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert found["brokers"] == [{"id": 0, "name": f"{host}:{port}"}]
    assert found["controllerid"] == 0
    (topic,) = [t for t in found["topics"] if t["topic"] == "kcat-meta"]
    replicas = {"leader": 0, "replicas": [{"id": 0}], "isrs": [{"id": 0}]}
    assert topic["partitions"] == [{"partition": p, **replicas} for p in range(3)]
    # a topic named in Metadata is created, as by Kafka with auto.create.topics.enable (num.partitions 1)
    one = json.loads(kcat(broker, "-L", "-J", "-t", "kcat-auto"))
    assert one["topics"] == [{"topic": "kcat-auto", "partitions": [{"partition": 0, **replicas}]}]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_each_codec_and_acks_then_consume(broker: BrokerProcess, codec: str) -> None:
    topic = f"kcat-{codec}"
    create(broker, topic, 2)
    before = int(time.time() * 1000)
    for acks, lines in (("1", LINES[:25]), ("all", LINES[25:])):
        produce = ["-P", "-t", topic, "-p", "1", "-K", "\t", "-H", f"acks={acks}", "-H", "h=é", "-H", "h="]
        kcat(broker, *produce, "-X", f"compression.codec={codec}", "-X", f"acks={acks}", stdin="\n".join(lines) + "\n")
    after = int(time.time() * 1000)
    got = consume(broker, topic, 1, "beginning")
    assert [(m["offset"], m["key"], m["payload"]) for m in got] == [
        (i, *line.split("\t")) for i, line in enumerate(LINES)
    ]
    assert [m["headers"] for m in got] == [["acks", "1" if i < 25 else "all", "h", "é", "h", ""] for i in range(40)]
    assert all(m["tstype"] == "create" and before <= m["ts"] <= after for m in got)
    assert [m["offset"] for m in consume(broker, topic, 1, "33")] == list(range(33, 40))
    assert [m["offset"] for m in consume(broker, topic, 1, "-4")] == list(range(36, 40))  # 4 before the end
    assert consume(broker, topic, 0, "beginning") == []
    # librdkafka sends a batch uncompressed when compressing does not make it smaller: a lone record
    batches = stored_batches(broker, topic, 1)
    assert sum(n for _, n in batches) == 40
    assert {c for c, n in batches if n > 1} == {Compression.parse(codec)}, batches


def test_offsets_for_times_and_consume_from_a_time(broker: BrokerProcess) -> None:
    """Records with known timestamps (10 ms apart, in batches of 8) from confluent-kafka; kcat
    asks ListOffsets for times and starts consuming at one."""
    topic = "kcat-times"
    create(broker, topic, 2)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50, "batch.num.messages": 8, "acks": "all"}
    )
    for i in range(30):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=BASE_TS + 10 * i)
    assert producer.flush(30) == 0
    queries = {"-2": 0, "-1": 30, str(BASE_TS - 1): 0, str(BASE_TS + 10 * 17): 17, str(BASE_TS + 10 * 21 - 3): 21}
    queries[str(BASE_TS + 10 * 30)] = -1  # no record that late: Kafka answers -1
    for query, offset in queries.items():
        assert kcat(broker, "-Q", "-t", f"{topic}:0:{query}").split() == [topic, "[0]", "offset", str(offset)]
    assert kcat(broker, "-Q", "-t", f"{topic}:1:{BASE_TS}").split()[-1] == "-1"  # an empty partition
    got = consume(broker, topic, 0, f"s@{BASE_TS + 10 * 25 - 1}")
    assert [(m["offset"], m["payload"], m["ts"]) for m in got] == [
        (i, f"v{i}", BASE_TS + 10 * i) for i in range(25, 30)
    ]
