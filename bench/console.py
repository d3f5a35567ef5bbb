"""The web console's answers (``seglog console``'s JSON API, what each page asks) on a cluster of
many topics, each figure beside a baseline measured in the same run: one Metadata request of
every topic on an already open connection, the least any page of the cluster must ask.

An embedded broker holds TOPICS topics of PARTITIONS partitions (created with CreateTopics, a
hundred topics a request), one of which holds 100 records of 1 KiB in partition 0 and is read
by a consumer group that committed half of them. Each endpoint is asked ROUNDS times from this
process over HTTP (a fresh client of the cluster each time, as the console serves a page); the
median and the slowest are printed in ms, beside the issue's target (300 ms) and as a ratio to
the baseline's median.

Run: ``.venv/bin/python bench/console.py [--topics 1000] [--partitions 5] [--rounds 9]``
(with the defaults, a few minutes to create the topics). The issue's cluster is 1,000 topics of 10
partitions; a broker keeps three files open a partition (its log, offset and time indexes), and
10,000 partitions in one process pass this machine's limit of 20,000 open files (``ulimit -n``):
hence 5 by default. Figures on a shared machine are not final.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition

import seglog.broker
from seglog.client import connect
from seglog.console import start
from seglog.protocol import ApiKey
from seglog.protocol.message_data import CreateTopicsRequestData, MetadataRequestData

TARGET_MS = 300.0
BROWSED = "browsed"
GROUP = "bench-group"
RECORDS = 100
VALUE = b"v" * 1024


def _create_topics(bootstrap: str, topics: int, partitions: int) -> None:
    with connect(bootstrap, timeout=600) as connection:
        names = [BROWSED] + [f"topic-{i:05d}" for i in range(topics - 1)]
        for at in range(0, len(names), 100):
            wanted = [
                CreateTopicsRequestData.CreatableTopic(
                    name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
                )
                for n in names[at : at + 100]
            ]
            request = CreateTopicsRequestData(topics=wanted, timeout_ms=600_000, validate_only=False)
            answer = connection.request(ApiKey.CREATE_TOPICS, request)
            failed = [(t.name, t.error_code) for t in answer.topics if t.error_code]
            assert not failed, failed


def _fill(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(BROWSED, key=f"key-{i}", value=VALUE, partition=0)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[KafkaPartition(BROWSED, 0, RECORDS // 2)], asynchronous=False)
    consumer.close()


def _timed(ask: Callable[[], object], rounds: int) -> list[float]:
    ask()  # a first time: connections, the broker's caches
    out = []
    for _ in range(rounds):
        began = time.perf_counter()
        ask()
        out.append((time.perf_counter() - began) * 1000)
    return out


def _get(url: str) -> Callable[[], object]:
    def ask() -> object:
        with urllib.request.urlopen(url, timeout=600) as answer:
            return answer.read()

    return ask


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, seglog.broker.start(d) as broker:
        bootstrap = broker.bootstrap_servers
        began = time.monotonic()
        _create_topics(bootstrap, args.topics, args.partitions)
        print(f"{args.topics} topics x {args.partitions} partitions created in {time.monotonic() - began:.0f} s")
        _fill(bootstrap)
        with connect(bootstrap) as connection, start(bootstrap) as console:
            every = MetadataRequestData(topics=None, allow_auto_topic_creation=False)
            baseline = statistics.median(_timed(lambda: connection.request(ApiKey.METADATA, every), args.rounds))
            print(f"baseline: Metadata of every topic on an open connection, median {baseline:.1f} ms")
            print(f"{'page (API)':44} {'median ms':>10} {'max ms':>8} {'target':>7} {'/ baseline':>11}")
            for label, path in [
                ("cluster", "api/cluster"),
                ("topics", "api/topics"),
                (f"topic {BROWSED}", f"api/topics/{BROWSED}"),
                (f"messages: {RECORDS} of 1 KiB", f"api/topics/{BROWSED}/messages?partition=0&limit={RECORDS}"),
                ("groups", "api/groups"),
                (f"group {GROUP}", f"api/groups/{GROUP}"),
            ]:
                times = _timed(_get(console.url + path), args.rounds)
                median = statistics.median(times)
                verdict = "met" if median <= TARGET_MS else "MISSED"
                print(f"{label:44} {median:10.1f} {max(times):8.1f} {verdict:>7} {median / baseline:10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
